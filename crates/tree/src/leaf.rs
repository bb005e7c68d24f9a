//! The value of a leaf: a boolean, a number or a string.
//!
//! It stands apart from the node that holds it because files below nodes use it too: the hash
//! texts (`digest`) are written for the leaves of packed bytes as for those of nodes, and the
//! size estimates (`estimate`) count them.

use std::sync::Arc;

/// The value of a leaf. Numbers are finite and never `-0` once inside a [`Node`](crate::Node).
#[derive(Clone, Debug, PartialEq)]
pub enum Leaf {
    Bool(bool),
    Number(f64),
    String(Arc<str>),
}
