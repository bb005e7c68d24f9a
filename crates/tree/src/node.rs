//! Persistent data-tree nodes.
//!
//! A node is empty, a leaf (with an optional priority) or an object with at least one child
//! (with an optional priority). Nodes are immutable and shared: every update returns a new root
//! that reuses all untouched subtrees, so a snapshot of the database is one `Node` clone, and
//! readers (listens, REST reads, hashing) never block writers.
//!
//! This file holds what a node is: its forms, how each is made from its parts, and what can be
//! asked of any node in O(1). The work on a node's children stands above it, in files of their
//! own: turning children into packed or chunked bytes and back (`packing`), reading them
//! (`read`), writing them (`update`), hashing (`hash`, `hash_java`) and JSON (`json`,
//! `json_write`). Those files see the forms (`Repr` is `pub(crate)`) and match on them
//! directly, as the hot paths need.

use std::sync::{Arc, OnceLock};

use crate::children::ChildMap;
use crate::chunked::Chunked;
use crate::estimate::{leaf_bytes, priority_bytes};
use crate::leaf::Leaf;
use crate::packed::Packed;
use crate::priority::{normalize_zero, Priority};
use crate::raw::RawObject;

/// A node of the data tree. Cloning is O(1).
#[derive(Clone, Default)]
pub struct Node(pub(crate) Repr);

#[derive(Clone, Default)]
pub(crate) enum Repr {
    #[default]
    Empty,
    /// A leaf without priority, the common case, held in the node itself: no allocation of
    /// its own and no hash cache (a leaf's hash is cheap to compute, and the object above it
    /// caches its own).
    Scalar(Leaf),
    /// A leaf with a priority.
    Leaf(Arc<LeafData>),
    Object(Arc<ObjectData>),
    /// A small object without priorities anywhere in it, as one byte string (see `packed`).
    Packed(Packed),
    /// A larger object whose children are all plain leaves or packed objects, as chunks of
    /// packed entries, but for children over the packing bound that are in chunks themselves,
    /// held beside them (see `chunked`).
    Chunked(Arc<Chunked>),
}

pub(crate) struct LeafData {
    pub(crate) value: Leaf,
    pub(crate) priority: Priority,
    /// Hash of this leaf, computed on first use. The data is immutable, so it never goes stale.
    pub(crate) hash: OnceLock<Arc<str>>,
}

pub(crate) struct ObjectData {
    /// Never empty: an object that loses its last child becomes the empty node.
    pub(crate) children: ChildMap<Node>,
    pub(crate) priority: Priority,
    /// Hash of this object, computed on first use. Every update builds a new `ObjectData`, so
    /// a cached hash always describes the children it sits beside.
    pub(crate) hash: OnceLock<Arc<str>>,
    /// Estimated JSON size, kept up to date incrementally so that size checks are O(1).
    pub(crate) bytes: usize,
}

impl Node {
    /// The empty node (JSON `null`).
    pub fn empty() -> Node {
        Node(Repr::Empty)
    }

    /// A leaf without priority. `-0` becomes `0`; a non-finite number, which JSON cannot carry
    /// and clients refuse, becomes the empty node (as `JSON.stringify` turns it into `null`).
    pub fn leaf(value: Leaf) -> Node {
        Node::leaf_with_priority(value, Priority::None)
    }

    /// A leaf with a priority, normalized like [`Node::leaf`] and [`Node::with_priority`].
    pub fn leaf_with_priority(value: Leaf, priority: Priority) -> Node {
        let value = match value {
            Leaf::Number(n) if !n.is_finite() => return Node::empty(),
            Leaf::Number(n) => Leaf::Number(normalize_zero(n)),
            other => other,
        };
        Node::leaf_raw(value, priority.normalized())
    }

    /// A leaf without priority whose value is already normal (decoded from a packed object,
    /// which only ever holds leaves that went through [`Node::leaf`]).
    pub(crate) fn scalar(value: Leaf) -> Node {
        Node(Repr::Scalar(value))
    }

    /// A leaf exactly as given, bypassing normalization (tests of the hash of `-0`).
    pub(crate) fn leaf_raw(value: Leaf, priority: Priority) -> Node {
        if matches!(priority, Priority::None) {
            return Node(Repr::Scalar(value));
        }
        Node(Repr::Leaf(Arc::new(LeafData {
            value,
            priority,
            hash: OnceLock::new(),
        })))
    }

