//! The index of each node this process links to. An owner keys a remote connection's session
//! by its edge node's index ([`crate::nodes::remote_conn`], 15 bits) and every shard has one
//! edge slot per index, so an index must name one node for as long as sessions may carry it.
//! A static placement numbers its nodes once, by id; with etcd a node gets the next index
//! the first time it is seen and keeps it for the life of the process, whether it leaves and
//! comes back or not: an index is never given to another node, so a late message of a node
//! that left can never reach a session of another. At most [`MAX_NODES`] ids are ever
//! numbered; past that a node gets no index (no link, its databases are served here under
//! fencing), which the caller logs.

use std::sync::{Arc, PoisonError, RwLock};

use rustc_hash::FxHashMap;

use crate::placement::MAX_NODES;

/// Node ids and their indexes, shared by the shards (which route) and the link thread.
#[derive(Debug)]
pub struct Directory {
    /// This node's own index: its slot is never linked.
    me: usize,
    /// Whether unknown ids get an index (etcd) or not (a static list).
    grows: bool,
    ids: RwLock<Ids>,
}

#[derive(Debug, Default)]
struct Ids {
    by_index: Vec<Arc<str>>,
    by_id: FxHashMap<Arc<str>, usize>,
}

impl Ids {
    fn add(&mut self, id: &str) -> usize {
        let id: Arc<str> = Arc::from(id);
        self.by_index.push(id.clone());
        self.by_id.insert(id, self.by_index.len() - 1);
        self.by_index.len() - 1
    }
}

impl Directory {
    /// The nodes of a static placement, `ids` in its order; `me` is this node's index.
    pub fn fixed(ids: &[&str], me: usize) -> Directory {
        let mut table = Ids::default();
        for id in ids {
            table.add(id);
        }
        Directory {
            me,
            grows: false,
            ids: RwLock::new(table),
        }
    }

    /// A directory that numbers nodes as they are seen, this node (`me`) first.
    pub fn growing(me: &str) -> Directory {
        let mut table = Ids::default();
        table.add(me);
        Directory {
            me: 0,
            grows: true,
            ids: RwLock::new(table),
        }
    }

    /// The most indexes this directory may hand out: the edge slots every shard needs.
    pub fn capacity(&self) -> usize {
        if self.grows {
            MAX_NODES
        } else {
            self.len()
        }
    }

    /// How many nodes have an index.
    pub fn len(&self) -> usize {
        self.read(|ids| ids.by_index.len())
    }

    /// Never: this node has the first index.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn me(&self) -> usize {
        self.me
    }

    /// The index of node `id`, given now if it has none and the directory grows; `None` for
    /// an unknown id of a static list, or when [`MAX_NODES`] ids have been numbered.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        if let Some(index) = self.read(|ids| ids.by_id.get(id).copied()) {
            return Some(index);
        }
        if !self.grows {
            return None;
        }
        let mut ids = self.ids.write().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have numbered it between the two locks.
        if let Some(index) = ids.by_id.get(id) {
            return Some(*index);
        }
        (ids.by_index.len() < MAX_NODES).then(|| ids.add(id))
    }

    /// The id of the node at `index`.
    pub fn id(&self, index: usize) -> Option<Arc<str>> {
        self.read(|ids| ids.by_index.get(index).cloned())
    }

    fn read<T>(&self, f: impl FnOnce(&Ids) -> T) -> T {
        f(&self.ids.read().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_is_given_once_and_kept() {
        let directory = Directory::growing("a");
        assert_eq!(directory.index_of("a"), Some(0));
        assert_eq!(directory.index_of("c"), Some(1));
        assert_eq!(directory.index_of("b"), Some(2));
        assert_eq!(directory.index_of("c"), Some(1), "kept");
        assert_eq!(directory.id(2).as_deref(), Some("b"));
        assert_eq!(directory.capacity(), MAX_NODES);
    }

    #[test]
    fn no_more_than_the_limit_of_ids_is_numbered() {
        let directory = Directory::growing("me");
        for n in 1..MAX_NODES {
            assert_eq!(directory.index_of(&format!("n{n}")), Some(n));
        }
        assert_eq!(directory.index_of("one-too-many"), None);
        assert_eq!(directory.index_of("n1"), Some(1), "known ids keep theirs");
        assert_eq!(directory.len(), MAX_NODES);
    }

    #[test]
    fn a_static_list_numbers_only_its_nodes() {
        let directory = Directory::fixed(&["a", "b", "c"], 1);
        assert_eq!(directory.index_of("c"), Some(2));
        assert_eq!(directory.index_of("z"), None);
        assert_eq!(directory.capacity(), 3);
        assert_eq!(directory.me(), 1);
    }
}
