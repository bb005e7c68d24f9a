//! JSON in and out of the tree (spec §8).
//!
//! Input is the export form the clients send: `.priority` and `.value` carry priorities, other
//! keys starting with `.` are ignored, arrays are objects keyed by index, and nulls and empty
//! objects vanish. Output is either that export form or plain JSON. `write_json` serializes
//! straight to bytes in key order without building a `serde_json::Value`, because it runs for
//! every listen push and REST read.

use serde_json::{Map, Value};

use crate::key::Key;
use crate::limits::{TreeError, MAX_DEPTH, MAX_PATH_BYTES, MAX_STRING_BYTES};
use crate::node::{Leaf, Node, ObjectData};
use crate::number::{number_to_value, write_number};
use crate::path::Path;
use crate::priority::Priority;

/// Where the value being parsed sits, so that the limits see the full path of every key.
#[derive(Clone, Copy)]
struct Position {
    depth: usize,
    /// UTF-8 bytes of the path so far: segments plus separators (0 at the root).
    bytes: usize,
}

impl Position {
    fn of(path: &Path) -> Position {
        let bytes = if path.is_root() { 0 } else { path.byte_len() };
        Position {
            depth: path.len(),
            bytes,
        }
    }

    /// The position of child `key`, refused when it breaks the depth or path-length limit.
    fn child(self, key: &str) -> Result<Position, TreeError> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(TreeError::TooDeep { depth });
        }
        let bytes = self.bytes + usize::from(self.depth > 0) + key.len();
        if bytes > MAX_PATH_BYTES {
            return Err(TreeError::PathTooLong { bytes });
        }
        Ok(Position { depth, bytes })
    }
}

impl Node {
    /// Builds a node from JSON in export form (plain JSON is a special case of it). Keys, depth,
    /// path length and string length are validated as if the value were written at the root;
    /// see [`Node::from_json_at`] for values written elsewhere. Unresolved server values
    /// (`.sv`) are refused: the caller resolves them first.
    pub fn from_json(v: &Value) -> Result<Node, TreeError> {
        parse(v, Position::of(&Path::root()))
    }

