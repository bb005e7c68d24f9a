//! Priorities: the optional sort value attached to a non-empty node (spec §8, §9.3).

use std::cmp::Ordering;
use std::sync::Arc;

use serde_json::Value;

use crate::key::compare_utf16;
use crate::limits::{TreeError, MAX_STRING_BYTES};
use crate::number::number_to_value;

/// A node's priority. Ordered as the client orders them (spec §9.3): no priority, then numbers
/// ascending, then strings in UTF-16 order.
#[derive(Clone, Debug, Default)]
pub enum Priority {
    #[default]
    None,
    Number(f64),
    String(Arc<str>),
}

impl Priority {
    /// Whether there is no priority.
    pub fn is_none(&self) -> bool {
        matches!(self, Priority::None)
    }

    /// Reads a priority from JSON: null means none, numbers and strings are kept, anything else
    /// (booleans, objects including unresolved `.sv` placeholders, arrays) is refused.
    pub fn from_json(v: &Value) -> Result<Priority, TreeError> {
        match v {
            Value::Null => Ok(Priority::None),
            Value::Number(n) => match n.as_f64() {
                Some(f) if f.is_finite() => Ok(Priority::Number(normalize_zero(f))),
                _ => Err(TreeError::InvalidPriority(format!(
                    "{n} is not a finite number"
                ))),
            },
            Value::String(s) => {
                if s.len() > MAX_STRING_BYTES {
                    return Err(TreeError::StringTooLong { bytes: s.len() });
                }
                Ok(Priority::String(Arc::from(s.as_str())))
            }
            Value::Bool(_) => Err(TreeError::InvalidPriority(
                "a priority cannot be a boolean".into(),
            )),
            Value::Object(_) | Value::Array(_) => Err(TreeError::InvalidPriority(
                "a priority must be null, a number or a string".into(),
            )),
        }
    }

    /// The priority as JSON (null for none).
    pub fn to_json(&self) -> Value {
        match self {
            Priority::None => Value::Null,
            Priority::Number(n) => number_to_value(*n),
            Priority::String(s) => Value::String(s.to_string()),
        }
    }

    /// The form stored in nodes: `-0` becomes `0` (it would hash differently, spec §17) and a
    /// non-finite number, which no client can send or read, becomes no priority.
    pub(crate) fn normalized(self) -> Priority {
        match self {
            Priority::Number(n) if !n.is_finite() => Priority::None,
            Priority::Number(n) => Priority::Number(normalize_zero(n)),
            other => other,
        }
    }

    /// Rank of the kind of priority in the order none < number < string.
    fn rank(&self) -> u8 {
        match self {
            Priority::None => 0,
            Priority::Number(_) => 1,
            Priority::String(_) => 2,
        }
    }
}

/// Turns `-0.0` into `0.0` and leaves every other value alone.
pub(crate) fn normalize_zero(v: f64) -> f64 {
    if v == 0.0 {
        0.0
    } else {
        v
    }
}

/// A total order on doubles that agrees with `<` on ordinary values and treats `-0` and `0` as
/// equal (they are adjacent in `total_cmp`, so merging them keeps the order transitive).
pub(crate) fn compare_f64(a: f64, b: f64) -> Ordering {
    if a == b {
        Ordering::Equal
    } else {
        a.total_cmp(&b)
    }
}

impl Ord for Priority {
    fn cmp(&self, other: &Priority) -> Ordering {
        match (self, other) {
            (Priority::Number(a), Priority::Number(b)) => compare_f64(*a, *b),
            (Priority::String(a), Priority::String(b)) => compare_utf16(a, b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Priority {
    fn partial_cmp(&self, other: &Priority) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Priority {
    fn eq(&self, other: &Priority) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Priority {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn string(s: &str) -> Priority {
        Priority::String(Arc::from(s))
    }

    #[test]
    fn order_is_none_numbers_strings() {
        let ascending = [
            Priority::None,
            Priority::Number(-1e300),
            Priority::Number(-1.0),
            Priority::Number(0.0),
            Priority::Number(0.5),
            Priority::Number(2.0),
            Priority::Number(10.0),
            string(""),
            string("10"),
            string("2"),
            string("B"),
            string("a"),
            string("😀"),
            string("｡"),
        ];
        for (i, a) in ascending.iter().enumerate() {
            for (j, b) in ascending.iter().enumerate() {
                assert_eq!(a.cmp(b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
        assert_eq!(Priority::Number(-0.0), Priority::Number(0.0));
        assert!(Priority::None.is_none());
        assert!(!Priority::Number(1.0).is_none());
    }

    #[test]
    fn json_round_trip() {
        assert_eq!(Priority::from_json(&json!(null)), Ok(Priority::None));
        assert_eq!(Priority::from_json(&json!(3)), Ok(Priority::Number(3.0)));
        assert_eq!(
            Priority::from_json(&json!(-2.5)),
            Ok(Priority::Number(-2.5))
        );
        assert_eq!(Priority::from_json(&json!("p")), Ok(string("p")));
        for bad in [
            json!(true),
            json!({"a": 1}),
            json!([1]),
            json!({".sv": "timestamp"}),
        ] {
            assert!(matches!(
                Priority::from_json(&bad),
                Err(TreeError::InvalidPriority(_))
            ));
        }
        assert_eq!(Priority::Number(3.0).to_json(), json!(3));
        assert_eq!(Priority::Number(0.25).to_json(), json!(0.25));
        assert_eq!(string("x").to_json(), json!("x"));
        assert_eq!(Priority::None.to_json(), json!(null));
    }

    #[test]
    fn negative_zero_is_normalized() {
        let parsed = Priority::from_json(&json!(-0.0)).expect("valid");
        match parsed {
            Priority::Number(n) => assert!(n.is_sign_positive()),
            other => panic!("unexpected {other:?}"),
        }
        match Priority::Number(-0.0).normalized() {
            Priority::Number(n) => assert!(n.is_sign_positive()),
            other => panic!("unexpected {other:?}"),
        }
        assert!(Priority::Number(f64::NAN).normalized().is_none());
    }
}
