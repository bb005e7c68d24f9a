//! The parsed form of a query (§7.1 of the wire protocol spec).
//!
//! Every type here is plain data with structural `Eq`/`Hash`, because the sync layer keys listens by
//! `(path, QueryParams)` and must recognise two listens on the same query as the same listen.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use hearth_tree::Path;

/// Largest accepted `l`. Clients can ask for any limit, but a window of more than a million children is far past
/// what one listen can sensibly carry; refusing it early keeps a single request from pinning the server.
pub const MAX_LIMIT: u32 = 1_000_000;

/// Wire spelling of the key tie-breaker that sorts before every key.
pub const MIN_NAME: &str = "[MIN_NAME]";
/// Wire spelling of the key tie-breaker that sorts after every key.
pub const MAX_NAME: &str = "[MAX_NAME]";

/// Which value of a child the query orders and filters by.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Index {
    /// The child's priority (`i` absent). Also the order of limit-only queries.
    #[default]
    Priority,
    /// The child's key (`i: ".key"`).
    Key,
    /// The child's own value (`i: ".value"`).
    Value,
    /// The value found at this (non-root) path below the child (`i: "score"`, `i: "a/b"`).
    Child(Path),
}

/// Which end of the ordered range a limit keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitFrom {
    /// `limitToFirst` — wire `vf: "l"`.
    First,
    /// `limitToLast` — wire `vf: "r"`.
    Last,
}

/// A window size and the end it is anchored at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Limit {
    /// Number of children kept, `1..=MAX_LIMIT`.
    pub count: u32,
    /// Which end of the range is kept.
    pub from: LimitFrom,
}

/// An `f64` with total equality and hashing, so bound values can live inside hashable [`QueryParams`].
///
/// `-0` is normalised to `0` on construction (the client treats them as the same number, and so must our
/// equality and hash). Ordering is IEEE `total_cmp`, which for the finite, `-0`-free values that occur here is
/// plain numeric order.
#[derive(Clone, Copy, Debug)]
pub struct OrderedF64(f64);

impl OrderedF64 {
    /// Wraps `value`, turning `-0` into `0`.
    pub fn new(value: f64) -> Self {
        OrderedF64(if value == 0.0 { 0.0 } else { value })
    }

    /// The wrapped number.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl From<f64> for OrderedF64 {
    fn from(value: f64) -> Self {
        OrderedF64::new(value)
    }
}

impl PartialEq for OrderedF64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for OrderedF64 {}

impl Hash for OrderedF64 {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

impl PartialOrd for OrderedF64 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedF64 {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The index value of a bound (`sp` / `ep`): a JSON primitive or null.
///
/// It is compared with a child's index value in value order (§9.2) — or in priority order (§9.3) for the
/// priority index, where `Null` means "no priority". For the key index it must be a `String`, compared as a key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BoundValue {
    /// JSON `null`: sorts before everything (a missing value / no priority).
    Null,
    /// A boolean (value and child indexes only).
    Bool(bool),
    /// A number.
    Number(OrderedF64),
    /// A string (for the key index: a key, or one of the [`MIN_NAME`] / [`MAX_NAME`] sentinels).
    String(Arc<str>),
}

impl BoundValue {
    /// The wire (JSON) form of this value.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            BoundValue::Null => serde_json::Value::Null,
            BoundValue::Bool(b) => serde_json::Value::Bool(*b),
            BoundValue::Number(n) => serde_json::Number::from_f64(n.get())
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            BoundValue::String(s) => serde_json::Value::String(s.to_string()),
        }
    }
}

/// The key tie-breaker of a bound (`sn` / `en`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BoundName {
    /// Sorts before every key (`[MIN_NAME]`, and the default for a start bound).
    Min,
    /// Sorts after every key (`[MAX_NAME]`, and the default for an end bound).
    Max,
    /// A raw name, compared with child keys by `compare_keys`.
    Name(Arc<str>),
}

impl BoundName {
    /// Reads a wire `sn` / `en` string, recognising the two sentinels.
    pub fn from_wire(name: &str) -> BoundName {
        match name {
            MIN_NAME => BoundName::Min,
            MAX_NAME => BoundName::Max,
            other => BoundName::Name(Arc::from(other)),
        }
    }
}

/// One end of a query range: the post `(value, name)` and whether children equal to it are included.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bound {
    /// The index value of the post.
    pub value: BoundValue,
    /// The key tie-breaker of the post (ignored by the key index).
    pub name: BoundName,
    /// `false` for `startAfter` / `endBefore`.
    pub inclusive: bool,
}

/// A parsed query: index, optional range ends and optional limit.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct QueryParams {
    /// What the children are ordered by.
    pub index: Index,
    /// Lower end of the range; `None` is open below.
    pub start: Option<Bound>,
    /// Upper end of the range; `None` is open above.
    pub end: Option<Bound>,
    /// Window size; `None` keeps every child in range.
    pub limit: Option<Limit>,
}

impl QueryParams {
    /// True when the query has a range or a limit, i.e. when the client sends it as a tagged listen (§7.3).
    ///
    /// An index alone does not filter: the client sorts locally and listens to the plain location.
    pub fn is_filtered(&self) -> bool {
        self.start.is_some() || self.end.is_some() || self.limit.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of<T: Hash>(value: &T) -> u64 {
        let mut hasher = DefaultHasher::new();
        value.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn negative_zero_is_normalised() {
        let neg = BoundValue::Number(OrderedF64::new(-0.0));
        let pos = BoundValue::Number(OrderedF64::new(0.0));
        assert_eq!(neg, pos);
        assert_eq!(hash_of(&neg), hash_of(&pos));
        assert_eq!(neg.to_json(), serde_json::json!(0.0));
    }

    #[test]
    fn ordered_f64_orders_numerically() {
        assert!(OrderedF64::new(-1.5) < OrderedF64::new(0.0));
        assert!(OrderedF64::new(2.0) > OrderedF64::new(1.0));
        assert_eq!(
            OrderedF64::new(3.0).cmp(&OrderedF64::new(3.0)),
            Ordering::Equal
        );
    }

    #[test]
    fn bound_name_sentinels() {
        assert_eq!(BoundName::from_wire("[MIN_NAME]"), BoundName::Min);
        assert_eq!(BoundName::from_wire("[MAX_NAME]"), BoundName::Max);
        assert_eq!(BoundName::from_wire("k"), BoundName::Name(Arc::from("k")));
    }

    #[test]
    fn default_is_unfiltered_priority_query() {
        let q = QueryParams::default();
        assert_eq!(q.index, Index::Priority);
        assert!(!q.is_filtered());
        let ordered_only = QueryParams {
            index: Index::Value,
            ..QueryParams::default()
        };
        assert!(!ordered_only.is_filtered());
        let limited = QueryParams {
            limit: Some(Limit {
                count: 1,
                from: LimitFrom::Last,
            }),
            ..QueryParams::default()
        };
        assert!(limited.is_filtered());
    }

    #[test]
    fn bound_value_json_round_trip() {
        assert_eq!(BoundValue::Null.to_json(), serde_json::Value::Null);
        assert_eq!(BoundValue::Bool(true).to_json(), serde_json::json!(true));
        assert_eq!(
            BoundValue::String(Arc::from("x")).to_json(),
            serde_json::json!("x")
        );
    }
}
