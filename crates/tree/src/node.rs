//! Persistent data-tree nodes.
//!
//! A node is empty, a leaf (with an optional priority) or an object with at least one child
//! (with an optional priority). Nodes are immutable and shared: every update returns a new root
//! that reuses all untouched subtrees, so a snapshot of the database is one `Node` clone, and
//! readers (listens, REST reads, hashing) never block writers.

use std::borrow::Cow;
use std::fmt;
use std::ops::Bound;
use std::sync::{Arc, LazyLock, OnceLock};

use crate::children::{self, ChildMap};
use crate::chunked::Chunked;
use crate::hash;
use crate::hash_java;
use crate::iter::{Children, ChildrenRange, Inner};
use crate::json;
use crate::key::Key;
use crate::packed::{Packed, PACK_MAX_BYTES};
use crate::path::Path;
use crate::priority::{normalize_zero, Priority};
use crate::raw::RawObject;

/// The value of a leaf. Numbers are finite and never `-0` once inside a [`Node`].
#[derive(Clone, Debug, PartialEq)]
pub enum Leaf {
    Bool(bool),
    Number(f64),
    String(Arc<str>),
}

/// A node of the data tree. Cloning is O(1).
#[derive(Clone, Default)]
pub struct Node(Repr);

#[derive(Clone, Default)]
enum Repr {
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
    /// packed entries (see `chunked`).
    Chunked(Arc<Chunked>),
}

struct LeafData {
    value: Leaf,
    priority: Priority,
    /// Hash of this leaf, computed on first use. The data is immutable, so it never goes stale.
    hash: OnceLock<Arc<str>>,
}

pub(crate) struct ObjectData {
    /// Never empty: an object that loses its last child becomes the empty node.
    pub(crate) children: ChildMap,
    pub(crate) priority: Priority,
    /// Hash of this object, computed on first use. Every update builds a new `ObjectData`, so
    /// a cached hash always describes the children it sits beside.
    hash: OnceLock<Arc<str>>,
    /// Estimated JSON size, kept up to date incrementally so that size checks are O(1).
    bytes: usize,
}

/// The hash of the empty node, shared so that hashing empty nodes does not allocate.
static EMPTY_HASH: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));

/// The priority of nodes that have none, to hand out by reference.
static NO_PRIORITY: Priority = Priority::None;

/// Rough JSON overhead of one object entry: two quotes, a colon and a comma.
pub(crate) const ENTRY_OVERHEAD: usize = 4;

/// Rough JSON overhead of an export wrapper `{".value":…,".priority":…}` or `,".priority":…`.
const PRIORITY_OVERHEAD: usize = 26;

/// Wraps non-empty `children` into an object node: packed when it is small and carries no
/// priority anywhere; with `try_chunks`, in chunks when it is larger, has no priority and
/// every child packs; otherwise an `ObjectData` with a cold hash cache. Every object is built
/// here. Trying chunks reads every child, so only builds and objects that were packed or
/// chunked (whose children are known to pack) try it: a large map of nodes that takes a write
/// stays one.
fn object_node(children: ChildMap, priority: Priority, bytes: usize, try_chunks: bool) -> Node {
    if packing_enabled() && priority.is_none() {
        if bytes <= PACK_MAX_BYTES {
            if let Some(packed) = Packed::encode(&children, bytes) {
                return Node(Repr::Packed(packed));
            }
        } else if try_chunks {
            if let Some(chunked) = Chunked::encode(children.iter(), children.len(), bytes) {
                return Node(Repr::Chunked(Arc::new(chunked)));
            }
        }
    }
    Node(Repr::Object(Arc::new(ObjectData {
        children,
        priority,
        hash: OnceLock::new(),
        bytes,
    })))
}

#[cfg(not(test))]
pub(crate) fn packing_enabled() -> bool {
    true
}