    /// Like [`Node::from_json`] for a value that will be written at `at`: the depth and
    /// path-length limits then apply to the full path of every key, as clients check them.
    pub fn from_json_at(v: &Value, at: &Path) -> Result<Node, TreeError> {
        parse(v, Position::of(at))
    }

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

fn parse(v: &Value, at: Position) -> Result<Node, TreeError> {
    match v {
        Value::Object(map) => parse_object(map, at),
        Value::Array(items) => Ok(ObjectData::build_from_entries(
            array_children(items, at)?,
            Priority::None,
        )),
        scalar => Ok(scalar_leaf(scalar)?.map(Node::leaf).unwrap_or_default()),
    }
}

fn parse_object(map: &Map<String, Value>, at: Position) -> Result<Node, TreeError> {
    refuse_server_value(map)?;
    if let Some(Value::Object(placeholder)) = map.get(".priority") {
        // Report an unresolved placeholder as such rather than as a bad priority.
        refuse_server_value(placeholder)?;
    }
    let priority = match map.get(".priority") {
        Some(p) => Priority::from_json(p)?,
        None => Priority::None,
    };
    if let Some(inner) = map.get(".value") {
        if map.keys().any(|key| !key.starts_with('.')) {
            return Err(TreeError::InvalidValue(
                "an object with .value cannot have other children".into(),
            ));
        }
        // The wrapped value takes the wrapper's priority; any metadata inside it is ignored,
        // as the client ignores it.
        match inner {
            Value::Null => return Ok(Node::empty()),
            Value::Object(inner_map) => {
                refuse_server_value(inner_map)?;
                return Ok(ObjectData::build_from_entries(
                    object_children(inner_map, at)?,
                    priority,
                ));
            }
            Value::Array(items) => {
                return Ok(ObjectData::build_from_entries(
                    array_children(items, at)?,
                    priority,
                ))
            }
            scalar => {
                return Ok(scalar_leaf(scalar)?
                    .map(|leaf| Node::leaf_with_priority(leaf, priority))
                    .unwrap_or_default())
            }
        }
    }
    Ok(ObjectData::build_from_entries(
        object_children(map, at)?,
        priority,
    ))
}

fn refuse_server_value(map: &Map<String, Value>) -> Result<(), TreeError> {
    if map.contains_key(".sv") {
        return Err(TreeError::InvalidValue(
            "unresolved server value (.sv) placeholder".into(),
        ));
    }
    Ok(())
}

/// The non-empty children of a JSON object, skipping metadata keys (those starting with `.`).
fn object_children(map: &Map<String, Value>, at: Position) -> Result<Vec<(Key, Node)>, TreeError> {
    let mut children = Vec::with_capacity(map.len());
    for (name, value) in map {
        if name.starts_with('.') {
            continue;
        }
        let key = Key::new(name)?;
        let child = parse(value, at.child(name)?)?;
        if !child.is_empty() {
            children.push((key, child));
        }
    }
    Ok(children)
}

/// The non-empty elements of a JSON array, keyed by index.
fn array_children(items: &[Value], at: Position) -> Result<Vec<(Key, Node)>, TreeError> {
    let mut children = Vec::with_capacity(items.len());
    for (index, value) in items.iter().enumerate() {
        let name = index.to_string();
        let position = at.child(&name)?;
        let child = parse(value, position)?;
        if !child.is_empty() {
            children.push((Key::new(&name)?, child));
        }
    }
    Ok(children)
}

/// The leaf of a JSON scalar (`None` for null).
fn scalar_leaf(v: &Value) -> Result<Option<Leaf>, TreeError> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(Leaf::Bool(*b))),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_finite() => Ok(Some(Leaf::Number(f))),
            _ => Err(TreeError::InvalidValue(format!(
                "{n} is not a finite number"
            ))),
        },
        Value::String(s) => {
            if s.len() > MAX_STRING_BYTES {
                return Err(TreeError::StringTooLong { bytes: s.len() });
            }
            Ok(Some(Leaf::String(s.as_str().into())))
        }
        Value::Object(_) | Value::Array(_) => {
            Err(TreeError::InvalidValue("expected a scalar".into()))
        }
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
pub(crate) fn write_string(out: &mut Vec<u8>, s: &str) {
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

pub(crate) fn write_node(node: &Node, out: &mut Vec<u8>, export: bool) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn node(v: Value) -> Node {
        Node::from_json(&v).expect("valid test node")
    }

    fn written(n: &Node, export: bool) -> String {
        let mut out = Vec::new();
        n.write_json(&mut out, export);
        String::from_utf8(out).expect("write_json emits UTF-8")
    }

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
    fn arrays_become_index_keyed_objects() {
        assert_eq!(
            node(json!([1, null, 3])).to_json(false),
            json!({"0": 1, "2": 3})
        );
        assert!(node(json!([])).is_empty());
        assert!(node(json!([null, {}, []])).is_empty());
        let eleven: Vec<u32> = (0..11).collect();
        let keys: Vec<String> = node(json!(eleven))
            .children()
            .map(|(k, _)| k.to_string())
            .collect();
        assert_eq!(
            keys,
            ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
        );
        assert_eq!(
            node(json!({".value": [5], ".priority": 1})).to_json(true),
            json!({"0": 5, ".priority": 1})
        );
    }

    #[test]
    fn nulls_and_empty_objects_vanish() {
        assert!(node(json!({"a": {}, "b": {"c": null}, "d": null})).is_empty());
        assert!(node(json!({".priority": 5})).is_empty());
        assert!(node(json!({".value": null, ".priority": 1})).is_empty());
        assert_eq!(
            node(json!({"a": {}, "b": 1})).to_json(true),
            json!({"b": 1})
        );
    }

    #[test]
    fn metadata_keys() {
        assert_eq!(
            node(json!({"a": 1, ".other": 2, ".info": {"x": 1}})).to_json(true),
            json!({"a": 1})
        );
        assert_eq!(
            node(json!({".value": 1, ".junk": 2})).to_json(true),
            json!(1)
        );
        assert!(matches!(
            Node::from_json(&json!({".value": 1, "a": 2})),
            Err(TreeError::InvalidValue(_))
        ));
        assert!(matches!(
            Node::from_json(&json!({".value": null, "a": 2})),
            Err(TreeError::InvalidValue(_))
        ));
        // The wrapped object's own metadata is ignored; the wrapper's priority applies.
        assert_eq!(
            node(json!({".value": {"a": 1, ".priority": 5}, ".priority": 2})).to_json(true),
            json!({"a": 1, ".priority": 2})
        );
        assert_eq!(
            node(json!({".value": {"a": 1, ".priority": 5}})).to_json(true),
            json!({"a": 1})
        );
        for bad in [
            json!({".sv": "timestamp"}),
            json!({"a": {"b": {".sv": "timestamp"}}}),
            json!([{".sv": {"increment": 1}}]),
            json!({".value": {".sv": "timestamp"}}),
            json!({"a": 1, ".priority": {".sv": "timestamp"}}),
        ] {
            assert!(
                matches!(Node::from_json(&bad), Err(TreeError::InvalidValue(_))),
                "{bad}"
            );
        }
        for bad in [
            json!({"a": 1, ".priority": true}),
            json!({".value": 1, ".priority": {"x": 1}}),
        ] {
            assert!(
                matches!(Node::from_json(&bad), Err(TreeError::InvalidPriority(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn negative_zero_becomes_zero() {
        let n: Value =
            serde_json::from_str(r#"{"a": -0.0, "b": -0, "c": {".value": 1, ".priority": -0.0}}"#)
                .expect("valid JSON");
        let n = node(n);
        for child in ["a", "b"] {
            match n.get(&Path::parse(child).expect("valid")).leaf_value() {
                Some(Leaf::Number(v)) => assert!(*v == 0.0 && v.is_sign_positive()),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(
            written(&n, true),
            r#"{"a":0,"b":0,"c":{".value":1,".priority":0}}"#
        );
    }

    #[test]
    fn invalid_keys_are_refused() {
        for bad in [
            json!({"a.b": 1}),
            json!({"": 1}),
            json!({"x": {"a/b": 1}}),
            json!({"-0": 1}),
            json!({"a": {"$x": 1}}),
        ] {
            assert!(
                matches!(Node::from_json(&bad), Err(TreeError::InvalidKey { .. })),
                "{bad}"
            );
        }
    }

    fn nested(depth: usize) -> Value {
        (0..depth).fold(json!(true), |inner, _| json!({ "k": inner }))
    }

    #[test]
    fn depth_limit() {
        assert!(Node::from_json(&nested(MAX_DEPTH)).is_ok());
        assert_eq!(
            Node::from_json(&nested(MAX_DEPTH + 1)),
            Err(TreeError::TooDeep { depth: 33 })
        );
        // Nulls do not escape the check, as in the client.
        let mut deep_null = json!(null);
        for _ in 0..=MAX_DEPTH {
            deep_null = json!({ "k": deep_null });
        }
        assert_eq!(
            Node::from_json(&deep_null),
            Err(TreeError::TooDeep { depth: 33 })
        );
        // `.value` wrappers do not add depth.
        let wrapped = (0..MAX_DEPTH).fold(
            json!({".value": 1, ".priority": 1}),
            |inner, _| json!({ "k": inner }),
        );
        assert!(Node::from_json(&wrapped).is_ok());
        // Written below a path, the limit covers the whole path.
        let at = Path::parse("/a/b").expect("valid");
        assert!(Node::from_json_at(&nested(MAX_DEPTH - 2), &at).is_ok());
        assert_eq!(
            Node::from_json_at(&nested(MAX_DEPTH - 1), &at),
            Err(TreeError::TooDeep { depth: 33 })
        );
        // And the tree accepts a leaf at depth 32 through `set`.
        let deepest = Path::parse(&"/k".repeat(MAX_DEPTH)).expect("valid");
        let root = Node::empty().set(&deepest, node(json!(1)));
        let expected = (0..MAX_DEPTH).fold(json!(1), |inner, _| json!({ "k": inner }));
        assert_eq!(root, node(expected));
    }

    #[test]
    fn path_length_limit() {
        let long = "x".repeat(MAX_PATH_BYTES);
        assert!(Node::from_json(&json!({ long.clone(): 1 })).is_ok());
        assert_eq!(
            Node::from_json(&json!({"a": { long.clone(): 1 }})),
            Err(TreeError::PathTooLong { bytes: 770 })
        );
        let at = Path::parse("/ab").expect("valid");
        let fits = "y".repeat(MAX_PATH_BYTES - 3);
        assert!(Node::from_json_at(&json!({ fits.clone(): 1 }), &at).is_ok());
        let too_long = format!("{fits}y");
        assert_eq!(
            Node::from_json_at(&json!({ too_long: 1 }), &at),
            Err(TreeError::PathTooLong { bytes: 769 })
        );
    }

    #[test]
    fn string_length_limit() {
        let max = "s".repeat(MAX_STRING_BYTES);
        assert!(Node::from_json(&Value::String(max.clone())).is_ok());
        let over = format!("{max}s");
        assert_eq!(
            Node::from_json(&json!({ "a": over })),
            Err(TreeError::StringTooLong {
                bytes: MAX_STRING_BYTES + 1
            })
        );
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
            let plain = crate::node::without_packing(|| Node::from_json(&v))
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
}
