//! Tests of `packing`: packed and chunked forms against the plain form of the same data.

use super::*;
use crate::packed::PACK_MAX_BYTES;
use crate::path::Path;
use crate::priority::Priority;
use crate::testing::{key, node, path};
use crate::update::without_packing;
use serde_json::json;

#[test]
fn small_objects_without_priorities_are_packed() {
    let record = node(json!({"uid": "u1", "text": "hi", "ts": 1_700_000_000_000u64}));
    assert!(record.packed().is_some());
    assert!(node(json!({"x": 1, ".priority": 2})).packed().is_none());
    assert!(node(json!({"x": {".value": 1, ".priority": 2}}))
        .packed()
        .is_none());
    assert!(node(json!({"t": "x".repeat(PACK_MAX_BYTES)}))
        .packed()
        .is_none());
    // Growing past the bound unpacks; shrinking back packs again.
    let grown = record.with_child(&key("body"), node(json!("y".repeat(PACK_MAX_BYTES + 88))));
    assert!(grown.packed().is_none() && grown.child(&key("uid")) == node(json!("u1")));
    let shrunk = grown.with_child(&key("body"), Node::empty());
    assert!(shrunk.packed().is_some());
    assert_eq!(shrunk, record);
    // A priority set on a packed object unpacks it.
    let prioritized = record.with_priority(Priority::Number(1.0));
    assert!(prioritized.packed().is_none());
    assert_eq!(prioritized.with_priority(Priority::None), record);
    // Both forms hash alike.
    let plain =
        without_packing(|| node(json!({"uid": "u1", "text": "hi", "ts": 1_700_000_000_000u64})));
    assert!(plain.packed().is_none());
    assert_eq!(plain.hash(), record.hash());
}

#[test]
fn large_collections_of_packable_records_are_chunked() {
    let records = collection(400);
    let root = node(records.clone());
    let chunked = root.chunked().expect("a collection of records is chunked");
    assert!(chunked.parts().count() > 10);
    // The property tests' collections are chunked too.
    assert!(has_chunked(&node(collection(26))));
    assert!(has_chunked(&node(json!({"10": collection(30), "b": 2.25}))));
    let plain = without_packing(|| node(records.clone()));
    assert!(!has_packed(&plain));
    assert_eq!(root.hash(), plain.hash());
    assert_eq!(root.to_json(true), plain.to_json(true));
    // Writes inside one record, of new records (splitting a chunk), and removals keep
    // every reading the same as the plain form's, and the collection chunked.
    let writes: [(&str, serde_json::Value); 6] = [
        ("/17/t", json!("short")),
        ("/b/x/y", json!(12.5)),
        ("/99x", json!({"t": "z".repeat(3000)})),
        ("/a", json!(null)),
        ("/150", json!(null)),
        ("/0new", json!(true)),
    ];
    let (mut chunked_root, mut plain_root) = (root, plain);
    for (at, value) in writes {
        chunked_root = chunked_root.set(&path(at), node(value.clone()));
        plain_root = without_packing(|| plain_root.set(&path(at), node(value.clone())));
        assert!(chunked_root.chunked().is_some());
        assert_eq!(chunked_root.hash(), plain_root.hash(), "after {at}");
        assert_eq!(chunked_root.to_json(true), plain_root.to_json(true));
        assert_eq!(chunked_root.estimated_bytes(), plain_root.estimated_bytes());
        assert_eq!(chunked_root.child_count(), plain_root.child_count());
    }
    // A priority below turns the collection into a map of nodes; a priority on it too.
    let prioritized = chunked_root.set(&path("/17/p"), node(json!({".value": 1, ".priority": 2})));
    assert!(prioritized.chunked().is_none() && prioritized.packed().is_none());
    assert_eq!(prioritized.get(&path("/17/t")), node(json!("short")));
    let on_top = chunked_root.with_priority(Priority::Number(1.0));
    assert!(on_top.chunked().is_none());
    assert_eq!(on_top.with_priority(Priority::None), chunked_root);
    // Equal collections in different chunks are equal; one changed entry is not.
    let rebuilt = node(chunked_root.to_json(true));
    assert!(rebuilt.chunked().is_some() && !rebuilt.ptr_eq(&chunked_root));
    assert_eq!(rebuilt, chunked_root);
    assert_ne!(
        rebuilt.set(&path("/17/t"), node(json!("other"))),
        chunked_root
    );
    // Shrinking to a small object packs it whole again.
    let mut shrinking = chunked_root;
    let keys: Vec<Key> = shrinking.children().map(|(k, _)| k.into_owned()).collect();
    for key in keys.iter().skip(3) {
        shrinking = shrinking.with_child(key, Node::empty());
    }
    assert!(shrinking.packed().is_some());
    assert_eq!(shrinking.child_count(), 3);
}

