//! The children of an object node: a persistent, key-ordered map in two shapes.
//!
//! Most objects in a database are small records (a handful of fields), while a few are large
//! collections (thousands of push IDs). A B-tree map allocates a full chunk even for one child
//! (about 700 bytes with `imbl`'s default chunk size), so small objects are kept instead as a
//! sorted shared slice, which costs 40 bytes per child and is just as fast to update at that
//! size (an `imbl` update copies a chunk of the same size). Objects that grow past
//! [`SMALL_MAX`] children move to an `imbl::OrdMap` with O(log n) copy-on-write updates, and
//! move back when they shrink to [`DEMOTE_AT`] (the gap avoids flapping at the boundary).

use std::iter;
use std::ops::Bound;
use std::sync::Arc;

use imbl::shared_ptr::DefaultSharedPtr;
use imbl::OrdMap;

use crate::key::Key;

/// Most children kept in the slice shape.
pub(crate) const SMALL_MAX: usize = 16;

/// Size at or below which a shrinking large map returns to the slice shape.
pub(crate) const DEMOTE_AT: usize = 8;

/// Key-ordered children. An object's map (`ChildMap<Node>`) never holds an empty node.
///
/// Generic over the child so that the map stands below the node that holds it: a node is
/// made of maps of nodes, and the map needs nothing of a node but to clone and compare it.
#[derive(Clone)]
pub(crate) enum ChildMap<V> {
    /// Sorted by key, keys unique, at most [`SMALL_MAX`] entries.
    Small(Arc<[(Key, V)]>),
    Large(OrdMap<Key, V>),
}

type MapIter<'a, V> = imbl::ordmap::Iter<'a, Key, V, DefaultSharedPtr>;
type MapRange<'a, V> = imbl::ordmap::RangedIter<'a, Key, V, DefaultSharedPtr>;

