//! Reading the query parameters of a REST request (spec §15.3): `orderBy`, `startAt`,
//! `startAfter`, `endAt`, `endBefore`, `equalTo`, `limitToFirst` and `limitToLast`.
//!
//! Each value is JSON text (`orderBy="age"`, `startAt=5`, `endAt="z"`); a range value may be
//! followed by a comma and a JSON string naming the key tie-breaker (`startAt=5,"k"`), as the
//! JS REST client sends it. The parameters are translated into the wire query object and read
//! by [`QueryParams::from_wire`], so both front ends share one definition of a query.

use serde_json::{Map, Value};

use hearth_tree::{replace_lone_surrogates_str, Path};

use crate::error::QueryError;
use crate::params::{QueryParams, MAX_LIMIT, MAX_NAME, MIN_NAME};

/// The query parameters of one REST request, percent-decoded but otherwise as received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestQueryText {
    pub order_by: Option<String>,
    pub start_at: Option<String>,
    pub start_after: Option<String>,
    pub end_at: Option<String>,
    pub end_before: Option<String>,
    pub equal_to: Option<String>,
    pub limit_to_first: Option<String>,
    pub limit_to_last: Option<String>,
}

impl RestQueryText {
    /// Takes the query parameters out of `(name, value)` pairs; other names are ignored. When a
    /// name repeats, the last value counts.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> RestQueryText {
        let mut text = RestQueryText::default();
        for (name, value) in pairs {
            let slot = match name {
                "orderBy" => &mut text.order_by,
                "startAt" => &mut text.start_at,
                "startAfter" => &mut text.start_after,
                "endAt" => &mut text.end_at,
                "endBefore" => &mut text.end_before,
                "equalTo" => &mut text.equal_to,
                "limitToFirst" => &mut text.limit_to_first,
                "limitToLast" => &mut text.limit_to_last,
                _ => continue,
            };
            *slot = Some(value.to_owned());
        }
        text
    }

    /// Whether any query parameter is present.
    pub fn is_empty(&self) -> bool {
        *self == RestQueryText::default()
    }

    fn filters(&self) -> [(&'static str, &Option<String>); 7] {
        [
            ("startAt", &self.start_at),
            ("startAfter", &self.start_after),
            ("endAt", &self.end_at),
            ("endBefore", &self.end_before),
            ("equalTo", &self.equal_to),
            ("limitToFirst", &self.limit_to_first),
            ("limitToLast", &self.limit_to_last),
        ]
    }
}

/// A REST query, ready to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestQuery {
    pub params: QueryParams,
    /// `limitToFirst=0` or `limitToLast=0`: the result is empty whatever the data. (The wire
    /// protocol has no empty limit, so this cannot be a [`QueryParams`].)
    pub matches_nothing: bool,
}

