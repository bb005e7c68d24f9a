//! Volatile writes: changes under `.volatile` paths are applied to the tree at once (so rules,
//! reads and new listens see the newest value) but neither logged nor pushed one by one. The
//! engine remembers which paths changed since the last tick; the runtime calls
//! [`Database::flush_volatile`] once per tick, and every listener gets at most one push per
//! changed path, with the value of then.
//!
//! Which writes count: a write whose every target lies under a volatile mark is volatile; one
//! whose targets are all outside is durable, even when it lies above a mark (removing a room
//! removes its cursors; what it puts below the mark is dropped at the next start, like any
//! volatile data); a write with targets on both sides is refused (see [`Classified`]).

use std::collections::BTreeSet;

use hearth_tree::{Node, Path};

use crate::access::Access;
use crate::effect::{Effect, Effects};
use crate::events::write_events;
use crate::write::{Change, Write, WriteOp};

use super::Database;

/// Distinct paths that may wait for one tick in one database. A write that would pass it
/// pushes what waits at once instead (still at most one push per path per flush), so the
/// memory and work of a tick stay bounded however many paths clients write between two
/// ticks. 16,384 is 490,000 distinct paths written a second at 30 ticks a second: far above
/// what one database's shard applies.
pub const MAX_VOLATILE_PATHS_PER_TICK: usize = 16_384;

/// The reply to a write with targets both under and outside volatile marks.
pub const MIXED_WRITE_MESSAGE: &str = "a write may not mix volatile and durable paths: \
     write the paths under .volatile marks and the others separately";

/// How a write's targets lie with respect to the volatile marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Classified {
    /// Every target is outside the marks (or above one).
    Durable,
    /// Every target is under a mark.
    Volatile,
    /// Some of each: refused.
    Mixed,
}

/// Classifies `write` under `access`.
pub(crate) fn classify(access: &Access, write: &Write) -> Classified {
    let Access::Rules(rules) = access else {
        return Classified::Durable;
    };
    if !rules.has_volatile() {
        return Classified::Durable;
    }
    let mut volatile = 0;
    let mut total = 0;
    for target in write.targets() {
        total += 1;
        if rules.is_volatile(&target) {
            volatile += 1;
        }
    }
    match volatile {
        0 => Classified::Durable,
        n if n == total => Classified::Volatile,
        _ => Classified::Mixed,
    }
}

/// The volatile paths of one database that changed since the last flush.
#[derive(Debug, Default)]
pub(crate) struct PendingVolatile {
    /// Changed paths, none an ancestor of another. In path order an ancestor comes right
    /// before its subtree, so the set answers "is an ancestor of this path here?" with one
    /// look at the path before it.
    paths: BTreeSet<Path>,
    /// The tree before the first of these changes: what listeners below a changed path last
    /// heard of, to tell whether their data really changed.
    before: Option<Node>,
}

impl PendingVolatile {
    /// Notes that `targets` changed; `before` is the tree as it was before the change.
    pub fn mark(&mut self, before: &Node, targets: impl Iterator<Item = Path>) {
        if self.before.is_none() {
            self.before = Some(before.clone());
        }
        for target in targets {
            let covered = self
                .paths
                .range(..=&target)
                .next_back()
                .is_some_and(|path| target.starts_with(path));
            if covered {
                continue;
            }
            let below: Vec<Path> = self
                .paths
                .range(&target..)
                .take_while(|path| path.starts_with(&target))
                .cloned()
                .collect();
            for path in below {
                self.paths.remove(&path);
            }
            self.paths.insert(target);
        }
    }

    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The changed paths as writes of their values in `root`, one per group of siblings
    /// (their parent as its base, so that a listener above them gets them in one push and
    /// the work stays linear in the paths), with the tree from before the changes.
    pub fn take(&mut self, root: &Node) -> Option<(Vec<Write>, Node)> {
        let before = self.before.take()?;
        let paths = std::mem::take(&mut self.paths);
        if paths.is_empty() {
            return None;
        }
        // A listener's cache was `before`. Setting a path below what was a leaf there does not
        // bring that cache to the data when the path has since been removed again (the leaf
        // would survive): such a path is pushed from the leaf's place instead.
        let mut lifted = PendingVolatile::default();
        lifted.mark(&before, paths.into_iter().map(|path| lift(&before, path)));
        // Siblings are adjacent in path order: nothing of another parent sorts between them.
        let mut writes: Vec<Write> = Vec::new();
        for path in lifted.paths {
            let parent = path.parent().unwrap_or_else(Path::root);
            let op = WriteOp {
                path: path.skip(parent.len()),
                change: Change::Set(root.get(&path)),
            };
            match writes.last_mut() {
                Some(write) if write.base == parent => write.ops.push(op),
                _ => writes.push(Write {
                    base: parent,
                    ops: vec![op],
                }),
            }
        }
        Some((writes, before))
    }
}

/// `path`, or its shallowest ancestor that is a leaf in `before`.
fn lift(before: &Node, path: Path) -> Path {
    let mut node = before.clone();
    for depth in 0..path.len() {
        if !node.is_empty() && node.child_count() == 0 {
            return Path::from_keys(path.keys()[..depth].to_vec());
        }
        node = node.child(&path.keys()[depth]);
    }
    path
}

impl Database {
    /// Whether volatile changes wait for a flush.
    pub fn has_pending_volatile(&self) -> bool {
        !self.volatile.is_empty()
    }

    /// Pushes the volatile changes made since the last flush: every listener of a changed
    /// path gets one push holding its value as of now. The runtime calls this once per tick
    /// and sends the replies of the volatile writes it held after these pushes.
    pub fn flush_volatile(&mut self, out: &mut Effects) {
        let Some((writes, before)) = self.volatile.take(&self.root) else {
            return;
        };
        let start = out.len();
        for write in &writes {
            write_events(&mut self.views, write, &before, &self.root, out);
        }
        self.stats.pushes += (out.len() - start) as u64;
    }

    /// Drops the data under volatile marks, without pushes: for a database just recovered,
    /// before it has sessions.
    pub fn drop_volatile_data(&mut self) {
        if let Access::Rules(rules) = &self.access {
            if rules.has_volatile() {
                self.root = rules.without_volatile(&self.root);
            }
        }
    }

    /// Applies a checked volatile write: the tree changes now, its pushes wait for the tick.
    /// [`Effect::Volatile`] tells the runtime to hold the writer's reply until then.
    pub(crate) fn commit_volatile(&mut self, write: Write, new_root: Node, out: &mut Effects) {
        if self.volatile.len() >= MAX_VOLATILE_PATHS_PER_TICK {
            self.flush_volatile(out);
        }
        let old_root = std::mem::replace(&mut self.root, new_root);
        self.stats.writes += 1;
        // Ordered indexes follow the tree now, not at the tick: a window read from one in
        // between (another write, a new listen) must see the children where they are. The
        // tick's update of the same children, from the same old data, then changes nothing.
        let targets: Vec<Path> = write.targets().collect();
        let affected = self.views.affected(targets.iter());
        self.views
            .update_indexes(&affected, &targets, &old_root, &self.root);
        self.volatile.mark(&old_root, write.targets());
        out.push(Effect::Volatile);
    }
}

#[cfg(test)]
#[path = "database_volatile_tests.rs"]
mod tests;
