//! Helpers shared by the crate's unit tests: nodes, paths and keys written as text.

use serde_json::Value;

use crate::key::Key;
use crate::node::Node;
use crate::path::Path;

/// The node of `v`, JSON in export form.
pub(crate) fn node(v: Value) -> Node {
    Node::from_json(&v).expect("valid test node")
}

pub(crate) fn path(s: &str) -> Path {
    Path::parse(s).expect("valid test path")
}

pub(crate) fn key(s: &str) -> Key {
    Key::new(s).expect("valid test key")
}

/// `n` as [`Node::write_json`] writes it.
pub(crate) fn written(n: &Node, export: bool) -> String {
    let mut out = Vec::new();
    n.write_json(&mut out, export);
    String::from_utf8(out).expect("write_json emits UTF-8")
}
