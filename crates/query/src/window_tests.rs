//! Tests of query windows (`window.rs`): orders, ranges, limits and their tie-breakers, and
//! the assembly of a result; `node` and `query` serve the index's tests too.

use super::*;
use serde_json::{json, Value};

pub(crate) fn node(value: Value) -> Node {
    Node::from_json(&value).expect("valid test data")
}

pub(crate) fn query(q: Value) -> QueryParams {
    QueryParams::from_wire(&q).expect("valid test query")
}

/// The keys of the query result, in the query's order.
fn result_keys(q: &QueryParams, data: &Node) -> Vec<String> {
    let result = q.apply(data);
    let mut children: Vec<_> = result.children().collect();
    children.sort_by(|a, b| q.compare_children((&a.0, &a.1), (&b.0, &b.1)));
    children
        .into_iter()
        .map(|(key, _)| key.as_str().to_owned())
        .collect()
}

fn keys_of(q: Value, data: &Node) -> Vec<String> {
    result_keys(&query(q), data)
}

fn scores() -> Node {
    node(json!({
        "a": {"score": 1}, "b": {"score": 5}, "j": {"score": 5}, "k": {"score": 5}, "l": {"score": 5},
        "m": {"score": 6}, "n": {"score": "x"}, "o": {"other": 1}, "p": {"score": {"deep": 1}},
    }))
}

#[test]
fn unfiltered_query_returns_node_itself() {
    let data = node(json!({".priority": 3, "a": 1, "b": 2}));
    let ordered_only = query(json!({"i": ".value"}));
    let result = ordered_only.apply(&data);
    assert!(result.ptr_eq(&data));
    assert_eq!(result.priority(), &Priority::Number(3.0));
}

#[test]
fn leaf_and_empty_give_empty() {
    let q = query(json!({"l": 1}));
    assert!(q.apply(&node(json!(5))).is_empty());
    assert!(q
        .apply(&node(json!({".value": "x", ".priority": 1})))
        .is_empty());
    assert!(q.apply(&Node::empty()).is_empty());
}

#[test]
fn result_has_no_priority_but_children_keep_theirs() {
    let data = node(json!({".priority": "top", "a": {".value": 1, ".priority": 7}, "b": 2}));
    let everything = query(json!({"sp": null}));
    let result = everything.apply(&data);
    assert_eq!(result.priority(), &Priority::None);
    assert_eq!(result, data.with_priority(Priority::None));
    let a = Key::new("a").expect("key");
    assert_eq!(result.child(&a).priority(), &Priority::Number(7.0));
    let first = query(json!({"l": 1}));
    assert_eq!(first.apply(&data).priority(), &Priority::None);
}

#[test]
fn child_limit_to_last() {
    let data = scores();
    // Order: o (missing), a 1, b/j/k/l 5, m 6, n "x", p object.
    assert_eq!(
        keys_of(json!({"l": 2, "vf": "r", "i": "score"}), &data),
        ["n", "p"]
    );
    assert_eq!(
        keys_of(json!({"l": 3, "vf": "l", "i": "score"}), &data),
        ["o", "a", "b"]
    );
    assert_eq!(
        keys_of(json!({"l": 4, "vf": "r", "i": "score", "ep": 5}), &data),
        ["b", "j", "k", "l"]
    );
}

#[test]
fn start_after_and_end_before() {
    let data = scores();
    assert_eq!(
        keys_of(
            json!({"sp": 5, "sn": "[MAX_NAME]", "sin": false, "i": "score"}),
            &data
        ),
        ["m", "n", "p"]
    );
    // startAt(5, [MAX_NAME]) inclusive is the same: no key equals the sentinel.
    assert_eq!(
        keys_of(
            json!({"sp": 5, "sn": "[MAX_NAME]", "sin": true, "i": "score"}),
            &data
        ),
        ["m", "n", "p"]
    );
    assert_eq!(
        keys_of(
            json!({"ep": 5, "en": "k", "ein": false, "i": "score"}),
            &data
        ),
        ["o", "a", "b", "j"]
    );
    assert_eq!(
        keys_of(
            json!({"ep": 5, "en": "[MIN_NAME]", "ein": false, "i": "score"}),
            &data
        ),
        ["o", "a"]
    );
    assert_eq!(
        keys_of(
            json!({"ep": 5, "en": "[MIN_NAME]", "ein": true, "i": "score"}),
            &data
        ),
        ["o", "a"]
    );
    // endBefore(5) without a name: the end post is (5, MAX), so every 5 is before it.
    assert_eq!(
        keys_of(json!({"ep": 5, "ein": false, "i": "score"}), &data),
        ["o", "a", "b", "j", "k", "l"]
    );
}

