//! The live ordered indexes of a database (`.indexOn`), each the children of one concrete
//! location ordered by one value or child index.
//!
//! An index is built when the first filtered view that can use it is created (its location
//! and index named by `.indexOn` in the rules, wildcards included), shared by every view of
//! that location and index, kept current by every write that reaches one of those views, and
//! dropped with the last of them. *Why on demand:* a wildcard declaration such as
//! `/rooms/$room/messages` names every room, most of which nobody queries at a given time;
//! indexing only what is listened to keeps the memory proportional to the live queries, and
//! a view without an index still computes its window by a scan, as before.

use std::collections::HashMap;

use hearth_query::{Index, OrderedIndex};
use hearth_tree::{Key, Node, Path};

pub(crate) type IndexId = usize;

struct Slot {
    path: Path,
    index: OrderedIndex,
    /// The views that use it; it is dropped when none is left.
    users: usize,
}

#[derive(Default)]
pub(crate) struct Indexes {
    slots: Vec<Option<Slot>>,
    free: Vec<IndexId>,
    by_key: HashMap<(Path, Index), IndexId>,
}

impl Indexes {
    /// One more user of the index of `path`'s children under `index`, built from `root` if
    /// it does not exist yet; `None` for the key and priority indexes, which need none.
    pub fn acquire(&mut self, path: &Path, index: &Index, root: &Node) -> Option<IndexId> {
        if let Some(&id) = self.by_key.get(&(path.clone(), index.clone())) {
            if let Some(slot) = self.slots.get_mut(id).and_then(Option::as_mut) {
                slot.users += 1;
                return Some(id);
            }
        }
        let ordered = OrderedIndex::build(index, &root.get(path))?;
        let slot = Slot {
            path: path.clone(),
            index: ordered,
            users: 1,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id] = Some(slot);
                id
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        self.by_key.insert((path.clone(), index.clone()), id);
        Some(id)
    }

    /// One user fewer; the index is dropped with its last user.
    pub fn release(&mut self, id: IndexId) {
        let Some(slot) = self.slots.get_mut(id).and_then(Option::as_mut) else {
            return;
        };
        slot.users -= 1;
        if slot.users > 0 {
            return;
        }
        if let Some(slot) = self.slots[id].take() {
            self.by_key.remove(&(slot.path, slot.index.index().clone()));
            self.free.push(id);
        }
    }

    pub fn get(&self, id: IndexId) -> Option<&OrderedIndex> {
        self.slots
            .get(id)
            .and_then(Option::as_ref)
            .map(|slot| &slot.index)
    }

    /// The live index of `path`'s children under `index`, if there is one.
    pub fn find(&self, path: &Path, index: &Index) -> Option<&OrderedIndex> {
        let id = *self.by_key.get(&(path.clone(), index.clone()))?;
        self.get(id)
    }

    /// The number of live indexes.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Brings index `id` from `old_root` to `new_root`, the write's `targets` being the only
    /// paths that changed: the children below a target are moved one by one, and a target at
    /// or above the location makes it walk the location's old and new children side by side.
    pub fn update(&mut self, id: IndexId, targets: &[Path], old_root: &Node, new_root: &Node) {
        let Some(slot) = self.slots.get_mut(id).and_then(Option::as_mut) else {
            return;
        };
        let depth = slot.path.len();
        let old = old_root.get(&slot.path);
        let new = new_root.get(&slot.path);
        if targets.iter().any(|target| slot.path.starts_with(target)) {
            slot.index.replace(&old, &new);
            return;
        }
        let mut keys: Vec<&Key> = targets
            .iter()
            .filter(|target| target.starts_with(&slot.path))
            .filter_map(|target| target.keys().get(depth))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            slot.index
                .update_child(key, &old.child(key), &new.child(key));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(text: &str) -> Path {
        Path::parse(text).expect("valid test path")
    }

    fn score() -> Index {
        Index::Child(path("score"))
    }

    #[test]
    fn shared_by_its_users_and_dropped_with_the_last() {
        let root = Node::from_json(&json!({"s": {"a": {"score": 1}}})).expect("data");
        let mut indexes = Indexes::default();
        let a = indexes
            .acquire(&path("/s"), &score(), &root)
            .expect("built");
        let b = indexes
            .acquire(&path("/s"), &score(), &root)
            .expect("shared");
        assert_eq!(a, b);
        assert!(indexes.acquire(&path("/s"), &Index::Key, &root).is_none());
        indexes.release(a);
        assert_eq!(indexes.len(), 1);
        indexes.release(b);
        assert_eq!(indexes.len(), 0);
        assert!(indexes.find(&path("/s"), &score()).is_none());
    }

    #[test]
    fn follows_writes_below_at_and_above_the_location() {
        let data = |value| Node::from_json(&value).expect("data");
        let mut root = data(json!({"s": {"a": {"score": 1}, "b": {"score": 2}}}));
        let mut indexes = Indexes::default();
        let id = indexes
            .acquire(&path("/s"), &score(), &root)
            .expect("built");
        let top = hearth_query::QueryParams::from_wire(&json!({"i": "score", "l": 1, "vf": "r"}))
            .expect("query");
        let window = |indexes: &Indexes, root: &Node| {
            indexes
                .get(id)
                .and_then(|index| index.window(&top, &root.get(&path("/s"))))
                .map(|node| node.to_json(false))
        };
        for (target, value, expected) in [
            ("/s/a/score", json!(5), json!({"a": {"score": 5}})),
            ("/s/c", json!({"score": 9}), json!({"c": {"score": 9}})),
            ("/s", json!({"d": {"score": 0}}), json!({"d": {"score": 0}})),
            (
                "/",
                json!({"s": {"e": {"score": 3}}}),
                json!({"e": {"score": 3}}),
            ),
            (
                "/s/e/other",
                json!(1),
                json!({"e": {"score": 3, "other": 1}}),
            ),
        ] {
            let new_root = root.set(&path(target), data(value));
            indexes.update(id, &[path(target)], &root, &new_root);
            root = new_root;
            assert_eq!(window(&indexes, &root), Some(expected), "{target}");
        }
        assert_eq!(indexes.get(id).map(OrderedIndex::len), Some(1));
    }
}
