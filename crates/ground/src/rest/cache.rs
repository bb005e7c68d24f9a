//! The serialized answers of hot REST reads, kept per shard so that a large read costs a
//! lookup and a reference-counted copy of its bytes instead of a walk and a serialization.
//!
//! An entry is keyed by the location and the form of the answer (namespace, path, query,
//! `format=export`, `print=pretty`, `shallow`), never by the caller: the rules are checked per
//! request before the cache is consulted, so an entry holds nothing a caller could read
//! without passing them. An entry also keeps the node its answer was made from, and is served
//! only while that very node is still at its location. The tree is copy-on-write: a write at,
//! below or above a location replaces the node there (and a write beside it does not), so
//! identity is exactly "nothing this answer shows has changed", whichever path changed the
//! tree (a logged write, a volatile one, a rollback after a disk failure, a reload after an
//! eviction). A stale entry is dropped when it is next looked up, or by the clock when room is
//! needed.
//!
//! The entries share a byte budget per shard (`--rest-cache-mib`), reclaimed with the clock
//! algorithm: a lookup marks its entry, and the hand sweeps past marked entries (clearing the
//! mark) to evict the first unmarked one.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};

use bytes::Bytes;
use hearth_query::QueryParams;
use hearth_tree::{Node, Path};
use rustc_hash::{FxHashMap, FxHasher};

/// The default budget of one shard's cache (`--rest-cache-mib`).
pub const DEFAULT_REST_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Answers shorter than this are serialized on every request: that costs about as much as a
/// lookup, and such answers would crowd out the ones that are worth keeping.
pub const MIN_CACHED_ANSWER_BYTES: usize = 1024;

/// An answer larger than the budget divided by this is not kept, so that one huge read cannot
/// push every other entry out.
pub const MAX_ENTRY_SHARE: usize = 4;

/// What an entry costs beyond its bytes: the key, the slot and the index entry.
const ENTRY_OVERHEAD_BYTES: usize = 256;

/// The form of an answer: everything besides the data that decides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Form {
    /// `format=export`.
    pub export: bool,
    /// `print=pretty`.
    pub pretty: bool,
    /// `shallow=true`.
    pub shallow: bool,
}

/// Which answer: the location and how it is read.
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    pub namespace: &'a str,
    pub path: &'a Path,
    /// The query, if the read has one (`orderBy` and its filters).
    pub query: Option<&'a QueryParams>,
    pub form: Form,
}

impl Lookup<'_> {
    fn hash(&self) -> u64 {
        let mut hasher = FxHasher::default();
        self.namespace.hash(&mut hasher);
        self.path.hash(&mut hasher);
        self.query.hash(&mut hasher);
        self.form.hash(&mut hasher);
        hasher.finish()
    }

    fn owned(&self) -> Key {
        Key {
            namespace: self.namespace.into(),
            path: self.path.clone(),
            query: self.query.cloned(),
            form: self.form,
        }
    }
}

#[derive(Debug)]
struct Key {
    namespace: Box<str>,
    path: Path,
    query: Option<QueryParams>,
    form: Form,
}

impl Key {
    fn matches(&self, lookup: &Lookup<'_>) -> bool {
        &*self.namespace == lookup.namespace
            && self.path == *lookup.path
            && self.query.as_ref() == lookup.query
            && self.form == lookup.form
    }
}

/// A cached answer.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The answer's bytes, shared with the cache.
    pub body: Bytes,
    /// What the answer shows: the location's node, or the query's result (for its ETag).
    pub result: Node,
}

struct Slot {
    key: Key,
    hash: u64,
    /// The node at the location when the answer was made.
    node: Node,
    hit: Hit,
    cost: usize,
    /// Looked up since the hand last passed.
    marked: bool,
}

/// What the cache holds and did, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub entries: usize,
    pub bytes: usize,
}

/// One shard's cache of serialized REST answers.
pub struct RestCache {
    budget: usize,
    inner: RefCell<Inner>,
}

#[derive(Default)]
struct Inner {
    index: FxHashMap<u64, usize>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    hand: usize,
    used: usize,
}

