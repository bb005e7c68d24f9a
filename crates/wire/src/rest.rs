//! JSON as the REST API writes it (spec §8, §15): plain values without priorities unless the
//! export format is asked for, array-like objects as arrays, shallow listings, and the
//! indented form of `print=pretty`.
//!
//! The realtime protocol always sends export-form objects (see `encode`); REST clients such
//! as Python's read plain JSON, where `[1, 2]` written earlier must come back as a list.

use hearth_tree::{Node, Priority, RawObject, RawValue};
use serde_json::Value;

/// How a value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JsonStyle {
    /// Keep priorities (`.priority`, `.value` wrappers): `format=export`.
    pub export: bool,
    /// Indent with two spaces and write `"key" : value`: `print=pretty`.
    pub pretty: bool,
}

/// Appends `node` in REST form.
pub fn write_rest_json(node: &Node, style: JsonStyle, out: &mut Vec<u8>) {
    Writer::new(out, style).node(node, 0);
}

/// The REST form of `node` as a new buffer.
pub fn rest_json(node: &Node, style: JsonStyle) -> Vec<u8> {
    let mut out = Vec::with_capacity(node.estimated_bytes().min(1 << 20) + 2);
    write_rest_json(node, style, &mut out);
    out
}

/// Appends the shallow form of `node` (`shallow=true`): an object becomes `{"key": true, …}`,
/// anything else is written as it is.
pub fn write_shallow_json(node: &Node, style: JsonStyle, out: &mut Vec<u8>) {
    if node.is_leaf() || node.is_empty() {
        let style = JsonStyle {
            export: false,
            ..style
        };
        write_rest_json(node, style, out);
        return;
    }
    let mut writer = Writer::new(out, style);
    writer.open(b'{');
    let add = |writer: &mut Writer<'_>, index: usize, key: &str| {
        writer.member(index, key, 1);
        writer.out.extend_from_slice(b"true");
    };
    match node.raw_object() {
        Some(object) => {
            for (index, (key, _)) in object.entries().enumerate() {
                add(&mut writer, index, key);
            }
        }
        None => {
            for (index, (key, _)) in node.children().enumerate() {
                add(&mut writer, index, key.as_str());
            }
        }
    }
    writer.close(b'}', node.child_count() > 0, 0);
}

