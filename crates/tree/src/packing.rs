//! Nodes to and from the encoded forms of objects: packed (`packed`) and in chunks (`chunked`).
//!
//! Those two files keep objects as bytes and know nothing of nodes, so that a node can hold
//! them. Here a node becomes an entry of those bytes, when it can (no priority anywhere, and
//! an object only if it is packed itself), and an entry becomes a node again: a leaf, or a
//! packed object that copies the entry's bytes. A child of a collection in chunks that is in
//! chunks itself (over the packing bound) stays a node, a part of its own among the chunks.
//! Readers of whole objects that need no nodes (JSON output, hashing) walk the bytes instead
//! (`raw`, `digest`).

use std::ops::Bound;
use std::sync::Arc;

use crate::children::ChildMap;
use crate::chunked::{self, Chunked, NewChild, Part};
use crate::key::Key;
use crate::leaf::Leaf;
use crate::node::{Node, Repr};
use crate::packed::{self, Packed, Value};

impl Packed {
    /// Packs `children` (at most [`PACK_MAX_BYTES`](packed::PACK_MAX_BYTES) estimated), or
    /// gives up when a child carries a priority or is an object that is not packed itself.
    pub(crate) fn encode(children: &ChildMap<Node>, estimate: usize) -> Option<Packed> {
        let mut out = Vec::with_capacity(estimate);
        packed::put_header(&mut out, estimate, children.len());
        for (key, child) in children.iter() {
            put_entry(&mut out, key, child)?;
        }
        Some(Packed::from_slice(&out))
    }

    /// The children as a map, to build an updated object from.
    pub(crate) fn child_map(&self) -> ChildMap<Node> {
        ChildMap::from_entries(self.entries())
    }
}

impl<H> Packed<H> {
    /// The child named `key`, decoded (found by [`Packed::child_value`]'s scan).
    pub(crate) fn get(&self, key: &Key) -> Option<Node> {
        self.child_value(key).map(value_node)
    }

    /// Every child, decoded, in key order.
    pub(crate) fn entries(&self) -> Vec<(Key, Node)> {
        let mut entries = Vec::with_capacity(self.len());
        packed::for_each(self.bytes(), |name, value| {
            entries.push((Key::new_unchecked(name), value_node(value)));
            true
        });
        entries
    }

    /// The children with keys between the bounds, decoded, in key order.
    pub(crate) fn range(&self, from: Bound<&Key>, to: Bound<&Key>) -> Vec<(Key, Node)> {
        let mut entries = self.entries();
        entries.retain(|(key, _)| packed::after(key, from) && packed::before(key, to));
        entries
    }
}

/// Appends one entry, `key` and its value; nothing useful when `child` cannot be packed (it
/// carries a priority or is an object that is not packed itself), which returns `None`.
pub(crate) fn put_entry(out: &mut Vec<u8>, key: &Key, child: &Node) -> Option<()> {
    packed::put_key(out, key.as_str());
    put_node(out, child)
}

/// Appends the value of `node`, or gives up as [`put_entry`] does.
fn put_node(out: &mut Vec<u8>, node: &Node) -> Option<()> {
    if !node.priority().is_none() {
        return None;
    }
    if let Some(leaf) = node.leaf_value() {
        match leaf {
            Leaf::Bool(b) => packed::put_bool(out, *b),
            Leaf::Number(n) => packed::put_number(out, *n),
            Leaf::String(text) => packed::put_string(out, text),
        }
        return Some(());
    }
    let packed = node.packed()?;
    packed::put_object(out, packed.bytes());
    Some(())
}

fn value_node(value: Value<'_>) -> Node {
    match value {
        Value::Bool(b) => Node::scalar(Leaf::Bool(b)),
        Value::Number(n) => Node::scalar(Leaf::Number(n)),
        Value::Str(s) => Node::scalar(Leaf::String(Arc::from(s))),
        Value::Object(bytes) => Node::from_packed(Packed::from_slice(bytes)),
    }
}

impl Chunked {
    /// `children` (in key order, `len` of them, `bytes` estimated) in chunks, or `None` when
    /// one of them can neither be packed nor is a collection in chunks itself.
    pub(crate) fn encode<'a>(
        children: impl Iterator<Item = (&'a Key, &'a Node)>,
        len: usize,
        bytes: usize,
    ) -> Option<Chunked> {
        let mut builder = chunked::Builder::new();
        for (key, child) in children {
            match &child.0 {
                Repr::Chunked(large) => builder.push_large(key, large.clone()),
                _ => builder.push(key, |out| put_entry(out, key, child))?,
            }
        }
        Some(builder.into_chunked(len, bytes))
    }

    pub(crate) fn get(&self, key: &Key) -> Option<Node> {
        match self.part_for(key)? {
            (_, Part::Run(chunk)) => chunk.packed().get(key),
            (first, Part::Large(child)) => (first == key).then(|| large_node(child)),
        }
    }

    /// A copy with child `key` set to `child` (removed when empty). `None` when `child` can
    /// neither be packed nor is a collection in chunks, or a chunk does not decode; the caller
    /// then holds the collection as nodes. The result may be empty (`len` 0).
    pub(crate) fn with_child(&self, key: &Key, child: &Node) -> Option<Chunked> {
        if child.is_empty() {
            return self.with_entry(key, None);
        }
        if let Repr::Chunked(large) = &child.0 {
            return self.with_entry(key, Some(NewChild::Large(large)));
        }
        let mut value = Vec::new();
        put_node(&mut value, child)?;
        let estimate = child.estimated_bytes();
        self.with_entry(key, Some(NewChild::Encoded(&value, estimate)))
    }

    /// Every child, decoded, in key order, chunk by chunk as the iterator advances.
    pub(crate) fn iter(&self) -> ChunkedIter<'_> {
        ChunkedIter(Box::new(
            self.parts()
                .flat_map(|(first, part)| part_entries(first, part)),
        ))
    }

    /// The children with keys between the bounds (not inverted), decoded chunk by chunk, in
    /// key order.
    pub(crate) fn range(&self, from: Bound<&Key>, to: Bound<&Key>) -> ChunkedIter<'_> {
        let parts = self.parts_between(from, to);
        let (from, to) = (from.cloned(), to.cloned());
        ChunkedIter(Box::new(
            parts
                .flat_map(|(first, part)| part_entries(first, part))
                .filter(move |(key, _)| {
                    packed::after(key, from.as_ref()) && packed::before(key, to.as_ref())
                }),
        ))
    }
}

/// The children of one part of a collection, decoded.
pub(crate) fn part_entries(first: &Key, part: &Part) -> Vec<(Key, Node)> {
    match part {
        Part::Run(chunk) => chunk.packed().entries(),
        Part::Large(child) => vec![(first.clone(), large_node(child))],
    }
}

/// The node of a large child: the same allocation, shared.
fn large_node(child: &Arc<Chunked>) -> Node {
    Node(Repr::Chunked(child.clone()))
}

/// Children of a chunked collection, decoded one chunk at a time from either end.
pub(crate) struct ChunkedIter<'a>(Box<dyn DoubleEndedIterator<Item = (Key, Node)> + 'a>);

impl Iterator for ChunkedIter<'_> {
    type Item = (Key, Node);

    fn next(&mut self) -> Option<(Key, Node)> {
        self.0.next()
    }
}

impl DoubleEndedIterator for ChunkedIter<'_> {
    fn next_back(&mut self) -> Option<(Key, Node)> {
        self.0.next_back()
    }
}

#[cfg(test)]
#[path = "packing_tests.rs"]
mod tests;
