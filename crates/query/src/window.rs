//! Computing a query result: the in-range children of a node, cut to the limit (§7.2).
//!
//! `apply` runs on every write under a listened location, so it avoids work proportional to more than the
//! children it must look at: the key index seeks in the (key-ordered) children map, a limit on any other index
//! keeps only `count` candidates in a bounded heap instead of sorting everything, and the result node is built
//! by whichever is cheaper — inserting the kept children into an empty node or deleting the dropped ones from
//! the original.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Bound as Seek;

use hearth_tree::{Key, Node, Priority};

use crate::compare::{IndexValue, KeyPost, NamePost, Range};
use crate::params::{Index, Limit, LimitFrom, QueryParams};

/// A kept child, borrowed from the queried node.
pub(crate) type Child<'a> = (Cow<'a, Key>, Cow<'a, Node>);

impl QueryParams {
    /// The query result of `node`: its in-range children, cut to the first or last `count` of them in
    /// (index value, key) order.
    ///
    /// The children keep their own priorities but the result itself has none, because the priority of the
    /// listened node is not part of a filtered view. A leaf or empty node gives the empty node. An unfiltered
    /// query returns `node` itself, priority included, since such a listen is a plain listen on the location.
    pub fn apply(&self, node: &Node) -> Node {
        if !self.is_filtered() {
            return node.clone();
        }
        if node.is_leaf() || node.is_empty() {
            return Node::empty();
        }
        let range = Range::new(self);
        let (kept, in_key_order) = match (&self.index, &self.limit) {
            (Index::Key, limit) => (key_window(node, &range, limit.as_ref()), true),
            (_, None) => {
                let kept = node
                    .children()
                    .filter(|(key, child)| range.contains(&range.sort_value(child), key));
                (kept.collect(), true)
            }
            (_, Some(limit)) => (ranked_window(node, &range, limit), false),
        };
        assemble(node, kept, in_key_order)
    }
}

/// The window of a key-index query, in key order.
///
/// The children map is ordered by the same name order as the posts, so when both posts are valid keys the
/// range is read straight out of the map (and a `limitToLast` window from its far end). A post that is not a
/// valid key — the client may send any string — falls back to a scan with the exact comparator.
fn key_window<'a>(node: &'a Node, range: &Range<'_>, limit: Option<&Limit>) -> Vec<Child<'a>> {
    let (start, end) = range.key_posts();
    if matches!(start, Some((NamePost::Max, _))) || matches!(end, Some((NamePost::Min, _))) {
        return Vec::new();
    }
    let seek_key = |post: KeyPost<'_>| match post {
        Some((NamePost::Name(name), inclusive)) => Key::new(name).map(|key| Some((key, inclusive))),
        _ => Ok(None),
    };
    match (seek_key(start), seek_key(end)) {
        // `children_range` yields nothing for an inverted range, as the query semantics want.
        (Ok(lower), Ok(upper)) => {
            window_in_order(node.children_range(to_seek(&lower), to_seek(&upper)), limit)
        }
        _ => {
            let scan = node
                .children()
                .filter(|(key, child)| range.contains(&range.sort_value(child), key));
            window_in_order(scan, limit)
        }
    }
}

/// A seek bound for the children map from an optional (key, inclusive) post.
fn to_seek(post: &Option<(Key, bool)>) -> Seek<&Key> {
    match post {
        None => Seek::Unbounded,
        Some((key, true)) => Seek::Included(key),
        Some((key, false)) => Seek::Excluded(key),
    }
}

/// Cuts an already ordered stream of in-range children to the limit, reading a `limitToLast` window from
/// the back so that only the kept children are visited.
fn window_in_order<'a>(
    children: impl DoubleEndedIterator<Item = Child<'a>>,
    limit: Option<&Limit>,
) -> Vec<Child<'a>> {
    match limit {
        None => children.collect(),
        Some(Limit {
            count,
            from: LimitFrom::First,
        }) => children.take(*count as usize).collect(),
        Some(Limit {
            count,
            from: LimitFrom::Last,
        }) => {
            let mut tail: Vec<Child<'a>> = children.rev().take(*count as usize).collect();
            tail.reverse();
            tail
        }
    }
}

/// A candidate for a value-ordered window, ordered by (index value, key).
struct Ranked<'a> {
    value: IndexValue,
    key: Cow<'a, Key>,
    child: Cow<'a, Node>,
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Ranked<'_> {}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.value
            .cmp(&other.value)
            .then_with(|| self.key.cmp(&other.key))
    }
}

/// The window of a limited query on a value-based index, in no particular order: one pass over the children,
/// keeping the best `count` in-range candidates.
fn ranked_window<'a>(node: &'a Node, range: &Range<'_>, limit: &Limit) -> Vec<Child<'a>> {
    let candidates = node.children().filter_map(|(key, child)| {
        let value = range.sort_value(&child);
        range
            .contains(&value, &key)
            .then_some(Ranked { value, key, child })
    });
    let count = limit.count as usize;
    match limit.from {
        LimitFrom::First => keep_smallest(candidates, count)
            .into_iter()
            .map(|r| (r.key, r.child))
            .collect(),
        LimitFrom::Last => keep_smallest(candidates.map(Reverse), count)
            .into_iter()
            .map(|Reverse(r)| (r.key, r.child))
            .collect(),
    }
}

/// The `count` smallest items, unordered, using a max-heap that never holds more than `count` items.
fn keep_smallest<T: Ord>(items: impl Iterator<Item = T>, count: usize) -> Vec<T> {
    let mut heap = BinaryHeap::new();
    for item in items {
        if heap.len() < count {
            heap.push(item);
        } else if let Some(mut largest) = heap.peek_mut() {
            if item < *largest {
                *largest = item;
            }
        }
    }
    heap.into_vec()
}

/// Builds the result node holding exactly `kept` (children of `node`), without a priority of its own.
pub(crate) fn assemble(node: &Node, mut kept: Vec<Child<'_>>, in_key_order: bool) -> Node {
    let total = node.child_count();
    if kept.len() == total {
        return node.with_priority(Priority::None);
    }
    if kept.len() <= total / 2 {
        // Built at once: one object, not one per kept child.
        let children = kept
            .into_iter()
            .map(|(key, child)| (key.into_owned(), child.into_owned()))
            .collect();
        return Node::from_children(children, Priority::None);
    }
    // Most children stay: delete the few that do not, walking both lists in key order.
    if !in_key_order {
        kept.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    }
    let mut kept = kept.into_iter().peekable();
    let mut result = node.with_priority(Priority::None);
    for (key, _) in node.children() {
        if kept.peek().is_some_and(|(kept_key, _)| *kept_key == key) {
            kept.next();
        } else {
            result = result.with_child(&key, Node::empty());
        }
    }
    result
}

#[cfg(test)]
#[path = "window_tests.rs"]
pub(crate) mod tests;