/// Why the query parameters of a REST request were refused (a 400 answer).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RestQueryError {
    #[error("orderBy must be a valid JSON encoded path")]
    InvalidOrderBy,
    #[error("orderBy must be defined when other query parameters are defined")]
    MissingOrderBy,
    #[error(
        "{param} must be a JSON primitive, optionally followed by a comma and a JSON string key"
    )]
    InvalidValue { param: &'static str },
    #[error("{param} must be a string when orderBy is \"$key\"")]
    KeyNeedsString { param: &'static str },
    #[error("{param} cannot be a boolean when orderBy is \"$priority\"")]
    PriorityBoolean { param: &'static str },
    #[error("{param} must be an integer from 0 to {MAX_LIMIT}")]
    InvalidLimit { param: &'static str },
    #[error("{first} and {second} cannot be used together")]
    Conflict {
        first: &'static str,
        second: &'static str,
    },
    #[error("invalid query: {0}")]
    Invalid(#[from] QueryError),
}

/// The order a REST query asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Key,
    Priority,
    Other,
}

impl QueryParams {
    /// Reads the query parameters of a REST request. `None` when there are none.
    pub fn from_rest(text: &RestQueryText) -> Result<Option<RestQuery>, RestQueryError> {
        let Some(order_by) = &text.order_by else {
            if text.filters().iter().any(|(_, value)| value.is_some()) {
                return Err(RestQueryError::MissingOrderBy);
            }
            return Ok(None);
        };
        let mut q = Map::new();
        let order = read_order(order_by, &mut q)?;
        refuse_conflicts(text)?;
        if let Some(value) = &text.equal_to {
            let (value, name) = bound("equalTo", value, order)?;
            q.insert("sp".into(), value.clone());
            q.insert("ep".into(), value);
            if let Some(name) = name {
                q.insert("sn".into(), name.clone());
                q.insert("en".into(), name);
            }
        }
        let start = [
            (&text.start_at, "startAt", true),
            (&text.start_after, "startAfter", false),
        ];
        for (value, param, inclusive) in start {
            if let Some(value) = value {
                let (value, name) = bound(param, value, order)?;
                q.insert("sp".into(), value);
                q.insert("sin".into(), Value::Bool(inclusive));
                // startAfter(v) excludes every child whose index value is v: its post is v
                // with the largest possible name.
                let name = name.or_else(|| (!inclusive).then(|| MAX_NAME.into()));
                if let Some(name) = name {
                    q.insert("sn".into(), name);
                }
            }
        }
        let end = [
            (&text.end_at, "endAt", true),
            (&text.end_before, "endBefore", false),
        ];
        for (value, param, inclusive) in end {
            if let Some(value) = value {
                let (value, name) = bound(param, value, order)?;
                q.insert("ep".into(), value);
                q.insert("ein".into(), Value::Bool(inclusive));
                let name = name.or_else(|| (!inclusive).then(|| MIN_NAME.into()));
                if let Some(name) = name {
                    q.insert("en".into(), name);
                }
            }
        }
        let mut matches_nothing = false;
        let limits = [
            (&text.limit_to_first, "limitToFirst", "l"),
            (&text.limit_to_last, "limitToLast", "r"),
        ];
        for (value, param, anchor) in limits {
            if let Some(value) = value {
                let count = read_limit(param, value)?;
                if count == 0 {
                    matches_nothing = true;
                } else {
                    q.insert("l".into(), Value::from(count));
                    q.insert("vf".into(), Value::String(anchor.into()));
                }
            }
        }
        let params = QueryParams::from_wire(&Value::Object(q))?;
        Ok(Some(RestQuery {
            params,
            matches_nothing,
        }))
    }
}

fn read_order(order_by: &str, q: &mut Map<String, Value>) -> Result<Order, RestQueryError> {
    let order_by = replace_lone_surrogates_str(order_by);
    let Ok(Value::String(order)) = serde_json::from_str::<Value>(&order_by) else {
        return Err(RestQueryError::InvalidOrderBy);
    };
    let (index, order) = match order.as_str() {
        "$key" => (Some(".key".to_owned()), Order::Key),
        "$value" => (Some(".value".to_owned()), Order::Other),
        "$priority" => (None, Order::Priority),
        child => {
            let path = Path::parse(child).map_err(|_| RestQueryError::InvalidOrderBy)?;
            if path.is_root() {
                return Err(RestQueryError::InvalidOrderBy);
            }
            (Some(path.to_string()), Order::Other)
        }
    };
    if let Some(index) = index {
        q.insert("i".into(), Value::String(index));
    }
    Ok(order)
}

fn refuse_conflicts(text: &RestQueryText) -> Result<(), RestQueryError> {
    let pairs = [
        ("equalTo", &text.equal_to, "startAt", &text.start_at),
        ("equalTo", &text.equal_to, "startAfter", &text.start_after),
        ("equalTo", &text.equal_to, "endAt", &text.end_at),
        ("equalTo", &text.equal_to, "endBefore", &text.end_before),
        ("startAt", &text.start_at, "startAfter", &text.start_after),
        ("endAt", &text.end_at, "endBefore", &text.end_before),
        (
            "limitToFirst",
            &text.limit_to_first,
            "limitToLast",
            &text.limit_to_last,
        ),
    ];
    for (first, a, second, b) in pairs {
        if a.is_some() && b.is_some() {
            return Err(RestQueryError::Conflict { first, second });
        }
    }
    Ok(())
}

/// Reads `value` or `value,"name"`.
fn bound(
    param: &'static str,
    text: &str,
    order: Order,
) -> Result<(Value, Option<Value>), RestQueryError> {
    let invalid = RestQueryError::InvalidValue { param };
    let items: Vec<Value> =
        serde_json::from_str(&replace_lone_surrogates_str(&format!("[{text}]")))
            .map_err(|_| invalid.clone())?;
    let mut items = items.into_iter();
    let (Some(value), name, None) = (items.next(), items.next(), items.next()) else {
        return Err(invalid);
    };
    if value.is_object() || value.is_array() {
        return Err(invalid);
    }
    if name.as_ref().is_some_and(|name| !name.is_string()) {
        return Err(invalid);
    }
    match (order, &value) {
        (Order::Key, Value::String(_)) => {}
        (Order::Key, _) => return Err(RestQueryError::KeyNeedsString { param }),
        (Order::Priority, Value::Bool(_)) => return Err(RestQueryError::PriorityBoolean { param }),
        _ => {}
    }
    Ok((value, name))
}

fn read_limit(param: &'static str, text: &str) -> Result<u32, RestQueryError> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|count| *count <= MAX_LIMIT)
        .ok_or(RestQueryError::InvalidLimit { param })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Bound, BoundName, BoundValue, Index, Limit, LimitFrom, OrderedF64};
    use std::sync::Arc;

    fn text(pairs: &[(&str, &str)]) -> RestQueryText {
        RestQueryText::from_pairs(pairs.iter().copied())
    }

    fn parse(pairs: &[(&str, &str)]) -> RestQuery {
        QueryParams::from_rest(&text(pairs))
            .expect("valid query")
            .expect("a query")
    }

    fn error(pairs: &[(&str, &str)]) -> RestQueryError {
        QueryParams::from_rest(&text(pairs)).expect_err("an invalid query")
    }

    fn string(s: &str) -> BoundValue {
        BoundValue::String(Arc::from(s))
    }

    #[test]
    fn no_parameters_is_no_query() {
        assert_eq!(
            QueryParams::from_rest(&text(&[("print", "pretty")])),
            Ok(None)
        );
    }

    #[test]
    fn lone_surrogates_in_bounds_and_order_become_replacement_characters() {
        let query = parse(&[("orderBy", r#""a\udc00""#), ("equalTo", r#""\ud800""#)]);
        assert_eq!(
            query.params.index,
            Index::Child(Path::parse("a\u{fffd}").expect("valid"))
        );
        assert_eq!(
            query.params.start.map(|bound| bound.value),
            Some(string("\u{fffd}"))
        );
    }

    #[test]
    fn python_child_range_and_limit() {
        // ?endAt=%22z%22&limitToFirst=3&orderBy=%22age%22&startAt=5 after decoding.
        let query = parse(&[
            ("endAt", "\"z\""),
            ("limitToFirst", "3"),
            ("orderBy", "\"age\""),
            ("startAt", "5"),
        ]);
        let params = query.params;
        assert_eq!(
            params.index,
            Index::Child(Path::parse("age").expect("valid"))
        );
        assert_eq!(
            params.start,
            Some(Bound {
                value: BoundValue::Number(OrderedF64::new(5.0)),
                name: BoundName::Min,
                inclusive: true
            })
        );
        assert_eq!(
            params.end,
            Some(Bound {
                value: string("z"),
                name: BoundName::Max,
                inclusive: true
            })
        );
        assert_eq!(
            params.limit,
            Some(Limit {
                count: 3,
                from: LimitFrom::First
            })
        );
        assert!(!query.matches_nothing);
    }

    #[test]
    fn orders() {
        assert_eq!(parse(&[("orderBy", "\"$key\"")]).params.index, Index::Key);
        assert_eq!(
            parse(&[("orderBy", "\"$value\"")]).params.index,
            Index::Value
        );
        assert_eq!(
            parse(&[("orderBy", "\"$priority\"")]).params.index,
            Index::Priority
        );
        assert_eq!(
            parse(&[("orderBy", "\"a/b\"")]).params.index,
            Index::Child(Path::parse("a/b").expect("valid"))
        );
        assert!(!parse(&[("orderBy", "\"$key\"")]).params.is_filtered());
    }

    #[test]
    fn exclusive_bounds_and_tie_breakers() {
        let after = parse(&[("orderBy", "\"score\""), ("startAfter", "5")]).params;
        assert_eq!(
            after.start,
            Some(Bound {
                value: BoundValue::Number(OrderedF64::new(5.0)),
                name: BoundName::Max,
                inclusive: false
            })
        );
        let before = parse(&[("orderBy", "\"score\""), ("endBefore", "5,\"k\"")]).params;
        assert_eq!(
            before.end,
            Some(Bound {
                value: BoundValue::Number(OrderedF64::new(5.0)),
                name: BoundName::Name(Arc::from("k")),
                inclusive: false
            })
        );
        let key_after = parse(&[("orderBy", "\"$key\""), ("startAfter", "\"b\"")]).params;
        assert_eq!(
            key_after.start,
            Some(Bound {
                value: string("b"),
                name: BoundName::Min,
                inclusive: false
            })
        );
        let equal = parse(&[("orderBy", "\"$value\""), ("equalTo", "true")]).params;
        assert_eq!(
            equal.start.as_ref().map(|b| &b.value),
            Some(&BoundValue::Bool(true))
        );
        assert_eq!(
            equal.end.as_ref().map(|b| &b.value),
            Some(&BoundValue::Bool(true))
        );
        let comma = parse(&[("orderBy", "\"$value\""), ("equalTo", "\"a,b\"")]).params;
        assert_eq!(comma.start.map(|b| b.value), Some(string("a,b")));
    }

    #[test]
    fn zero_limit_matches_nothing() {
        let query = parse(&[("orderBy", "\"$key\""), ("limitToLast", "0")]);
        assert!(query.matches_nothing);
        assert_eq!(query.params.limit, None);
        let last = parse(&[("orderBy", "\"$key\""), ("limitToLast", "2")]);
        assert_eq!(
            last.params.limit,
            Some(Limit {
                count: 2,
                from: LimitFrom::Last
            })
        );
    }

    #[test]
    fn errors() {
        assert_eq!(
            error(&[("limitToFirst", "1")]),
            RestQueryError::MissingOrderBy
        );
        assert_eq!(error(&[("orderBy", "age")]), RestQueryError::InvalidOrderBy);
        assert_eq!(error(&[("orderBy", "5")]), RestQueryError::InvalidOrderBy);
        assert_eq!(
            error(&[("orderBy", "\"\"")]),
            RestQueryError::InvalidOrderBy
        );
        assert_eq!(
            error(&[("orderBy", "\"a.b\"")]),
            RestQueryError::InvalidOrderBy
        );
        assert_eq!(
            error(&[("orderBy", "\"$other\"")]),
            RestQueryError::InvalidOrderBy
        );
        assert_eq!(
            error(&[("orderBy", "\"$key\""), ("startAt", "5")]),
            RestQueryError::KeyNeedsString { param: "startAt" }
        );
        assert_eq!(
            error(&[("orderBy", "\"$priority\""), ("endAt", "true")]),
            RestQueryError::PriorityBoolean { param: "endAt" }
        );
        for bad in ["abc", "", "{}", "[1]", "1,2", "1,\"a\",\"b\""] {
            assert_eq!(
                error(&[("orderBy", "\"x\""), ("startAt", bad)]),
                RestQueryError::InvalidValue { param: "startAt" },
                "{bad}"
            );
        }
        for bad in ["-1", "1.5", "x", "", "1000001"] {
            assert_eq!(
                error(&[("orderBy", "\"x\""), ("limitToFirst", bad)]),
                RestQueryError::InvalidLimit {
                    param: "limitToFirst"
                },
                "{bad}"
            );
        }
        assert!(matches!(
            error(&[
                ("orderBy", "\"x\""),
                ("limitToFirst", "1"),
                ("limitToLast", "1")
            ]),
            RestQueryError::Conflict { .. }
        ));
        assert!(matches!(
            error(&[("orderBy", "\"x\""), ("equalTo", "1"), ("startAt", "1")]),
            RestQueryError::Conflict { .. }
        ));
    }
}
