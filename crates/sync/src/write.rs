//! Writes in resolved form: the unit that is applied to the tree, logged and turned into events.

use hearth_tree::{Node, Path, Priority, TreeError, MAX_DEPTH};
use serde_json::Value;

use crate::limits::MAX_MERGE_ENTRIES;
use crate::server_values::contains_placeholder;

/// Where a write lands: a path, or only the priority of the node at a path (a path that ends
/// in `/.priority` on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WriteTarget {
    pub path: Path,
    pub priority_only: bool,
}

impl WriteTarget {
    /// Parses a wire path such as `/a/b` or `/a/.priority`. Empty segments are dropped.
    pub fn parse(text: &str) -> Result<WriteTarget, WriteError> {
        let (rest, priority_only) = match text.trim_end_matches('/').strip_suffix(".priority") {
            Some(rest) if rest.is_empty() || rest.ends_with('/') => (rest, true),
            _ => (text, false),
        };
        let path = Path::parse(rest).map_err(WriteError::Tree)?;
        Ok(WriteTarget {
            path,
            priority_only,
        })
    }

    pub fn whole(path: Path) -> WriteTarget {
        WriteTarget {
            path,
            priority_only: false,
        }
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    #[error("{0}")]
    Tree(#[from] TreeError),
    #[error("invalid server value: {0}")]
    ServerValue(String),
    #[error("the write reaches depth {depth}, deeper than the limit of {MAX_DEPTH}")]
    TooDeep { depth: usize },
    #[error("update paths {0} and {1} overlap: one is an ancestor of the other")]
    OverlappingPaths(String, String),
    #[error("an update may hold at most {limit} entries")]
    TooManyEntries { limit: usize },
    #[error("a priority must be a string, a number or null")]
    InvalidPriority,
}

/// What one operation does at its path.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Replace the subtree (empty deletes).
    Set(Node),
    /// Change only the priority of the node (no effect on an empty node).
    Priority(Priority),
}

/// One operation of a write; `path` is relative to the write's base.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOp {
    pub path: Path,
    pub change: Change,
}

/// An atomic write in resolved form (server values already computed). A set is one operation
/// at the base; a multi-path update is several operations, none an ancestor of another.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub base: Path,
    pub ops: Vec<WriteOp>,
}

impl Write {
    /// Absolute paths of the operations, in order.
    pub fn targets(&self) -> impl Iterator<Item = Path> + '_ {
        self.ops.iter().map(|op| self.base.join(&op.path))
    }

    /// Applies the write to `root` and returns the new root; `root` itself is unchanged.
    pub fn apply(&self, root: &Node) -> Node {
        let mut next = root.clone();
        for op in &self.ops {
            let path = self.base.join(&op.path);
            next = match &op.change {
                Change::Set(node) => next.set(&path, node.clone()),
                Change::Priority(priority) => {
                    let node = next.get(&path);
                    if node.is_empty() {
                        continue;
                    }
                    next.set(&path, node.with_priority(priority.clone()))
                }
            };
        }
        next
    }
}

/// The data of a set converted into the tree ahead of the engine, so that the O(size) work of
/// a large write (the conversion, and dropping its JSON) can be done away from the thread that
/// runs the engine. Only data without server value placeholders can be prepared: theirs depend
/// on the stored data and the commit time.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedSet {
    change: Change,
}

impl PreparedSet {
    /// Converts `data` for a set at `target` exactly as the engine would. `None` when the data
    /// holds a placeholder or is refused: the engine then resolves the JSON itself and gives
    /// its usual reply, in its usual order.
    pub fn prepare(target: &WriteTarget, data: &Value) -> Option<PreparedSet> {
        if contains_placeholder(data) {
            return None;
        }
        let change = change_from_json(target, data).ok()?;
        Some(PreparedSet { change })
    }

    /// The change the set makes at its target.
    pub fn change(&self) -> &Change {
        &self.change
    }

    pub(crate) fn into_change(self) -> Change {
        self.change
    }
}

/// The entries of a multi-path update converted ahead, as [`PreparedSet`] converts a set's
/// data: only entries without placeholders, and only an update the engine would not refuse
/// for its shape (too many entries, overlapping paths, data it cannot convert).
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedMerge {
    ops: Vec<WriteOp>,
}

