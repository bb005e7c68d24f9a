//! The binary encoding of tree values, paths and writes, shared by log records and snapshots
//! (byte layout in FORMAT.md, "Values").
//!
//! Binary rather than JSON because numbers keep their exact bits, nothing is re-validated as
//! client input on the way back, and decoding a large snapshot is a single pass with no
//! intermediate `serde_json::Value`. Encoding writes through a [`Sink`] so that a snapshot can
//! stream to disk while it is produced; decoding reads through a [`Source`] so that it can pull
//! from a byte slice (a log record) or from checksummed frames (a snapshot).

use hearth_sync::{Change, Write, WriteOp};
use hearth_tree::{Key, Leaf, Node, ObjectBuilder, Path, Priority, MAX_KEY_BYTES};

#[path = "codec_primitives.rs"]
mod primitives;

pub(crate) use primitives::{
    infallible, put_str, put_varint, read_str, read_u8, read_varint, Sink, SliceSource, Source,
};
use primitives::{is_exact_integer, put_f64, put_integer, read_f64, read_integer, read_len};
pub use primitives::{DecodeError, DECODE_DEPTH_MAX, DECODE_STRING_BYTES_MAX};

const NODE_EMPTY: u8 = 0x00;
const NODE_FALSE: u8 = 0x01;
const NODE_TRUE: u8 = 0x02;
const NODE_INTEGER: u8 = 0x03;
const NODE_FLOAT: u8 = 0x04;
const NODE_STRING: u8 = 0x05;
const NODE_OBJECT: u8 = 0x06;
const NODE_HAS_PRIORITY: u8 = 0x80;

const PRIORITY_NONE: u8 = 0x00;
const PRIORITY_INTEGER: u8 = 0x01;
const PRIORITY_FLOAT: u8 = 0x02;
const PRIORITY_STRING: u8 = 0x03;

const CHANGE_SET: u8 = 0x00;
const CHANGE_PRIORITY: u8 = 0x01;

// ---- priorities, keys, paths ------------------------------------------------------------

pub(crate) fn put_priority<K: Sink>(sink: &mut K, priority: &Priority) -> Result<(), K::Error> {
    match priority {
        Priority::None => sink.put(&[PRIORITY_NONE]),
        Priority::Number(n) if is_exact_integer(*n) => {
            sink.put(&[PRIORITY_INTEGER])?;
            put_integer(sink, *n)
        }
        Priority::Number(n) => {
            sink.put(&[PRIORITY_FLOAT])?;
            put_f64(sink, *n)
        }
        Priority::String(text) => {
            sink.put(&[PRIORITY_STRING])?;
            put_str(sink, text)
        }
    }
}

pub(crate) fn read_priority<S: Source>(source: &mut S) -> Result<Priority, S::Error> {
    Ok(match read_u8(source)? {
        PRIORITY_NONE => Priority::None,
        PRIORITY_INTEGER => Priority::Number(read_integer(source)?),
        PRIORITY_FLOAT => Priority::Number(read_f64(source)?),
        PRIORITY_STRING => Priority::String(read_str(source, DECODE_STRING_BYTES_MAX)?),
        tag => return Err(DecodeError::Tag(tag).into()),
    })
}

/// A key, validated in place (a key of up to 23 bytes then needs no allocation at all).
fn read_key<S: Source>(source: &mut S) -> Result<Key, S::Error> {
    let len = read_len(source, MAX_KEY_BYTES as u64)?;
    let key = source.with_bytes(len, |bytes| match std::str::from_utf8(bytes) {
        Ok(text) => Key::new(text).map_err(DecodeError::Key),
        Err(_) => Err(DecodeError::Utf8),
    })?;
    key.map_err(Into::into)
}

pub(crate) fn put_path<K: Sink>(sink: &mut K, path: &Path) -> Result<(), K::Error> {
    put_varint(sink, path.len() as u64)?;
    for key in path.keys() {
        put_str(sink, key.as_str())?;
    }
    Ok(())
}