#[test]
fn key_tie_breakers() {
    let data = scores();
    assert_eq!(
        keys_of(
            json!({"sp": 5, "sn": "k", "sin": true, "i": "score"}),
            &data
        ),
        ["k", "l", "m", "n", "p"]
    );
    assert_eq!(
        keys_of(
            json!({"sp": 5, "sn": "k", "sin": false, "i": "score"}),
            &data
        ),
        ["l", "m", "n", "p"]
    );
    assert_eq!(
        keys_of(
            json!({"sp": 5, "sn": "j", "ep": 5, "en": "k", "i": "score"}),
            &data
        ),
        ["j", "k"]
    );
    assert_eq!(
        keys_of(json!({"sp": 5, "ep": 5, "i": "score"}), &data),
        ["b", "j", "k", "l"]
    );
}

#[test]
fn equal_to_null_matches_missing_children() {
    let data = node(
        json!({"a": {"n": 1}, "b": {"x": 1}, "c": 3, "d": {"n": {"deep": true}}, "e": {"m": 1}}),
    );
    let q = json!({"sp": null, "sin": true, "ep": null, "ein": true, "i": "n"});
    assert_eq!(keys_of(q, &data), ["b", "c", "e"]);
}

#[test]
fn nested_child_path() {
    let data = node(json!({
        "a": {"a": {"b": 4}}, "b": {"a": {"b": 5}}, "c": {"a": {"b": 10}}, "d": {"a": {"b": 11}},
        "e": {"a": 5}, "f": {"b": 7},
    }));
    assert_eq!(
        keys_of(
            json!({"sp": 5, "sin": true, "ep": 10, "ein": true, "i": "a/b"}),
            &data
        ),
        ["b", "c"]
    );
    assert_eq!(
        keys_of(json!({"l": 3, "vf": "l", "i": "a/b"}), &data),
        ["e", "f", "a"]
    );
}