impl RestCache {
    /// A cache of at most `budget` bytes; 0 keeps nothing.
    pub fn new(budget: usize) -> RestCache {
        RestCache {
            budget,
            inner: RefCell::new(Inner::default()),
        }
    }

    /// Whether the cache keeps anything at all.
    pub fn is_enabled(&self) -> bool {
        self.budget > 0
    }

    /// Whether an answer of `bytes` would be kept.
    pub fn would_keep(&self, bytes: usize) -> bool {
        bytes >= MIN_CACHED_ANSWER_BYTES
            && bytes.saturating_add(ENTRY_OVERHEAD_BYTES) <= self.budget / MAX_ENTRY_SHARE
    }

    /// The answer for `lookup` if one is kept and `node` (the node now at the location) is
    /// the one it was made from. A stale entry is dropped.
    pub fn get(&self, lookup: &Lookup<'_>, node: &Node) -> Option<Hit> {
        if self.budget == 0 {
            return None;
        }
        let hash = lookup.hash();
        let mut inner = self.inner.borrow_mut();
        let index = *inner.index.get(&hash)?;
        let slot = inner.slots.get_mut(index)?.as_mut()?;
        if !slot.key.matches(lookup) {
            return None;
        }
        if slot.node.same_stored(node) {
            slot.marked = true;
            return Some(slot.hit.clone());
        }
        inner.remove(index);
        None
    }

    /// Keeps the answer for `lookup`, made from `node`, if it is worth keeping.
    pub fn put(&self, lookup: &Lookup<'_>, node: Node, hit: Hit) {
        if !self.would_keep(hit.body.len()) {
            return;
        }
        let cost = hit.body.len() + ENTRY_OVERHEAD_BYTES;
        let hash = lookup.hash();
        let mut inner = self.inner.borrow_mut();
        if let Some(&index) = inner.index.get(&hash) {
            inner.remove(index);
        }
        while inner.used + cost > self.budget {
            if !inner.evict_one() {
                return;
            }
        }
        let slot = Slot {
            key: lookup.owned(),
            hash,
            node,
            hit,
            cost,
            marked: false,
        };
        let index = match inner.free.pop() {
            Some(index) => {
                inner.slots[index] = Some(slot);
                index
            }
            None => {
                inner.slots.push(Some(slot));
                inner.slots.len() - 1
            }
        };
        inner.index.insert(hash, index);
        inner.used += cost;
    }

    /// Drops every entry of a database (it left memory, or was replaced).
    pub fn forget(&self, namespace: &str) {
        let mut inner = self.inner.borrow_mut();
        let doomed: Vec<usize> = inner
            .slots
            .iter()
            .enumerate()
            .filter_map(|(index, slot)| {
                slot.as_ref()
                    .is_some_and(|slot| &*slot.key.namespace == namespace)
                    .then_some(index)
            })
            .collect();
        for index in doomed {
            inner.remove(index);
        }
    }

    pub fn stats(&self) -> CacheStats {
        let inner = self.inner.borrow();
        CacheStats {
            entries: inner.index.len(),
            bytes: inner.used,
        }
    }
}

impl Inner {
    fn remove(&mut self, index: usize) {
        if let Some(slot) = self.slots.get_mut(index).and_then(Option::take) {
            self.index.remove(&slot.hash);
            self.used -= slot.cost;
            self.free.push(index);
        }
    }

