//! The registry of views. A view is one (path, query) that at least one connection listens
//! to; identical listens of many connections share it, so its result is computed and
//! serialized once per change. A trie over paths finds the views a write touches without
//! looking at the others.

use std::collections::HashMap;

use hearth_query::{Index, OrderedIndex, QueryParams};
use hearth_tree::{Key, Node, Path};

use crate::effect::Target;
use crate::indexes::{IndexId, Indexes};

pub(crate) type ViewId = usize;

pub(crate) struct View {
    pub path: Path,
    pub query: QueryParams,
    pub subscribers: Vec<Target>,
    /// Where each subscriber sits in `subscribers`, so that removing one is O(1) even when
    /// thousands of connections leave a popular view at once.
    positions: HashMap<Target, usize>,
    /// The result last sent, for filtered views (their pushes are diffs against it).
    pub window: Node,
    /// The ordered index its window is read from, when `.indexOn` declares one.
    pub index: Option<IndexId>,
}

impl View {
    fn add(&mut self, target: Target) {
        if self.positions.contains_key(&target) {
            return;
        }
        self.positions.insert(target, self.subscribers.len());
        self.subscribers.push(target);
    }

    fn remove(&mut self, target: Target) {
        let Some(index) = self.positions.remove(&target) else {
            return;
        };
        self.subscribers.swap_remove(index);
        if let Some(moved) = self.subscribers.get(index) {
            self.positions.insert(*moved, index);
        }
    }
}

#[derive(Default)]
struct TrieNode {
    views: Vec<ViewId>,
    children: HashMap<Key, TrieNode>,
}

#[derive(Default)]
pub(crate) struct Views {
    slots: Vec<Option<View>>,
    free: Vec<ViewId>,
    by_key: HashMap<(Path, QueryParams), ViewId>,
    trie: TrieNode,
    indexes: Indexes,
}

