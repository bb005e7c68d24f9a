//! Turning one applied write into the pushes that keep every affected view current.
//!
//! Default views at or above the write's base all receive the same push (the write itself), so
//! it is built once and sent to all of them. Default views below the base receive the new value
//! of their own subtree, or the parts of the write inside it. Filtered views recompute their
//! result and send the difference from what they sent last, so that children entering a limit
//! window arrive together with those that leave it.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use hearth_query::{LimitFrom, QueryParams};

use hearth_tree::{Key, Node, Path};

use crate::effect::{Effect, Effects, Push, PushData, Target};
use crate::indexes::Indexes;
use crate::views::{window_of, View, Views};
use crate::write::Write;

/// Appends to `out` the pushes caused by `write`, which turned `old_root` into `new_root`.
pub(crate) fn write_events(
    views: &mut Views,
    write: &Write,
    old_root: &Node,
    new_root: &Node,
    out: &mut Effects,
) {
    let targets: Vec<Path> = write.targets().collect();
    let affected = views.affected(targets.iter());
    // Every index a view reads its window from is brought up to date before any window is.
    views.update_indexes(&affected, &targets, old_root, new_root);
    let mut shared_targets: Vec<Target> = Vec::new();
    for id in affected {
        let Some((view, indexes)) = views.get_with_indexes(id) else {
            continue;
        };
        if view.query.is_filtered() {
            if let Some(push) = filtered_push(view, indexes, &targets, new_root) {
                emit(out, push, view.subscribers.clone());
            }
        } else if write.base.starts_with(&view.path) {
            shared_targets.extend_from_slice(&view.subscribers);
        } else if let Some(push) = default_push_below(&view.path, &targets, old_root, new_root) {
            emit(out, push, view.subscribers.clone());
        }
    }
    if !shared_targets.is_empty() {
        emit(out, write_push(write, &targets, new_root), shared_targets);
    }
}

fn emit(out: &mut Effects, push: Push, targets: Vec<Target>) {
    if targets.is_empty() {
        return;
    }
    out.push(Effect::Push {
        push: Arc::new(push),
        targets,
    });
}

/// The push that describes the whole write, for views at or above its base.
fn write_push(write: &Write, targets: &[Path], new_root: &Node) -> Push {
    if let [only] = targets {
        return Push {
            path: only.clone(),
            data: PushData::Put(new_root.get(only)),
        };
    }
    let entries = write
        .ops
        .iter()
        .zip(targets)
        .map(|(op, target)| (op.path.clone(), new_root.get(target)))
        .collect();
    Push {
        path: write.base.clone(),
        data: PushData::Merge(entries),
    }
}

/// The push for a default view strictly below the write's base, or `None` when its data did
/// not change.
fn default_push_below(
    view_path: &Path,
    targets: &[Path],
    old_root: &Node,
    new_root: &Node,
) -> Option<Push> {
    if targets.iter().any(|target| view_path.starts_with(target)) {
        let new_value = new_root.get(view_path);
        let old_value = old_root.get(view_path);
        if new_value.ptr_eq(&old_value) || new_value == old_value {
            return None;
        }
        return Some(Push {
            path: view_path.clone(),
            data: PushData::Put(new_value),
        });
    }
    let inside: Vec<&Path> = targets
        .iter()
        .filter(|target| target.starts_with(view_path))
        .collect();
    match inside.as_slice() {
        [] => None,
        [only] => Some(Push {
            path: (*only).clone(),
            data: PushData::Put(new_root.get(only)),
        }),
        many => {
            let entries = many
                .iter()
                .filter_map(|target| {
                    let relative = target.strip_prefix(view_path)?;
                    Some((relative, new_root.get(target)))
                })
                .collect();
            Some(Push {
                path: view_path.clone(),
                data: PushData::Merge(entries),
            })
        }
    }
}

/// Recomputes a filtered view and returns the push that brings its listeners from the old
/// result to the new one, or `None` when the result did not change. A view with an ordered
/// index reads its new window from it (O(log n + window)); one without scans the children.
fn filtered_push(
    view: &mut View,
    indexes: &Indexes,
    targets: &[Path],
    new_root: &Node,
) -> Option<Push> {
    let window = match window_shortcut(view, targets, new_root) {
        Some(Shortcut::Unchanged) => return None,
        Some(Shortcut::InPlace(window)) => window,
        None => window_of(indexes, view.index, &view.query, &new_root.get(&view.path)),
    };
    if window.ptr_eq(&view.window) || window == view.window {
        return None;
    }
    let old = std::mem::replace(&mut view.window, window.clone());
    if window.is_empty() {
        return Some(Push {
            path: view.path.clone(),
            data: PushData::Put(Node::empty()),
        });
    }
    if let Some(push) = deep_child_push(&view.path, targets, &old, &window, new_root) {
        return Some(push);
    }
    let mut entries: Vec<(Path, Node)> = Vec::new();
    for (key, _) in old.children() {
        if window.child(&key).is_empty() {
            entries.push((Path::from_keys(vec![key.into_owned()]), Node::empty()));
        }
    }
    for (key, child) in window.children() {
        let before = old.child(&key);
        if !before.ptr_eq(&child) && before != *child {
            entries.push((Path::from_keys(vec![key.into_owned()]), child.into_owned()));
        }
    }
    if entries.len() > window.child_count() {
        return Some(Push {
            path: view.path.clone(),
            data: PushData::Put(window),
        });
    }
    Some(Push {
        path: view.path.clone(),
        data: PushData::Merge(entries),
    })
}