#[cfg(test)]
thread_local! {
    /// Cleared by tests that build the same data without packing, to compare both forms.
    static PACKING: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

#[cfg(test)]
pub(crate) fn packing_enabled() -> bool {
    PACKING.with(std::cell::Cell::get)
}

/// Runs `build` with packing off: every object it makes is an object of nodes (tests that
/// compare both forms).
#[cfg(test)]
pub(crate) fn without_packing<T>(build: impl FnOnce() -> T) -> T {
    PACKING.with(|p| p.set(false));
    let built = build();
    PACKING.with(|p| p.set(true));
    built
}

impl ObjectData {
    /// An object node of `entries` in any order (of duplicate keys the last wins), or the
    /// empty node when there are none. A large collection that can be chunked is encoded
    /// straight from the sorted entries: building its map of nodes first, only to encode it,
    /// was most of the time of loading a large array (10 million entries: seconds of B-tree
    /// inserts).
    pub(crate) fn build_from_entries(entries: Vec<(Key, Node)>, priority: Priority) -> Node {
        let entries = crate::children::sorted_unique(entries);
        if entries.is_empty() {
            return Node::empty();
        }
        let priority = priority.normalized();
        let bytes = 2
            + priority_bytes(&priority)
            + entries
                .iter()
                .map(|(key, child)| entry_bytes(key, child))
                .sum::<usize>();
        let mut try_chunks = true;
        if packing_enabled() && priority.is_none() && bytes > PACK_MAX_BYTES {
            let iter = entries.iter().map(|(key, child)| (key, child));
            if let Some(chunked) = Chunked::encode(iter, entries.len(), bytes) {
                return Node(Repr::Chunked(Arc::new(chunked)));
            }
            // `object_node` would only try the same again.
            try_chunks = false;
        }
        object_node(ChildMap::from_sorted(entries), priority, bytes, try_chunks)
    }
}

impl ObjectData {
    /// `node`, whose data this is, with child `key` replaced by `child` (removed when empty);
    /// `try_chunks` as for [`object_node`].
    fn with_child(&self, node: &Node, key: &Key, child: Node, try_chunks: bool) -> Node {
        let old = self.children.get(key);
        if old.is_some_and(|old| old.ptr_eq(&child)) {
            return node.clone();
        }
        let old_bytes = old.map_or(0, |old| entry_bytes(key, old));
        if child.is_empty() {
            if old.is_none() {
                return node.clone();
            }
            let children = self.children.remove(key);
            if children.is_empty() {
                return Node::empty();
            }
            let bytes = self.bytes - old_bytes;
            return object_node(children, self.priority.clone(), bytes, try_chunks);
        }
        let bytes = self.bytes - old_bytes + entry_bytes(key, &child);
        let children = self.children.insert(key, child);
        object_node(children, self.priority.clone(), bytes, try_chunks)
    }
}

fn entry_bytes(key: &Key, child: &Node) -> usize {
    key.as_str().len() + ENTRY_OVERHEAD + child.estimated_bytes()
}

pub(crate) fn priority_bytes(priority: &Priority) -> usize {
    match priority {
        Priority::None => 0,
        Priority::Number(n) => PRIORITY_OVERHEAD + number_bytes(*n),
        Priority::String(s) => PRIORITY_OVERHEAD + s.len() + 2,
    }
}

/// Approximate printed length of a number: exact for integers below 10^15, generous otherwise.
pub(crate) fn number_bytes(n: f64) -> usize {
    let magnitude = n.abs();
    if n.fract() == 0.0 && magnitude < 1e15 {
        // The range check makes the conversion exact.
        let digits = (magnitude as u64)
            .checked_ilog10()
            .map_or(1, |d| d as usize + 1);
        digits + usize::from(n < 0.0)
    } else {
        24
    }
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

    /// An object of `children` in any order (of duplicate keys the last wins; empty children
    /// are left out) with `priority`; the empty node if no child remains. Building at once is
    /// cheaper than one [`Node::with_child`] per child, and leaves a more compact map.
    pub fn from_children(mut children: Vec<(Key, Node)>, priority: Priority) -> Node {
        children.retain(|(_, child)| !child.is_empty());
        ObjectData::build_from_entries(children, priority)
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

    /// This node with another priority. The empty node cannot carry one and stays empty.
    pub fn with_priority(&self, p: Priority) -> Node {
        let priority = p.normalized();
        match &self.0 {
            Repr::Empty => Node::empty(),
            Repr::Scalar(value) => Node::leaf_raw(value.clone(), priority),
            Repr::Leaf(leaf) => Node::leaf_raw(leaf.value.clone(), priority),
            Repr::Object(object) => {
                let bytes =
                    object.bytes - priority_bytes(&object.priority) + priority_bytes(&priority);
                object_node(object.children.clone(), priority, bytes, false)
            }
            Repr::Packed(_) | Repr::Chunked(_) if priority.is_none() => self.clone(),
            Repr::Packed(packed) => {
                let bytes = packed.estimate() + priority_bytes(&priority);
                object_node(packed.child_map(), priority, bytes, false)
            }
            Repr::Chunked(chunked) => {
                let bytes = chunked.estimate() + priority_bytes(&priority);
                object_node(chunked_map(chunked), priority, bytes, false)
            }
        }
    }

    /// The child named `key`; empty if there is none or this is not an object.
    pub fn child(&self, key: &Key) -> Node {
        self.child_cow(key).map(Cow::into_owned).unwrap_or_default()
    }

    /// The child named `key`: borrowed from an object, decoded from a packed one.
    fn child_cow(&self, key: &Key) -> Option<Cow<'_, Node>> {
        match &self.0 {
            Repr::Object(object) => object.children.get(key).map(Cow::Borrowed),
            Repr::Packed(packed) => packed.get(key).map(Cow::Owned),
            Repr::Chunked(chunked) => chunked.get(key).map(Cow::Owned),
            _ => None,
        }
    }

    /// The node at `path` below this one (empty if nothing is there).
    pub fn get(&self, path: &Path) -> Node {
        let Some((last, above)) = path.keys().split_last() else {
            return self.clone();
        };
        let mut node = Cow::Borrowed(self);
        for key in above {
            node = match node {
                Cow::Borrowed(node) => match node.child_cow(key) {
                    Some(child) => child,
                    None => return Node::empty(),
                },
                Cow::Owned(node) => match node.child_cow(key) {
                    Some(child) => Cow::Owned(child.into_owned()),
                    None => return Node::empty(),
                },
            };
        }
        node.child(last)
    }

    /// Returns the tree with `value` placed at `path`; `self` is unchanged and every untouched
    /// subtree is shared with it.
    ///
    /// * The root path replaces everything.
    /// * Writing below a leaf turns the leaf into an object; the leaf's value is dropped but its
    ///   priority kept, exactly as the JS client updates its cache (`LeafNode`), so that client
    ///   and server keep hashing the same data.
    /// * Writing the empty node removes; an object that loses its last child becomes empty and
    ///   loses its priority, and this cascades up through emptied ancestors.
    pub fn set(&self, path: &Path, value: Node) -> Node {
        self.set_keys(path.keys(), value)
    }

    fn set_keys(&self, keys: &[Key], value: Node) -> Node {
        match keys.split_first() {
            None => value,
            Some((key, [])) => self.with_child(key, value),
            Some((key, rest)) => {
                let new_child = match self.child_cow(key) {
                    Some(child) => child.set_keys(rest, value),
                    // Nothing is here: build the new branch from scratch (a deletion of
                    // something absent builds nothing and leaves `self` as it is).
                    None => Node::empty().set_keys(rest, value),
                };
                self.with_child(key, new_child)
            }
        }
    }

    /// Single-level [`Node::set`]: replaces (or with an empty `child`, removes) one child.
    pub fn with_child(&self, key: &Key, child: Node) -> Node {
        match &self.0 {
            Repr::Empty if child.is_empty() => Node::empty(),
            Repr::Empty => single_child(key, child, Priority::None),
            Repr::Scalar(_) | Repr::Leaf(_) if child.is_empty() => self.clone(),
            Repr::Scalar(_) => single_child(key, child, Priority::None),
            Repr::Leaf(leaf) => single_child(key, child, leaf.priority.clone()),
            Repr::Packed(packed) => {
                let object = ObjectData {
                    children: packed.child_map(),
                    priority: Priority::None,
                    hash: OnceLock::new(),
                    bytes: packed.estimate(),
                };
                object.with_child(self, key, child, true)
            }
            Repr::Chunked(chunked) => {
                if child.is_empty() && chunked.get(key).is_none() {
                    return self.clone();
                }
                match chunked.with_child(key, &child) {
                    Some(next) if next.len() == 0 => Node::empty(),
                    // Small again: packed whole.
                    Some(next) if next.estimate() <= PACK_MAX_BYTES => object_node(
                        ChildMap::from_entries(next.iter().collect()),
                        Priority::None,
                        next.estimate(),
                        false,
                    ),
                    Some(next) => Node(Repr::Chunked(Arc::new(next))),
                    // A child that does not pack: the collection becomes a map of nodes.
                    None => {
                        let object = ObjectData {
                            children: chunked_map(chunked),
                            priority: Priority::None,
                            hash: OnceLock::new(),
                            bytes: chunked.estimate(),
                        };
                        object.with_child(self, key, child, false)
                    }
                }
            }
            Repr::Object(object) => object.with_child(self, key, child, false),
        }
    }

    /// The children in key order (§9.1); none for leaves and the empty node. Children of an
    /// object are borrowed; those of a packed object are decoded as the iterator is made.
    pub fn children(&self) -> Children<'_> {
        Children(match &self.0 {
            Repr::Object(object) => Inner::Map(object.children.iter()),
            Repr::Packed(packed) => Inner::Decoded(packed.entries().into_iter()),
            Repr::Chunked(chunked) => Inner::Chunked(chunked.iter(), Some(chunked.len())),
            _ => Inner::Nothing,
        })
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

    /// The child with the smallest key.
    pub fn first_child(&self) -> Option<(Cow<'_, Key>, Cow<'_, Node>)> {
        self.children().next()
    }

    /// The child with the largest key.
    pub fn last_child(&self) -> Option<(Cow<'_, Key>, Cow<'_, Node>)> {
        self.children().next_back()
    }

    /// The children whose keys lie between `from` and `to`, in key order (orderByKey windows).
    /// An inverted range yields nothing.
    pub fn children_range(&self, from: Bound<&Key>, to: Bound<&Key>) -> ChildrenRange<'_> {
        ChildrenRange(match &self.0 {
            Repr::Object(object) => Inner::Map(object.children.range(from, to)),
            Repr::Packed(packed) => Inner::Decoded(packed.range(from, to).into_iter()),
            Repr::Chunked(_) if children::is_inverted(from, to) => Inner::Nothing,
            Repr::Chunked(chunked) => Inner::Chunked(chunked.range(from, to), None),
            _ => Inner::Nothing,
        })
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

    /// The node hash of spec §10 (`""` for the empty node), cached inside the node.
    pub fn hash(&self) -> Arc<str> {
        match &self.0 {
            Repr::Empty => EMPTY_HASH.clone(),
            Repr::Scalar(value) => hash::leaf_hash(value, &Priority::None),
            Repr::Leaf(leaf) => leaf
                .hash
                .get_or_init(|| hash::leaf_hash(&leaf.value, &leaf.priority))
                .clone(),
            Repr::Object(object) => object
                .hash
                .get_or_init(|| hash::object_hash(&object.children, &object.priority))
                .clone(),
            Repr::Packed(packed) => {
                Arc::from(hash::digest_base64(&packed.digest(hash::packed_digest)))
            }
            Repr::Chunked(chunked) => chunked.hash(),
        }
    }

    /// Whether `hash` is this node's hash as a client computes it: the JS client's form
    /// ([`Node::hash`], cached) or else the Java client's, which differs only for some numbers
    /// and keys (`hash_java`) and is computed only when the first does not match.
    pub fn hash_matches(&self, hash: &str) -> bool {
        *self.hash() == *hash || hash_java::java_hash(self).is_some_and(|java| *java == *hash)
    }

    /// The node hash as the Java (Android) client computes it; equal to [`Node::hash`] unless
    /// the subtree holds a number or key the two clients hash differently.
    pub fn java_hash(&self) -> Arc<str> {
        hash_java::java_hash(self).unwrap_or_else(|| self.hash())
    }

    /// The hash if it has already been computed (never computes it).
    fn cached_hash(&self) -> Option<&Arc<str>> {
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

fn leaf_bytes(value: &Leaf) -> usize {
    match value {
        Leaf::Bool(true) => 4,
        Leaf::Bool(false) => 5,
        Leaf::Number(n) => number_bytes(*n),
        Leaf::String(s) => s.len() + 2,
    }
}

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

fn single_child(key: &Key, child: Node, priority: Priority) -> Node {
    let bytes = 2 + entry_bytes(key, &child) + priority_bytes(&priority);
    object_node(ChildMap::single(key.clone(), child), priority, bytes, false)
}

/// The children of a chunked collection as a map of nodes.
fn chunked_map(chunked: &Chunked) -> ChildMap {
    ChildMap::from_entries(chunked.iter().collect())
}

/// Deep equality, priorities included. Shared subtrees are skipped by identity, and two cached
/// hashes that differ prove inequality without a walk.
impl PartialEq for Node {
    fn eq(&self, other: &Node) -> bool {
        if self.ptr_eq(other) {
            return true;
        }
        if let (Some(a), Some(b)) = (self.cached_hash(), other.cached_hash()) {
            if a != b {
                return false;
            }
        }
        match (&self.0, &other.0) {
            (Repr::Scalar(a), Repr::Scalar(b)) => a == b,
            (Repr::Leaf(a), Repr::Leaf(b)) => a.value == b.value && a.priority == b.priority,
            (Repr::Object(a), Repr::Object(b)) => {
                a.priority == b.priority && a.children == b.children
            }
            // The encoding is canonical: keys in order, each number in one form.
            (Repr::Packed(a), Repr::Packed(b)) => a.bytes() == b.bytes(),
            (Repr::Chunked(a), Repr::Chunked(b)) => a.same_children(b),
            // The same data may take different forms (a map of nodes that took writes, the
            // chunks of a collection split as it grew): compare by content.
            (
                Repr::Object(_) | Repr::Packed(_) | Repr::Chunked(_),
                Repr::Object(_) | Repr::Packed(_) | Repr::Chunked(_),
            ) => {
                self.priority() == other.priority()
                    && self.child_count() == other.child_count()
                    && self.children().eq(other.children())
            }
            _ => false,
        }
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        json::write_node(self, &mut out, true);
        write!(f, "Node({})", String::from_utf8_lossy(&out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        Node::from_json(&v).expect("valid test node")
    }

    fn path(s: &str) -> Path {
        Path::parse(s).expect("valid test path")
    }

    fn key(s: &str) -> Key {
        Key::new(s).expect("valid test key")
    }

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
    fn set_and_get() {
        let root = Node::empty()
            .set(&path("/a/b"), node(json!(1)))
            .set(&path("/a/c"), node(json!("x")))
            .set(&path("/d"), node(json!(true)));
        assert_eq!(
            root.to_json(false),
            json!({"a": {"b": 1, "c": "x"}, "d": true})
        );
        assert_eq!(root.get(&path("/a/b")), node(json!(1)));
        assert!(root.get(&path("/a/zz")).is_empty());
        assert!(root.get(&path("/a/b/deeper")).is_empty());
        assert_eq!(root.get(&Path::root()), root);
        assert_eq!(root.child_count(), 2);
        assert_eq!(root.child(&key("d")).leaf_value(), Some(&Leaf::Bool(true)));
        let replaced = root.set(&Path::root(), node(json!(5)));
        assert_eq!(replaced.to_json(false), json!(5));
    }

    #[test]
    fn removal_prunes_emptied_ancestors() {
        let root =
            node(json!({"a": {"b": {"c": {".value": 1, ".priority": 2}}, ".priority": 3}, "x": 1}));
        let pruned = root.set(&path("/a/b/c"), Node::empty());
        assert_eq!(pruned.to_json(true), json!({"x": 1}));
        let all_gone = pruned.set(&path("/x"), Node::empty());
        assert!(all_gone.is_empty());
        // Removing something absent changes nothing and allocates nothing.
        let same = root.set(&path("/q/r/s"), Node::empty());
        assert!(same.ptr_eq(&root));
        let same = root.set(&path("/x/under/leaf"), Node::empty());
        assert!(same.ptr_eq(&root));
    }

    #[test]
    fn writing_below_a_leaf_makes_an_object() {
        let root = node(json!({"a": {".value": 1, ".priority": 9}}));
        let next = root.set(&path("/a/b"), node(json!(2)));
        // The leaf value goes; its priority stays, as in the JS client's cache.
        assert_eq!(next.to_json(true), json!({"a": {"b": 2, ".priority": 9}}));
        let plain = node(json!({"a": 1})).set(&path("/a/b/c"), node(json!(2)));
        assert_eq!(plain.to_json(true), json!({"a": {"b": {"c": 2}}}));
    }

    #[test]
    fn copy_on_write_shares_untouched_subtrees() {
        // The long text keeps the root above the packing size and the priority below it out
        // of chunks, so it is an object of nodes.
        let root = node(json!({
            "a": {"x": 1, "y": 2}, "b": {"z": 3}, "t": "x".repeat(PACK_MAX_BYTES + 88),
            "p": {".value": 1, ".priority": 2},
        }));
        assert!(root.packed().is_none() && root.chunked().is_none());
        assert!(root.child(&key("b")).packed().is_some());
        let before = root.to_json(true);
        let next = root.set(&path("/a/x"), node(json!(10)));
        assert_eq!(root.to_json(true), before);
        assert_eq!(next.get(&path("/a/x")), node(json!(10)));
        assert!(next.child(&key("b")).ptr_eq(&root.child(&key("b"))));
        assert!(next.get(&path("/a/y")).ptr_eq(&root.get(&path("/a/y"))));
        assert!(!next.ptr_eq(&root));
        // Writing the very same node back is a no-op that keeps identity.
        let b = root.child(&key("b"));
        assert!(root.with_child(&key("b"), b).ptr_eq(&root));
    }

    #[test]
    fn small_objects_without_priorities_are_packed() {
        let record = node(json!({"uid": "u1", "text": "hi", "ts": 1_700_000_000_000u64}));
        assert!(record.packed().is_some());
        assert!(node(json!({"x": 1, ".priority": 2})).packed().is_none());
        assert!(node(json!({"x": {".value": 1, ".priority": 2}}))
            .packed()
            .is_none());
        assert!(node(json!({"t": "x".repeat(PACK_MAX_BYTES)}))
            .packed()
            .is_none());
        // Growing past the bound unpacks; shrinking back packs again.
        let grown = record.with_child(&key("body"), node(json!("y".repeat(PACK_MAX_BYTES + 88))));
        assert!(grown.packed().is_none() && grown.child(&key("uid")) == node(json!("u1")));
        let shrunk = grown.with_child(&key("body"), Node::empty());
        assert!(shrunk.packed().is_some());
        assert_eq!(shrunk, record);
        // A priority set on a packed object unpacks it.
        let prioritized = record.with_priority(Priority::Number(1.0));
        assert!(prioritized.packed().is_none());
        assert_eq!(prioritized.with_priority(Priority::None), record);
        // Both forms hash alike.
        let plain = without_packing(|| {
            node(json!({"uid": "u1", "text": "hi", "ts": 1_700_000_000_000u64}))
        });
        assert!(plain.packed().is_none());
        assert_eq!(plain.hash(), record.hash());
    }

    #[test]
    fn large_collections_of_packable_records_are_chunked() {
        let records = collection(400);
        let root = node(records.clone());
        let chunked = root.chunked().expect("a collection of records is chunked");
        assert!(chunked.chunks().count() > 10);
        // The property tests' collections are chunked too.
        assert!(has_chunked(&node(collection(26))));
        assert!(has_chunked(&node(json!({"10": collection(30), "b": 2.25}))));
        let plain = without_packing(|| node(records.clone()));
        assert!(!has_packed(&plain));
        assert_eq!(root.hash(), plain.hash());
        assert_eq!(root.to_json(true), plain.to_json(true));
        // Writes inside one record, of new records (splitting a chunk), and removals keep
        // every reading the same as the plain form's, and the collection chunked.
        let writes: [(&str, serde_json::Value); 6] = [
            ("/17/t", json!("short")),
            ("/b/x/y", json!(12.5)),
            ("/99x", json!({"t": "z".repeat(3000)})),
            ("/a", json!(null)),
            ("/150", json!(null)),
            ("/0new", json!(true)),
        ];
        let (mut chunked_root, mut plain_root) = (root, plain);
        for (at, value) in writes {
            chunked_root = chunked_root.set(&path(at), node(value.clone()));
            plain_root = without_packing(|| plain_root.set(&path(at), node(value.clone())));
            assert!(chunked_root.chunked().is_some());
            assert_eq!(chunked_root.hash(), plain_root.hash(), "after {at}");
            assert_eq!(chunked_root.to_json(true), plain_root.to_json(true));
            assert_eq!(chunked_root.estimated_bytes(), plain_root.estimated_bytes());
            assert_eq!(chunked_root.child_count(), plain_root.child_count());
        }
        // A priority below turns the collection into a map of nodes; a priority on it too.
        let prioritized =
            chunked_root.set(&path("/17/p"), node(json!({".value": 1, ".priority": 2})));
        assert!(prioritized.chunked().is_none() && prioritized.packed().is_none());
        assert_eq!(prioritized.get(&path("/17/t")), node(json!("short")));
        let on_top = chunked_root.with_priority(Priority::Number(1.0));
        assert!(on_top.chunked().is_none());
        assert_eq!(on_top.with_priority(Priority::None), chunked_root);
        // Equal collections in different chunks are equal; one changed entry is not.
        let rebuilt = node(chunked_root.to_json(true));
        assert!(rebuilt.chunked().is_some() && !rebuilt.ptr_eq(&chunked_root));
        assert_eq!(rebuilt, chunked_root);
        assert_ne!(
            rebuilt.set(&path("/17/t"), node(json!("other"))),
            chunked_root
        );
        // Shrinking to a small object packs it whole again.
        let mut shrinking = chunked_root;
        let keys: Vec<Key> = shrinking.children().map(|(k, _)| k.into_owned()).collect();
        for key in keys.iter().skip(3) {
            shrinking = shrinking.with_child(key, Node::empty());
        }
        assert!(shrinking.packed().is_some());
        assert_eq!(shrinking.child_count(), 3);
    }

    #[test]
    fn a_packed_object_that_grows_large_is_chunked() {
        let mut root = Node::empty();
        for i in 0..8000 {
            root = root.set(
                &path(&format!("/m{i:04}")),
                node(json!({"uid": "u1", "ts": i})),
            );
            if i == 200 {
                // A few chunks, indexed by a slice.
                assert!(root.chunked().is_some());
                let plain = without_packing(|| node(root.to_json(true)));
                assert_eq!(root.hash(), plain.hash());
            }
        }
        // Past 32 chunks the index is a map; emptying most chunks brings the slice back.
        assert!(root.chunked().is_some_and(|c| c.chunks().count() > 32));
        let plain = without_packing(|| node(root.to_json(true)));
        assert_eq!(root.hash(), plain.hash());
        for i in 0..7000 {
            root = root.set(&path(&format!("/m{i:04}")), Node::empty());
        }
        let plain = without_packing(|| node(root.to_json(true)));
        assert_eq!(root.to_json(true), plain.to_json(true));
        assert_eq!(root.hash(), plain.hash());
        assert_eq!(root.child_count(), 1000);
        assert!(root.chunked().is_some_and(|c| c.chunks().count() <= 32));
    }

    #[test]
    fn hash_cache_never_goes_stale() {
        let text = "x".repeat(PACK_MAX_BYTES + 88);
        let root = node(json!({"a": {"x": 1}, "b": 2, "t": text}));
        let h1 = root.hash();
        assert!(
            Arc::ptr_eq(&h1, &root.hash()),
            "the second call is served from the cache"
        );
        let next = root.set(&path("/a/x"), node(json!(2)));
        assert_ne!(next.hash(), h1);
        assert_eq!(root.hash(), h1);
        assert_eq!(
            next.hash(),
            node(json!({"a": {"x": 2}, "b": 2, "t": text})).hash()
        );
        let back = next.set(&path("/a/x"), node(json!(1)));
        assert_eq!(back.hash(), h1);
        let prioritized = root.with_priority(Priority::Number(1.0));
        assert_ne!(prioritized.hash(), h1);
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
    fn children_in_key_order_and_ranges() {
        let root = node(json!({"b": 1, "a": 2, "10": 3, "9": 4, "007": 5}));
        let keys: Vec<String> = root
            .children()
            .map(|(k, _)| k.as_str().to_owned())
            .collect();
        assert_eq!(keys, ["007", "9", "10", "a", "b"]);
        let back: Vec<String> = root
            .children()
            .rev()
            .map(|(k, _)| k.as_str().to_owned())
            .collect();
        assert_eq!(back, ["b", "a", "10", "9", "007"]);
        assert_eq!(root.children().len(), 5);
        assert_eq!(
            root.first_child()
                .map(|(k, _)| k.as_str().to_owned())
                .as_deref(),
            Some("007")
        );
        assert_eq!(
            root.last_child()
                .map(|(k, _)| k.as_str().to_owned())
                .as_deref(),
            Some("b")
        );
        let (nine, a) = (key("9"), key("a"));
        let range = |from, to| -> Vec<String> {
            root.children_range(from, to)
                .map(|(k, _)| k.to_string())
                .collect()
        };
        assert_eq!(
            range(Bound::Included(&nine), Bound::Included(&a)),
            ["9", "10", "a"]
        );
        assert_eq!(range(Bound::Excluded(&nine), Bound::Excluded(&a)), ["10"]);
        assert_eq!(range(Bound::Unbounded, Bound::Excluded(&nine)), ["007"]);
        assert_eq!(range(Bound::Excluded(&a), Bound::Unbounded), ["b"]);
        assert!(range(Bound::Included(&a), Bound::Included(&nine)).is_empty());
        assert!(range(Bound::Excluded(&a), Bound::Excluded(&a)).is_empty());
        assert_eq!(range(Bound::Included(&a), Bound::Included(&a)), ["a"]);
        let leaf = node(json!(1));
        assert_eq!(leaf.children().count(), 0);
        assert_eq!(leaf.child_count(), 0);
        assert!(leaf.first_child().is_none());
        assert_eq!(
            leaf.children_range(Bound::Unbounded, Bound::Unbounded)
                .count(),
            0
        );
        assert!(leaf.child(&a).is_empty());
    }

    #[test]
    fn equality_is_deep() {
        let a = node(json!({"x": {"y": 1, ".priority": 2}, "z": "s"}));
        let b = node(json!({"z": "s", "x": {".priority": 2, "y": 1}}));
        assert_eq!(a, b);
        assert_ne!(a, node(json!({"x": {"y": 1}, "z": "s"})));
        assert_ne!(a, node(json!({"x": {"y": 1, ".priority": 2}, "z": "t"})));
        assert_ne!(node(json!(1)), node(json!("1")));
        assert_ne!(node(json!(1)), Node::empty());
        assert_eq!(Node::empty(), Node::default());
        // With warm, different hash caches the answer is the same.
        let c = node(json!({"x": 1}));
        let d = node(json!({"x": 2}));
        let _ = (c.hash(), d.hash());
        assert_ne!(c, d);
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
        assert_eq!(number_bytes(-120.0), 4);
        assert_eq!(number_bytes(0.0), 1);
        assert_eq!(number_bytes(0.5), 24);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(Vec<&'static str>, serde_json::Value),
        Prioritize(Vec<&'static str>, serde_json::Value),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let segments =
            proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("10")], 0..4);
        let value = prop_oneof![
            Just(json!(null)),
            Just(json!(1)),
            Just(json!("s")),
            Just(json!({"x": 1, "y": {"z": true}})),
            Just(json!({".value": 2, ".priority": "p"})),
            Just(json!({"x": 3, ".priority": 1})),
            Just(json!("t".repeat(PACK_MAX_BYTES * 3 / 5))),
            Just(json!({"k": [1, 2.5, "u"], "w": -7, "f": 9_007_199_254_740_993.0})),
            Just(json!({"n": {"d": {"e": 1e300, "g": false}}, "0": "zero"})),
            // Large enough to be kept in chunks, with keys the paths above reach.
            Just(collection(26)),
            Just(json!({"10": collection(30), "b": 2.25})),
        ];
        let priority = prop_oneof![Just(json!(null)), Just(json!(5)), Just(json!("q"))];
        prop_oneof![
            3 => (segments.clone(), value).prop_map(|(p, v)| Op::Set(p, v)),
            1 => (segments, priority).prop_map(|(p, v)| Op::Prioritize(p, v)),
        ]
    }

    fn apply(root: &Node, op: &Op) -> Node {
        match op {
            Op::Set(segments, v) => {
                let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                root.set(&target, node(v.clone()))
            }
            Op::Prioritize(segments, p) => {
                let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                let priority = Priority::from_json(p).expect("valid priority");
                root.set(&target, root.get(&target).with_priority(priority))
            }
        }
    }

    /// A map of `n` records under the keys "0", "1", ... with "a" and "b" among them.
    fn collection(n: usize) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for i in 0..n {
            let key = match i {
                0 => "a".to_string(),
                1 => "b".to_string(),
                _ => i.to_string(),
            };
            let text = "r".repeat(150 + i * 7);
            map.insert(
                key,
                json!({"t": text, "n": i as f64 / 4.0, "x": {"y": i % 3 == 0}}),
            );
        }
        serde_json::Value::Object(map)
    }

    fn has_packed(node: &Node) -> bool {
        node.packed().is_some()
            || node.chunked().is_some()
            || node.children().any(|(_, child)| has_packed(&child))
    }

    fn has_chunked(node: &Node) -> bool {
        node.chunked().is_some() || node.children().any(|(_, child)| has_chunked(&child))
    }

    /// Everything a reader can observe of `a` and `b` at `at` is the same.
    fn same_reading(
        a: &Node,
        b: &Node,
        at: &Path,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let (a, b) = (a.get(at), b.get(at));
        proptest::prop_assert_eq!(&a, &b);
        proptest::prop_assert_eq!(a.to_json(true), b.to_json(true));
        for export in [false, true] {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            a.write_json(&mut x, export);
            b.write_json(&mut y, export);
            proptest::prop_assert_eq!(x, y);
        }
        proptest::prop_assert_eq!(a.hash(), b.hash());
        proptest::prop_assert_eq!(a.estimated_bytes(), b.estimated_bytes());
        proptest::prop_assert_eq!(a.child_count(), b.child_count());
        proptest::prop_assert!(a.children().eq(b.children()));
        proptest::prop_assert!(a.children().rev().eq(b.children().rev()));
        proptest::prop_assert_eq!(a.first_child(), b.first_child());
        proptest::prop_assert_eq!(a.last_child(), b.last_child());
        let (from, to) = (key("10"), key("b"));
        for (lo, hi) in [
            (Bound::Included(&from), Bound::Excluded(&to)),
            (Bound::Excluded(&from), Bound::Included(&to)),
            (Bound::Unbounded, Bound::Excluded(&from)),
        ] {
            proptest::prop_assert!(a.children_range(lo, hi).eq(b.children_range(lo, hi)));
        }
        Ok(())
    }

    proptest::proptest! {
        /// Packing and chunks are invisible: the same writes applied with and without them read the same
        /// everywhere, hashes and JSON bytes included.
        #[test]
        fn packed_and_unpacked_forms_agree(ops in proptest::collection::vec(op(), 1..24)) {
            let (mut packed, mut plain) = (Node::empty(), Node::empty());
            for op in &ops {
                packed = apply(&packed, op);
                plain = without_packing(|| apply(&plain, op));
                proptest::prop_assert!(!has_packed(&plain));
                for at in ["/", "/a", "/b", "/10", "/a/b", "/10/a/b", "/a/x", "/b/n/d", "/10/10"] {
                    same_reading(&packed, &plain, &path(at))?;
                }
            }
        }

        #[test]
        fn updates_keep_invariants(ops in proptest::collection::vec(op(), 1..24)) {
            let mut root = Node::empty();
            for op in ops {
                let before = root.clone();
                let before_json = before.to_json(true);
                let before_hash = before.hash();
                let (target, next) = match &op {
                    Op::Set(segments, v) => {
                        let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                        let value = node(v.clone());
                        let next = root.set(&target, value.clone());
                        proptest::prop_assert_eq!(next.get(&target), value);
                        (target, next)
                    }
                    Op::Prioritize(segments, p) => {
                        let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                        let priority = Priority::from_json(p).expect("valid priority");
                        let current = root.get(&target);
                        let next = root.set(&target, current.with_priority(priority.clone()));
                        if !current.is_empty() {
                            proptest::prop_assert_eq!(next.get(&target).priority().clone(), priority);
                        }
                        (target, next)
                    }
                };
                // The old version is untouched, cached hash included.
                proptest::prop_assert_eq!(before.to_json(true), before_json);
                proptest::prop_assert_eq!(before.hash(), before_hash);
                // The new version is canonical (no empty objects) and its incremental
                // bookkeeping (hash cache, size estimate) equals a fresh build.
                let rebuilt = node(next.to_json(true));
                proptest::prop_assert_eq!(&rebuilt, &next);
                proptest::prop_assert_eq!(rebuilt.hash(), next.hash());
                proptest::prop_assert_eq!(rebuilt.estimated_bytes(), next.estimated_bytes());
                // Siblings of the written path are shared, not copied (a packed object's
                // children are bytes, copied by design).
                if let Some(first) = target.first() {
                    for (k, child) in before.children() {
                        let of_nodes = |n: &Node| n.packed().is_none() && n.chunked().is_none();
                        if *k != *first && of_nodes(&before) && of_nodes(&next) {
                            proptest::prop_assert!(child.ptr_eq(&next.child(&k)) || next.is_leaf());
                        }
                    }
                }
                root = next;
            }
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
