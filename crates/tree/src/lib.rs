//! hearth-tree
