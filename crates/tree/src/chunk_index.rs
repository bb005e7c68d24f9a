//! The parts of a collection in chunks (see `chunked`), by the key of each part's first child.
//!
//! Most collections have few parts, indexed by a sorted slice: an `imbl` map allocates a full
//! node of 64 entries (about 2 KiB) even for one part, more than a small collection's own
//! bytes, while copying a slice of 32 entries on a write costs what updating the map does.
//! Larger ones use the map, with O(log n) copy-on-write updates.

use std::ops::Bound;
use std::sync::Arc;

use imbl::OrdMap;

use crate::key::Key;
use crate::packed;

/// Most parts indexed by a sorted slice.
const SMALL_INDEX_MAX: usize = 32;

/// The parts by first key, in key order. Generic over the part (`chunked::P`) so that the
/// index knows nothing of what it holds.
#[derive(Clone)]
pub(crate) enum Index<P> {
    Small(Arc<[(Key, P)]>),
    Large(OrdMap<Key, P>),
}

pub(crate) type IndexIter<'a, P> = Box<dyn DoubleEndedIterator<Item = (&'a Key, &'a P)> + 'a>;

impl<P: Clone> Index<P> {
    pub(crate) fn from_vec(parts: Vec<(Key, P)>) -> Index<P> {
        if parts.len() <= SMALL_INDEX_MAX {
            Index::Small(parts.into())
        } else {
            Index::Large(parts.into_iter().collect())
        }
    }

    /// The last part starting at or before `key`.
    pub(crate) fn at_or_before(&self, key: &Key) -> Option<(&Key, &P)> {
        // Under every read of a child: no boxed iterator, no clone of the key.
        match self {
            Index::Small(parts) => {
                let after = parts.partition_point(|(first, _)| first <= key);
                let at = after.checked_sub(1)?;
                parts.get(at).map(|(first, part)| (first, part))
            }
            Index::Large(parts) => parts
                .range::<_, Key>((Bound::Unbounded, Bound::Included(key)))
                .next_back(),
        }
    }

    /// The last part starting before `key`.
    pub(crate) fn before(&self, key: &Key) -> Option<(&Key, &P)> {
        self.range(Bound::Unbounded, Bound::Excluded(key.clone()))
            .next_back()
    }

    /// The first part starting after `key`.
    pub(crate) fn after(&self, key: &Key) -> Option<(&Key, &P)> {
        self.range(Bound::Excluded(key.clone()), Bound::Unbounded)
            .next()
    }

