//! hearth-wire
