//! The tree as JSON (spec §8): in export form, with `.priority` and `.value` where there are
//! priorities, or as plain JSON.
//!
//! `write_json` serializes straight to bytes in key order without building a
//! `serde_json::Value`, because it runs for every listen push and REST read; an object held
//! encoded is written from its bytes (`raw`), without a node per child.

use std::fmt;

use serde_json::{Map, Value};

use crate::leaf::Leaf;
use crate::node::Node;
use crate::number::{number_to_value, write_number};
use crate::priority::Priority;
use crate::raw::{RawObject, RawValue};

impl Node {
    /// The node as JSON: `null` for the empty node; with `export`, priorities appear as
    /// `.priority` and prioritized leaves as `{".value": …, ".priority": …}`.
    pub fn to_json(&self, export: bool) -> Value {
        if let Some(leaf) = self.leaf_value() {
            let value = leaf_to_value(leaf);
            if !export || self.priority().is_none() {
                return value;
            }
            let mut map = Map::new();
            map.insert(".value".into(), value);
            map.insert(".priority".into(), self.priority().to_json());
            return Value::Object(map);
        }
        if self.is_empty() {
            return Value::Null;
        }
        let mut map = Map::new();
        for (key, child) in self.children() {
            map.insert(key.as_str().to_owned(), child.to_json(export));
        }
        if export && !self.priority().is_none() {
            map.insert(".priority".into(), self.priority().to_json());
        }
        Value::Object(map)
    }

    /// Appends the JSON of the node to `out`; the same document as [`Node::to_json`], with
    /// children in key order.
    pub fn write_json(&self, out: &mut Vec<u8>, export: bool) {
        write_node(self, out, export);
    }
}

fn leaf_to_value(leaf: &Leaf) -> Value {
    match leaf {
        Leaf::Bool(b) => Value::Bool(*b),
        Leaf::Number(n) => number_to_value(*n),
        Leaf::String(s) => Value::String(s.to_string()),
    }
}

/// Appends `s` as a JSON string literal.
fn write_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn write_leaf(out: &mut Vec<u8>, leaf: &Leaf) {
    match leaf {
        Leaf::Bool(true) => out.extend_from_slice(b"true"),
        Leaf::Bool(false) => out.extend_from_slice(b"false"),
        Leaf::Number(n) => write_number(out, *n),
        Leaf::String(s) => write_string(out, s),
    }
}

fn write_priority(out: &mut Vec<u8>, priority: &Priority) {
    match priority {
        Priority::None => out.extend_from_slice(b"null"),
        Priority::Number(n) => write_number(out, *n),
        Priority::String(s) => write_string(out, s),
    }
}

fn write_node(node: &Node, out: &mut Vec<u8>, export: bool) {
    let priority = node.priority();
    let with_priority = export && !priority.is_none();
    if let Some(leaf) = node.leaf_value() {
        if with_priority {
            out.extend_from_slice(b"{\".value\":");
            write_leaf(out, leaf);
            out.extend_from_slice(b",\".priority\":");
            write_priority(out, priority);
            out.push(b'}');
        } else {
            write_leaf(out, leaf);
        }
        return;
    }
    if node.is_empty() {
        out.extend_from_slice(b"null");
        return;
    }
    if let Some(object) = node.raw_object() {
        // Nothing in an encoded object has a priority: the plain and the export form agree.
        object.write_json(out);
        return;
    }
    out.push(b'{');
    let mut first = true;
    for (key, child) in node.children() {
        if !first {
            out.push(b',');
        }
        first = false;
        write_string(out, key.as_str());
        out.push(b':');
        write_node(&child, out, export);
    }
    if with_priority {
        out.extend_from_slice(b",\".priority\":");
        write_priority(out, priority);
    }
    out.push(b'}');
}

impl RawObject<'_> {
    /// Appends the object as JSON, as [`Node::write_json`](crate::Node::write_json) writes it
    /// (plain and export form are the same without priorities).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        for (index, (key, value)) in self.entries().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            write_string(out, key);
            out.push(b':');
            value.write_json(out);
        }
        out.push(b'}');
    }
}

