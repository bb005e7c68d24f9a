//! Paths: sequences of keys from the root of a database.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::key::Key;
use crate::limits::{TreeError, MAX_DEPTH, MAX_PATH_BYTES};

/// A location in the tree. Cloning is cheap (the keys live behind one reference count), because
/// paths are copied into every write, listen and event.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Path(Arc<[Key]>);

impl Path {
    /// The root, `/`.
    pub fn root() -> Path {
        Path::default()
    }

    /// Parses a path such as `/a/b`. Empty segments are dropped (so `""`, `"/"` and `"a//b/"`
    /// are fine), each segment must be a valid [`Key`], and the path may have at most
    /// [`MAX_DEPTH`] segments and [`MAX_PATH_BYTES`] bytes, as clients check for their writes.
    pub fn parse(s: &str) -> Result<Path, TreeError> {
        let segments = || s.split('/').filter(|segment| !segment.is_empty());
        let depth = segments().count();
        if depth > MAX_DEPTH {
            return Err(TreeError::TooDeep { depth });
        }
        let keys = segments().map(Key::new).collect::<Result<Vec<Key>, _>>()?;
        let path = Path::from_keys(keys);
        let bytes = path.byte_len();
        if bytes > MAX_PATH_BYTES {
            return Err(TreeError::PathTooLong { bytes });
        }
        Ok(path)
    }

    /// A path made of `keys`, without checking the limits (the keys are already valid).
    pub fn from_keys(keys: Vec<Key>) -> Path {
        Path(keys.into())
    }

    /// The keys from the root down.
    pub fn keys(&self) -> &[Key] {
        &self.0
    }

    /// Number of segments (0 for the root).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether this is the root.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether this is the root (same as [`Path::is_empty`], reads better at call sites).
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The first segment.
    pub fn first(&self) -> Option<&Key> {
        self.0.first()
    }

    /// The last segment: the key of the node the path points at.
    pub fn last(&self) -> Option<&Key> {
        self.0.last()
    }

    /// The path with one more segment.
    pub fn child(&self, key: Key) -> Path {
        let mut keys = Vec::with_capacity(self.len() + 1);
        keys.extend_from_slice(&self.0);
        keys.push(key);
        Path::from_keys(keys)
    }

    /// This path followed by `rel`.
    pub fn join(&self, rel: &Path) -> Path {
        if rel.is_root() {
            return self.clone();
        }
        if self.is_root() {
            return rel.clone();
        }
        let mut keys = Vec::with_capacity(self.len() + rel.len());
        keys.extend_from_slice(&self.0);
        keys.extend_from_slice(&rel.0);
        Path::from_keys(keys)
    }

    /// The path without its last segment; `None` for the root.
    pub fn parent(&self) -> Option<Path> {
        let (_, init) = self.0.split_last()?;
        Some(Path::from_keys(init.to_vec()))
    }

    /// Whether `prefix` is an ancestor of this path or the path itself.
    pub fn starts_with(&self, prefix: &Path) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// The path relative to `prefix`, if `prefix` is an ancestor or the path itself.
    pub fn strip_prefix(&self, prefix: &Path) -> Option<Path> {
        let rest = self.0.strip_prefix(&*prefix.0)?;
        if rest.len() == self.len() {
            return Some(self.clone());
        }
        Some(Path::from_keys(rest.to_vec()))
    }

    /// The path without its first `n` segments (the root if `n >= len`).
    pub fn skip(&self, n: usize) -> Path {
        match n {
            0 => self.clone(),
            n if n >= self.len() => Path::root(),
            n => Path::from_keys(self.0[n..].to_vec()),
        }
    }

    /// Length in UTF-8 bytes as the clients measure it for [`MAX_PATH_BYTES`]: the segments
    /// plus one `/` between each, and at least 1.
    pub fn byte_len(&self) -> usize {
        let segments: usize = self.0.iter().map(|key| key.as_str().len()).sum();
        (segments + self.len().saturating_sub(1)).max(1)
    }
}

/// Paths order key by key in name order, an ancestor before its descendants, so sorting a set
/// of paths puts every ancestor right before its subtree.
impl Ord for Path {
    fn cmp(&self, other: &Path) -> Ordering {
        self.0.iter().cmp(other.0.iter())
    }
}

