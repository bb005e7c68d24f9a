//! An ordered index of one location's children under a value or child index (`.indexOn`).
//!
//! The index holds every child of the location as its position (index value, key), in the
//! query order of §7.2, so a window is found by seeking to its range and reading `count`
//! positions from the near end: O(log n + count) instead of a pass over every child. The
//! index does not hold the children themselves, only their positions; the window's children
//! are then looked up by key in the node. Writes keep it current child by child
//! ([`OrderedIndex::update_child`]), or by walking two versions of the location side by side
//! when the location itself was replaced ([`OrderedIndex::replace`]).

use std::borrow::{Borrow, Cow};
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound as Seek;

use hearth_tree::{compare_keys, Key, Node};

use crate::compare::{sort_value, value_post, IndexValue, NamePost};
use crate::params::{Bound, Index, LimitFrom, QueryParams};
use crate::window::{assemble, Child};

/// The children of one location ordered by an index other than the key index (keys are
/// already the order of the children map, and need no index of their own).
#[derive(Debug, Clone)]
pub struct OrderedIndex {
    index: Index,
    positions: BTreeSet<Position>,
}

/// One child's place: its index value, then its key.
#[derive(Debug, Clone)]
struct Position {
    value: IndexValue,
    key: Key,
}

impl PartialEq for Position {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Position {}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> Ordering {
        self.value
            .cmp(&other.value)
            .then_with(|| self.key.cmp(&other.key))
    }
}

/// Something placed in the index order: a child's position, or a query bound, whose name may
/// be a sentinel or a string that is no valid key. The set is searched through this trait so
/// that a bound needs no `Position` of its own.
trait Place {
    fn value(&self) -> &IndexValue;
    fn name(&self) -> NamePost<'_>;
}

impl Place for Position {
    fn value(&self) -> &IndexValue {
        &self.value
    }

    fn name(&self) -> NamePost<'_> {
        NamePost::Name(self.key.as_str())
    }
}

/// A query bound as a place in the index order.
struct Post<'q> {
    value: IndexValue,
    name: NamePost<'q>,
}

impl Place for Post<'_> {
    fn value(&self) -> &IndexValue {
        &self.value
    }

    fn name(&self) -> NamePost<'_> {
        self.name
    }
}

impl<'a> Borrow<dyn Place + 'a> for Position {
    fn borrow(&self) -> &(dyn Place + 'a) {
        self
    }
}

/// Names order as keys, with the sentinels before and after every key.
fn compare_names(a: NamePost<'_>, b: NamePost<'_>) -> Ordering {
    match (a, b) {
        (NamePost::Min, NamePost::Min) | (NamePost::Max, NamePost::Max) => Ordering::Equal,
        (NamePost::Min, _) | (_, NamePost::Max) => Ordering::Less,
        (_, NamePost::Min) | (NamePost::Max, _) => Ordering::Greater,
        (NamePost::Name(a), NamePost::Name(b)) => compare_keys(a, b),
    }
}

impl PartialEq for dyn Place + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn Place + '_ {}

impl PartialOrd for dyn Place + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Place + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.value()
            .cmp(other.value())
            .then_with(|| compare_names(self.name(), other.name()))
    }
}

impl OrderedIndex {
    /// Whether queries ordered by `index` can use an ordered index: value and child indexes.
    pub fn supports(index: &Index) -> bool {
        matches!(index, Index::Value | Index::Child(_))
    }

    /// The index of `node`'s children under `index`, or `None` for the key and priority
    /// indexes (see [`OrderedIndex::supports`]).
    pub fn build(index: &Index, node: &Node) -> Option<OrderedIndex> {
        if !OrderedIndex::supports(index) {
            return None;
        }
        let positions = node
            .children()
            .map(|(key, child)| Position {
                value: sort_value(index, &child),
                key: key.into_owned(),
            })
            .collect();
        Some(OrderedIndex {
            index: index.clone(),
            positions,
        })
    }

    /// What the children are ordered by.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The number of children indexed.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether the indexed location has no children.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Moves child `key` from where `old` put it to where `new` puts it (an empty node is no
    /// child): O(log n).
    pub fn update_child(&mut self, key: &Key, old: &Node, new: &Node) {
        if old.ptr_eq(new) {
            return;
        }
        let old_value = (!old.is_empty()).then(|| sort_value(&self.index, old));
        let new_value = (!new.is_empty()).then(|| sort_value(&self.index, new));
        if old_value == new_value {
            return;
        }
        if let Some(value) = old_value {
            self.positions.remove(&Position {
                value,
                key: key.clone(),
            });
        }
        if let Some(value) = new_value {
            self.positions.insert(Position {
                value,
                key: key.clone(),
            });
        }
    }

