//! `RuleDataSnapshot` (spec §7): a location in the old or the new tree.
//!
//! A snapshot must be able to walk up (`parent()`), so it has to know its path, not just its
//! node. Building a path per snapshot would allocate on every `data`/`newData` use; instead a
//! snapshot names a prefix of the location being evaluated (whose nodes the evaluator already
//! holds, one per depth) plus, after `child()`, the keys below it. Literal `child('a/b')`
//! paths are split once when rules load and shared, so the common forms allocate nothing.

use std::sync::Arc;

use hearth_tree::{Key, Leaf, Node};

/// Which tree a snapshot reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tree {
    /// The data before the operation (`root`, `data`).
    Old,
    /// The data as it would be after the operation (`newData`).
    New,
}

/// The nodes along the location being evaluated: `nodes[i]` is the node at the first `i`
/// keys of the location, in the old and in the new tree.
pub(crate) struct Frames<'a> {
    pub old: &'a [Node],
    /// Empty for reads, which have no new tree.
    pub new: &'a [Node],
}

impl Frames<'_> {
    fn node(&self, tree: Tree, depth: usize) -> Node {
        let nodes = match tree {
            Tree::Old => self.old,
            Tree::New => self.new,
        };
        nodes.get(depth).cloned().unwrap_or_default()
    }
}

/// A snapshot: the location `depth` keys down the evaluated location, then `extra` keys.
#[derive(Debug, Clone)]
pub(crate) struct Snap {
    tree: Tree,
    depth: usize,
    extra: Extra,
    /// The node at that location (empty when there is no data).
    node: Node,
}

/// Keys below the base location, as a prefix of a shared key list.
#[derive(Debug, Clone)]
enum Extra {
    None,
    Keys(Arc<[Option<Key>]>, usize),
}

impl Extra {
    fn keys(&self) -> &[Option<Key>] {
        match self {
            Extra::None => &[],
            Extra::Keys(keys, len) => keys.get(..*len).unwrap_or(keys),
        }
    }
}

/// The node `keys` below `node`; a `None` key (which cannot exist) gives no data.
pub(crate) fn walk(node: &Node, keys: &[Option<Key>]) -> Node {
    let mut current = node.clone();
    for key in keys {
        match key {
            Some(key) if !current.is_empty() => current = current.child(key),
            _ => return Node::empty(),
        }
    }
    current
}