pub(crate) fn read_path<S: Source>(source: &mut S) -> Result<Path, S::Error> {
    let len = read_len(source, DECODE_DEPTH_MAX as u64)?;
    let keys = (0..len)
        .map(|_| read_key(source))
        .collect::<Result<Vec<Key>, S::Error>>()?;
    Ok(Path::from_keys(keys))
}

// ---- nodes ------------------------------------------------------------------------------

/// Encodes `node` depth first, children in key order. Recursion is bounded by the depth of the
/// tree, which the tree limits.
pub(crate) fn put_node<K: Sink>(sink: &mut K, node: &Node) -> Result<(), K::Error> {
    let priority = node.priority();
    let flag = if priority.is_none() {
        0
    } else {
        NODE_HAS_PRIORITY
    };
    let put_own_priority = |sink: &mut K| match priority {
        Priority::None => Ok(()),
        some => put_priority(sink, some),
    };
    if let Some(leaf) = node.leaf_value() {
        match leaf {
            Leaf::Bool(false) => sink.put(&[NODE_FALSE | flag])?,
            Leaf::Bool(true) => sink.put(&[NODE_TRUE | flag])?,
            Leaf::Number(n) if is_exact_integer(*n) => sink.put(&[NODE_INTEGER | flag])?,
            Leaf::Number(_) => sink.put(&[NODE_FLOAT | flag])?,
            Leaf::String(_) => sink.put(&[NODE_STRING | flag])?,
        }
        put_own_priority(sink)?;
        return match leaf {
            Leaf::Bool(_) => Ok(()),
            Leaf::Number(n) if is_exact_integer(*n) => put_integer(sink, *n),
            Leaf::Number(n) => put_f64(sink, *n),
            Leaf::String(text) => put_str(sink, text),
        };
    }
    if node.is_empty() {
        return sink.put(&[NODE_EMPTY]);
    }
    sink.put(&[NODE_OBJECT | flag])?;
    put_own_priority(sink)?;
    put_varint(sink, node.child_count() as u64)?;
    for (key, child) in node.children() {
        put_str(sink, key.as_str())?;
        put_node(sink, &child)?;
    }
    Ok(())
}

pub(crate) fn read_node<S: Source>(source: &mut S) -> Result<Node, S::Error> {
    let tag = read_u8(source)?;
    read_tagged_node(source, tag, 0, &mut Vec::new())
}

/// Decodes the node whose tag was just read. `builders` holds object builders that are not in
/// use, so that decoding a large tree allocates a buffer per nesting level, not per object.
fn read_tagged_node<S: Source>(
    source: &mut S,
    tag: u8,
    depth: usize,
    builders: &mut Vec<ObjectBuilder>,
) -> Result<Node, S::Error> {
    if depth > DECODE_DEPTH_MAX {
        return Err(DecodeError::TooDeep.into());
    }
    let priority = if tag & NODE_HAS_PRIORITY != 0 {
        match read_priority(source)? {
            // A flagged priority is never "none": refuse what no encoder writes.
            Priority::None => return Err(DecodeError::Tag(PRIORITY_NONE).into()),
            some => some,
        }
    } else {
        Priority::None
    };
    let leaf = |value| Ok(Node::leaf_with_priority(value, priority.clone()));
    match tag & !NODE_HAS_PRIORITY {
        NODE_EMPTY if tag == NODE_EMPTY => Ok(Node::empty()),
        NODE_FALSE => leaf(Leaf::Bool(false)),
        NODE_TRUE => leaf(Leaf::Bool(true)),
        NODE_INTEGER => leaf(Leaf::Number(read_integer(source)?)),
        NODE_FLOAT => leaf(Leaf::Number(read_f64(source)?)),
        NODE_STRING => leaf(Leaf::String(read_str(source, DECODE_STRING_BYTES_MAX)?)),
        NODE_OBJECT => {
            let mut builder = builders.pop().unwrap_or_default();
            read_children(source, depth, &mut builder, builders)?;
            let node = builder.finish(priority);
            builders.push(builder);
            Ok(node)
        }
        _ => Err(DecodeError::Tag(tag).into()),
    }
}