#[test]
fn order_by_key_with_integer_like_keys() {
    let data = node(
        json!({"1": 0, "2": 0, "007": 0, "10": 0, "-3": 0, "a": 0, "b": 0, "B": 0, "2147483648": 0}),
    );
    let all = keys_of(json!({"sp": "[MIN_NAME]", "i": ".key"}), &data);
    assert_eq!(
        all,
        ["-3", "1", "2", "007", "10", "2147483648", "B", "a", "b"]
    );
    assert_eq!(
        keys_of(json!({"sp": "2", "i": ".key"}), &data),
        ["2", "007", "10", "2147483648", "B", "a", "b"]
    );
    assert_eq!(
        keys_of(json!({"ep": "10", "i": ".key"}), &data),
        ["-3", "1", "2", "007", "10"]
    );
    assert_eq!(
        keys_of(json!({"sp": "7", "ep": "7", "i": ".key"}), &data),
        Vec::<String>::new()
    );
    assert_eq!(
        keys_of(json!({"sp": "007", "ep": "007", "i": ".key"}), &data),
        ["007"]
    );
    assert_eq!(
        keys_of(json!({"sp": "a", "sin": false, "i": ".key"}), &data),
        ["b"]
    );
    assert_eq!(
        keys_of(
            json!({"sp": "b", "sin": false, "l": 3, "vf": "l", "i": ".key"}),
            &data
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        keys_of(
            json!({"sp": "1", "sin": false, "l": 3, "vf": "l", "i": ".key"}),
            &data
        ),
        ["2", "007", "10"]
    );
    assert_eq!(
        keys_of(
            json!({"ep": "a", "ein": false, "l": 2, "vf": "r", "i": ".key"}),
            &data
        ),
        ["2147483648", "B"]
    );
    assert_eq!(
        keys_of(json!({"l": 2, "vf": "r", "i": ".key"}), &data),
        ["a", "b"]
    );
    // Bounds that are not valid keys still compare as names (scan path).
    assert_eq!(keys_of(json!({"sp": "a.b", "i": ".key"}), &data), ["b"]);
    assert_eq!(
        keys_of(json!({"sp": "", "ep": "1", "i": ".key"}), &data),
        Vec::<String>::new()
    );
    assert_eq!(
        keys_of(json!({"sp": "[", "ep": "a", "i": ".key"}), &data),
        ["a"]
    );
    // Inverted, empty and sentinel ranges.
    assert_eq!(
        keys_of(json!({"sp": "b", "ep": "a", "i": ".key"}), &data),
        Vec::<String>::new()
    );
    assert_eq!(
        keys_of(
            json!({"sp": "a", "sin": false, "ep": "a", "i": ".key"}),
            &data
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        keys_of(json!({"sp": "[MAX_NAME]", "i": ".key"}), &data),
        Vec::<String>::new()
    );
    assert_eq!(
        keys_of(json!({"ep": "[MIN_NAME]", "i": ".key"}), &data),
        Vec::<String>::new()
    );
    assert_eq!(
        keys_of(json!({"ep": "[MAX_NAME]", "l": 1, "i": ".key"}), &data),
        ["-3"]
    );
}

#[test]
fn order_by_key_zero_ties() {
    let data = node(json!({"0": 1, "00": 2, "1": 3}));
    assert_eq!(
        keys_of(json!({"sp": "0", "sin": false, "i": ".key"}), &data),
        ["00", "1"]
    );
    assert_eq!(
        keys_of(json!({"sp": "00", "sin": true, "i": ".key"}), &data),
        ["00", "1"]
    );
    assert_eq!(keys_of(json!({"ep": "0", "i": ".key"}), &data), ["0"]);
    // "-0" is not a valid key (so the window is found by scanning) but still a name: after "0", before "00".
    assert_eq!(
        keys_of(json!({"sp": "-0", "i": ".key"}), &data),
        ["00", "1"]
    );
    assert_eq!(keys_of(json!({"ep": "-0", "i": ".key"}), &data), ["0"]);
}

#[test]
fn priority_order_mixes() {
    let data = node(json!({
        "a": {".value": 1, ".priority": "s"}, "b": {".value": 1, ".priority": 2}, "c": 1,
        "d": {".value": 1, ".priority": 1}, "e": {".value": 1, ".priority": "r"}, "f": {"x": 1},
        "g": {"x": 1, ".priority": 1},
    }));
    assert_eq!(
        keys_of(json!({"l": 7}), &data),
        ["c", "f", "d", "g", "b", "e", "a"]
    );
    assert_eq!(keys_of(json!({"l": 3}), &data), ["c", "f", "d"]);
    assert_eq!(keys_of(json!({"l": 2, "vf": "r"}), &data), ["e", "a"]);
    assert_eq!(keys_of(json!({"sp": null}), &data).len(), 7);
    assert_eq!(keys_of(json!({"ep": null}), &data), ["c", "f"]);
    assert_eq!(
        keys_of(json!({"sp": 1, "sn": "x", "sin": true}), &data),
        ["b", "e", "a"]
    );
    assert_eq!(
        keys_of(json!({"sp": 1, "sn": "e", "sin": true}), &data),
        ["g", "b", "e", "a"]
    );
    assert_eq!(keys_of(json!({"sp": "a", "ep": "r"}), &data), ["e"]);
    assert_eq!(keys_of(json!({"sp": 0, "ep": 100}), &data), ["d", "g", "b"]);
    assert_eq!(keys_of(json!({"sp": "", "l": 1, "vf": "l"}), &data), ["e"]);
}

#[test]
fn value_order_mixes() {
    let data = node(json!({
        "f": false, "t": true, "n1": -1, "n2": 2.5, "s1": "B", "s2": "a", "o1": {"z": 1}, "o2": {"a": 2},
        "e1": "😀", "e2": "｡",
    }));
    let all = keys_of(json!({"sp": null, "i": ".value"}), &data);
    assert_eq!(
        all,
        ["f", "t", "n1", "n2", "s1", "s2", "e1", "e2", "o1", "o2"]
    );
    assert_eq!(
        keys_of(json!({"sp": true, "ep": true, "i": ".value"}), &data),
        ["t"]
    );
    // startAfter(false) as the client sends it, and the same bound without the [MAX_NAME] tie-breaker,
    // where (false, "f") still lies after the post (false, [MIN_NAME]).
    let after_false =
        json!({"sp": false, "sn": "[MAX_NAME]", "sin": false, "ep": 0, "i": ".value"});
    assert_eq!(keys_of(after_false, &data), ["t", "n1"]);
    assert_eq!(
        keys_of(
            json!({"sp": false, "sin": false, "ep": 0, "i": ".value"}),
            &data
        ),
        ["f", "t", "n1"]
    );
    assert_eq!(
        keys_of(json!({"sp": "a", "i": ".value"}), &data),
        ["s2", "e1", "e2", "o1", "o2"]
    );
    // UTF-16 order: "😀" (a surrogate pair starting 0xD83D) sorts after "zzz" but before "｡" (0xFF61).
    assert_eq!(
        keys_of(
            json!({"ep": "zzz", "i": ".value", "l": 2, "vf": "r"}),
            &data
        ),
        ["s1", "s2"]
    );
    assert_eq!(
        keys_of(json!({"sp": "zzz", "ep": "｡", "i": ".value"}), &data),
        ["e1", "e2"]
    );
    assert_eq!(
        keys_of(json!({"sp": "😀", "ep": "😀", "i": ".value"}), &data),
        ["e1"]
    );
    assert_eq!(
        keys_of(json!({"l": 1, "vf": "r", "i": ".value"}), &data),
        ["o2"]
    );
}

#[test]
fn limit_windows_break_ties_by_key() {
    let data = node(json!({"c": 1, "a": 1, "b": 1, "d": 0, "10": 1, "9": 1}));
    assert_eq!(
        keys_of(json!({"l": 3, "i": ".value"}), &data),
        ["d", "9", "10"]
    );
    assert_eq!(
        keys_of(json!({"l": 3, "vf": "r", "i": ".value"}), &data),
        ["a", "b", "c"]
    );
    assert_eq!(
        keys_of(json!({"l": 100, "vf": "r", "i": ".value"}), &data).len(),
        6
    );
    assert_eq!(
        keys_of(
            json!({"sp": 1, "sn": "10", "sin": false, "l": 2, "i": ".value"}),
            &data
        ),
        ["a", "b"]
    );
}

#[test]
fn removal_and_insertion_assembly_agree() {
    let mut object = serde_json::Map::new();
    for i in 0..40 {
        object.insert(format!("k{i:02}"), json!({"v": i % 7, ".priority": i % 3}));
    }
    let data = node(Value::Object(object));
    for q in [
        json!({"sp": 1, "i": "v"}),
        json!({"sp": 5, "i": "v"}),
        json!({"l": 35, "vf": "r", "i": "v"}),
        json!({"l": 5, "i": "v"}),
        json!({"l": 30}),
        json!({"sp": "k03", "i": ".key"}),
        json!({"ep": "k03", "i": ".key"}),
    ] {
        let params = query(q.clone());
        let result = params.apply(&data);
        let expected = data
            .children()
            .filter(|(key, child)| params.in_range(key, child))
            .fold(Node::empty(), |acc, (key, child)| {
                acc.with_child(&key, child.into_owned())
            });
        if params.limit.is_none() {
            assert_eq!(result, expected, "{q}");
        } else {
            assert_eq!(
                result.child_count(),
                params.limit.as_ref().map_or(0, |l| l.count as usize),
                "{q}"
            );
        }
    }
}

#[test]
fn zero_count_limit_keeps_nothing() {
    let data = node(json!({"a": 1, "b": 2}));
    for from in [LimitFrom::First, LimitFrom::Last] {
        for index in [Index::Key, Index::Value, Index::Priority] {
            let q = QueryParams {
                index,
                limit: Some(Limit { count: 0, from }),
                ..QueryParams::default()
            };
            assert!(q.apply(&data).is_empty());
        }
    }
}