    pub(crate) fn from_packed(packed: Packed) -> Node {
        Node(Repr::Packed(packed))
    }

    pub(crate) fn from_chunked(chunked: Chunked) -> Node {
        Node(Repr::Chunked(Arc::new(chunked)))
    }

    pub(crate) fn packed(&self) -> Option<&Packed> {
        match &self.0 {
            Repr::Packed(packed) => Some(packed),
            _ => None,
        }
    }

    #[cfg(test)]
    pub(crate) fn chunked(&self) -> Option<&Chunked> {
        match &self.0 {
            Repr::Chunked(chunked) => Some(chunked),
            _ => None,
        }
    }

    /// The object's children read in place, when it is held encoded (a packed object or a
    /// collection in chunks): writers copy them out without decoding a node per child.
    pub fn raw_object(&self) -> Option<RawObject<'_>> {
        match &self.0 {
            Repr::Packed(packed) => Some(RawObject::packed(packed.bytes())),
            Repr::Chunked(chunked) => Some(RawObject::chunked(chunked)),
            _ => None,
        }
    }

    /// Whether this is the empty node.
    pub fn is_empty(&self) -> bool {
        matches!(self.0, Repr::Empty)
    }

    /// Whether this is a leaf.
    pub fn is_leaf(&self) -> bool {
        matches!(self.0, Repr::Scalar(_) | Repr::Leaf(_))
    }

    /// The leaf value, if this is a leaf.
    pub fn leaf_value(&self) -> Option<&Leaf> {
        match &self.0 {
            Repr::Scalar(value) => Some(value),
            Repr::Leaf(leaf) => Some(&leaf.value),
            _ => None,
        }
    }

    /// The priority ([`Priority::None`] for the empty node).
    pub fn priority(&self) -> &Priority {
        match &self.0 {
            Repr::Empty | Repr::Scalar(_) | Repr::Packed(_) | Repr::Chunked(_) => &NO_PRIORITY,
            Repr::Leaf(leaf) => &leaf.priority,
            Repr::Object(object) => &object.priority,
        }
    }

    /// Number of children (0 for leaves and the empty node).
    pub fn child_count(&self) -> usize {
        match &self.0 {
            Repr::Object(object) => object.children.len(),
            Repr::Packed(packed) => packed.len(),
            Repr::Chunked(chunked) => chunked.len(),
            _ => 0,
        }
    }

    /// Cheap identity test: true when both are the same shared node or both are empty. May
    /// report false for equal nodes built separately.
    pub fn ptr_eq(&self, other: &Node) -> bool {
        match (&self.0, &other.0) {
            (Repr::Empty, Repr::Empty) => true,
            (Repr::Scalar(a), Repr::Scalar(b)) => same_scalar(a, b),
            (Repr::Leaf(a), Repr::Leaf(b)) => Arc::ptr_eq(a, b),
            (Repr::Object(a), Repr::Object(b)) => Arc::ptr_eq(a, b),
            (Repr::Packed(a), Repr::Packed(b)) => a.ptr_eq(b),
            (Repr::Chunked(a), Repr::Chunked(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether both hold the same stored data without looking inside it: the same shared
    /// node, or two packed nodes with the same bytes (a packed node read from inside a packed
    /// or chunked parent is a fresh copy each time, so identity alone would never match it;
    /// its bytes are at most `PACK_MAX_BYTES` long, so the comparison is a short `memcmp`).
    /// May report false for equal nodes of other forms built separately.
    pub fn same_stored(&self, other: &Node) -> bool {
        match (&self.0, &other.0) {
            (Repr::Packed(a), Repr::Packed(b)) => a.ptr_eq(b) || a.bytes() == b.bytes(),
            _ => self.ptr_eq(other),
        }
    }

    /// The hash if it has already been computed (never computes it).
    pub(crate) fn cached_hash(&self) -> Option<&Arc<str>> {
        match &self.0 {
            Repr::Empty | Repr::Scalar(_) | Repr::Packed(_) => None,
            Repr::Leaf(leaf) => leaf.hash.get(),
            Repr::Object(object) => object.hash.get(),
            Repr::Chunked(chunked) => chunked.cached_hash(),
        }
    }

    /// Rough size of the node as JSON in export form, for size limits. O(1).
    pub fn estimated_bytes(&self) -> usize {
        match &self.0 {
            Repr::Empty => 4,
            Repr::Scalar(value) => leaf_bytes(value),
            Repr::Leaf(leaf) => leaf_bytes(&leaf.value) + priority_bytes(&leaf.priority),
            Repr::Object(object) => object.bytes,
            Repr::Packed(packed) => packed.estimate(),
            Repr::Chunked(chunked) => chunked.estimate(),
        }
    }
}

/// The priority of nodes that have none, to hand out by reference.
static NO_PRIORITY: Priority = Priority::None;

/// Identity of two scalar leaves, as cheap as a pointer test: the same string allocation, or
/// the same number or boolean (bit for bit, so that `0` and `-0` stay apart).
fn same_scalar(a: &Leaf, b: &Leaf) -> bool {
    match (a, b) {
        (Leaf::Bool(a), Leaf::Bool(b)) => a == b,
        (Leaf::Number(a), Leaf::Number(b)) => a.to_bits() == b.to_bits(),
        (Leaf::String(a), Leaf::String(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Key;
    use crate::path::Path;
    use crate::testing::{node, path};
    use serde_json::json;

    #[test]
    fn nodes_are_send_sync_and_small() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Node>();
        assert_send_sync::<Key>();
        assert_send_sync::<Path>();
        // A leaf without priority lives in the node: a string's pointer and length, a tag.
        assert_eq!(std::mem::size_of::<Node>(), 24);
    }

    #[test]
    fn priorities() {
        assert!(Node::empty()
            .with_priority(Priority::Number(1.0))
            .is_empty());
        let leaf = node(json!("v")).with_priority(Priority::String(Arc::from("p")));
        assert_eq!(leaf.to_json(true), json!({".value": "v", ".priority": "p"}));
        assert_eq!(leaf.to_json(false), json!("v"));
        let object = node(json!({"a": 1})).with_priority(Priority::Number(-0.0));
        match object.priority() {
            Priority::Number(n) => assert!(n.is_sign_positive()),
            other => panic!("unexpected {other:?}"),
        }
        assert!(Node::empty().priority().is_none());
        let cleared = leaf.with_priority(Priority::None);
        assert_eq!(cleared, node(json!("v")));
    }

    #[test]
    fn leaves_are_normalized() {
        match Node::leaf(Leaf::Number(-0.0)).leaf_value() {
            Some(Leaf::Number(n)) => assert!(n.is_sign_positive()),
            other => panic!("unexpected {other:?}"),
        }
        assert!(Node::leaf(Leaf::Number(f64::NAN)).is_empty());
        assert!(Node::leaf(Leaf::Number(f64::INFINITY)).is_empty());
        assert!(Node::leaf(Leaf::Bool(false)).is_leaf());
    }

    #[test]
    fn estimated_bytes_tracks_updates() {
        let root = node(json!({"a": "xyz", "b": 12}));
        // {"a":"xyz","b":12} is 18 bytes; the estimate counts one comma too many.
        assert_eq!(root.estimated_bytes(), 19);
        let bigger = root.set(&path("/c"), node(json!("0123456789")));
        assert_eq!(bigger.estimated_bytes(), 19 + 1 + 4 + 12);
        let smaller = bigger.set(&path("/a"), Node::empty());
        assert_eq!(smaller.estimated_bytes(), 19 + 1 + 4 + 12 - (1 + 4 + 5));
        let rebuilt = node(smaller.to_json(true));
        assert_eq!(rebuilt.estimated_bytes(), smaller.estimated_bytes());
        let with_priority = rebuilt.with_priority(Priority::Number(5.0));
        assert_eq!(
            with_priority.estimated_bytes(),
            rebuilt.estimated_bytes() + 27
        );
        assert_eq!(
            with_priority
                .with_priority(Priority::None)
                .estimated_bytes(),
            rebuilt.estimated_bytes()
        );
        assert_eq!(Node::empty().estimated_bytes(), 4);
    }
}