/// Decodes an object's children (the count and every entry) into `builder`. A child without
/// priority goes into the builder as it is decoded: a record's text is copied once, from the
/// source into the packed bytes it is kept in, and no node is made of it.
fn read_children<S: Source>(
    source: &mut S,
    depth: usize,
    builder: &mut ObjectBuilder,
    builders: &mut Vec<ObjectBuilder>,
) -> Result<(), S::Error> {
    // Each child takes at least two bytes, which bounds a corrupt count by the data; nothing
    // is reserved from the count.
    let count = read_varint(source)?;
    if count == 0 {
        return Err(DecodeError::EmptyObject.into());
    }
    let mut previous: Option<Key> = None;
    for _ in 0..count {
        let key = read_key(source)?;
        if previous.as_ref().is_some_and(|previous| *previous >= key) {
            return Err(DecodeError::KeyOrder.into());
        }
        read_child(source, &key, depth + 1, builder, builders)?;
        previous = Some(key);
    }
    Ok(())
}

/// Decodes the child `key` at nesting level `depth` into `parent`.
fn read_child<S: Source>(
    source: &mut S,
    key: &Key,
    depth: usize,
    parent: &mut ObjectBuilder,
    builders: &mut Vec<ObjectBuilder>,
) -> Result<(), S::Error> {
    if depth > DECODE_DEPTH_MAX {
        return Err(DecodeError::TooDeep.into());
    }
    let tag = read_u8(source)?;
    match tag {
        NODE_FALSE => parent.push_bool(key, false),
        NODE_TRUE => parent.push_bool(key, true),
        NODE_INTEGER => parent.push_number(key, read_integer(source)?),
        NODE_FLOAT => parent.push_number(key, read_f64(source)?),
        NODE_STRING => {
            let len = read_len(source, DECODE_STRING_BYTES_MAX)?;
            source
                .with_bytes(len, |bytes| {
                    std::str::from_utf8(bytes).map(|text| parent.push_str(key, text))
                })?
                .map_err(|_| DecodeError::Utf8)?;
        }
        NODE_OBJECT => {
            let mut child = builders.pop().unwrap_or_default();
            read_children(source, depth, &mut child, builders)?;
            parent.push_object(key, &mut child);
            builders.push(child);
        }
        // The empty node, and nodes with a priority (which never pack).
        _ => {
            let child = read_tagged_node(source, tag, depth, builders)?;
            if child.is_empty() {
                return Err(DecodeError::EmptyObject.into());
            }
            parent.push_node(key, child);
        }
    }
    Ok(())
}

// ---- writes -----------------------------------------------------------------------------

pub(crate) fn put_write<K: Sink>(sink: &mut K, write: &Write) -> Result<(), K::Error> {
    put_path(sink, &write.base)?;
    put_varint(sink, write.ops.len() as u64)?;
    for op in &write.ops {
        put_path(sink, &op.path)?;
        match &op.change {
            Change::Set(node) => {
                sink.put(&[CHANGE_SET])?;
                put_node(sink, node)?;
            }
            Change::Priority(priority) => {
                sink.put(&[CHANGE_PRIORITY])?;
                put_priority(sink, priority)?;
            }
        }
    }
    Ok(())
}

