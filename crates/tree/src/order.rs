//! Value order (spec §9.2), used by orderByValue, orderByChild and query bounds.

use std::cmp::Ordering;

use crate::key::compare_utf16;
use crate::leaf::Leaf;
use crate::node::Node;
use crate::priority::compare_f64;

/// Compares two nodes by value: empty < `false` < `true` < numbers (ascending) < strings
/// (UTF-16 order) < objects, all objects being equal. Priorities are ignored, and ties are
/// left to the caller, which breaks them by key.
pub fn compare_values(a: &Node, b: &Node) -> Ordering {
    match (a.leaf_value(), b.leaf_value()) {
        (Some(Leaf::Number(x)), Some(Leaf::Number(y))) => compare_f64(*x, *y),
        (Some(Leaf::String(x)), Some(Leaf::String(y))) => compare_utf16(x, y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Position of the node's kind in the value order; booleans fold their value in.
fn rank(node: &Node) -> u8 {
    match node.leaf_value() {
        None if node.is_empty() => 0,
        Some(Leaf::Bool(false)) => 1,
        Some(Leaf::Bool(true)) => 2,
        Some(Leaf::Number(_)) => 3,
        Some(Leaf::String(_)) => 4,
        None => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::Priority;
    use serde_json::json;
    use std::sync::Arc;

    fn node(v: serde_json::Value) -> Node {
        Node::from_json(&v).expect("valid test node")
    }

    #[test]
    fn value_order() {
        let ascending = [
            Node::empty(),
            node(json!(false)),
            node(json!(true)),
            node(json!(-1e300)),
            node(json!(-1)),
            node(json!(0)),
            node(json!(0.5)),
            node(json!(2)),
            node(json!(10)),
            node(json!("")),
            node(json!("10")),
            node(json!("2")),
            node(json!("B")),
            node(json!("a")),
            node(json!("😀")),
            node(json!("｡")),
            node(json!({"a": 1})),
        ];
        for (i, a) in ascending.iter().enumerate() {
            for (j, b) in ascending.iter().enumerate() {
                assert_eq!(compare_values(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn objects_tie_and_priorities_are_ignored() {
        assert_eq!(
            compare_values(&node(json!({"a": 1})), &node(json!({"z": "zz"}))),
            Ordering::Equal
        );
        let low = node(json!(1)).with_priority(Priority::String(Arc::from("zzz")));
        let high = node(json!(2)).with_priority(Priority::Number(-5.0));
        assert_eq!(compare_values(&low, &high), Ordering::Less);
        assert_eq!(
            compare_values(&node(json!(3)), &node(json!(3.0))),
            Ordering::Equal
        );
    }
}