/// What a write below one child of the view provably does to its window, found without
/// recomputing the window over every child.
enum Shortcut {
    /// The window is as it was: the child was outside it and still is (gone, out of range, or
    /// beyond the far end of a full limit window), as when a leaderboard's lower ranks change.
    Unchanged,
    /// The window is the old one with that child replaced: the child was inside it and still
    /// is, as when a leaderboard's top scores go up.
    InPlace(Node),
}

/// The shortcut for a write whose paths all lie below one child of the view, if one holds.
/// A member stays in when it is still in range and either the window is not full (every child
/// in range belongs to it) or it still sorts on the near side of the other members' far end:
/// every outsider sorts beyond that end, so none can take its place.
fn window_shortcut(view: &View, targets: &[Path], new_root: &Node) -> Option<Shortcut> {
    let key = sole_child_written(&view.path, targets)?;
    let parent = new_root.get(&view.path);
    if parent.is_leaf() {
        return None;
    }
    let child = parent.child(key);
    let was_member = !view.window.child(key).is_empty();
    if child.is_empty() || !view.query.in_range(key, &child) {
        return (!was_member).then_some(Shortcut::Unchanged);
    }
    let full_limit = view
        .query
        .limit
        .as_ref()
        .filter(|limit| view.window.child_count() >= limit.count as usize);
    let Some(limit) = full_limit else {
        // Every child in range belongs to the window: an outsider now in range enters it.
        return was_member.then(|| Shortcut::InPlace(view.window.with_child(key, child)));
    };
    let beyond = match limit.from {
        LimitFrom::First => Ordering::Greater,
        LimitFrom::Last => Ordering::Less,
    };
    let query = &view.query;
    if !was_member {
        let members = view.window.children();
        return (against_far_end(query, limit.from, members, key, &child) == Some(beyond))
            .then_some(Shortcut::Unchanged);
    }
    // With no other member (a limit of one) nothing bounds the outsiders: `None` below.
    let others = view.window.children().filter(|(other, _)| **other != *key);
    (against_far_end(query, limit.from, others, key, &child) == Some(beyond.reverse()))
        .then(|| Shortcut::InPlace(view.window.with_child(key, child)))
}

/// How `(key, child)` sorts against the far end of `members` (the last of a limitToFirst
/// window, the first of a limitToLast one); `None` when there are no members.
fn against_far_end<'a>(
    query: &QueryParams,
    from: LimitFrom,
    members: impl Iterator<Item = Member<'a>>,
    key: &Key,
    child: &Node,
) -> Option<Ordering> {
    let order = |a: &Member<'_>, b: &Member<'_>| query.compare_children((&a.0, &a.1), (&b.0, &b.1));
    let far_end = match from {
        LimitFrom::First => members.max_by(order),
        LimitFrom::Last => members.min_by(order),
    }?;
    Some(query.compare_children((key, child), (&far_end.0, &far_end.1)))
}

/// A child of a window as its iterator yields it.
type Member<'a> = (Cow<'a, Key>, Cow<'a, Node>);

/// The one child of `view_path` below which every target lies, if there is one.
fn sole_child_written<'a>(view_path: &Path, targets: &'a [Path]) -> Option<&'a Key> {
    let depth = view_path.len();
    let mut sole: Option<&Key> = None;
    for target in targets {
        if target.len() <= depth || !target.starts_with(view_path) {
            return None;
        }
        let key = &target.keys()[depth];
        if sole.is_some_and(|sole| sole != key) {
            return None;
        }
        sole = Some(key);
    }
    sole
}

/// When a single write below the view changed one child that stays in the window, and the
/// window's members did not change, the write itself is the smallest correct push.
fn deep_child_push(
    view_path: &Path,
    targets: &[Path],
    old: &Node,
    window: &Node,
    new_root: &Node,
) -> Option<Push> {
    let [target] = targets else {
        return None;
    };
    if target.len() <= view_path.len() + 1 || !target.starts_with(view_path) {
        return None;
    }
    let same_members = old.child_count() == window.child_count()
        && old
            .children()
            .zip(window.children())
            .all(|((a, _), (b, _))| a == b);
    let key = &target.keys()[view_path.len()];
    if !same_members || window.child(key).is_empty() {
        return None;
    }
    Some(Push {
        path: target.clone(),
        data: PushData::Put(new_root.get(target)),
    })
}
