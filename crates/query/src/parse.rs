//! Reading the wire query object `q` of a listen or get (§7.1).
//!
//! The official clients validate queries before sending them, so anything odd here comes from a buggy or
//! hostile client (or a REST front end building the object itself). We refuse such input with a clear error
//! instead of guessing, because a guessed range would silently show the client a different window than it
//! asked for. Unknown keys are ignored so that newer clients adding fields keep working.

use serde_json::{Map, Value};

use hearth_tree::Path;

use crate::error::QueryError;
use crate::params::{
    Bound, BoundName, BoundValue, Index, Limit, LimitFrom, OrderedF64, QueryParams, MAX_LIMIT,
};

/// The wire field names of one end of the range, and the tie-breaker used when the name is absent.
struct Side {
    value: &'static str,
    name: &'static str,
    inclusive: &'static str,
    default_name: BoundName,
}

const START: Side = Side {
    value: "sp",
    name: "sn",
    inclusive: "sin",
    default_name: BoundName::Min,
};
const END: Side = Side {
    value: "ep",
    name: "en",
    inclusive: "ein",
    default_name: BoundName::Max,
};

impl QueryParams {
    /// Parses the wire query object `q` (§7.1): keys `sp`, `sn`, `sin`, `ep`, `en`, `ein`, `l`, `vf`, `i`.
    ///
    /// * `{}` gives the default (unfiltered, priority-ordered) query.
    /// * `i` absent (or `".priority"`) is the priority index, `".key"` the key index, `".value"` the value index,
    ///   anything else a child path (`"a/b"` nests).
    /// * A missing `sn` means `[MIN_NAME]`, a missing `en` `[MAX_NAME]`; `sin`/`ein` default to `true`.
    /// * With `.key`, `sp`/`ep` must be strings and `sn`/`en` are ignored (the key is the whole post); with the
    ///   priority index they must be null, a number or a string; objects and arrays are never allowed.
    /// * `l` must be an integer in `1..=MAX_LIMIT`; `vf` is `"l"` (default) or `"r"`.
    /// * Qualifiers without what they qualify (`sn` without `sp`, `vf` without `l`, …) are refused.
    pub fn from_wire(q: &Value) -> Result<QueryParams, QueryError> {
        let obj = q.as_object().ok_or(QueryError::NotAnObject)?;
        let index = parse_index(obj.get("i"))?;
        let start = parse_bound(obj, &index, &START)?;
        let end = parse_bound(obj, &index, &END)?;
        let limit = parse_limit(obj.get("l"), obj.get("vf"))?;
        Ok(QueryParams {
            index,
            start,
            end,
            limit,
        })
    }
}

fn parse_index(raw: Option<&Value>) -> Result<Index, QueryError> {
    let text = match raw {
        None => return Ok(Index::Priority),
        Some(Value::String(text)) => text,
        Some(_) => {
            return Err(QueryError::WrongType {
                field: "i",
                expected: "a string",
            })
        }
    };
    match text.as_str() {
        ".key" => Ok(Index::Key),
        ".value" => Ok(Index::Value),
        // The client never sends this (priority order is the absence of `i`), but it is the index's own name.
        ".priority" => Ok(Index::Priority),
        _ => {
            let path = Path::parse(text).map_err(|err| QueryError::InvalidIndex {
                index: text.clone(),
                reason: err.to_string(),
            })?;
            if path.is_root() {
                return Err(QueryError::InvalidIndex {
                    index: text.clone(),
                    reason: "a child index needs a non-empty path (use \".value\" to order by the child itself)"
                        .to_owned(),
                });
            }
            Ok(Index::Child(path))
        }
    }
}

fn parse_bound(
    obj: &Map<String, Value>,
    index: &Index,
    side: &Side,
) -> Result<Option<Bound>, QueryError> {
    let Some(raw_value) = obj.get(side.value) else {
        for qualifier in [side.name, side.inclusive] {
            if obj.contains_key(qualifier) {
                return Err(QueryError::Orphan {
                    field: qualifier,
                    requires: side.value,
                });
            }
        }
        return Ok(None);
    };
    let value = parse_bound_value(raw_value, index, side.value)?;
    let inclusive = match obj.get(side.inclusive) {
        None => true,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            return Err(QueryError::WrongType {
                field: side.inclusive,
                expected: "a boolean",
            })
        }
    };
    let name = match obj.get(side.name) {
        None => side.default_name.clone(),
        Some(Value::String(name)) => BoundName::from_wire(name),
        Some(_) => {
            return Err(QueryError::WrongType {
                field: side.name,
                expected: "a string",
            })
        }
    };
    // For the key index the key *is* the post, so a tie-breaker has no meaning. Normalising it keeps two
    // equivalent queries equal (and hashing alike) when they key a listen table.
    let name = if *index == Index::Key {
        side.default_name.clone()
    } else {
        name
    };
    Ok(Some(Bound {
        value,
        name,
        inclusive,
    }))
}

