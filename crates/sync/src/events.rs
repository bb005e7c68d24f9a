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

use hearth_query::LimitFrom;

use hearth_tree::{Key, Node, Path};

use crate::effect::{Effect, Effects, Push, PushData, Target};
use crate::views::{View, Views};
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
    let mut shared_targets: Vec<Target> = Vec::new();
    for id in affected {
        let Some(view) = views.get_mut(id) else {
            continue;
        };
        if view.query.is_filtered() {
            if let Some(push) = filtered_push(view, &targets, new_root) {
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
/// result to the new one, or `None` when the result did not change.
fn filtered_push(view: &mut View, targets: &[Path], new_root: &Node) -> Option<Push> {
    if window_unchanged(view, targets, new_root) {
        return None;
    }
    let window = window_in_place(view, targets, new_root)
        .unwrap_or_else(|| view.query.apply(&new_root.get(&view.path)));
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

/// Whether a write below one child of the view provably leaves its window as it was, so that
/// the window need not be recomputed over every child. That holds when the written child was
/// not in the window and now is either gone, out of range, or beyond the far end of a full
/// limit window: the common case of a leaderboard whose lower ranks change. A write may
/// touch several paths below that child (an update of a player's score and time).
fn window_unchanged(view: &View, targets: &[Path], new_root: &Node) -> bool {
    let Some(key) = sole_child_written(&view.path, targets) else {
        return false;
    };
    if !view.window.child(key).is_empty() {
        return false;
    }
    // Outside the window before, and not there now: nothing that was in it moved.
    let parent = new_root.get(&view.path);
    if parent.is_leaf() {
        return false;
    }
    let child = parent.child(key);
    if child.is_empty() || !view.query.in_range(key, &child) {
        return true;
    }
    let Some(limit) = &view.query.limit else {
        return false;
    };
    if view.window.child_count() < limit.count as usize {
        return false;
    }
    // A full window: the new child stays out if it sorts beyond the window's far end.
    let query = &view.query;
    let members = view.window.children();
    match limit.from {
        LimitFrom::First => members
            .max_by(|a, b| query.compare_children((&a.0, &a.1), (&b.0, &b.1)))
            .is_some_and(|last| {
                query.compare_children((key, &child), (&last.0, &last.1)) == Ordering::Greater
            }),
        LimitFrom::Last => members
            .min_by(|a, b| query.compare_children((&a.0, &a.1), (&b.0, &b.1)))
            .is_some_and(|first| {
                query.compare_children((key, &child), (&first.0, &first.1)) == Ordering::Less
            }),
    }
}

/// The new window without a recomputation, when the one child written was in it and provably
/// still is: the old window with that child replaced. That holds when the child is still in
/// range and either the window is not full (every child in range belongs to it) or the child
/// still sorts on the near side of the other members' far end, so that no outsider, all of
/// which sort beyond that end, can take its place: a leaderboard's top scores going up.
fn window_in_place(view: &View, targets: &[Path], new_root: &Node) -> Option<Node> {
    let key = sole_child_written(&view.path, targets)?;
    if view.window.child(key).is_empty() {
        return None;
    }
    let parent = new_root.get(&view.path);
    if parent.is_leaf() {
        return None;
    }
    let child = parent.child(key);
    if child.is_empty() || !view.query.in_range(key, &child) {
        return None;
    }
    if let Some(limit) = &view.query.limit {
        if view.window.child_count() >= limit.count as usize {
            let query = &view.query;
            let order =
                |a: &Member<'_>, b: &Member<'_>| query.compare_children((&a.0, &a.1), (&b.0, &b.1));
            let others = view.window.children().filter(|(other, _)| **other != *key);
            let stays = match limit.from {
                // With no other member (a limit of one) nothing bounds the outsiders.
                LimitFrom::First => others.max_by(order).is_some_and(|last| {
                    query.compare_children((key, &child), (&last.0, &last.1)) == Ordering::Less
                }),
                LimitFrom::Last => others.min_by(order).is_some_and(|first| {
                    query.compare_children((key, &child), (&first.0, &first.1)) == Ordering::Greater
                }),
            };
            if !stays {
                return None;
            }
        }
    }
    Some(view.window.with_child(key, child))
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