impl Snap {
    /// The snapshot of the first `depth` keys of the evaluated location.
    pub fn at(frames: &Frames<'_>, tree: Tree, depth: usize) -> Snap {
        Snap {
            tree,
            depth,
            extra: Extra::None,
            node: frames.node(tree, depth),
        }
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    /// `child(path)` for a path already split into keys. Shares `keys` when it can.
    pub fn child(&self, keys: &Arc<[Option<Key>]>) -> Snap {
        if keys.is_empty() {
            return self.clone();
        }
        let node = walk(&self.node, keys);
        let extra = match &self.extra {
            Extra::None => Extra::Keys(keys.clone(), keys.len()),
            Extra::Keys(..) => {
                let joined: Arc<[Option<Key>]> = self
                    .extra
                    .keys()
                    .iter()
                    .chain(keys.iter())
                    .cloned()
                    .collect();
                let len = joined.len();
                Extra::Keys(joined, len)
            }
        };
        Snap {
            tree: self.tree,
            depth: self.depth,
            extra,
            node,
        }
    }

    /// `parent()`; `None` at the root of the tree.
    pub fn parent(&self, frames: &Frames<'_>) -> Option<Snap> {
        match &self.extra {
            Extra::Keys(keys, len) if *len > 1 => {
                let base = frames.node(self.tree, self.depth);
                let above = keys.get(..len - 1).unwrap_or(keys);
                Some(Snap {
                    tree: self.tree,
                    depth: self.depth,
                    extra: Extra::Keys(keys.clone(), len - 1),
                    node: walk(&base, above),
                })
            }
            Extra::Keys(..) => Some(Snap::at(frames, self.tree, self.depth)),
            Extra::None => {
                let depth = self.depth.checked_sub(1)?;
                Some(Snap::at(frames, self.tree, depth))
            }
        }
    }

    pub fn exists(&self) -> bool {
        !self.node.is_empty()
    }

    pub fn has_children(&self) -> bool {
        self.node.child_count() > 0
    }

    pub fn is_number(&self) -> bool {
        matches!(self.node.leaf_value(), Some(Leaf::Number(_)))
    }

    pub fn is_string(&self) -> bool {
        matches!(self.node.leaf_value(), Some(Leaf::String(_)))
    }

    pub fn is_boolean(&self) -> bool {
        matches!(self.node.leaf_value(), Some(Leaf::Bool(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::split_path;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        Node::from_json(&v).expect("valid test node")
    }

    fn keys(path: &str) -> Arc<[Option<Key>]> {
        split_path(path).collect()
    }

    /// Frames along /a/b of `root` (old) and `new`.
    fn frames_of(root: &Node) -> Vec<Node> {
        let a = root.child(&Key::new("a").expect("key"));
        let b = a.child(&Key::new("b").expect("key"));
        vec![root.clone(), a, b]
    }

    fn json_of(snap: &Snap) -> serde_json::Value {
        snap.node().to_json(true)
    }

    #[test]
    fn child_and_parent_walk_the_tree() {
        let root = node(json!({"a": {"b": {"c": 1}, "s": "x"}, "z": true}));
        let old = frames_of(&root);
        let frames = Frames {
            old: &old,
            new: &[],
        };
        let data = Snap::at(&frames, Tree::Old, 2);
        assert_eq!(json_of(&data), json!({"c": 1}));
        let parent = data.parent(&frames).expect("parent");
        assert_eq!(json_of(&parent), json!({"b": {"c": 1}, "s": "x"}));
        let sibling = parent.child(&keys("s"));
        assert_eq!(json_of(&sibling), json!("x"));
        // parent() after child() walks back through the extra keys.
        let deep = Snap::at(&frames, Tree::Old, 0).child(&keys("a/b/c"));
        assert_eq!(json_of(&deep), json!(1));
        let up = deep.parent(&frames).expect("parent");
        assert_eq!(json_of(&up), json!({"c": 1}));
        let up2 = up.parent(&frames).expect("parent");
        assert!(up2.child(&keys("s")).is_string());
        let root_again = up2.parent(&frames).expect("root");
        assert!(root_again.parent(&frames).is_none());
        assert!(root_again.child(&keys("z")).is_boolean());
        // Chained child() calls join their keys.
        let chained = root_again.child(&keys("a")).child(&keys("b"));
        assert_eq!(
            json_of(&chained.parent(&frames).expect("parent")),
            json_of(&parent)
        );
    }

    #[test]
    fn missing_and_impossible_locations_have_no_data() {
        let root = node(json!({"a": "leaf"}));
        let old = vec![root];
        let frames = Frames {
            old: &old,
            new: &[],
        };
        let root = Snap::at(&frames, Tree::Old, 0);
        assert!(!root.child(&keys("a/b")).exists());
        assert!(!root.child(&keys("a.b")).exists());
        assert!(root.child(&keys("")).exists());
        assert!(root.has_children());
        assert!(!root.child(&keys("a")).has_children());
        // Out-of-range frames (newData in a read) read as no data rather than panicking.
        assert!(!Snap::at(&frames, Tree::New, 0).exists());
    }

    #[test]
    fn types() {
        let root = node(json!({"n": {".value": 2.5, ".priority": "p"}}));
        let old = vec![root];
        let frames = Frames {
            old: &old,
            new: &[],
        };
        let root = Snap::at(&frames, Tree::Old, 0);
        let n = root.child(&keys("n"));
        assert!(n.is_number() && !n.is_string() && !n.is_boolean());
    }
}