    /// Brings the index from the children of `old` to those of `new` (the location itself was
    /// written), walking both in key order and skipping the children they share.
    pub fn replace(&mut self, old: &Node, new: &Node) {
        if old.ptr_eq(new) {
            return;
        }
        let mut old_children = old.children().peekable();
        let mut new_children = new.children().peekable();
        loop {
            let order = match (old_children.peek(), new_children.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((a, _)), Some((b, _))) => a.cmp(b),
            };
            let empty = Node::empty();
            match order {
                Ordering::Less => {
                    if let Some((key, child)) = old_children.next() {
                        self.update_child(&key, &child, &empty);
                    }
                }
                Ordering::Greater => {
                    if let Some((key, child)) = new_children.next() {
                        self.update_child(&key, &empty, &child);
                    }
                }
                Ordering::Equal => {
                    if let (Some((key, before)), Some((_, after))) =
                        (old_children.next(), new_children.next())
                    {
                        self.update_child(&key, &before, &after);
                    }
                }
            }
        }
    }

    /// The query result of `node`, whose children this index holds: what
    /// [`QueryParams::apply`] computes, found in O(log n + window) steps. `None` when the
    /// query is not ordered by this index.
    pub fn window(&self, query: &QueryParams, node: &Node) -> Option<Node> {
        if query.index != self.index {
            return None;
        }
        if !query.is_filtered() {
            return Some(node.clone());
        }
        if node.is_leaf() || node.is_empty() {
            return Some(Node::empty());
        }
        let keys = self.window_keys(query);
        let kept: Vec<Child<'_>> = keys
            .into_iter()
            .map(|key| {
                let child = node.child(key);
                (Cow::Borrowed(key), Cow::Owned(child))
            })
            .collect();
        Some(assemble(node, kept, false))
    }

    /// The keys of the window, nearest the limit's anchor first.
    fn window_keys(&self, query: &QueryParams) -> Vec<&Key> {
        let start = query.start.as_ref().map(post);
        let end = query.end.as_ref().map(post);
        if let (Some((start, start_in)), Some((end, end_in))) = (&start, &end) {
            // An inverted or empty range selects nothing (and a B-tree range would panic).
            match (start as &dyn Place).cmp(end as &dyn Place) {
                Ordering::Greater => return Vec::new(),
                Ordering::Equal if !(*start_in && *end_in) => return Vec::new(),
                _ => {}
            }
        }
        let range = self
            .positions
            .range::<dyn Place, _>((seek(start.as_ref()), seek(end.as_ref())));
        let keys = range.map(|position| &position.key);
        match &query.limit {
            None => keys.collect(),
            Some(limit) => match limit.from {
                LimitFrom::First => keys.take(limit.count as usize).collect(),
                LimitFrom::Last => keys.rev().take(limit.count as usize).collect(),
            },
        }
    }
}

/// A bound as a place in the index order, with whether it is inclusive.
fn post(bound: &Bound) -> (Post<'_>, bool) {
    let (value, name) = value_post(bound);
    (Post { value, name }, bound.inclusive)
}

