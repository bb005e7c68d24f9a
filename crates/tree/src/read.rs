//! Reading the children of a node: one by key or at a path, all or a key range in key order,
//! and deep equality, which compares children. Children of an object of nodes are borrowed;
//! those of a packed object or a collection in chunks are decoded as they are read.

use std::borrow::Cow;
use std::ops::Bound;

use crate::children::{self, ChildIter};
use crate::key::Key;
use crate::node::{Node, Repr};
use crate::packing::ChunkedIter;
use crate::path::Path;

impl Node {
    /// The child named `key`; empty if there is none or this is not an object.
    pub fn child(&self, key: &Key) -> Node {
        self.child_cow(key).map(Cow::into_owned).unwrap_or_default()
    }

    /// The child named `key`: borrowed from an object, decoded from a packed one.
    pub(crate) fn child_cow(&self, key: &Key) -> Option<Cow<'_, Node>> {
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

/// Where the children of an iterator come from.
pub(crate) enum Inner<'a> {
    Nothing,
    Map(ChildIter<'a, Node>),
    Decoded(std::vec::IntoIter<(Key, Node)>),
    /// Decoded chunk by chunk, with the count still to come when known (all children).
    Chunked(ChunkedIter<'a>, Option<usize>),
}

impl<'a> Inner<'a> {
    fn next(&mut self) -> Option<(Cow<'a, Key>, Cow<'a, Node>)> {
        match self {
            Inner::Nothing => None,
            Inner::Map(it) => it.next().map(|(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v))),
            Inner::Decoded(it) => it.next().map(|(k, v)| (Cow::Owned(k), Cow::Owned(v))),
            Inner::Chunked(it, left) => {
                let next = it.next()?;
                *left = left.map(|n| n.saturating_sub(1));
                Some((Cow::Owned(next.0), Cow::Owned(next.1)))
            }
        }
    }

    fn next_back(&mut self) -> Option<(Cow<'a, Key>, Cow<'a, Node>)> {
        match self {
            Inner::Nothing => None,
            Inner::Map(it) => it
                .next_back()
                .map(|(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v))),
            Inner::Decoded(it) => it.next_back().map(|(k, v)| (Cow::Owned(k), Cow::Owned(v))),
            Inner::Chunked(it, left) => {
                let next = it.next_back()?;
                *left = left.map(|n| n.saturating_sub(1));
                Some((Cow::Owned(next.0), Cow::Owned(next.1)))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Inner::Nothing => (0, Some(0)),
            Inner::Map(it) => it.size_hint(),
            Inner::Decoded(it) => it.size_hint(),
            Inner::Chunked(_, Some(left)) => (*left, Some(*left)),
            Inner::Chunked(_, None) => (0, None),
        }
    }
}

/// Iterator over the children of a node, in key order. Double-ended, so the last children
/// (limitToLast windows) are as cheap to reach as the first.
pub struct Children<'a>(pub(crate) Inner<'a>);

impl<'a> Iterator for Children<'a> {
    type Item = (Cow<'a, Key>, Cow<'a, Node>);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Children<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl ExactSizeIterator for Children<'_> {}

/// Iterator over a key range of the children of a node, in key order, from either end.
pub struct ChildrenRange<'a>(pub(crate) Inner<'a>);

impl<'a> Iterator for ChildrenRange<'a> {
    type Item = (Cow<'a, Key>, Cow<'a, Node>);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

impl DoubleEndedIterator for ChildrenRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{key, node};
    use serde_json::json;

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
}