#[test]
fn a_packed_object_that_grows_large_is_chunked() {
    let mut root = Node::empty();
    for i in 0..8000 {
        root = root.set(
            &path(&format!("/m{i:04}")),
            node(json!({"uid": "u1", "ts": i})),
        );
        if i == 200 {
            // A few chunks, indexed by a slice.
            assert!(root.chunked().is_some());
            let plain = without_packing(|| node(root.to_json(true)));
            assert_eq!(root.hash(), plain.hash());
        }
    }
    // Past 32 chunks the index is a map; emptying most chunks brings the slice back.
    assert!(root.chunked().is_some_and(|c| c.parts().count() > 32));
    let plain = without_packing(|| node(root.to_json(true)));
    assert_eq!(root.hash(), plain.hash());
    for i in 0..7000 {
        root = root.set(&path(&format!("/m{i:04}")), Node::empty());
    }
    let plain = without_packing(|| node(root.to_json(true)));
    assert_eq!(root.to_json(true), plain.to_json(true));
    assert_eq!(root.hash(), plain.hash());
    assert_eq!(root.child_count(), 1000);
    assert!(root.chunked().is_some_and(|c| c.parts().count() <= 32));
}

/// `small` records of an SVG path each, as the icons of `@iconify-json/mdi`, and among them
/// "m100x", one over the packing bound.
fn icons(small: usize) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for i in 0..small {
        let body = format!("<path d=\"M{i} 0h24v24H{i}z\"/>");
        map.insert(format!("m{i:03}"), json!({"body": body, "width": 24}));
    }
    let large = json!({"body": "d".repeat(PACK_MAX_BYTES + 300), "width": 24});
    map.insert("m100x".into(), large);
    serde_json::Value::Object(map)
}

/// The number of children of a collection in chunks held as parts of their own.
fn larges(node: &Node) -> usize {
    node.chunked().map_or(0, |chunked| {
        chunked
            .parts()
            .filter(|(_, part)| matches!(part, Part::Large(_)))
            .count()
    })
}

#[test]
fn one_oversized_child_does_not_unchunk_its_siblings() {
    let value = icons(200);
    let root = node(value.clone());
    assert!(root.chunked().is_some(), "the collection is chunked");
    assert_eq!(larges(&root), 1);
    // The large child is read as its node holds it, shared rather than copied.
    let large = root.child(&key("m100x"));
    assert!(large.chunked().is_some() && large.ptr_eq(&root.child(&key("m100x"))));
    let plain = without_packing(|| node(value.clone()));
    let everywhere = ["/", "/m100x", "/m100x/body", "/m099", "/m101/width"];
    for at in everywhere {
        same_reading(&root, &plain, &path(at)).expect("the same reading");
    }
    let big = || json!({"body": "e".repeat(PACK_MAX_BYTES), "width": 1});
    let writes: [(&str, serde_json::Value); 10] = [
        // A packed record grows past the bound, and the oversized one shrinks below it.
        ("/m050/body", json!("g".repeat(PACK_MAX_BYTES + 10))),
        ("/m100x/body", json!("short")),
        ("/m050", json!(null)),
        // Large children before every part, after every part, and next to each other.
        ("/a000", big()),
        ("/z999", big()),
        ("/z998", big()),
        // A write inside a large child; packed children after a large one.
        ("/a000/width", json!(25)),
        ("/z999x", json!({"width": 2})),
        ("/a000x", json!(true)),
        ("/z998", json!(null)),
    ];
    let (mut chunked_root, mut plain_root) = (root.clone(), plain);
    let parts = |n: &Node| n.chunked().map_or(0, |c| c.parts().count());
    for (at, value) in writes {
        chunked_root = chunked_root.set(&path(at), node(value.clone()));
        plain_root = without_packing(|| plain_root.set(&path(at), node(value.clone())));
        assert!(chunked_root.chunked().is_some(), "chunked after {at}");
        for at in everywhere.iter().chain(&[at, "/a000", "/z999"]) {
            same_reading(&chunked_root, &plain_root, &path(at)).expect("the same reading");
        }
        let rebuilt = node(chunked_root.to_json(true));
        assert_eq!(rebuilt, chunked_root);
        assert_eq!(rebuilt.hash(), chunked_root.hash());
        assert_eq!(larges(&rebuilt), larges(&chunked_root), "after {at}");
        if at == "/m100x/body" {
            // Back below the bound, it joined the runs beside it.
            assert_eq!(larges(&chunked_root), 1);
            let runs: Vec<usize> = chunked_root.chunked().map_or(Vec::new(), |c| {
                c.parts()
                    .filter_map(|(_, part)| match part {
                        Part::Run(chunk) => Some(chunk.packed().len()),
                        Part::Large(_) => None,
                    })
                    .collect()
            });
            assert!(runs.iter().all(|n| *n > 1), "no run of one entry: {runs:?}");
            assert!(parts(&chunked_root) <= parts(&rebuilt) + 1, "{runs:?}");
        }
    }
    assert_eq!(larges(&chunked_root), 2);
    // The old version is untouched.
    same_reading(&root, &without_packing(|| node(value)), &path("/")).expect("untouched");
    // A priority inside a large child turns the collection into a map of nodes.
    let prioritized =
        chunked_root.set(&path("/a000/p"), node(json!({".value": 1, ".priority": 2})));
    assert!(prioritized.chunked().is_none());
    assert_eq!(
        prioritized.child(&key("a000")).child(&key("width")),
        node(json!(25))
    );
}