/// One end of a B-tree range from a bound (`None`: that end is open).
fn seek<'a>(end: Option<&'a (Post<'a>, bool)>) -> Seek<&'a (dyn Place + 'a)> {
    match end {
        None => Seek::Unbounded,
        Some((post, true)) => Seek::Included(post),
        Some((post, false)) => Seek::Excluded(post),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::tests::{node, query};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    #[test]
    fn key_and_priority_need_no_index() {
        let data = node(json!({"a": 1}));
        assert!(OrderedIndex::build(&Index::Key, &data).is_none());
        assert!(OrderedIndex::build(&Index::Priority, &data).is_none());
        assert!(OrderedIndex::build(&Index::Value, &data).is_some());
    }

    #[test]
    fn window_of_another_index_is_refused() {
        let data = node(json!({"a": {"s": 1}}));
        let index = OrderedIndex::build(&Index::Value, &data).expect("value index");
        assert!(index
            .window(&query(json!({"i": "s", "l": 1})), &data)
            .is_none());
    }

    #[test]
    fn inverted_and_empty_ranges_select_nothing() {
        let data = node(json!({"a": 1, "b": 2, "c": 3}));
        let index = OrderedIndex::build(&Index::Value, &data).expect("value index");
        for q in [
            json!({"i": ".value", "sp": 3, "ep": 1}),
            json!({"i": ".value", "sp": 2, "sn": "b", "sin": false, "ep": 2, "en": "b"}),
            json!({"i": ".value", "sp": 2, "sn": "b", "sin": false, "ep": 2, "en": "b", "ein": false}),
        ] {
            let window = index.window(&query(q.clone()), &data).expect("same index");
            assert!(window.is_empty(), "{q}");
        }
        let q = query(json!({"i": ".value", "sp": 2, "sn": "b", "ep": 2, "en": "b"}));
        assert_eq!(
            index.window(&q, &data).expect("same index"),
            node(json!({"b": 2}))
        );
    }

    #[test]
    fn follows_writes_to_children_and_to_the_location() {
        let old = node(json!({"a": {"s": 1}, "b": {"s": 2}, "c": {"t": 0}}));
        let index_of = Index::Child(hearth_tree::Path::parse("s").expect("path"));
        let mut index = OrderedIndex::build(&index_of, &old).expect("child index");
        let a = Key::new("a").expect("key");
        let new = old.with_child(&a, node(json!({"s": 5})));
        index.update_child(&a, &old.child(&a), &new.child(&a));
        let top = query(json!({"i": "s", "l": 1, "vf": "r"}));
        assert_eq!(index.window(&top, &new), Some(node(json!({"a": {"s": 5}}))));
        let replaced = node(json!({"b": {"s": 9}, "d": {"s": 0}}));
        index.replace(&new, &replaced);
        assert_eq!(index.len(), 2);
        assert_eq!(
            index.window(&top, &replaced),
            Some(node(json!({"b": {"s": 9}})))
        );
    }

    const KEYS: &[&str] = &["a", "b", "c", "1", "2", "10", "007", "-1"];

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            (-2i64..4).prop_map(|n| json!(n)),
            Just(json!(0.5)),
            prop::sample::select(vec!["x", "y", ""]).prop_map(|s| json!(s)),
            any::<bool>().prop_map(|b| json!(b)),
        ]
    }

    fn child() -> impl Strategy<Value = Value> {
        prop_oneof![
            leaf(),
            leaf().prop_map(|v| json!({"s": v})),
            leaf().prop_map(|v| json!({"s": {"t": v}})),
            leaf().prop_map(|v| json!({"u": v})),
        ]
    }

    fn list() -> impl Strategy<Value = Value> {
        prop::collection::btree_map(prop::sample::select(KEYS), child(), 0..8).prop_map(|map| {
            Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
        })
    }

    fn bound() -> impl Strategy<Value = (Value, Option<&'static str>, bool)> {
        (
            prop_oneof![leaf(), Just(Value::Null)],
            prop::option::of(prop::sample::select(vec![
                "a",
                "1",
                "10",
                "007",
                "zz",
                "a.b",
                "[MIN_NAME]",
                "[MAX_NAME]",
            ])),
            any::<bool>(),
        )
    }

    fn query_of(
        index: &str,
        start: Option<(Value, Option<&str>, bool)>,
        end: Option<(Value, Option<&str>, bool)>,
        limit: Option<(u32, bool)>,
    ) -> QueryParams {
        let mut q = serde_json::Map::new();
        q.insert("i".into(), json!(index));
        for (prefix, bound) in [("s", start), ("e", end)] {
            if let Some((value, name, inclusive)) = bound {
                q.insert(format!("{prefix}p"), value);
                if let Some(name) = name {
                    q.insert(format!("{prefix}n"), json!(name));
                }
                q.insert(format!("{prefix}in"), json!(inclusive));
            }
        }
        if let Some((count, first)) = limit {
            q.insert("l".into(), json!(count));
            q.insert("vf".into(), json!(if first { "l" } else { "r" }));
        }
        query(Value::Object(q))
    }

    proptest! {
        /// An index kept current through writes gives the same windows as a scan.
        #[test]
        fn windows_match_the_scan(
            first in list(),
            writes in prop::collection::vec((prop::sample::select(KEYS), prop::option::of(child())), 0..6),
            replacement in prop::option::of(list()),
            index in prop::sample::select(vec![".value", "s", "s/t"]),
            start in prop::option::of(bound()),
            end in prop::option::of(bound()),
            limit in prop::option::of((1u32..4, any::<bool>())),
        ) {
            let q = query_of(index, start, end, limit);
            let mut data = node(first);
            let mut ordered = OrderedIndex::build(&q.index, &data).expect("indexable");
            for (key, value) in writes {
                let key = Key::new(key).expect("key");
                let new = data.with_child(&key, value.map_or_else(Node::empty, node));
                ordered.update_child(&key, &data.child(&key), &new.child(&key));
                data = new;
            }
            if let Some(replacement) = replacement {
                let new = node(replacement);
                ordered.replace(&data, &new);
                data = new;
            }
            prop_assert_eq!(ordered.len(), data.child_count());
            let window = ordered.window(&q, &data).expect("same index");
            prop_assert_eq!(window.to_json(true), q.apply(&data).to_json(true));
        }
    }
}