/// A member of an object assembled from parts: a node written as a read writes it, or a
/// JSON value as it is.
#[derive(Debug, Clone, Copy)]
pub enum Member<'a> {
    Node(&'a Node),
    Value(&'a Value),
}

/// Appends an object of the given members, in the given order, each written as a read of it
/// would be (arrays, numbers, key order and indentation alike): a PATCH's answer, whose
/// members are the written paths.
pub fn write_rest_object(members: &[(&str, Member<'_>)], style: JsonStyle, out: &mut Vec<u8>) {
    let mut writer = Writer::new(out, style);
    writer.open(b'{');
    for (index, (name, member)) in members.iter().enumerate() {
        writer.member(index, name, 1);
        match member {
            Member::Node(node) => writer.node(node, 1),
            Member::Value(value) => writer.value(value, 1),
        }
    }
    writer.close(b'}', !members.is_empty(), 0);
}

/// Appends any JSON value (error bodies, small answers) in the given style.
pub fn write_value(value: &Value, pretty: bool, out: &mut Vec<u8>) {
    let style = JsonStyle {
        export: false,
        pretty,
    };
    let mut writer = Writer::new(out, style);
    writer.value(value, 0);
}

/// True when an object's keys are all canonical non-negative integers (`0`, or digits without a
/// leading zero) and the largest is less than twice the number of keys: the rule by which the
/// clients render an object as an array.
pub fn is_array_like(node: &Node) -> bool {
    if node.is_leaf() {
        return false;
    }
    match node.raw_object() {
        Some(object) => array_like(object.entries().map(|(key, _)| key), object.len()),
        None => array_like(
            node.children().map(|(key, _)| array_index(key.as_str())),
            node.child_count(),
        ),
    }
}

/// Whether `count` keys make an array: each of them an index, the largest below twice the
/// count. Items are keys or, already read, their indices.
fn array_like<K: ArrayKey>(keys: impl Iterator<Item = K>, count: usize) -> bool {
    if count == 0 {
        return false;
    }
    let mut largest: u64 = 0;
    for key in keys {
        match key.index() {
            Some(index) => largest = largest.max(index),
            None => return false,
        }
    }
    largest < 2 * count as u64
}

/// A key, or the array index read from one.
trait ArrayKey {
    fn index(&self) -> Option<u64>;
}

impl ArrayKey for &str {
    fn index(&self) -> Option<u64> {
        array_index(self)
    }
}

impl ArrayKey for Option<u64> {
    fn index(&self) -> Option<u64> {
        *self
    }
}

fn array_index(text: &str) -> Option<u64> {
    let canonical = text == "0"
        || (!text.is_empty() && !text.starts_with('0') && text.bytes().all(|b| b.is_ascii_digit()));
    if !canonical || text.len() > 10 {
        return None;
    }
    text.parse().ok()
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
    style: JsonStyle,
    /// Write encoded objects straight from their bytes (off only in tests, which compare both
    /// ways).
    raw: bool,
}

impl<'a> Writer<'a> {
    fn new(out: &'a mut Vec<u8>, style: JsonStyle) -> Writer<'a> {
        Writer {
            out,
            style,
            raw: true,
        }
    }

    fn node(&mut self, node: &Node, depth: usize) {
        if node.is_empty() {
            self.out.extend_from_slice(b"null");
            return;
        }
        if let Some(object) = node.raw_object().filter(|_| self.raw) {
            self.raw_object(object, depth);
            return;
        }
        let priority = node.priority();
        let export_priority = self.style.export && !priority.is_none();
        if node.is_leaf() {
            if !export_priority {
                // Without `export` a leaf is written without its priority.
                node.write_json(self.out, false);
                return;
            }
            self.open(b'{');
            self.member(0, ".value", depth + 1);
            node.write_json(self.out, false);
            self.member(1, ".priority", depth + 1);
            self.priority(priority);
            self.close(b'}', true, depth);
            return;
        }
        if !self.style.export && is_array_like(node) {
            let children = node
                .children()
                .map(|(key, child)| (array_index(key.as_str()), child));
            self.array(children, depth, |writer, child, depth| {
                writer.node(&child, depth)
            });
            return;
        }
        self.open(b'{');
        let mut index = 0;
        for (key, child) in node.children() {
            self.member(index, key.as_str(), depth + 1);
            self.node(&child, depth + 1);
            index += 1;
        }
        if export_priority {
            self.member(index, ".priority", depth + 1);
            self.priority(priority);
        }
        self.close(b'}', true, depth);
    }

    /// An object held encoded, written from its bytes: no priorities anywhere inside.
    fn raw_object(&mut self, object: RawObject<'_>, depth: usize) {
        if !self.style.export && array_like(object.entries().map(|(key, _)| key), object.len()) {
            let children = object
                .entries()
                .map(|(key, value)| (array_index(key), value));
            self.array(children, depth, Writer::raw_value);
            return;
        }
        self.open(b'{');
        let mut count = 0;
        for (index, (key, value)) in object.entries().enumerate() {
            self.member(index, key, depth + 1);
            self.raw_value(value, depth + 1);
            count += 1;
        }
        self.close(b'}', count > 0, depth);
    }

    fn raw_value(&mut self, value: RawValue<'_>, depth: usize) {
        match value {
            RawValue::Object(object) => self.raw_object(object, depth),
            scalar => scalar.write_json(self.out),
        }
    }

    /// Writes array-like children (with their indices) as an array, nulls in the gaps.
    fn array<C>(
        &mut self,
        children: impl Iterator<Item = (Option<u64>, C)>,
        depth: usize,
        mut write: impl FnMut(&mut Self, C, usize),
    ) {
        self.open(b'[');
        let mut next: u64 = 0;
        for (index, child) in children {
            // Children iterate in key order, which for canonical integers is numeric order.
            let index = index.unwrap_or(next);
            while next < index {
                self.element(next, depth + 1);
                self.out.extend_from_slice(b"null");
                next += 1;
            }
            self.element(next, depth + 1);
            write(self, child, depth + 1);
            next += 1;
        }
        self.close(b']', true, depth);
    }

    fn priority(&mut self, priority: &Priority) {
        // Serializing a JSON value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *self.out, &priority.to_json());
    }

    fn value(&mut self, value: &Value, depth: usize) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                self.open(b'{');
                for (index, (key, child)) in map.iter().enumerate() {
                    self.member(index, key, depth + 1);
                    self.value(child, depth + 1);
                }
                self.close(b'}', true, depth);
            }
            Value::Array(items) if !items.is_empty() => {
                self.open(b'[');
                for (index, item) in items.iter().enumerate() {
                    self.element(index as u64, depth + 1);
                    self.value(item, depth + 1);
                }
                self.close(b']', true, depth);
            }
            other => {
                let _ = serde_json::to_writer(&mut *self.out, other);
            }
        }
    }

    fn open(&mut self, bracket: u8) {
        self.out.push(bracket);
    }

    /// Writes the separator and indentation before member `index`, then its key.
    fn member(&mut self, index: usize, key: &str, depth: usize) {
        self.element(index as u64, depth);
        let _ = serde_json::to_writer(&mut *self.out, key);
        if self.style.pretty {
            self.out.extend_from_slice(b" : ");
        } else {
            self.out.push(b':');
        }
    }

    fn element(&mut self, index: u64, depth: usize) {
        if index > 0 {
            self.out.push(b',');
        }
        if self.style.pretty {
            self.newline(depth);
        }
    }

    fn close(&mut self, bracket: u8, had_members: bool, depth: usize) {
        if self.style.pretty && had_members {
            self.newline(depth);
        }
        self.out.push(bracket);
    }

    fn newline(&mut self, depth: usize) {
        self.out.push(b'\n');
        for _ in 0..depth {
            self.out.extend_from_slice(b"  ");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn node(value: Value) -> Node {
        Node::from_json(&value).expect("valid test node")
    }

    fn plain(value: Value) -> String {
        String::from_utf8(rest_json(&node(value), JsonStyle::default())).expect("utf-8")
    }

    fn export(value: Value) -> String {
        let style = JsonStyle {
            export: true,
            pretty: false,
        };
        String::from_utf8(rest_json(&node(value), style)).expect("utf-8")
    }

    #[test]
    fn plain_output_drops_priorities_and_keeps_integers_integral() {
        assert_eq!(
            plain(json!({"a": {".value": 1.0, ".priority": 2}, "b": {"c": 2.5, ".priority": "x"}})),
            r#"{"a":1,"b":{"c":2.5}}"#
        );
        assert_eq!(plain(json!(null)), "null");
        assert_eq!(plain(json!("text")), r#""text""#);
        assert_eq!(plain(json!(1e21)), "1e+21");
    }

    #[test]
    fn export_output_keeps_priorities() {
        assert_eq!(
            export(json!({"a": {".value": 1, ".priority": 2}, "b": {"c": 1, ".priority": "x"}})),
            r#"{"a":{".value":1,".priority":2},"b":{"c":1,".priority":"x"}}"#
        );
        // Arrays stay objects in export form, as on the wire.
        assert_eq!(export(json!([1, 2])), r#"{"0":1,"1":2}"#);
    }

    #[test]
    fn array_like_objects_become_arrays() {
        assert_eq!(plain(json!([1, 2, 3])), "[1,2,3]");
        assert_eq!(plain(json!({"0": "a", "2": "c"})), r#"["a",null,"c"]"#);
        // Largest key not below twice the count: an object.
        assert_eq!(plain(json!({"0": "a", "4": "e"})), r#"{"0":"a","4":"e"}"#);
        // Leading zeros and negatives are not indices.
        assert_eq!(plain(json!({"0": 1, "01": 2})), r#"{"0":1,"01":2}"#);
        assert_eq!(plain(json!({"-1": 1, "0": 2})), r#"{"-1":1,"0":2}"#);
        assert_eq!(plain(json!({"x": [true, false]})), r#"{"x":[true,false]}"#);
        // Key order of integer-like keys is numeric.
        assert_eq!(
            plain(
                json!({"10": 10, "2": 2, "0": 0, "1": 1, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9})
            ),
            "[0,1,2,3,4,5,6,7,8,9,10]"
        );
    }

    #[test]
    fn assembled_objects_write_members_as_reads_do() {
        let list = node(json!({"1": "b", "0": "a"}));
        let numbers = node(json!({"10": 1, "9": 2, "b": 3}));
        let sent = json!({"x": 1});
        let members = [
            ("list", Member::Node(&list)),
            ("n/m", Member::Node(&numbers)),
            ("raw", Member::Value(&sent)),
        ];
        let mut out = Vec::new();
        write_rest_object(&members, JsonStyle::default(), &mut out);
        assert_eq!(
            String::from_utf8(out).expect("UTF-8"),
            r#"{"list":["a","b"],"n/m":{"9":2,"10":1,"b":3},"raw":{"x":1}}"#
        );
        let mut pretty = Vec::new();
        let style = JsonStyle {
            pretty: true,
            ..JsonStyle::default()
        };
        write_rest_object(&members[..1], style, &mut pretty);
        assert_eq!(
            String::from_utf8(pretty).expect("UTF-8"),
            "{\n  \"list\" : [\n    \"a\",\n    \"b\"\n  ]\n}"
        );
        let mut empty = Vec::new();
        write_rest_object(&[], style, &mut empty);
        assert_eq!(empty, b"{}");
    }

    #[test]
    fn pretty_output() {
        let style = JsonStyle {
            export: false,
            pretty: true,
        };
        let text = String::from_utf8(rest_json(&node(json!({"a": 1, "b": {"c": [1, 2]}})), style))
            .expect("utf-8");
        assert_eq!(
            text,
            "{\n  \"a\" : 1,\n  \"b\" : {\n    \"c\" : [\n      1,\n      2\n    ]\n  }\n}"
        );
        let mut error = Vec::new();
        write_value(&json!({"error": "Permission denied"}), true, &mut error);
        assert_eq!(
            String::from_utf8(error).expect("utf-8"),
            "{\n  \"error\" : \"Permission denied\"\n}"
        );
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed, json!({"a": 1, "b": {"c": [1, 2]}}));
    }

    #[test]
    fn shallow_lists_keys_only() {
        let mut out = Vec::new();
        write_shallow_json(
            &node(json!({"a": {"deep": 1}, "b": 2})),
            JsonStyle::default(),
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            r#"{"a":true,"b":true}"#
        );
        let mut leaf = Vec::new();
        write_shallow_json(
            &node(json!({".value": 5, ".priority": 1})),
            JsonStyle::default(),
            &mut leaf,
        );
        assert_eq!(leaf, b"5");
    }

    /// The REST form of `node` written with the fast path for encoded objects on or off.
    fn written(node: &Node, style: JsonStyle, raw: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut writer = Writer::new(&mut out, style);
        writer.raw = raw;
        writer.node(node, 0);
        out
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            (-1e6..1e6f64).prop_map(Value::from),
            "[a-z\\\"\n\u{1}é]{0,6}".prop_map(Value::from),
        ]
    }

    /// A record: a leaf, an array (maybe with gaps) or a small object, nested a little.
    fn record() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(prop_oneof![Just(Value::Null), inner.clone()], 1..5)
                    .prop_map(Value::Array),
                proptest::collection::btree_map("[0-9a-c]{1,3}", inner, 1..5)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    /// A collection large enough to be kept in chunks, keyed by names or by indices (an
    /// array, with gaps when `sparse`), beside a few small members.
    fn document() -> impl Strategy<Value = Value> {
        (
            proptest::collection::vec(record(), 0..300),
            0..3u8,
            proptest::collection::btree_map("[a-z]{1,4}", record(), 0..4),
        )
            .prop_map(|(records, keys, small)| {
                let mut root: serde_json::Map<String, Value> = small.into_iter().collect();
                let list = match keys {
                    0 => Value::Array(records),
                    1 => Value::Object(
                        records
                            .into_iter()
                            .enumerate()
                            .map(|(i, record)| ((i * 3 / 2).to_string(), record))
                            .collect(),
                    ),
                    _ => Value::Object(
                        records
                            .into_iter()
                            .enumerate()
                            .map(|(i, record)| (format!("-N{i:05}"), record))
                            .collect(),
                    ),
                };
                root.insert("list".into(), list);
                Value::Object(root)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Writing packed objects and chunked collections from their bytes changes no byte
        /// of any form (plain arrays, export, pretty) nor of the shallow listing.
        #[test]
        fn encoded_objects_write_as_decoded_ones(value in document()) {
            let root = node(value);
            for (export, pretty) in [(false, false), (true, false), (false, true), (true, true)] {
                let style = JsonStyle { export, pretty };
                for at in [root.clone(), root.child(&hearth_tree::Key::new("list").expect("key"))] {
                    let fast = String::from_utf8(written(&at, style, true)).expect("UTF-8");
                    let slow = String::from_utf8(written(&at, style, false)).expect("UTF-8");
                    prop_assert_eq!(fast, slow);
                }
            }
        }
    }
}