fn parse_bound_value(
    raw: &Value,
    index: &Index,
    field: &'static str,
) -> Result<BoundValue, QueryError> {
    let value = match raw {
        Value::Null => BoundValue::Null,
        Value::Bool(flag) => BoundValue::Bool(*flag),
        Value::Number(number) => {
            let number =
                number
                    .as_f64()
                    .filter(|n| n.is_finite())
                    .ok_or(QueryError::WrongType {
                        field,
                        expected: "a finite number",
                    })?;
            BoundValue::Number(OrderedF64::new(number))
        }
        Value::String(text) => BoundValue::String(text.as_str().into()),
        Value::Array(_) | Value::Object(_) => {
            return Err(QueryError::WrongType {
                field,
                expected: "a JSON primitive or null",
            });
        }
    };
    match (index, &value) {
        (Index::Key, BoundValue::String(_)) => Ok(value),
        (Index::Key, _) => Err(QueryError::WrongType {
            field,
            expected: "a string when ordering by key",
        }),
        (Index::Priority, BoundValue::Bool(_)) => Err(QueryError::WrongType {
            field,
            expected: "null, a number or a string when ordering by priority",
        }),
        _ => Ok(value),
    }
}

fn parse_limit(count: Option<&Value>, from: Option<&Value>) -> Result<Option<Limit>, QueryError> {
    let Some(count) = count else {
        if from.is_some() {
            return Err(QueryError::Orphan {
                field: "vf",
                requires: "l",
            });
        }
        return Ok(None);
    };
    let invalid = || QueryError::InvalidLimit {
        got: count.to_string(),
    };
    let whole = match count.as_u64() {
        Some(whole) => whole,
        // JavaScript has no integer type, so `2.0` from a non-JS client means the same as `2`.
        None => match count.as_f64() {
            Some(float)
                if float.fract() == 0.0 && float >= 1.0 && float <= f64::from(MAX_LIMIT) =>
            {
                float as u64
            }
            _ => return Err(invalid()),
        },
    };
    let count = u32::try_from(whole)
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(invalid)?;
    let from = match from {
        None => LimitFrom::First,
        Some(Value::String(anchor)) if anchor == "l" => LimitFrom::First,
        Some(Value::String(anchor)) if anchor == "r" => LimitFrom::Last,
        Some(other) => {
            return Err(QueryError::InvalidLimitFrom {
                got: other.to_string(),
            })
        }
    };
    Ok(Some(Limit { count, from }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn parse(q: Value) -> QueryParams {
        match QueryParams::from_wire(&q) {
            Ok(params) => params,
            Err(err) => panic!("{q} failed to parse: {err}"),
        }
    }

    fn parse_err(q: Value) -> QueryError {
        match QueryParams::from_wire(&q) {
            Ok(params) => panic!("{q} unexpectedly parsed as {params:?}"),
            Err(err) => err,
        }
    }

    fn child(path: &str) -> Index {
        Index::Child(Path::parse(path).expect("valid path"))
    }

    fn num(n: f64) -> BoundValue {
        BoundValue::Number(OrderedF64::new(n))
    }

    fn string(s: &str) -> BoundValue {
        BoundValue::String(Arc::from(s))
    }

    fn bound(value: BoundValue, name: BoundName, inclusive: bool) -> Option<Bound> {
        Some(Bound {
            value,
            name,
            inclusive,
        })
    }

    fn limit(count: u32, from: LimitFrom) -> Option<Limit> {
        Some(Limit { count, from })
    }

    #[test]
    fn empty_object_is_default() {
        assert_eq!(parse(json!({})), QueryParams::default());
    }

    #[test]
    fn order_by_child_limit_to_last() {
        let q = parse(json!({"l":2,"vf":"r","i":"score"}));
        assert_eq!(
            q,
            QueryParams {
                index: child("score"),
                start: None,
                end: None,
                limit: limit(2, LimitFrom::Last)
            }
        );
    }

    #[test]
    fn nested_child_start_end() {
        let q = parse(json!({"sp":5,"sin":true,"ep":10,"ein":true,"i":"a/b"}));
        assert_eq!(
            q,
            QueryParams {
                index: child("a/b"),
                start: bound(num(5.0), BoundName::Min, true),
                end: bound(num(10.0), BoundName::Max, true),
                limit: None,
            }
        );
        match &q.index {
            Index::Child(path) => assert_eq!(path.len(), 2),
            other => panic!("unexpected index {other:?}"),
        }
    }

    #[test]
    fn start_after_uses_max_name() {
        let q = parse(json!({"sp":5,"sn":"[MAX_NAME]","sin":false,"i":"score"}));
        assert_eq!(q.index, child("score"));
        assert_eq!(q.start, bound(num(5.0), BoundName::Max, false));
        assert_eq!(q.end, None);
        assert_eq!(q.limit, None);
    }

    #[test]
    fn end_before_with_name() {
        let q = parse(json!({"ep":5,"en":"k","ein":false,"i":"score"}));
        assert_eq!(q.start, None);
        assert_eq!(
            q.end,
            bound(num(5.0), BoundName::Name(Arc::from("k")), false)
        );
    }

    #[test]
    fn key_start_after_limit_first() {
        let q = parse(json!({"sp":"b","sin":false,"l":3,"vf":"l","i":".key"}));
        assert_eq!(
            q,
            QueryParams {
                index: Index::Key,
                start: bound(string("b"), BoundName::Min, false),
                end: None,
                limit: limit(3, LimitFrom::First),
            }
        );
    }

    #[test]
    fn value_equal_to_true() {
        let q = parse(json!({"sp":true,"sin":true,"ep":true,"ein":true,"i":".value"}));
        assert_eq!(q.index, Index::Value);
        assert_eq!(q.start, bound(BoundValue::Bool(true), BoundName::Min, true));
        assert_eq!(q.end, bound(BoundValue::Bool(true), BoundName::Max, true));
    }

    #[test]
    fn priority_start_at_with_name() {
        let q = parse(json!({"sp":1,"sn":"x","sin":true}));
        assert_eq!(q.index, Index::Priority);
        assert_eq!(
            q.start,
            bound(num(1.0), BoundName::Name(Arc::from("x")), true)
        );
        assert!(q.is_filtered());
    }

    #[test]
    fn child_equal_to_null() {
        let q = parse(json!({"sp":null,"sin":true,"ep":null,"ein":true,"i":"n"}));
        assert_eq!(q.index, child("n"));
        assert_eq!(q.start, bound(BoundValue::Null, BoundName::Min, true));
        assert_eq!(q.end, bound(BoundValue::Null, BoundName::Max, true));
    }

    #[test]
    fn limit_only_is_priority_order() {
        let q = parse(json!({"l":1,"vf":"r"}));
        assert_eq!(
            q,
            QueryParams {
                limit: limit(1, LimitFrom::Last),
                ..QueryParams::default()
            }
        );
    }

    #[test]
    fn index_only_is_not_filtered() {
        let q = parse(json!({"i":"x"}));
        assert_eq!(q.index, child("x"));
        assert!(!q.is_filtered());
    }

    #[test]
    fn defaults_and_leniency() {
        // sin/ein default to true, vf defaults to "l", unknown keys are ignored.
        let q = parse(json!({"sp":"a","ep":"b","l":4,"i":".key","future":1}));
        assert_eq!(q.start, bound(string("a"), BoundName::Min, true));
        assert_eq!(q.end, bound(string("b"), BoundName::Max, true));
        assert_eq!(q.limit, limit(4, LimitFrom::First));
        assert_eq!(parse(json!({"i":".priority"})).index, Index::Priority);
        assert_eq!(parse(json!({"l":2.0})).limit, limit(2, LimitFrom::First));
        assert_eq!(
            parse(json!({"l":MAX_LIMIT})).limit,
            limit(MAX_LIMIT, LimitFrom::First)
        );
        assert_eq!(
            parse(json!({"sp":-0.0})).start,
            bound(num(0.0), BoundName::Min, true)
        );
    }

    #[test]
    fn key_index_ignores_names() {
        let q = parse(json!({"sp":"a","sn":"zz","ep":"b","en":"yy","i":".key"}));
        assert_eq!(q.start, bound(string("a"), BoundName::Min, true));
        assert_eq!(q.end, bound(string("b"), BoundName::Max, true));
        assert_eq!(q, parse(json!({"sp":"a","ep":"b","i":".key"})));
    }

    #[test]
    fn sentinel_names_as_end_name() {
        let q = parse(json!({"ep":"x","en":"[MIN_NAME]","ein":false}));
        assert_eq!(q.end, bound(string("x"), BoundName::Min, false));
    }

    #[test]
    fn rejects_non_objects() {
        for q in [json!(null), json!([]), json!("q"), json!(3)] {
            assert_eq!(parse_err(q), QueryError::NotAnObject);
        }
    }

    #[test]
    fn rejects_bad_bound_values() {
        assert!(matches!(
            parse_err(json!({"sp":{"a":1}})),
            QueryError::WrongType { field: "sp", .. }
        ));
        assert!(matches!(
            parse_err(json!({"ep":[1], "i":"x"})),
            QueryError::WrongType { field: "ep", .. }
        ));
        assert!(matches!(
            parse_err(json!({"sp":1,"i":".key"})),
            QueryError::WrongType { field: "sp", .. }
        ));
        assert!(matches!(
            parse_err(json!({"ep":null,"i":".key"})),
            QueryError::WrongType { field: "ep", .. }
        ));
        assert!(matches!(
            parse_err(json!({"sp":true})),
            QueryError::WrongType { field: "sp", .. }
        ));
        assert!(matches!(
            parse_err(json!({"sp":1,"sn":2})),
            QueryError::WrongType { field: "sn", .. }
        ));
        assert!(matches!(
            parse_err(json!({"sp":1,"sin":"no"})),
            QueryError::WrongType { field: "sin", .. }
        ));
        assert!(matches!(
            parse_err(json!({"ep":1,"ein":1})),
            QueryError::WrongType { field: "ein", .. }
        ));
    }

    #[test]
    fn rejects_orphans() {
        assert_eq!(
            parse_err(json!({"sn":"a"})),
            QueryError::Orphan {
                field: "sn",
                requires: "sp"
            }
        );
        assert_eq!(
            parse_err(json!({"sin":true})),
            QueryError::Orphan {
                field: "sin",
                requires: "sp"
            }
        );
        assert_eq!(
            parse_err(json!({"en":"a"})),
            QueryError::Orphan {
                field: "en",
                requires: "ep"
            }
        );
        assert_eq!(
            parse_err(json!({"ein":false})),
            QueryError::Orphan {
                field: "ein",
                requires: "ep"
            }
        );
        assert_eq!(
            parse_err(json!({"vf":"r"})),
            QueryError::Orphan {
                field: "vf",
                requires: "l"
            }
        );
    }

    #[test]
    fn rejects_bad_limits() {
        for l in [
            json!(0),
            json!(-1),
            json!(1.5),
            json!("3"),
            json!(null),
            json!(MAX_LIMIT as u64 + 1),
            json!(1e300),
        ] {
            let err = parse_err(json!({ "l": l }));
            assert!(
                matches!(err, QueryError::InvalidLimit { .. }),
                "{l}: {err:?}"
            );
            assert!(err.to_string().contains("1 to 1000000"));
        }
        assert_eq!(
            parse_err(json!({"l":1,"vf":"x"})),
            QueryError::InvalidLimitFrom {
                got: "\"x\"".to_owned()
            }
        );
        assert!(matches!(
            parse_err(json!({"l":1,"vf":1})),
            QueryError::InvalidLimitFrom { .. }
        ));
    }

    #[test]
    fn rejects_bad_indexes() {
        assert!(matches!(
            parse_err(json!({"i":3})),
            QueryError::WrongType { field: "i", .. }
        ));
        assert!(matches!(
            parse_err(json!({"i":""})),
            QueryError::InvalidIndex { .. }
        ));
        assert!(matches!(
            parse_err(json!({"i":"a/$b"})),
            QueryError::InvalidIndex { .. }
        ));
        assert!(matches!(
            parse_err(json!({"i":"a[0]"})),
            QueryError::InvalidIndex { .. }
        ));
    }

    #[test]
    fn error_messages_name_the_field() {
        let err = parse_err(json!({"sp":1,"i":".key"}));
        assert_eq!(
            err.to_string(),
            "query field `sp` must be a string when ordering by key"
        );
        assert_eq!(
            QueryError::NotAnObject.to_string(),
            "query must be a JSON object"
        );
    }
}