/// Iterator over (a range of) a [`ChildMap`], in key order, from either end.
pub(crate) enum ChildIter<'a, V> {
    Slice(std::slice::Iter<'a, (Key, V)>),
    Map(MapIter<'a, V>),
    Range(MapRange<'a, V>),
}

impl<V: Clone> ChildMap<V> {
    /// A map of one child.
    pub(crate) fn single(key: Key, node: V) -> ChildMap<V> {
        ChildMap::Small(Arc::new([(key, node)]))
    }

    /// A map of `entries` in any order; of duplicate keys the last one wins.
    pub(crate) fn from_entries(entries: Vec<(Key, V)>) -> ChildMap<V> {
        ChildMap::from_sorted(sorted_unique(entries))
    }

    /// A map of `entries`, sorted by key with no key twice ([`sorted_unique`]).
    pub(crate) fn from_sorted(entries: Vec<(Key, V)>) -> ChildMap<V> {
        if entries.len() <= SMALL_MAX {
            ChildMap::Small(entries.into())
        } else {
            ChildMap::Large(full_map(entries))
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            ChildMap::Small(entries) => entries.len(),
            ChildMap::Large(map) => map.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn get(&self, key: &Key) -> Option<&V> {
        match self {
            ChildMap::Small(entries) => entries
                .binary_search_by(|(k, _)| k.cmp(key))
                .ok()
                .map(|at| &entries[at].1),
            ChildMap::Large(map) => map.get(key),
        }
    }

    /// A copy with `key` set to `node` (a non-empty node).
    pub(crate) fn insert(&self, key: &Key, node: V) -> ChildMap<V> {
        match self {
            ChildMap::Small(entries) => match entries.binary_search_by(|(k, _)| k.cmp(key)) {
                Ok(at) => {
                    let replaced = entries[..at]
                        .iter()
                        .cloned()
                        .chain(iter::once((key.clone(), node)))
                        .chain(entries[at + 1..].iter().cloned());
                    ChildMap::Small(replaced.collect())
                }
                Err(at) if entries.len() < SMALL_MAX => {
                    let inserted = entries[..at]
                        .iter()
                        .cloned()
                        .chain(iter::once((key.clone(), node)))
                        .chain(entries[at..].iter().cloned());
                    ChildMap::Small(inserted.collect())
                }
                Err(_) => {
                    let mut map: OrdMap<Key, V> = entries.iter().cloned().collect();
                    map.insert(key.clone(), node);
                    ChildMap::Large(map)
                }
            },
            ChildMap::Large(map) => ChildMap::Large(map.update(key.clone(), node)),
        }
    }

    /// A copy without `key` (the same map, shared, if `key` is absent).
    pub(crate) fn remove(&self, key: &Key) -> ChildMap<V> {
        match self {
            ChildMap::Small(entries) => match entries.binary_search_by(|(k, _)| k.cmp(key)) {
                Ok(at) => {
                    let rest = entries[..at]
                        .iter()
                        .cloned()
                        .chain(entries[at + 1..].iter().cloned());
                    ChildMap::Small(rest.collect())
                }
                Err(_) => self.clone(),
            },
            ChildMap::Large(map) => {
                let map = map.without(key);
                if map.len() <= DEMOTE_AT {
                    ChildMap::Small(map.into_iter().collect())
                } else {
                    ChildMap::Large(map)
                }
            }
        }
    }

    pub(crate) fn iter(&self) -> ChildIter<'_, V> {
        match self {
            ChildMap::Small(entries) => ChildIter::Slice(entries.iter()),
            ChildMap::Large(map) => ChildIter::Map(map.iter()),
        }
    }

    /// The children with keys between the bounds; nothing if the range is inverted.
    pub(crate) fn range(&self, from: Bound<&Key>, to: Bound<&Key>) -> ChildIter<'_, V> {
        if is_inverted(from, to) {
            return ChildIter::Slice([].iter());
        }
        match self {
            ChildMap::Small(entries) => {
                let start = match from {
                    Bound::Included(k) => entries.partition_point(|(key, _)| key < k),
                    Bound::Excluded(k) => entries.partition_point(|(key, _)| key <= k),
                    Bound::Unbounded => 0,
                };
                let end = match to {
                    Bound::Included(k) => entries.partition_point(|(key, _)| key <= k),
                    Bound::Excluded(k) => entries.partition_point(|(key, _)| key < k),
                    Bound::Unbounded => entries.len(),
                };
                ChildIter::Slice(entries[start..end.max(start)].iter())
            }
            ChildMap::Large(map) => ChildIter::Range(map.range::<_, Key>((from, to))),
        }
    }
}

/// A map of sorted, unique `entries` whose leaves are nearly full.
///
/// The B-tree splits a full leaf at its median, so inserting in key order leaves every leaf
/// half empty: about 94 bytes per entry instead of 50. Inserting every other entry first and
/// then the rest fills each half-full leaf up to its capacity without another split.
/// `entries` sorted by key; of duplicate keys the last one wins.
pub(crate) fn sorted_unique<V>(mut entries: Vec<(Key, V)>) -> Vec<(Key, V)> {
    // Stable sort: duplicates stay in arrival order, and `dedup_by` then moves the last
    // value into the first slot before dropping the later one.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            std::mem::swap(&mut later.1, &mut kept.1);
            true
        } else {
            false
        }
    });
    entries
}

fn full_map<V: Clone>(entries: Vec<(Key, V)>) -> OrdMap<Key, V> {
    let mut map = OrdMap::new();
    let every_other = |first: usize| entries.iter().skip(first).step_by(2);
    for (key, node) in every_other(0).chain(every_other(1)) {
        map.insert(key.clone(), node.clone());
    }
    map
}

/// Whether no key can lie between the bounds (`std`'s maps would panic on such a range).
pub(crate) fn is_inverted(from: Bound<&Key>, to: Bound<&Key>) -> bool {
    match (from, to) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}

/// Equal when the same keys map to equal nodes, whatever the shapes. Shared structure is
/// recognised by identity and skipped.
impl<V: Clone + PartialEq> PartialEq for ChildMap<V> {
    fn eq(&self, other: &ChildMap<V>) -> bool {
        match (self, other) {
            (ChildMap::Small(a), ChildMap::Small(b)) => Arc::ptr_eq(a, b) || a[..] == b[..],
            (ChildMap::Large(a), ChildMap::Large(b)) => a == b,
            _ => self.len() == other.len() && self.iter().eq(other.iter()),
        }
    }
}

impl<'a, V> Iterator for ChildIter<'a, V> {
    type Item = (&'a Key, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            ChildIter::Slice(it) => it.next().map(|(k, v)| (k, v)),
            ChildIter::Map(it) => it.next(),
            ChildIter::Range(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            ChildIter::Slice(it) => it.size_hint(),
            ChildIter::Map(it) => it.size_hint(),
            ChildIter::Range(it) => it.size_hint(),
        }
    }
}

