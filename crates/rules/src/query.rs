//! The `query` variable (spec §6.7), built from the parsed query of a read.
//!
//! The wire protocol does not say which client method produced a range, so the mapping has
//! to choose (documented on [`QueryVars::from_params`]). Every choice keeps rules safe: a
//! query the rules variable describes as `startAt(x)` never returns children before `x`.

use std::sync::Arc;

use hearth_query::{Bound, BoundName, BoundValue, Index, LimitFrom, QueryParams};

use crate::expr::QueryProp;
use crate::value::{Text, Value};

/// A primitive query property value.
#[derive(Debug, Clone, PartialEq)]
enum Prim {
    Null,
    Bool(bool),
    Num(f64),
    Str(Arc<str>),
}

impl Prim {
    fn value(&self) -> Value<'_> {
        match self {
            Prim::Null => Value::Null,
            Prim::Bool(b) => Value::Bool(*b),
            Prim::Num(n) => Value::Num(*n),
            Prim::Str(s) => Value::Str(Text::Borrowed(s)),
        }
    }
}

/// The nine properties of `query`, computed once per read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QueryVars {
    order_by_key: bool,
    order_by_priority: bool,
    order_by_value: bool,
    order_by_child: Prim,
    start_at: Prim,
    end_at: Prim,
    equal_to: Prim,
    limit_to_first: Prim,
    limit_to_last: Prim,
}

/// What `query` holds for a read without a query, and in `.write`/`.validate` rules: ordered
/// by key, everything else null, as the hosted service reported over REST.
pub(crate) static UNQUERIED: QueryVars = QueryVars {
    order_by_key: true,
    order_by_priority: false,
    order_by_value: false,
    order_by_child: Prim::Null,
    start_at: Prim::Null,
    end_at: Prim::Null,
    equal_to: Prim::Null,
    limit_to_first: Prim::Null,
    limit_to_last: Prim::Null,
};

impl QueryVars {
    /// Maps a parsed query to the rules variable:
    ///
    /// * The default query (priority order, no range, no limit — what `q: {}` parses to) is an
    ///   unqueried read.
    /// * A range whose two ends are the same inclusive post is `equalTo`; `startAt` and
    ///   `endAt` then hold the same value, since that is what the query also is on the wire.
    /// * `startAfter`/`endBefore` (exclusive ends) report their value as `startAt`/`endAt`;
    ///   the query returns a subset of what the inclusive bound would, so rules that accept
    ///   the inclusive bound may accept it.
    /// * The key tie-breakers of bounds are not visible to rules.
    pub fn from_params(q: &QueryParams) -> QueryVars {
        if *q == QueryParams::default() {
            return UNQUERIED.clone();
        }
        let bound = |b: &Option<Bound>| b.as_ref().map_or(Prim::Null, |b| prim(&b.value));
        let equal_to = match (&q.start, &q.end) {
            (Some(s), Some(e))
                if s.inclusive && e.inclusive && s.value == e.value && same_post(s, e) =>
            {
                prim(&s.value)
            }
            _ => Prim::Null,
        };
        let limit = |from: LimitFrom| match &q.limit {
            Some(limit) if limit.from == from => Prim::Num(f64::from(limit.count)),
            _ => Prim::Null,
        };
        QueryVars {
            order_by_key: q.index == Index::Key,
            order_by_priority: q.index == Index::Priority,
            order_by_value: q.index == Index::Value,
            order_by_child: match &q.index {
                Index::Child(path) => {
                    let text = path.to_string();
                    Prim::Str(Arc::from(text.trim_start_matches('/')))
                }
                _ => Prim::Null,
            },
            start_at: bound(&q.start),
            end_at: bound(&q.end),
            equal_to,
            limit_to_first: limit(LimitFrom::First),
            limit_to_last: limit(LimitFrom::Last),
        }
    }

