//! Copy-on-write updates of a node, and the one place where objects are built.
//!
//! Every update returns a new node that shares all untouched subtrees with the old one. Every
//! object, whether parsed, built from children or written to, is made by [`object_node`],
//! which chooses its form (packed, in chunks, or an object of nodes), so that equal data always
//! takes the same form.

use std::sync::{Arc, OnceLock};

use crate::children::{self, ChildMap};
use crate::chunked::Chunked;
use crate::estimate::{priority_bytes, ENTRY_OVERHEAD};
use crate::key::Key;
use crate::node::{Node, ObjectData, Repr};
use crate::packed::{Packed, PACK_MAX_BYTES};
use crate::path::Path;
use crate::priority::Priority;

/// Wraps non-empty `children` into an object node: packed when it is small and carries no
/// priority anywhere; with `try_chunks`, in chunks when it is larger, has no priority and
/// every child packs or is in chunks itself; otherwise an `ObjectData` with a cold hash cache.
/// Every object is built here. Trying chunks reads every child, so only builds and objects
/// that were packed or chunked (whose children are known to pack) try it: a large map of
/// nodes that takes a write stays one.
fn object_node(
    children: ChildMap<Node>,
    priority: Priority,
    bytes: usize,
    try_chunks: bool,
) -> Node {
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
        let entries = children::sorted_unique(entries);
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

impl Node {
    /// An object of `children` in any order (of duplicate keys the last wins; empty children
    /// are left out) with `priority`; the empty node if no child remains. Building at once is
    /// cheaper than one [`Node::with_child`] per child, and leaves a more compact map.
    pub fn from_children(mut children: Vec<(Key, Node)>, priority: Priority) -> Node {
        children.retain(|(_, child)| !child.is_empty());
        ObjectData::build_from_entries(children, priority)
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
                    // A child that neither packs nor is in chunks (a priority somewhere): the
                    // collection becomes a map of nodes.
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
}

fn single_child(key: &Key, child: Node, priority: Priority) -> Node {
    let bytes = 2 + entry_bytes(key, &child) + priority_bytes(&priority);
    object_node(ChildMap::single(key.clone(), child), priority, bytes, false)
}

/// The children of a chunked collection as a map of nodes.
fn chunked_map(chunked: &Chunked) -> ChildMap<Node> {
    ChildMap::from_entries(chunked.iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leaf::Leaf;
    use crate::testing::{key, node, path};
    use serde_json::json;

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
}