    pub(crate) fn iter(&self) -> IndexIter<'_, P> {
        match self {
            Index::Small(parts) => Box::new(parts.iter().map(|(key, part)| (key, part))),
            Index::Large(parts) => Box::new(parts.iter()),
        }
    }

    /// The parts whose first keys lie between the bounds (not inverted).
    pub(crate) fn range(&self, from: Bound<Key>, to: Bound<Key>) -> IndexIter<'_, P> {
        match self {
            Index::Small(parts) => {
                // The slice is sorted: the bounds are two binary searches.
                let start =
                    parts.partition_point(|(first, _)| !packed::after(first, from.as_ref()));
                let end = parts.partition_point(|(first, _)| packed::before(first, to.as_ref()));
                let slice = parts.get(start..end.max(start)).unwrap_or_default();
                Box::new(slice.iter().map(|(key, part)| (key, part)))
            }
            Index::Large(parts) => Box::new(parts.range::<_, Key>((from, to))),
        }
    }

    /// A copy with the consecutive parts starting at `old` replaced by `new`, whose keys all
    /// lie between the neighbours of the old ones (or, when `old` is empty, between two
    /// neighbouring parts), in key order.
    pub(crate) fn splice<'a>(
        &self,
        old: impl Iterator<Item = &'a Key> + Clone,
        new: Vec<(Key, P)>,
    ) -> Index<P> {
        match self {
            Index::Small(parts) => {
                let mut next: Vec<(Key, P)> = Vec::with_capacity(parts.len() + new.len());
                next.extend(
                    parts
                        .iter()
                        .filter(|(first, _)| !old.clone().any(|key| key == first))
                        .cloned(),
                );
                if let Some((first, _)) = new.first() {
                    let at = next.partition_point(|(key, _)| key < first);
                    next.splice(at..at, new);
                }
                Index::from_vec(next)
            }
            Index::Large(parts) => {
                let mut next = parts.clone();
                for first in old {
                    next.remove(first);
                }
                for (first, part) in new {
                    next.insert(first, part);
                }
                if next.len() <= SMALL_INDEX_MAX / 2 {
                    Index::Small(next.into_iter().collect())
                } else {
                    Index::Large(next)
                }
            }
        }
    }

    /// A copy with the part starting at `first` (there is one) replaced by `part`.
    pub(crate) fn replace(&self, first: &Key, part: P) -> Index<P> {
        match self {
            // One allocation: the slice is collected from an iterator of known length.
            Index::Small(parts) => Index::Small(
                parts
                    .iter()
                    .map(|(key, old)| {
                        (
                            key.clone(),
                            if key == first {
                                part.clone()
                            } else {
                                old.clone()
                            },
                        )
                    })
                    .collect(),
            ),
            Index::Large(parts) => Index::Large(parts.update(first.clone(), part)),
        }
    }

    pub(crate) fn ptr_eq(&self, other: &Index<P>) -> bool {
        match (self, other) {
            (Index::Small(a), Index::Small(b)) => Arc::ptr_eq(a, b),
            (Index::Large(a), Index::Large(b)) => a.ptr_eq(b),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunked::Part;
    use crate::node::Repr;
    use crate::packed::PACK_MAX_BYTES;
    use crate::testing::{key, node};
    use proptest::prelude::*;
    use serde_json::json;

    /// A part to index: a large child (its kind does not matter to the index).
    fn part() -> Part {
        match node(json!({"t": "x".repeat(PACK_MAX_BYTES + 1)})).0 {
            Repr::Chunked(child) => Part::Large(child),
            _ => panic!("an object over the bound of leaves is chunked"),
        }
    }

    fn keys(index: &Index<Part>) -> Vec<String> {
        index.iter().map(|(first, _)| first.to_string()).collect()
    }

    proptest! {
        /// Splicing keeps the parts in key order, in either shape, and finds neighbours.
        #[test]
        fn splice_keeps_key_order(
            n in 0usize..80, from in 0usize..80, width in 0usize..4, added in 0usize..4,
        ) {
            let part = part();
            let name = |k: usize| key(&k.to_string());
            // Odd keys, so that even ones fall between neighbours.
            let index = Index::from_vec((0..n).map(|i| (name(2 * i + 1), part.clone())).collect());
            let from = from.min(n);
            let to = (from + width).min(n);
            let old: Vec<Key> = (from..to).map(|i| name(2 * i + 1)).collect();
            // Between the part before the window, 2 * from - 1, and the one after, 2 * to + 1.
            let new: Vec<usize> = (0..added)
                .map(|i| 2 * from + 2 * i)
                .filter(|k| to == n || *k <= 2 * to)
                .collect();
            let mut model: Vec<usize> = (0..n)
                .map(|i| 2 * i + 1)
                .filter(|k| *k < 2 * from || *k > 2 * to)
                .chain(new.iter().copied())
                .collect();
            model.sort_unstable();
            let spliced = index.splice(old.iter(), new.iter().map(|k| (name(*k), part.clone())).collect());
            let want: Vec<String> = model.iter().map(ToString::to_string).collect();
            prop_assert_eq!(keys(&spliced), want);
            prop_assert_eq!(keys(&index).len(), n);
            let last = |keys: &mut dyn DoubleEndedIterator<Item = &usize>| keys.next_back().map(ToString::to_string);
            for probe in 0..2 * n + 3 {
                let at = |found: Option<(&Key, &Part)>| found.map(|(k, _)| k.to_string());
                prop_assert_eq!(at(spliced.at_or_before(&name(probe))), last(&mut model.iter().filter(|k| **k <= probe)));
                prop_assert_eq!(at(spliced.before(&name(probe))), last(&mut model.iter().filter(|k| **k < probe)));
                prop_assert_eq!(at(spliced.after(&name(probe))), model.iter().find(|k| **k > probe).map(ToString::to_string));
            }
        }
    }
}