    pub fn get(&self, prop: QueryProp) -> Value<'_> {
        match prop {
            QueryProp::OrderByKey => Value::Bool(self.order_by_key),
            QueryProp::OrderByPriority => Value::Bool(self.order_by_priority),
            QueryProp::OrderByValue => Value::Bool(self.order_by_value),
            QueryProp::OrderByChild => self.order_by_child.value(),
            QueryProp::StartAt => self.start_at.value(),
            QueryProp::EndAt => self.end_at.value(),
            QueryProp::EqualTo => self.equal_to.value(),
            QueryProp::LimitToFirst => self.limit_to_first.value(),
            QueryProp::LimitToLast => self.limit_to_last.value(),
        }
    }
}

/// Whether two bounds with equal values name the same post: the same key tie-breaker, or
/// none at all (`equalTo(v)` goes out as `sp: v, ep: v`, whose names default to the
/// opposite sentinels).
fn same_post(start: &Bound, end: &Bound) -> bool {
    start.name == end.name || (start.name == BoundName::Min && end.name == BoundName::Max)
}

fn prim(value: &BoundValue) -> Prim {
    match value {
        BoundValue::Null => Prim::Null,
        BoundValue::Bool(b) => Prim::Bool(*b),
        BoundValue::Number(n) => Prim::Num(n.get()),
        BoundValue::String(s) => Prim::Str(s.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(q: serde_json::Value) -> QueryVars {
        QueryVars::from_params(&QueryParams::from_wire(&q).expect("valid query"))
    }

    fn show(v: Value<'_>) -> serde_json::Value {
        match v {
            Value::Null => json!(null),
            Value::Bool(b) => json!(b),
            Value::Num(n) => json!(n),
            Value::Str(s) => json!(&*s),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn all(v: &QueryVars) -> serde_json::Value {
        use QueryProp::*;
        json!({
            "orderByKey": show(v.get(OrderByKey)),
            "orderByPriority": show(v.get(OrderByPriority)),
            "orderByValue": show(v.get(OrderByValue)),
            "orderByChild": show(v.get(OrderByChild)),
            "startAt": show(v.get(StartAt)),
            "endAt": show(v.get(EndAt)),
            "equalTo": show(v.get(EqualTo)),
            "limitToFirst": show(v.get(LimitToFirst)),
            "limitToLast": show(v.get(LimitToLast)),
        })
    }

    #[test]
    fn unqueried_reads_are_ordered_by_key() {
        assert_eq!(vars(json!({})), UNQUERIED);
        assert_eq!(
            all(&UNQUERIED),
            json!({"orderByKey": true, "orderByPriority": false, "orderByValue": false,
                   "orderByChild": null, "startAt": null, "endAt": null, "equalTo": null,
                   "limitToFirst": null, "limitToLast": null})
        );
    }

    #[test]
    fn maps_each_part_of_a_query() {
        assert_eq!(
            all(&vars(json!({"i": "a/b", "sp": 5, "l": 10, "vf": "l"}))),
            json!({"orderByKey": false, "orderByPriority": false, "orderByValue": false,
                   "orderByChild": "a/b", "startAt": 5.0, "endAt": null, "equalTo": null,
                   "limitToFirst": 10.0, "limitToLast": null})
        );
        assert_eq!(
            all(&vars(json!({"i": ".key", "ep": "m", "l": 3, "vf": "r"}))),
            json!({"orderByKey": true, "orderByPriority": false, "orderByValue": false,
                   "orderByChild": null, "startAt": null, "endAt": "m", "equalTo": null,
                   "limitToFirst": null, "limitToLast": 3.0})
        );
        let equal = all(&vars(
            json!({"i": "customer", "sp": "alice", "ep": "alice"}),
        ));
        assert_eq!(equal["equalTo"], json!("alice"));
        assert_eq!(equal["startAt"], json!("alice"));
        let range = all(&vars(json!({"i": ".value", "sp": 1, "ep": 2})));
        assert_eq!(range["equalTo"], json!(null));
        assert_eq!(range["orderByValue"], json!(true));
        let exclusive = all(&vars(
            json!({"i": ".value", "sp": 1, "sin": false, "ep": 1}),
        ));
        assert_eq!(exclusive["equalTo"], json!(null));
        assert_eq!(exclusive["startAt"], json!(1.0));
        let limited = all(&vars(json!({"l": 5, "vf": "r"})));
        assert_eq!(limited["orderByPriority"], json!(true));
        assert_eq!(limited["orderByKey"], json!(false));
    }
}
