//! hearth-sync
