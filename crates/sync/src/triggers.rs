//! Database triggers (Cloud Functions' `onWrite` / `onValueWritten` family): which registered
//! path patterns a write changed, with the data at each matched path before and after it.
//! Pure: the runtime delivers what this finds once the write is durable.
//!
//! A pattern is a path whose segments may be wildcards (`/rooms/{room}/messages/{id}`). A
//! write changes a pattern's path when it writes at, above or below it: a write at
//! `/rooms/r1` changes `/rooms/r1/messages/{id}` for every message that it adds, removes or
//! changes, and a write at `/rooms/r1/messages/m1/text` changes `/rooms/r1/messages/m1`.
//! Each matched path is one change, however many of the write's operations reach it.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use hearth_tree::{Key, Node, Path, TreeError};

use crate::write::Write;

/// The most changes one write reports to its database's triggers, all triggers together: as
/// Firebase, where one write triggers at most 1,000 functions. A write that would report more
/// is refused under `strictTriggerValidation` (the default, [`check_limits`]); without it, it
/// is applied all the same and the changes past the limit are not reported (the caller counts
/// them).
pub const MAX_TRIGGER_CHANGES_PER_WRITE: usize = 1000;

/// The most triggers one database holds.
pub const MAX_TRIGGERS_PER_DATABASE: usize = 1000;

/// One segment of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(Key),
    /// `{name}` (or `{name=*}`): any key, reported as the parameter `name`; `*`: any key,
    /// reported as none (an empty name).
    Wildcard(Arc<str>),
}

/// A path pattern such as `/rooms/{room}/messages/{id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    segments: Vec<Segment>,
}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    #[error("{0}")]
    Tree(#[from] TreeError),
    #[error("a wildcard must be a whole segment, as in /rooms/{{room}}: {0:?}")]
    Wildcard(String),
    #[error("the wildcard {{{0}}} is named twice")]
    Repeated(String),
}

impl PathPattern {
    /// Parses `/a/{b}/c`. A segment in braces is a wildcard, as are `{b=*}` and `*` (one
    /// segment, unnamed); the multi-segment globs of Firebase's v2 patterns (`**`, `{b=**}`)
    /// are refused rather than read as something else.
    pub fn parse(text: &str) -> Result<PathPattern, PatternError> {
        let mut segments = Vec::new();
        let mut names = HashSet::new();
        for part in text.split('/').filter(|part| !part.is_empty()) {
            let braced = part.strip_prefix('{').and_then(|p| p.strip_suffix('}'));
            let braced = braced.map(|inner| inner.strip_suffix("=*").unwrap_or(inner));
            let segment = match braced {
                None if part == "*" => Segment::Wildcard("".into()),
                Some(name) if is_wildcard_name(name) => {
                    if !names.insert(name.to_owned()) {
                        return Err(PatternError::Repeated(name.to_owned()));
                    }
                    Segment::Wildcard(name.into())
                }
                Some(_) => return Err(PatternError::Wildcard(part.to_owned())),
                None if part.contains(['{', '}', '*']) => {
                    return Err(PatternError::Wildcard(part.to_owned()))
                }
                None => Segment::Literal(Key::new(part)?),
            };
            segments.push(segment);
        }
        if segments.len() > hearth_tree::MAX_DEPTH {
            return Err(PatternError::Tree(TreeError::TooDeep {
                depth: segments.len(),
            }));
        }
        Ok(PathPattern { segments })
    }

    /// The number of segments.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Whether the segment at `index` admits `key`.
    fn admits(&self, index: usize, key: &Key) -> bool {
        match &self.segments[index] {
            Segment::Literal(literal) => literal == key,
            Segment::Wildcard(_) => true,
        }
    }

    /// The wildcards' values in `path`, a path the pattern matches.
    pub fn params(&self, path: &Path) -> Vec<(Arc<str>, String)> {
        self.segments
            .iter()
            .zip(path.keys())
            .filter_map(|(segment, key)| match segment {
                Segment::Wildcard(name) if !name.is_empty() => {
                    Some((name.clone(), key.as_str().to_owned()))
                }
                Segment::Wildcard(_) | Segment::Literal(_) => None,
            })
            .collect()
    }

    /// Adds to `out` every path the pattern matches that a write at `target` may have
    /// changed: the target's prefix when the target is as deep or deeper, else the matching
    /// paths below it that differ between `before` and `after` (the roots).
    fn changed_by(&self, target: &Path, before: &Node, after: &Node, out: &mut Matches) {
        let keys = target.keys();
        let common = keys.len().min(self.len());
        if !(0..common).all(|i| self.admits(i, &keys[i])) {
            return;
        }
        if keys.len() >= self.len() {
            out.add(Path::from_keys(keys[..self.len()].to_vec()));
            return;
        }
        self.expand(target.clone(), &before.get(target), &after.get(target), out);
    }

    /// Walks the pattern's remaining segments below `path`, whose data was `before` and is
    /// `after`, skipping subtrees the write left as they were.
    fn expand(&self, path: Path, before: &Node, after: &Node, out: &mut Matches) {
        if out.full() || before.same_stored(after) {
            return;
        }
        let depth = path.len();
        if depth == self.len() {
            out.add(path);
            return;
        }
        match &self.segments[depth] {
            Segment::Literal(key) => {
                let (b, a) = (before.child(key), after.child(key));
                self.expand(path.child(key.clone()), &b, &a, out);
            }
            Segment::Wildcard(_) => {
                let mut keys: Vec<Key> = before.children().map(|(k, _)| k.into_owned()).collect();
                let seen: HashSet<Key> = keys.iter().cloned().collect();
                keys.extend(
                    after
                        .children()
                        .map(|(k, _)| k.into_owned())
                        .filter(|k| !seen.contains(k)),
                );
                for key in keys {
                    let (b, a) = (before.child(&key), after.child(&key));
                    self.expand(path.child(key), &b, &a, out);
                }
            }
        }
    }
}

