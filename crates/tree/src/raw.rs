//! Children read in place from the bytes of a packed object or a chunked collection.
//!
//! Decoding a child of an encoded object into a [`Key`](crate::Key) and a
//! [`Node`](crate::Node) allocates both (and copies a nested object's bytes), which made
//! serializing a collection of a thousand records cost a thousand of each. Writers walk these
//! borrowed views instead: keys and strings are slices of the encoded bytes, nested objects
//! stay encoded. The views stand below nodes, which lend them (`Node::raw_object`);
//! `json_write` writes them as JSON, as it writes nodes.

use crate::chunk_index::IndexIter;
use crate::chunked::{Chunked, Part};
use crate::packed::{self, Value};

/// An object held encoded: a packed object or a collection in chunks. It carries no
/// priority, and neither does anything inside it.
#[derive(Clone, Copy)]
pub struct RawObject<'a>(Source<'a>);

#[derive(Clone, Copy)]
enum Source<'a> {
    Packed(&'a [u8]),
    Chunked(&'a Chunked),
}

/// A child of a [`RawObject`], borrowed from its bytes.
#[derive(Clone, Copy)]
pub enum RawValue<'a> {
    Bool(bool),
    Number(f64),
    String(&'a str),
    Object(RawObject<'a>),
}

impl<'a> RawObject<'a> {
    pub(crate) fn packed(bytes: &'a [u8]) -> RawObject<'a> {
        RawObject(Source::Packed(bytes))
    }

    pub(crate) fn chunked(chunked: &'a Chunked) -> RawObject<'a> {
        RawObject(Source::Chunked(chunked))
    }

    /// The number of children.
    pub fn len(&self) -> usize {
        match self.0 {
            Source::Packed(bytes) => packed::Entries::new(bytes).len(),
            Source::Chunked(chunked) => chunked.len(),
        }
    }

    /// Whether it has no children (an encoded object never is, but a malformed one reads so).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The children in key order, as [`Node::children`](crate::Node::children) gives them.
    pub fn entries(&self) -> RawEntries<'a> {
        match self.0 {
            Source::Packed(bytes) => RawEntries {
                parts: None,
                current: packed::Entries::new(bytes),
            },
            Source::Chunked(chunked) => RawEntries {
                parts: Some(chunked.parts()),
                current: packed::Entries::new(&[]),
            },
        }
    }
}

/// The children of a [`RawObject`] in key order, chunk by chunk.
pub struct RawEntries<'a> {
    /// The parts still to read, for a chunked collection.
    parts: Option<IndexIter<'a, Part>>,
    current: packed::Entries<'a>,
}

impl<'a> Iterator for RawEntries<'a> {
    type Item = (&'a str, RawValue<'a>);

    fn next(&mut self) -> Option<(&'a str, RawValue<'a>)> {
        loop {
            if let Some((key, value)) = self.current.next() {
                let value = match value {
                    Value::Bool(b) => RawValue::Bool(b),
                    Value::Number(n) => RawValue::Number(n),
                    Value::Str(text) => RawValue::String(text),
                    Value::Object(bytes) => RawValue::Object(RawObject::packed(bytes)),
                };
                return Some((key, value));
            }
            match self.parts.as_mut()?.next()? {
                (_, Part::Run(chunk)) => {
                    self.current = packed::Entries::new(chunk.packed().bytes())
                }
                // A collection in chunks itself: nothing in it has a priority either.
                (key, Part::Large(child)) => {
                    return Some((key.as_str(), RawValue::Object(RawObject::chunked(child))))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::Node;

    fn node(value: Value) -> Node {
        Node::from_json(&value).expect("valid test node")
    }

    /// Children as keys and their JSON.
    type Written = Vec<(String, String)>;

    /// Each child read in place as JSON, beside the decoded child written as JSON.
    fn both_ways(node: &Node) -> (Written, Written) {
        let object = node.raw_object().expect("an encoded object");
        let raw = object
            .entries()
            .map(|(key, value)| {
                let mut out = Vec::new();
                value.write_json(&mut out);
                (key.to_owned(), String::from_utf8(out).expect("UTF-8"))
            })
            .collect();
        let decoded = node
            .children()
            .map(|(key, child)| {
                let mut out = Vec::new();
                child.write_json(&mut out, true);
                (key.to_string(), String::from_utf8(out).expect("UTF-8"))
            })
            .collect();
        (raw, decoded)
    }

    #[test]
    fn children_read_in_place_are_the_decoded_children() {
        let records: Vec<Value> = (0..500)
            .map(|i| json!({"n": i, "x": i as f64 / 8.0, "s": format!("r\"{i}\n"), "ok": i % 2 == 0, "tags": {"a": [i, "b"]}}))
            .collect();
        let collection = node(Value::Array(records));
        assert!(collection.chunked().is_some_and(|c| c.parts().count() > 10));
        let (raw, decoded) = both_ways(&collection);
        assert_eq!(raw.len(), 500);
        assert_eq!(collection.raw_object().map(|o| o.len()), Some(500));
        assert_eq!(raw, decoded);

        let record = node(json!({"b": {"c": "d"}, "a": 1.5, "e": false}));
        assert!(record.packed().is_some());
        let (raw, decoded) = both_ways(&record);
        assert_eq!(raw, decoded);
        assert_eq!(raw[0], ("a".to_owned(), "1.5".to_owned()));

        assert!(node(json!(1)).raw_object().is_none());
        assert!(Node::empty().raw_object().is_none());
    }
}
