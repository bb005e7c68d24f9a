//! Snapshots read back into the forms the tree keeps data in (packed records, chunked
//! collections, objects of nodes): random trees come back identical, and a snapshot written
//! before the reader built those forms directly still loads.

use hearth_store::{read_snapshot, write_snapshot, MemoryStorage, Storage, StorageFile};
use hearth_tree::{Node, Path};
use proptest::prelude::*;
use serde_json::{json, Value};

/// A snapshot of database `db` covering sequence number 12, written by the reader's previous
/// version (commit 6fd0544, which decoded every child into a node first) from the tree in
/// [`fixture_tree`], with rules `{"rules":{".read":true}}`.
const OLD_SNAPSHOT_HEX: &[&str] = &[
    "484541525448534e010000005ee34cbc0c000000000000000000000000000000de000000c085b8f102646201",
    "187b2272756c6573223a7b222e72656164223a747275657d7d0607022d3105056d696e7573013905046e696e",
    "65023130050374656e046e756d7306050130049a9999999999b93f0131049c7500883ce4377e013204000000",
    "00000004c001330380808080808080200134030e036f626a8603017001016106010162060101630501640370",
    "72698502000000000000f83f017605726f6f6d7306010272310602026d310603026f6b020474657874050b68",
    "c3a96c6c6f20f09f98800274730380a0abfef962026d320603026f6b01047465787405017802747303050000",
    "0000af2cec48de00000000000000",
];

fn fixture_tree() -> Value {
    json!({
        "rooms": {"r1": {
            "m1": {"text": "héllo 😀", "ts": 1_700_000_000_000u64, "ok": true},
            "m2": {"text": "x", "ts": -3, "ok": false},
        }},
        "nums": [0.1, 1e300, -2.5, 9007199254740993.0, 7],
        "pri": {".value": "v", ".priority": 1.5},
        "obj": {"a": {"b": {"c": "d"}}, ".priority": "p"},
        "10": "ten", "9": "nine", "-1": "minus"
    })
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn a_snapshot_written_by_the_previous_reader_loads() {
    let storage = MemoryStorage::new();
    let name = "snap-db-00000000000000000012";
    let file = storage.create(name).expect("created");
    file.write_at(0, &unhex(&OLD_SNAPSHOT_HEX.concat()))
        .expect("written");
    let snapshot = read_snapshot(&storage, name).expect("the old snapshot reads");
    let expected = Node::from_json(&fixture_tree()).expect("a valid tree");
    assert_eq!(snapshot.root, expected);
    // The hash as the previous version computed it when the fixture was made.
    assert_eq!(&*snapshot.root.hash(), "X53X7bfh460sFeXRdvqhdjEJ2UI=");
    assert_eq!(snapshot.root.to_json(true), expected.to_json(true));
    assert_eq!(
        snapshot.rules.as_deref(),
        Some("{\"rules\":{\".read\":true}}")
    );
    assert_eq!(snapshot.covered_seq, 12);
    // The same tree written now is the same bytes: the format did not change.
    let again = MemoryStorage::new();
    let info =
        write_snapshot(&again, "db", 12, snapshot.rules.as_deref(), &expected).expect("written");
    let file = again.open(&info.name).expect("opens");
    let mut bytes = vec![0; file.size().expect("a size") as usize];
    file.read_at(0, &mut bytes).expect("reads");
    assert_eq!(bytes, unhex(&OLD_SNAPSHOT_HEX.concat()));
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a-z\"é😀]{0,8}".prop_map(Value::String),
        // Long strings take objects past the packing bound, into chunks, and across frames.
        "[a-z]{1000,6000}".prop_map(Value::String),
        (any::<i16>(), "[a-z]{0,3}").prop_map(|(v, p)| json!({".value": v, ".priority": p})),
        // A whole small record, which packs.
        ("[a-z]{0,20}", any::<u32>())
            .prop_map(|(text, n)| json!({"text": text, "n": n, "ok": n % 3 == 0})),
    ]
}

/// A tree made by a series of writes at random paths of up to four levels, so that objects of
/// every size and form (packed, chunked, maps of nodes, with priorities) appear at any depth.
fn tree() -> impl Strategy<Value = Node> {
    let path = proptest::collection::vec("[a-c]{1,2}|[0-9]{1,3}|-[1-9]", 1..5);
    proptest::collection::vec((path, leaf()), 1..80).prop_map(|writes| {
        let mut root = Node::empty();
        for (keys, value) in writes {
            let at = Path::parse(&keys.join("/")).expect("a valid path");
            root = root.set(&at, Node::from_json(&value).expect("a valid value"));
        }
        root
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any tree written to a snapshot reads back identical: equal, with the same hash, size
    /// estimate and JSON, and the same for every child.
    #[test]
    fn random_trees_round_trip(root in tree()) {
        let storage = MemoryStorage::new();
        let info = write_snapshot(&storage, "db", 3, None, &root).expect("written");
        let back = read_snapshot(&storage, &info.name).expect("read").root;
        prop_assert_eq!(&back, &root);
        prop_assert_eq!(back.hash(), root.hash());
        prop_assert_eq!(back.estimated_bytes(), root.estimated_bytes());
        prop_assert_eq!(back.to_json(true), root.to_json(true));
        for (key, child) in root.children() {
            let other = back.child(&key);
            prop_assert_eq!(other.hash(), child.hash());
            prop_assert_eq!(other.estimated_bytes(), child.estimated_bytes());
            prop_assert_eq!(other.to_json(false), child.to_json(false));
        }
    }
}