    /// Evicts the first unmarked entry after the hand, clearing the marks it passes; false
    /// when the cache is empty.
    fn evict_one(&mut self) -> bool {
        if self.index.is_empty() {
            return false;
        }
        // Two turns always suffice: the first clears every mark it passes.
        for _ in 0..2 * self.slots.len() {
            let index = self.hand % self.slots.len();
            self.hand = index + 1;
            match &mut self.slots[index] {
                Some(slot) if slot.marked => slot.marked = false,
                Some(_) => {
                    self.remove(index);
                    return true;
                }
                None => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_tree::Node;
    use serde_json::json;

    const PLAIN: Form = Form {
        export: false,
        pretty: false,
        shallow: false,
    };

    fn path(text: &str) -> Path {
        Path::parse(text).expect("a valid path")
    }

    fn node(size: usize) -> Node {
        Node::from_json(&json!({ "text": "x".repeat(size) })).expect("a valid value")
    }

    fn hit(node: &Node, size: usize) -> Hit {
        Hit {
            body: Bytes::from(vec![b'x'; size]),
            result: node.clone(),
        }
    }

    fn lookup<'a>(path: &'a Path) -> Lookup<'a> {
        Lookup {
            namespace: "db",
            path,
            query: None,
            form: PLAIN,
        }
    }

    #[test]
    fn an_entry_is_served_only_for_its_own_node_and_form() {
        let cache = RestCache::new(1 << 20);
        let at = path("/a");
        let data = node(2000);
        cache.put(&lookup(&at), data.clone(), hit(&data, 2000));
        assert!(cache.get(&lookup(&at), &data).is_some());
        let pretty = Lookup {
            form: Form {
                pretty: true,
                ..PLAIN
            },
            ..lookup(&at)
        };
        assert!(cache.get(&pretty, &data).is_none());
        let other_db = Lookup {
            namespace: "other",
            ..lookup(&at)
        };
        assert!(cache.get(&other_db, &data).is_none());
        // A packed node with the same bytes (how a node inside a packed parent is read back)
        // is the same stored data: a hit.
        assert!(cache.get(&lookup(&at), &node(2000)).is_some());
        // The same content in another node of a form without bytes to compare (too large to
        // pack: a write of equal data) is a miss, and drops the entry.
        let large = node(5000);
        cache.put(&lookup(&at), large.clone(), hit(&large, 5000));
        assert!(cache.get(&lookup(&at), &large).is_some());
        assert!(cache.get(&lookup(&at), &node(5000)).is_none());
        assert_eq!(cache.stats(), CacheStats::default());
    }

    #[test]
    fn small_and_huge_answers_are_not_kept() {
        let cache = RestCache::new(64 * 1024);
        let at = path("/a");
        let data = node(10);
        cache.put(&lookup(&at), data.clone(), hit(&data, 100));
        cache.put(&lookup(&at), data.clone(), hit(&data, 20_000));
        assert_eq!(cache.stats().entries, 0);
        let disabled = RestCache::new(0);
        disabled.put(&lookup(&at), data.clone(), hit(&data, 2000));
        assert!(disabled.get(&lookup(&at), &data).is_none());
    }

    #[test]
    fn the_clock_keeps_the_budget_and_spares_what_was_read() {
        let entry = 4000;
        let budget = 4 * (entry + ENTRY_OVERHEAD_BYTES);
        let cache = RestCache::new(budget);
        let paths: Vec<Path> = (0..6).map(|i| path(&format!("/p{i}"))).collect();
        let nodes: Vec<Node> = (0..6).map(|_| node(10)).collect();
        for i in 0..4 {
            cache.put(&lookup(&paths[i]), nodes[i].clone(), hit(&nodes[i], entry));
        }
        assert_eq!(cache.stats().entries, 4);
        // /p0 is read, so the hand passes it and evicts /p1 for /p4.
        assert!(cache.get(&lookup(&paths[0]), &nodes[0]).is_some());
        cache.put(&lookup(&paths[4]), nodes[4].clone(), hit(&nodes[4], entry));
        assert_eq!(cache.stats().entries, 4);
        assert!(cache.stats().bytes <= budget);
        assert!(cache.get(&lookup(&paths[1]), &nodes[1]).is_none());
        assert!(cache.get(&lookup(&paths[0]), &nodes[0]).is_some());
        assert!(cache.get(&lookup(&paths[4]), &nodes[4]).is_some());
        cache.forget("db");
        assert_eq!(cache.stats(), CacheStats::default());
        cache.put(&lookup(&paths[5]), nodes[5].clone(), hit(&nodes[5], entry));
        assert!(cache.get(&lookup(&paths[5]), &nodes[5]).is_some());
    }
}
