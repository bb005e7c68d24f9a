//! Errors raised while reading a wire query object.

use crate::params::MAX_LIMIT;

/// Why a query object `q` was refused.
///
/// The messages are meant to be sent back to the client (as the `d` of an error status), so they name the
/// offending wire field the way the client spells it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// `q` itself was not a JSON object.
    #[error("query must be a JSON object")]
    NotAnObject,
    /// A field had a JSON type that is not allowed for it (possibly only under the chosen index).
    #[error("query field `{field}` must be {expected}")]
    WrongType {
        /// The wire name of the field (`sp`, `sn`, …).
        field: &'static str,
        /// What was expected, in words.
        expected: &'static str,
    },
    /// A field that only qualifies another one (`sn`, `sin`, `vf`, …) appeared without it.
    #[error("query field `{field}` is only allowed together with `{requires}`")]
    Orphan {
        /// The field that was present.
        field: &'static str,
        /// The field it depends on, which was missing.
        requires: &'static str,
    },
    /// `i` named a child path that is not a valid path (or is empty).
    #[error("invalid query index {index:?}: {reason}")]
    InvalidIndex {
        /// The raw `i` string.
        index: String,
        /// Why it was refused.
        reason: String,
    },
    /// `l` was not an integer in `1..=MAX_LIMIT`.
    #[error("query limit `l` must be an integer from 1 to {max}, got {got}", max = MAX_LIMIT)]
    InvalidLimit {
        /// The offending value, as JSON text.
        got: String,
    },
    /// `vf` was neither `"l"` nor `"r"`.
    #[error("query field `vf` must be \"l\" or \"r\", got {got}")]
    InvalidLimitFrom {
        /// The offending value, as JSON text.
        got: String,
    },
}