pub(crate) fn read_write<S: Source>(source: &mut S) -> Result<Write, S::Error> {
    let base = read_path(source)?;
    // Each operation takes at least three bytes; the count is checked against the data as the
    // operations are read, so it needs no bound of its own.
    let count = read_varint(source)?;
    let mut ops = Vec::new();
    for _ in 0..count {
        let path = read_path(source)?;
        let change = match read_u8(source)? {
            CHANGE_SET => Change::Set(read_node(source)?),
            CHANGE_PRIORITY => Change::Priority(read_priority(source)?),
            tag => return Err(DecodeError::Tag(tag).into()),
        };
        ops.push(WriteOp { path, change });
    }
    Ok(Write { base, ops })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(node: &Node) -> Node {
        let mut bytes = Vec::new();
        infallible(put_node(&mut bytes, node));
        let mut source = SliceSource::new(&bytes);
        let back = read_node(&mut source).expect("decodes");
        source.finish().expect("consumed exactly");
        back
    }

    fn node(value: serde_json::Value) -> Node {
        Node::from_json(&value).expect("valid test value")
    }

    #[test]
    fn nodes_round_trip_exactly() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-1),
            json!(9007199254740992.0),
            json!(-9007199254740993.0),
            json!(0.1),
            json!(1e300),
            json!(0.00015000000000000001),
            json!("text ✓"),
            json!({".value": "p", ".priority": 3}),
            json!({".value": 1, ".priority": "b"}),
            json!({"a": {"b": [1, 2, {"c": null, "d": 2.5}]}, ".priority": -7.25}),
        ];
        for value in values {
            let original = node(value.clone());
            let back = round_trip(&original);
            assert_eq!(back, original, "{value}");
            assert_eq!(back.to_json(true), original.to_json(true));
            assert_eq!(back.hash(), original.hash());
        }
    }

    #[test]
    fn varints_round_trip_at_their_edges() {
        for value in [0, 1, 127, 128, 16_383, 16_384, u64::MAX / 2, u64::MAX] {
            let mut bytes = Vec::new();
            infallible(put_varint(&mut bytes, value));
            let mut source = SliceSource::new(&bytes);
            assert_eq!(read_varint(&mut source), Ok(value));
            assert_eq!(source.finish(), Ok(()));
        }
        let mut overlong = SliceSource::new(&[0xff; 11]);
        assert_eq!(read_varint(&mut overlong), Err(DecodeError::Varint));
    }

    #[test]
    fn bad_nodes_are_refused() {
        let cases: [(&[u8], DecodeError); 7] = [
            (&[0x07], DecodeError::Tag(0x07)),
            (&[NODE_OBJECT, 0], DecodeError::EmptyObject),
            (
                &[NODE_OBJECT, 1, 1, b'a', NODE_EMPTY],
                DecodeError::EmptyObject,
            ),
            (
                &[NODE_OBJECT, 2, 1, b'b', NODE_TRUE, 1, b'a', NODE_TRUE],
                DecodeError::KeyOrder,
            ),
            (&[NODE_STRING, 2, 0xff, 0xfe], DecodeError::Utf8),
            (&[NODE_STRING, 5, b'a'], DecodeError::Truncated),
            (
                &[NODE_EMPTY | NODE_HAS_PRIORITY, PRIORITY_NONE],
                DecodeError::Tag(0),
            ),
        ];
        for (bytes, expected) in cases {
            let mut source = SliceSource::new(bytes);
            assert_eq!(read_node(&mut source), Err(expected), "{bytes:?}");
        }
        let mut nan = vec![NODE_FLOAT];
        nan.extend_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(
            read_node(&mut SliceSource::new(&nan)),
            Err(DecodeError::Number)
        );
        let deep = [NODE_OBJECT, 1, 1, b'a'].repeat(DECODE_DEPTH_MAX + 2);
        assert_eq!(
            read_node(&mut SliceSource::new(&deep)),
            Err(DecodeError::TooDeep)
        );
        let bad_key = [NODE_OBJECT, 1, 1, b'.', NODE_TRUE];
        assert!(matches!(
            read_node(&mut SliceSource::new(&bad_key)),
            Err(DecodeError::Key(_))
        ));
    }

    #[test]
    fn writes_round_trip() {
        let path = |text: &str| Path::parse(text).expect("valid test path");
        let write = Write {
            base: path("/users/ada"),
            ops: vec![
                WriteOp {
                    path: path("/name"),
                    change: Change::Set(node(json!({"first": "Ada", "n": 1.5}))),
                },
                WriteOp {
                    path: path("/gone"),
                    change: Change::Set(Node::empty()),
                },
                WriteOp {
                    path: path("/"),
                    change: Change::Priority(Priority::String("z".into())),
                },
                WriteOp {
                    path: path("/x"),
                    change: Change::Priority(Priority::None),
                },
            ],
        };
        let mut bytes = Vec::new();
        infallible(put_write(&mut bytes, &write));
        let mut source = SliceSource::new(&bytes);
        assert_eq!(read_write(&mut source), Ok(write));
        assert_eq!(source.finish(), Ok(()));
    }
}