impl Views {
    /// Adds `target` to the view of (`path`, `query`), creating the view if needed.
    /// `root` is the current tree, used to compute a new filtered view's first result;
    /// `indexed` says whether `.indexOn` declares the query's index at `path`, in which case
    /// a new filtered view reads its windows from an ordered index.
    pub fn subscribe(
        &mut self,
        path: &Path,
        query: &QueryParams,
        target: Target,
        root: &Node,
        indexed: bool,
    ) -> ViewId {
        let query = normalize(query);
        if let Some(&id) = self.by_key.get(&(path.clone(), query.clone())) {
            if let Some(view) = self.slots[id].as_mut() {
                view.add(target);
                return id;
            }
        }
        let index = (indexed && query.is_filtered())
            .then(|| self.indexes.acquire(path, &query.index, root))
            .flatten();
        let window = if query.is_filtered() {
            window_of(&self.indexes, index, &query, &root.get(path))
        } else {
            Node::empty()
        };
        let view = View {
            path: path.clone(),
            query: query.clone(),
            subscribers: vec![target],
            positions: HashMap::from([(target, 0)]),
            window,
            index,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id] = Some(view);
                id
            }
            None => {
                self.slots.push(Some(view));
                self.slots.len() - 1
            }
        };
        self.by_key.insert((path.clone(), query), id);
        self.trie_node_mut(path).views.push(id);
        id
    }

    /// Removes `target` from a view, and the view itself when nobody listens any more.
    pub fn unsubscribe(&mut self, id: ViewId, target: Target) {
        let Some(view) = self.slots.get_mut(id).and_then(Option::as_mut) else {
            return;
        };
        view.remove(target);
        if !view.subscribers.is_empty() {
            return;
        }
        let Some(view) = self.slots[id].take() else {
            return;
        };
        self.by_key.remove(&(view.path.clone(), view.query));
        self.remove_from_trie(&view.path, id);
        self.free.push(id);
        if let Some(index) = view.index {
            self.indexes.release(index);
        }
    }

    /// Gives each filtered view the index that `indexed` (the rules, after a change) now
    /// declares for it, and takes away those it no longer declares: indexes are built or
    /// dropped accordingly, and views without one go back to scanning.
    pub fn reindex(&mut self, root: &Node, indexed: impl Fn(&Path, &Index) -> bool) {
        for view in self.slots.iter_mut().flatten() {
            if !view.query.is_filtered() {
                continue;
            }
            let wanted = indexed(&view.path, &view.query.index);
            match (wanted, view.index) {
                (true, None) => {
                    view.index = self.indexes.acquire(&view.path, &view.query.index, root);
                }
                (false, Some(index)) => {
                    self.indexes.release(index);
                    view.index = None;
                }
                _ => {}
            }
        }
    }

    /// Brings the indexes of the views `ids` (each index once) from `old_root` to `new_root`,
    /// which differ at `targets` only.
    pub fn update_indexes(
        &mut self,
        ids: &[ViewId],
        targets: &[Path],
        old_root: &Node,
        new_root: &Node,
    ) {
        let mut indexes: Vec<IndexId> = ids
            .iter()
            .filter_map(|&id| self.get(id).and_then(|view| view.index))
            .collect();
        if indexes.is_empty() {
            return;
        }
        indexes.sort_unstable();
        indexes.dedup();
        for index in indexes {
            self.indexes.update(index, targets, old_root, new_root);
        }
    }

    /// A view with the indexes, to recompute its window.
    pub fn get_with_indexes(&mut self, id: ViewId) -> Option<(&mut View, &Indexes)> {
        let view = self.slots.get_mut(id).and_then(Option::as_mut)?;
        Some((view, &self.indexes))
    }

    /// The live index of `path`'s children under `index`, if a view keeps one.
    pub fn find_index(&self, path: &Path, index: &Index) -> Option<&OrderedIndex> {
        self.indexes.find(path, index)
    }

    /// The number of live ordered indexes.
    pub fn index_count(&self) -> usize {
        self.indexes.len()
    }

    pub fn get(&self, id: ViewId) -> Option<&View> {
        self.slots.get(id).and_then(Option::as_ref)
    }

    /// The number of live views.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Every view at, above or below one of `paths`, each once, in a stable order.
    pub fn affected<'a>(&self, paths: impl Iterator<Item = &'a Path>) -> Vec<ViewId> {
        let mut found = Vec::new();
        for path in paths {
            let mut node = &self.trie;
            found.extend_from_slice(&node.views);
            let mut reached = true;
            for key in path.keys() {
                match node.children.get(key) {
                    Some(child) => {
                        node = child;
                        found.extend_from_slice(&node.views);
                    }
                    None => {
                        reached = false;
                        break;
                    }
                }
            }
            if reached {
                collect_below(node, &mut found);
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }

    fn trie_node_mut(&mut self, path: &Path) -> &mut TrieNode {
        let mut node = &mut self.trie;
        for key in path.keys() {
            node = node.children.entry(key.clone()).or_default();
        }
        node
    }

    fn remove_from_trie(&mut self, path: &Path, id: ViewId) {
        remove_recursive(&mut self.trie, path.keys(), id);
    }
}

/// The query result of `node` for a view: read from its index when it has one, else by a
/// scan of the children.
pub(crate) fn window_of(
    indexes: &Indexes,
    index: Option<IndexId>,
    query: &QueryParams,
    node: &Node,
) -> Node {
    index
        .and_then(|id| indexes.get(id))
        .and_then(|index| index.window(query, node))
        .unwrap_or_else(|| query.apply(node))
}

/// Views whose query only orders (no range, no limit) send the full data, exactly like a
/// default listen, so they share the default view.
fn normalize(query: &QueryParams) -> QueryParams {
    if query.is_filtered() {
        query.clone()
    } else {
        QueryParams::default()
    }
}

fn collect_below(node: &TrieNode, found: &mut Vec<ViewId>) {
    let mut stack: Vec<&TrieNode> = node.children.values().collect();
    while let Some(node) = stack.pop() {
        found.extend_from_slice(&node.views);
        stack.extend(node.children.values());
    }
}

/// Removes `id` from the trie node at `keys` and prunes nodes left empty. Returns whether the
/// node it was called on is now empty.
fn remove_recursive(node: &mut TrieNode, keys: &[Key], id: ViewId) -> bool {
    match keys.split_first() {
        None => node.views.retain(|v| *v != id),
        Some((first, rest)) => {
            let child_empty = node
                .children
                .get_mut(first)
                .is_some_and(|child| remove_recursive(child, rest, id));
            if child_empty {
                node.children.remove(first);
            }
        }
    }
    node.views.is_empty() && node.children.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Path {
        Path::parse(text).expect("valid test path")
    }

    fn target(conn: u64) -> Target {
        Target { conn, tag: None }
    }

    #[test]
    fn identical_listens_share_a_view() {
        let mut views = Views::default();
        let root = Node::empty();
        let a = views.subscribe(
            &path("/x"),
            &QueryParams::default(),
            target(1),
            &root,
            false,
        );
        let b = views.subscribe(
            &path("/x"),
            &QueryParams::default(),
            target(2),
            &root,
            false,
        );
        assert_eq!(a, b);
        assert_eq!(views.len(), 1);
        views.unsubscribe(a, target(1));
        assert_eq!(views.len(), 1);
        views.unsubscribe(a, target(2));
        assert_eq!(views.len(), 0);
        assert!(views.trie.children.is_empty());
    }

    #[test]
    fn many_subscribers_leave_in_any_order() {
        let mut views = Views::default();
        let root = Node::empty();
        let id = views.subscribe(
            &path("/x"),
            &QueryParams::default(),
            target(0),
            &root,
            false,
        );
        for conn in 1..100 {
            views.subscribe(
                &path("/x"),
                &QueryParams::default(),
                target(conn),
                &root,
                false,
            );
        }
        for conn in (0..100)
            .filter(|c| c % 3 == 0)
            .chain((0..100).filter(|c| c % 3 != 0))
        {
            let view = views.get(id).expect("live until the last one leaves");
            assert!(view.subscribers.contains(&target(conn)));
            views.unsubscribe(id, target(conn));
            if let Some(view) = views.get(id) {
                assert!(!view.subscribers.contains(&target(conn)));
                for (index, t) in view.subscribers.iter().enumerate() {
                    assert_eq!(view.positions[t], index);
                }
            }
        }
        assert_eq!(views.len(), 0);
    }

    #[test]
    fn affected_finds_ancestors_self_and_descendants_only() {
        let mut views = Views::default();
        let root = Node::empty();
        let mut id = |p: &str, c| {
            views.subscribe(&path(p), &QueryParams::default(), target(c), &root, false)
        };
        let top = id("/", 1);
        let a = id("/a", 2);
        let ab = id("/a/b", 3);
        let abc = id("/a/b/c", 4);
        let other = id("/z", 5);
        let found = views.affected([path("/a/b")].iter());
        assert_eq!(found, {
            let mut v = vec![top, a, ab, abc];
            v.sort_unstable();
            v
        });
        assert!(!found.contains(&other));
        let found = views.affected([path("/q/r")].iter());
        assert_eq!(found, vec![top]);
    }
}