impl<V> DoubleEndedIterator for ChildIter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            ChildIter::Slice(it) => it.next_back().map(|(k, v)| (k, v)),
            ChildIter::Map(it) => it.next_back(),
            ChildIter::Range(it) => it.next_back(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leaf::Leaf;
    use crate::node::Node;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn key(s: &str) -> Key {
        Key::new(s).expect("valid test key")
    }

    fn leaf(n: u32) -> Node {
        Node::leaf(Leaf::Number(f64::from(n)))
    }

    fn contents(map: &ChildMap<Node>) -> Vec<(String, Node)> {
        map.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn grows_into_a_tree_and_shrinks_back() {
        let mut map = ChildMap::single(key("0"), leaf(0));
        for i in 1..=SMALL_MAX as u32 {
            map = map.insert(&key(&i.to_string()), leaf(i));
        }
        assert!(matches!(map, ChildMap::Large(_)));
        assert_eq!(map.len(), SMALL_MAX + 1);
        let mut i = SMALL_MAX as u32;
        while map.len() > DEMOTE_AT {
            assert!(matches!(map, ChildMap::Large(_)));
            map = map.remove(&key(&i.to_string()));
            i -= 1;
        }
        assert!(matches!(map, ChildMap::Small(_)));
        let keys: Vec<String> = contents(&map).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["0", "1", "2", "3", "4", "5", "6", "7"]);
    }

    #[test]
    fn from_entries_sorts_and_keeps_the_last_duplicate() {
        let map = ChildMap::from_entries(vec![
            (key("b"), leaf(1)),
            (key("a"), leaf(2)),
            (key("b"), leaf(3)),
        ]);
        assert_eq!(
            contents(&map),
            [("a".to_string(), leaf(2)), ("b".to_string(), leaf(3))]
        );
    }

    #[test]
    fn equality_across_shapes() {
        let entries: Vec<(Key, Node)> =
            (0..10u32).map(|i| (key(&i.to_string()), leaf(i))).collect();
        let small = ChildMap::Small(entries.clone().into());
        let large = ChildMap::Large(entries.into_iter().collect());
        assert!(small == large);
        assert!(small != large.remove(&key("3")));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, u32),
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..40, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (0u8..40).prop_map(Op::Remove),
        ]
    }

    fn bound(kind: u8, k: &Key) -> Bound<&Key> {
        match kind % 3 {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        }
    }

    proptest! {
        #[test]
        fn behaves_like_a_btree_map(
            ops in proptest::collection::vec(op(), 0..120),
            lo in 0u8..40, hi in 0u8..40, lo_kind in 0u8..3, hi_kind in 0u8..3,
        ) {
            let mut map = ChildMap::Small(Arc::new([]));
            let mut model: BTreeMap<Key, Node> = BTreeMap::new();
            for op in ops {
                let before = contents(&map);
                let snapshot = map.clone();
                match op {
                    Op::Insert(k, v) => {
                        let k = key(&k.to_string());
                        map = map.insert(&k, leaf(v));
                        model.insert(k, leaf(v));
                    }
                    Op::Remove(k) => {
                        let k = key(&k.to_string());
                        map = map.remove(&k);
                        model.remove(&k);
                    }
                }
                prop_assert_eq!(contents(&snapshot), before);
                prop_assert_eq!(map.len(), model.len());
                let expected: Vec<(String, Node)> =
                    model.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
                prop_assert_eq!(contents(&map), expected);
                let reversed: Vec<&Key> = map.iter().rev().map(|(k, _)| k).collect();
                prop_assert!(reversed.iter().copied().eq(model.keys().rev()));
                prop_assert_eq!(map.iter().next().map(|(k, _)| k), model.keys().next());
                prop_assert_eq!(map.iter().next_back().map(|(k, _)| k), model.keys().next_back());
                for probe in 0u8..40 {
                    let k = key(&probe.to_string());
                    prop_assert_eq!(map.get(&k), model.get(&k));
                }
            }
            let (lo, hi) = (key(&lo.to_string()), key(&hi.to_string()));
            let (from, to) = (bound(lo_kind, &lo), bound(hi_kind, &hi));
            let got: Vec<&Key> = map.range(from, to).map(|(k, _)| k).collect();
            if is_inverted(from, to) {
                prop_assert!(got.is_empty());
            } else {
                let want: Vec<&Key> = model.range::<Key, _>((from, to)).map(|(k, _)| k).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