#[derive(Debug, Clone)]
enum Op {
    Set(Vec<&'static str>, serde_json::Value),
    Prioritize(Vec<&'static str>, serde_json::Value),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let segments = proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("10")], 0..4);
    let value = prop_oneof![
        Just(json!(null)),
        Just(json!(1)),
        Just(json!("s")),
        Just(json!({"x": 1, "y": {"z": true}})),
        Just(json!({".value": 2, ".priority": "p"})),
        Just(json!({"x": 3, ".priority": 1})),
        Just(json!("t".repeat(PACK_MAX_BYTES * 3 / 5))),
        Just(json!({"k": [1, 2.5, "u"], "w": -7, "f": 9_007_199_254_740_993.0})),
        Just(json!({"n": {"d": {"e": 1e300, "g": false}}, "0": "zero"})),
        // Large enough to be kept in chunks, with keys the paths above reach.
        Just(collection(26)),
        Just(json!({"10": collection(30), "b": 2.25})),
        // Over the bound: a record, a string that takes a packed record past it, and
        // collections with such records among small ones.
        Just(json!({"t": "o".repeat(PACK_MAX_BYTES), "n": 2})),
        Just(json!("u".repeat(PACK_MAX_BYTES + 10))),
        Just(with_large_records(collection(26))),
        Just(json!({"10": with_large_records(collection(30)), "a": 1})),
    ];
    let priority = prop_oneof![Just(json!(null)), Just(json!(5)), Just(json!("q"))];
    prop_oneof![
        3 => (segments.clone(), value).prop_map(|(p, v)| Op::Set(p, v)),
        1 => (segments, priority).prop_map(|(p, v)| Op::Prioritize(p, v)),
    ]
}

fn apply(root: &Node, op: &Op) -> Node {
    match op {
        Op::Set(segments, v) => {
            let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
            root.set(&target, node(v.clone()))
        }
        Op::Prioritize(segments, p) => {
            let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
            let priority = Priority::from_json(p).expect("valid priority");
            root.set(&target, root.get(&target).with_priority(priority))
        }
    }
}

/// A map of `n` records under the keys "0", "1", ... with "a" and "b" among them.
fn collection(n: usize) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for i in 0..n {
        let key = match i {
            0 => "a".to_string(),
            1 => "b".to_string(),
            _ => i.to_string(),
        };
        let text = "r".repeat(150 + i * 7);
        map.insert(
            key,
            json!({"t": text, "n": i as f64 / 4.0, "x": {"y": i % 3 == 0}}),
        );
    }
    serde_json::Value::Object(map)
}

/// `collection` with its records "b" and "10" over the packing bound.
fn with_large_records(mut collection: serde_json::Value) -> serde_json::Value {
    for name in ["b", "10"] {
        collection[name]["t"] = json!("l".repeat(PACK_MAX_BYTES));
    }
    collection
}

fn has_packed(node: &Node) -> bool {
    node.packed().is_some()
        || node.chunked().is_some()
        || node.children().any(|(_, child)| has_packed(&child))
}

fn has_chunked(node: &Node) -> bool {
    node.chunked().is_some() || node.children().any(|(_, child)| has_chunked(&child))
}

/// Everything a reader can observe of `a` and `b` at `at` is the same.
fn same_reading(a: &Node, b: &Node, at: &Path) -> Result<(), proptest::test_runner::TestCaseError> {
    let (a, b) = (a.get(at), b.get(at));
    proptest::prop_assert_eq!(&a, &b);
    proptest::prop_assert_eq!(a.to_json(true), b.to_json(true));
    for export in [false, true] {
        let (mut x, mut y) = (Vec::new(), Vec::new());
        a.write_json(&mut x, export);
        b.write_json(&mut y, export);
        proptest::prop_assert_eq!(x, y);
    }
    proptest::prop_assert_eq!(a.hash(), b.hash());
    proptest::prop_assert_eq!(a.estimated_bytes(), b.estimated_bytes());
    proptest::prop_assert_eq!(a.child_count(), b.child_count());
    proptest::prop_assert!(a.children().eq(b.children()));
    proptest::prop_assert!(a.children().rev().eq(b.children().rev()));
    proptest::prop_assert_eq!(a.first_child(), b.first_child());
    proptest::prop_assert_eq!(a.last_child(), b.last_child());
    let (from, to) = (key("10"), key("b"));
    for (lo, hi) in [
        (Bound::Included(&from), Bound::Excluded(&to)),
        (Bound::Excluded(&from), Bound::Included(&to)),
        (Bound::Unbounded, Bound::Excluded(&from)),
    ] {
        proptest::prop_assert!(a.children_range(lo, hi).eq(b.children_range(lo, hi)));
    }
    Ok(())
}

proptest::proptest! {
    /// Packing and chunks are invisible: the same writes applied with and without them read the same
    /// everywhere, hashes and JSON bytes included.
    #[test]
    fn packed_and_unpacked_forms_agree(ops in proptest::collection::vec(op(), 1..24)) {
        let (mut packed, mut plain) = (Node::empty(), Node::empty());
        for op in &ops {
            packed = apply(&packed, op);
            plain = without_packing(|| apply(&plain, op));
            proptest::prop_assert!(!has_packed(&plain));
            for at in ["/", "/a", "/b", "/10", "/a/b", "/10/a/b", "/a/x", "/b/n/d", "/10/10"] {
                same_reading(&packed, &plain, &path(at))?;
            }
        }
    }

    #[test]
    fn updates_keep_invariants(ops in proptest::collection::vec(op(), 1..24)) {
        let mut root = Node::empty();
        for op in ops {
            let before = root.clone();
            let before_json = before.to_json(true);
            let before_hash = before.hash();
            let (target, next) = match &op {
                Op::Set(segments, v) => {
                    let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                    let value = node(v.clone());
                    let next = root.set(&target, value.clone());
                    proptest::prop_assert_eq!(next.get(&target), value);
                    (target, next)
                }
                Op::Prioritize(segments, p) => {
                    let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                    let priority = Priority::from_json(p).expect("valid priority");
                    let current = root.get(&target);
                    let next = root.set(&target, current.with_priority(priority.clone()));
                    if !current.is_empty() {
                        proptest::prop_assert_eq!(next.get(&target).priority().clone(), priority);
                    }
                    (target, next)
                }
            };
            // The old version is untouched, cached hash included.
            proptest::prop_assert_eq!(before.to_json(true), before_json);
            proptest::prop_assert_eq!(before.hash(), before_hash);
            // The new version is canonical (no empty objects) and its incremental
            // bookkeeping (hash cache, size estimate) equals a fresh build.
            let rebuilt = node(next.to_json(true));
            proptest::prop_assert_eq!(&rebuilt, &next);
            proptest::prop_assert_eq!(rebuilt.hash(), next.hash());
            proptest::prop_assert_eq!(rebuilt.estimated_bytes(), next.estimated_bytes());
            // Siblings of the written path are shared, not copied (a packed object's
            // children are bytes, copied by design).
            if let Some(first) = target.first() {
                for (k, child) in before.children() {
                    let of_nodes = |n: &Node| n.packed().is_none() && n.chunked().is_none();
                    if *k != *first && of_nodes(&before) && of_nodes(&next) {
                        proptest::prop_assert!(child.ptr_eq(&next.child(&k)) || next.is_leaf());
                    }
                }
            }
            root = next;
        }
    }
}
