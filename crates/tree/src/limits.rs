//! Named limits of the data model and the error type that reports a breach of them.
//!
//! Every limit is a constant so that the parser, the error messages and the tests all speak of
//! the same number. The values follow what the official clients check before sending a write
//! (spec §17): a server that enforces the same limits refuses exactly what a client would have
//! refused itself, which matters for REST and non-JS clients that skip client-side checks.

use thiserror::Error;

/// Longest key, in UTF-8 bytes.
pub const MAX_KEY_BYTES: usize = 768;

/// Most path segments from the root to any node (a write reaching depth 33 is refused).
pub const MAX_DEPTH: usize = 32;

/// Longest string value or string priority, in UTF-8 bytes (10 MiB).
pub const MAX_STRING_BYTES: usize = 10 * 1024 * 1024;

/// Longest path, in UTF-8 bytes, counted as the clients count it: the segments plus one `/`
/// between each, and at least 1 (spec §17, "Path written by the client").
pub const MAX_PATH_BYTES: usize = 768;

/// Longest excerpt of an offending key quoted in an error, so that a hostile multi-megabyte key
/// does not turn into a multi-megabyte error message.
const MAX_QUOTED_KEY_BYTES: usize = 100;

/// Why a key, path, value or priority was refused.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum TreeError {
    /// A key is empty, too long or contains a forbidden character.
    #[error("invalid key {key:?}: {reason}")]
    InvalidKey { key: String, reason: &'static str },
    /// Data or a path reaches deeper than [`MAX_DEPTH`] segments.
    #[error("the path reaches depth {depth}, deeper than the limit of {MAX_DEPTH} segments")]
    TooDeep { depth: usize },
    /// A string is longer than [`MAX_STRING_BYTES`].
    #[error("a string of {bytes} bytes is longer than the limit of {MAX_STRING_BYTES} bytes")]
    StringTooLong { bytes: usize },
    /// A value cannot be stored (wrong shape, unresolved server value, non-finite number, ...).
    #[error("invalid value: {0}")]
    InvalidValue(String),
    /// A priority is neither null, a finite number nor a string.
    #[error("invalid priority: {0}")]
    InvalidPriority(String),
    /// A path is longer than [`MAX_PATH_BYTES`].
    #[error("a path of {bytes} bytes is longer than the limit of {MAX_PATH_BYTES} bytes")]
    PathTooLong { bytes: usize },
}

impl TreeError {
    /// An [`TreeError::InvalidKey`] quoting at most the first few bytes of `key`.
    pub(crate) fn invalid_key(key: &str, reason: &'static str) -> TreeError {
        let mut end = key.len().min(MAX_QUOTED_KEY_BYTES);
        while !key.is_char_boundary(end) {
            end -= 1;
        }
        let mut quoted = key[..end].to_owned();
        if end < key.len() {
            quoted.push('…');
        }
        TreeError::InvalidKey {
            key: quoted,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_readable() {
        let err = TreeError::TooDeep { depth: 33 };
        assert_eq!(
            err.to_string(),
            "the path reaches depth 33, deeper than the limit of 32 segments"
        );
        let err = TreeError::invalid_key("a.b", "no dots");
        assert_eq!(err.to_string(), "invalid key \"a.b\": no dots");
    }

    #[test]
    fn long_keys_are_quoted_briefly() {
        let key = "é".repeat(1000);
        match TreeError::invalid_key(&key, "too long") {
            TreeError::InvalidKey { key, .. } => {
                assert!(key.len() <= MAX_QUOTED_KEY_BYTES + '…'.len_utf8());
                assert!(key.ends_with('…'));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