impl RawValue<'_> {
    /// Appends the value as JSON, as [`Node::write_json`](crate::Node::write_json) writes it.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            RawValue::Bool(true) => out.extend_from_slice(b"true"),
            RawValue::Bool(false) => out.extend_from_slice(b"false"),
            RawValue::Number(n) => write_number(out, *n),
            RawValue::String(text) => write_string(out, text),
            RawValue::Object(object) => object.write_json(out),
        }
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        write_node(self, &mut out, true);
        write!(f, "Node({})", String::from_utf8_lossy(&out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Key;
    use crate::testing::{node, written};
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn plain_and_export_round_trips() {
        let export = json!({
            "a": {"x": 1, ".priority": 2},
            "b": {".value": "s", ".priority": "p"},
            "c": [true, false],
            "d": 0.5
        });
        let n = node(export.clone());
        assert_eq!(
            n.to_json(true),
            json!({
                "a": {"x": 1, ".priority": 2},
                "b": {".value": "s", ".priority": "p"},
                "c": {"0": true, "1": false},
                "d": 0.5
            })
        );
        assert_eq!(
            n.to_json(false),
            json!({"a": {"x": 1}, "b": "s", "c": {"0": true, "1": false}, "d": 0.5})
        );
        assert_eq!(node(n.to_json(true)), n);
        assert_eq!(
            written(&n, true),
            r#"{"a":{"x":1,".priority":2},"b":{".value":"s",".priority":"p"},"c":{"0":true,"1":false},"d":0.5}"#
        );
        assert_eq!(
            written(&n, false),
            r#"{"a":{"x":1},"b":"s","c":{"0":true,"1":false},"d":0.5}"#
        );
        assert_eq!(written(&Node::empty(), true), "null");
        assert_eq!(Node::empty().to_json(true), Value::Null);
    }

    #[test]
    fn strings_are_escaped() {
        let n = node(json!({"k\"ey\\": "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é😀"}));
        let text = written(&n, false);
        assert_eq!(
            text,
            "{\"k\\\"ey\\\\\":\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\u{7f}é😀\"}"
        );
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed, n.to_json(false));
    }

    fn leaf_value() -> impl Strategy<Value = Value> {
        let number = prop_oneof![
            any::<i32>().prop_map(|i| json!(i)),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            (-20i32..=20).prop_map(|e| json!(10f64.powi(e) * 1.5)),
        ];
        prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            number,
            any::<String>().prop_map(Value::String),
            Just(Value::Null),
        ]
    }

    fn key_string() -> impl Strategy<Value = String> {
        prop_oneof!["[a-c]{1,3}", "[0-9]{1,3}", "-[1-9]", "[\"\\\\ é😀｡]{1,2}"]
    }

    fn priority_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i16>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            "[a-z]{0,3}".prop_map(Value::String),
        ]
    }

    fn export_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            3 => leaf_value(),
            1 => (leaf_value(), priority_value()).prop_map(|(v, p)| json!({".value": v, ".priority": p})),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                (
                    proptest::collection::btree_map(key_string(), inner.clone(), 0..6),
                    priority_value()
                )
                    .prop_map(|(children, priority)| {
                        let mut map: Map<String, Value> = children.into_iter().collect();
                        if !priority.is_null() {
                            map.insert(".priority".into(), priority);
                        }
                        Value::Object(map)
                    }),
                proptest::collection::vec(inner, 0..4).prop_map(Value::Array),
            ]
        })
    }

    proptest! {
        /// Any value reads the same whether its small objects are packed or not: keys of every
        /// kind, numbers of every size, strings with escapes, priorities at any depth.
        #[test]
        fn packing_changes_no_output(v in export_value()) {
            let packed = Node::from_json(&v).expect("generated values are valid");
            let plain = crate::update::without_packing(|| Node::from_json(&v))
                .expect("generated values are valid");
            prop_assert_eq!(&packed, &plain);
            prop_assert_eq!(packed.hash(), plain.hash());
            prop_assert_eq!(packed.estimated_bytes(), plain.estimated_bytes());
            for export in [false, true] {
                prop_assert_eq!(packed.to_json(export), plain.to_json(export));
                let (mut a, mut b) = (Vec::new(), Vec::new());
                packed.write_json(&mut a, export);
                plain.write_json(&mut b, export);
                prop_assert_eq!(a, b);
            }
            for (key, child) in plain.children() {
                let other = packed.child(&key);
                prop_assert_eq!(other.hash(), child.hash());
                prop_assert_eq!(other.to_json(true), child.to_json(true));
            }
        }

        #[test]
        fn write_json_matches_to_json(v in export_value(), export in any::<bool>()) {
            let n = Node::from_json(&v).expect("generated values are valid");
            let mut out = Vec::new();
            n.write_json(&mut out, export);
            let reparsed: Value = serde_json::from_slice(&out).expect("write_json emits JSON");
            prop_assert_eq!(&reparsed, &n.to_json(export));
            // Key order in the text is the tree's order.
            let keys_in_text: Vec<Key> = n.children().map(|(k, _)| k.into_owned()).collect();
            let mut sorted = keys_in_text.clone();
            sorted.sort();
            prop_assert_eq!(keys_in_text, sorted);
        }

        #[test]
        fn export_json_round_trips(v in export_value()) {
            let n = Node::from_json(&v).expect("generated values are valid");
            let again = Node::from_json(&n.to_json(true)).expect("export output is valid input");
            prop_assert_eq!(&again, &n);
            prop_assert_eq!(again.hash(), n.hash());
            let plain = Node::from_json(&n.to_json(false)).expect("plain output is valid input");
            prop_assert_eq!(plain.to_json(true), plain.to_json(false));
        }
    }

    #[test]
    fn debug_shows_export_json() {
        let n = node(json!({"a": {".value": 1, ".priority": 2}}));
        assert_eq!(
            format!("{n:?}"),
            r#"Node({"a":{".value":1,".priority":2}})"#
        );
    }
}
