//! hearth-query
