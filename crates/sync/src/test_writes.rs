//! Writes and small random trees for the crate's tests (the triggers' and the feed's models).

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::write::{Change, Write, WriteOp};
use hearth_tree::{Node, Path};

pub fn node(value: Value) -> Node {
    Node::from_json(&value).expect("valid")
}

pub fn path(text: &str) -> Path {
    Path::parse(text).expect("path")
}

/// A set of `value` at `at`.
pub fn set(at: &str, value: Value) -> Write {
    Write {
        base: path(at),
        ops: vec![WriteOp {
            path: Path::root(),
            change: Change::Set(node(value)),
        }],
    }
}

/// A multi-path update at `at`: each member's path (one segment or more) and its value.
pub fn merge(at: &str, members: &[(&str, Value)]) -> Write {
    Write {
        base: path(at),
        ops: members
            .iter()
            .map(|(member, value)| WriteOp {
                path: path(member),
                change: Change::Set(node(value.clone())),
            })
            .collect(),
    }
}

/// Trees of at most three levels over the keys `a`, `b`, `c`.
pub fn small_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        (0..3i64).prop_map(Value::from),
        Just(json!("s")),
    ];
    leaf.prop_recursive(3, 24, 3, |inner| {
        prop::collection::btree_map(prop::sample::select(vec!["a", "b", "c"]), inner, 0..3)
            .prop_map(|map| {
                Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            })
    })
}

/// Paths of at most three segments over the same keys.
pub fn small_path() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 0..4)
        .prop_map(|keys| format!("/{}", keys.join("/")))
}