fn is_wildcard_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for segment in &self.segments {
            match segment {
                Segment::Literal(key) => write!(f, "/{}", key.as_str())?,
                Segment::Wildcard(name) if name.is_empty() => f.write_str("/*")?,
                Segment::Wildcard(name) => write!(f, "/{{{name}}}")?,
            }
        }
        Ok(())
    }
}

/// Which changes a trigger is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerOn {
    /// Every change (`onWrite`, `onValueWritten`).
    Write,
    /// Data where there was none (`onCreate`, `onValueCreated`).
    Create,
    /// Data changed where there was data and still is (`onUpdate`, `onValueUpdated`).
    Update,
    /// Data removed (`onDelete`, `onValueDeleted`).
    Delete,
}

impl TriggerOn {
    fn admits(self, before: &Node, after: &Node) -> bool {
        match self {
            TriggerOn::Write => true,
            TriggerOn::Create => before.is_empty(),
            TriggerOn::Update => !before.is_empty() && !after.is_empty(),
            TriggerOn::Delete => after.is_empty(),
        }
    }
}

/// A registered trigger of one database.
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    /// The name the trigger's receiver knows it by.
    pub name: Arc<str>,
    pub pattern: PathPattern,
    pub on: TriggerOn,
}

/// Where a database takes its triggers from: a registry that another thread may change (a
/// Functions emulator registers a trigger on any core). The database reads it only when the
/// generation moved since it last did, at its next write.
pub trait TriggerSource: Send + Sync {
    /// Moves on with every change of the registry.
    fn generation(&self) -> u64;
    /// The triggers of `database` now.
    fn triggers_of(&self, database: &str) -> Arc<[Trigger]>;
}

/// A database's link to its [`TriggerSource`].
pub(crate) struct Following {
    pub(crate) source: Arc<dyn TriggerSource>,
    pub(crate) database: Arc<str>,
    /// The generation its triggers were taken at.
    pub(crate) generation: u64,
}

/// One change a trigger is told of.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerChange {
    pub trigger: Arc<str>,
    /// The matched path (every wildcard filled).
    pub path: Path,
    pub params: Vec<(Arc<str>, String)>,
    pub before: Node,
    pub after: Node,
}

/// The changes one write makes, for the database's triggers, in trigger order then path order
/// (a path once per trigger), at most [`MAX_TRIGGER_CHANGES_PER_WRITE`]; with the number of
/// matched paths left out past that limit.
pub fn changes(
    triggers: &[Trigger],
    write: &Write,
    before: &Node,
    after: &Node,
) -> (Vec<TriggerChange>, usize) {
    let mut found = Vec::new();
    let mut dropped = 0;
    for trigger in triggers {
        let mut matches = Matches::new(MAX_TRIGGER_CHANGES_PER_WRITE + 1);
        for target in write.targets() {
            trigger
                .pattern
                .changed_by(&target, before, after, &mut matches);
        }
        for path in matches.paths {
            let (b, a) = (before.get(&path), after.get(&path));
            if b == a || !trigger.on.admits(&b, &a) {
                continue;
            }
            if found.len() == MAX_TRIGGER_CHANGES_PER_WRITE {
                dropped += 1;
                continue;
            }
            found.push(TriggerChange {
                trigger: trigger.name.clone(),
                params: trigger.pattern.params(&path),
                path,
                before: b,
                after: a,
            });
        }
    }
    (found, dropped)
}

/// The largest event one change may make under `strictTriggerValidation` (its data before and
/// after, as JSON): Firebase's 1 MB.
pub const MAX_TRIGGER_EVENT_BYTES: usize = 1024 * 1024;

/// Why `strictTriggerValidation` refuses a write whose changes are `changes`, with `dropped`
/// more past [`MAX_TRIGGER_CHANGES_PER_WRITE`]: `None` when it is within both limits.
pub fn check_limits(changes: &[TriggerChange], dropped: usize) -> Option<String> {
    if dropped > 0 {
        return Some(format!(
            "this write would trigger {} functions, more than the {MAX_TRIGGER_CHANGES_PER_WRITE} one write may (strictTriggerValidation; set it to false to deliver the first {MAX_TRIGGER_CHANGES_PER_WRITE} only)",
            changes.len() + dropped
        ));
    }
    let largest = changes
        .iter()
        .map(|change| change.before.estimated_bytes() + change.after.estimated_bytes())
        .max()?;
    (largest > MAX_TRIGGER_EVENT_BYTES).then(|| {
        format!(
            "this write would send a function an event of about {largest} bytes, more than the {MAX_TRIGGER_EVENT_BYTES} one event may (strictTriggerValidation; set it to false to deliver it all the same)"
        )
    })
}

/// Matched paths, each once, in the order found, at most `limit`.
struct Matches {
    paths: Vec<Path>,
    seen: HashSet<Path>,
    limit: usize,
}

impl Matches {
    fn new(limit: usize) -> Matches {
        Matches {
            paths: Vec::new(),
            seen: HashSet::new(),
            limit,
        }
    }

    fn full(&self) -> bool {
        self.paths.len() >= self.limit
    }

    fn add(&mut self, path: Path) {
        if !self.full() && self.seen.insert(path.clone()) {
            self.paths.push(path);
        }
    }
}

#[cfg(test)]
#[path = "triggers_tests.rs"]
mod tests;