impl PreparedMerge {
    /// Converts the entries of an update at `path` exactly as the engine would; `None` when
    /// the engine must resolve or refuse them itself.
    pub fn prepare(path: &Path, entries: &[(WriteTarget, Value)]) -> Option<PreparedMerge> {
        if entries.len() > MAX_MERGE_ENTRIES {
            return None;
        }
        let mut ops = Vec::with_capacity(entries.len());
        for (target, data) in entries {
            if contains_placeholder(data) {
                return None;
            }
            let absolute = WriteTarget {
                path: path.join(&target.path),
                priority_only: target.priority_only,
            };
            let change = change_from_json(&absolute, data).ok()?;
            ops.push(WriteOp {
                path: target.path.clone(),
                change,
            });
        }
        check_disjoint(&ops).ok()?;
        Some(PreparedMerge { ops })
    }

    pub(crate) fn into_ops(self) -> Vec<WriteOp> {
        self.ops
    }

    /// The operations it makes, relative to its path.
    pub fn ops(&self) -> &[WriteOp] {
        &self.ops
    }
}

/// Converts a resolved JSON value into the change it makes at `target`, checking that the
/// written data does not reach deeper than the tree allows.
pub(crate) fn change_from_json(target: &WriteTarget, value: &Value) -> Result<Change, WriteError> {
    if target.priority_only {
        let priority = Priority::from_json(value).map_err(|_| WriteError::InvalidPriority)?;
        return Ok(Change::Priority(priority));
    }
    let depth = target.path.len() + json_depth(value);
    if depth > MAX_DEPTH {
        return Err(WriteError::TooDeep { depth });
    }
    Ok(Change::Set(Node::from_json(value)?))
}

/// The number of key levels below a JSON value (a leaf is 0), ignoring `.value`/`.priority`
/// wrappers. Iterative, so that a hostile, deeply nested value cannot overflow the stack.
fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    if key.starts_with('.') {
                        if key == ".value" {
                            stack.push((child, depth));
                        }
                        continue;
                    }
                    stack.push((child, depth + 1));
                }
            }
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Builds the resolved operations of a multi-path update and checks that no entry is an
/// ancestor of another (clients guarantee it; other clients might not).
pub(crate) fn check_disjoint(ops: &[WriteOp]) -> Result<(), WriteError> {
    let mut paths: Vec<&Path> = ops.iter().map(|op| &op.path).collect();
    paths.sort();
    for pair in paths.windows(2) {
        if pair[1].starts_with(pair[0]) {
            return Err(WriteError::OverlappingPaths(
                pair[0].to_string(),
                pair[1].to_string(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(text: &str) -> Path {
        Path::parse(text).expect("valid test path")
    }

    #[test]
    fn parses_priority_targets() {
        let target = WriteTarget::parse("/a/.priority").expect("valid");
        assert!(target.priority_only);
        assert_eq!(target.path, path("/a"));
        let root_priority = WriteTarget::parse("/.priority").expect("valid");
        assert!(root_priority.priority_only && root_priority.path.is_root());
        let plain = WriteTarget::parse("/a/b").expect("valid");
        assert!(!plain.priority_only);
        assert!(WriteTarget::parse("/a.priority").is_err());
    }

    #[test]
    fn depth_counts_path_and_data() {
        let mut value = json!(1);
        for _ in 0..30 {
            value = json!({ "k": value });
        }
        let shallow = WriteTarget::whole(path("/a/b"));
        assert!(change_from_json(&shallow, &value).is_ok());
        let deep = WriteTarget::whole(path("/a/b/c"));
        assert!(matches!(
            change_from_json(&deep, &value),
            Err(WriteError::TooDeep { depth: 33 })
        ));
    }

    #[test]
    fn overlapping_merge_paths_are_refused() {
        let op = |p: &str| WriteOp {
            path: path(p),
            change: Change::Set(Node::empty()),
        };
        assert!(check_disjoint(&[op("/a"), op("/b/c"), op("/b/d")]).is_ok());
        assert!(check_disjoint(&[op("/a"), op("/a/b")]).is_err());
    }

    #[test]
    fn apply_sets_and_priorities() {
        let root = Node::from_json(&json!({"a": 1})).expect("valid");
        let write = Write {
            base: path("/"),
            ops: vec![
                WriteOp {
                    path: path("/b/c"),
                    change: Change::Set(Node::from_json(&json!(2)).expect("valid")),
                },
                WriteOp {
                    path: path("/a"),
                    change: Change::Priority(Priority::Number(3.0)),
                },
                WriteOp {
                    path: path("/zz"),
                    change: Change::Priority(Priority::Number(3.0)),
                },
            ],
        };
        let next = write.apply(&root);
        assert_eq!(
            next.to_json(true),
            json!({"a": {".value": 1, ".priority": 3}, "b": {"c": 2}})
        );
        assert_eq!(root.to_json(true), json!({"a": 1}));
    }
}