impl PartialOrd for Path {
    fn partial_cmp(&self, other: &Path) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            return f.write_str("/");
        }
        for key in self.0.iter() {
            write!(f, "/{key}")?;
        }
        Ok(())
    }
}

impl From<Key> for Path {
    fn from(key: Key) -> Path {
        Path::from_keys(vec![key])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Path {
        Path::parse(s).expect("valid test path")
    }

    fn key(s: &str) -> Key {
        Key::new(s).expect("valid test key")
    }

    #[test]
    fn parsing_drops_empty_segments() {
        assert!(path("").is_root());
        assert!(path("/").is_root());
        assert!(path("//").is_root());
        let p = path("a//b/");
        assert_eq!(p.len(), 2);
        assert_eq!(p, path("/a/b"));
        assert_eq!(p.first(), Some(&key("a")));
        assert_eq!(p.last(), Some(&key("b")));
        assert_eq!(p.to_string(), "/a/b");
        assert_eq!(Path::root().to_string(), "/");
        assert!(matches!(
            Path::parse("/a/b.c"),
            Err(TreeError::InvalidKey { .. })
        ));
        let refused_key = |path: &str, bad: &str| match Path::parse(path) {
            Err(TreeError::InvalidKey { key, .. }) => key == bad,
            _ => false,
        };
        assert!(refused_key("/.info/connected", ".info"));
        assert!(refused_key("/-0", "-0"));
    }

    #[test]
    fn depth_limit() {
        let deepest = "/k".repeat(MAX_DEPTH);
        assert_eq!(path(&deepest).len(), MAX_DEPTH);
        let too_deep = "/k".repeat(MAX_DEPTH + 1);
        assert_eq!(
            Path::parse(&too_deep),
            Err(TreeError::TooDeep { depth: 33 })
        );
    }

    #[test]
    fn byte_limit() {
        // Two segments of 383 bytes and one separator: 767 bytes; 384 + 1 + 383 = 768.
        let a = "a".repeat(384);
        let b = "b".repeat(383);
        assert_eq!(path(&format!("/{a}/{b}")).byte_len(), 768);
        let c = "c".repeat(384);
        assert_eq!(
            Path::parse(&format!("/{a}/{c}")),
            Err(TreeError::PathTooLong { bytes: 769 })
        );
        assert_eq!(Path::root().byte_len(), 1);
        assert_eq!(path("/ab").byte_len(), 2);
        assert_eq!(path("/ab/c").byte_len(), 4);
    }

    #[test]
    fn navigation() {
        let ab = path("/a/b");
        assert_eq!(ab.parent(), Some(path("/a")));
        assert_eq!(path("/a").parent(), Some(Path::root()));
        assert_eq!(Path::root().parent(), None);
        assert_eq!(ab.child(key("c")), path("/a/b/c"));
        assert_eq!(path("/a").join(&path("/b/c")), path("/a/b/c"));
        assert_eq!(Path::root().join(&ab), ab);
        assert_eq!(ab.join(&Path::root()), ab);
        assert!(ab.starts_with(&path("/a")));
        assert!(ab.starts_with(&ab));
        assert!(ab.starts_with(&Path::root()));
        assert!(!path("/a").starts_with(&ab));
        assert!(!path("/ab").starts_with(&path("/a")));
        assert_eq!(ab.strip_prefix(&path("/a")), Some(path("/b")));
        assert_eq!(ab.strip_prefix(&ab), Some(Path::root()));
        assert_eq!(ab.strip_prefix(&Path::root()), Some(ab.clone()));
        assert_eq!(ab.strip_prefix(&path("/b")), None);
        assert_eq!(ab.skip(1), path("/b"));
        assert_eq!(ab.skip(5), Path::root());
        assert_eq!(Path::from(key("x")), path("/x"));
    }

    #[test]
    fn ordering_is_key_by_key() {
        let mut paths = [
            path("/b"),
            path("/a/c"),
            path("/10"),
            path("/a"),
            path("/9/z"),
            Path::root(),
            path("/a/b"),
        ];
        paths.sort();
        let text: Vec<String> = paths.iter().map(Path::to_string).collect();
        assert_eq!(text, ["/", "/9/z", "/10", "/a", "/a/b", "/a/c", "/b"]);
    }
}
