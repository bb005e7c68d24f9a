use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::test_writes::{merge, node, path, set, small_path, small_value};
use crate::write::WriteOp;
use hearth_tree::Node;

/// What a client holding the value at `at` makes of a feed's event: the push applied to it.
fn apply(client: &Node, at: &Path, push: &Push) -> Node {
    let relative = push
        .path
        .strip_prefix(at)
        .expect("events lie under the feed");
    match &push.data {
        PushData::Put(value) => client.set(&relative, value.clone()),
        PushData::Merge(members) => members
            .iter()
            .fold(client.clone(), |client, (member, value)| {
                client.set(&relative.join(member), value.clone())
            }),
    }
}

#[test]
fn a_set_is_a_put_and_an_update_a_patch_at_its_base() {
    let write = set("/rooms/r1", json!({"name": "x"}));
    let push = feed_push(&write, &path("/rooms")).expect("seen");
    assert_eq!(push.path, path("/rooms/r1"));
    assert_eq!(push.data, PushData::Put(node(json!({"name": "x"}))));

    let write = merge("/rooms", &[("r1/name", json!("y")), ("r2", Value::Null)]);
    let push = feed_push(&write, &Path::root()).expect("seen");
    assert_eq!(push.path, path("/rooms"));
    assert_eq!(
        push.data,
        PushData::Merge(vec![
            (path("/r1/name"), node(json!("y"))),
            (path("/r2"), Node::empty()),
        ])
    );
}

#[test]
fn a_write_above_the_feed_gives_only_its_part() {
    let write = set("/rooms", json!({"r1": {"name": "x"}, "r2": 1}));
    let push = feed_push(&write, &path("/rooms/r1")).expect("seen");
    assert_eq!(push.path, path("/rooms/r1"));
    assert_eq!(push.data, PushData::Put(node(json!({"name": "x"}))));
    // An update above the feed: only its members under the feed, and the one above it.
    let write = merge("/rooms", &[("r1/name", json!("y")), ("r2", json!(2))]);
    let push = feed_push(&write, &path("/rooms/r1")).expect("seen");
    assert_eq!(push.path, path("/rooms/r1"));
    assert_eq!(
        push.data,
        PushData::Merge(vec![(path("/name"), node(json!("y")))])
    );
    let push = feed_push(&write, &path("/rooms/r2/deep")).expect("seen");
    assert_eq!(push.data, PushData::Put(Node::empty()));
}

#[test]
fn writes_elsewhere_and_priorities_are_not_seen() {
    assert_eq!(feed_push(&set("/a", json!(1)), &path("/b")), None);
    let priority = Write {
        base: path("/a"),
        ops: vec![WriteOp {
            path: Path::root(),
            change: Change::Priority(hearth_tree::Priority::Number(1.0)),
        }],
    };
    assert_eq!(feed_push(&priority, &Path::root()), None);
}

#[test]
fn the_log_resumes_after_a_position_and_refuses_what_it_let_go() {
    let mut log = ChangeLog::new(10);
    for seq in [11, 14, 15] {
        log.record(seq, Arc::new(set("/a", json!(seq))));
    }
    let after = |log: &ChangeLog, from| {
        log.since(from, 16)
            .map(|records| records.map(|(seq, _)| seq).collect::<Vec<_>>())
    };
    assert_eq!(after(&log, 10), Ok(vec![11, 14, 15]));
    assert_eq!(after(&log, 12), Ok(vec![14, 15]));
    assert_eq!(after(&log, 16), Ok(vec![]));
    assert_eq!(after(&log, 9), Err(ResumeError::TooOld { floor: 10 }));
    assert_eq!(after(&log, 17), Err(ResumeError::Ahead { last: 16 }));
    log.roll_back(14);
    assert_eq!(after(&log, 10), Ok(vec![11, 14]));
}

#[test]
fn past_its_limit_the_log_lets_the_oldest_go_and_raises_its_floor() {
    let mut log = ChangeLog::new(0);
    for seq in 1..=(MAX_FEED_RECORDS as u64 + 5) {
        log.record(seq, Arc::new(set("/a", json!(1))));
    }
    assert_eq!(log.len(), MAX_FEED_RECORDS);
    assert_eq!(log.floor(), 5);
    assert!(log.since(4, u64::MAX).is_err());
    assert_eq!(
        log.since(5, u64::MAX).map(|r| r.count()),
        Ok(MAX_FEED_RECORDS)
    );
    // Past the byte limit too the oldest go; a record larger than the limit is not kept at
    // all, and nothing before it can be resumed from.
    let quarter = "x".repeat(MAX_FEED_BYTES / 4);
    let big = |n: u64| Arc::new(set(&format!("/b{n}"), json!({"a": quarter, "b": quarter})));
    let first = MAX_FEED_RECORDS as u64 + 6;
    for seq in first..first + 3 {
        log.record(seq, big(seq));
    }
    assert!(log.bytes() <= MAX_FEED_BYTES);
    assert_eq!(log.floor(), first + 1);
    assert_eq!(log.since(first + 1, u64::MAX).map(|r| r.count()), Ok(1));
    let huge = "x".repeat(MAX_FEED_BYTES / 2 + 1);
    log.record(
        first + 10,
        Arc::new(set("/c", json!({"a": huge, "b": huge}))),
    );
    assert_eq!((log.len(), log.bytes(), log.floor()), (0, 0, first + 10));
}

fn small_write() -> impl Strategy<Value = Write> {
    // Members of an update are never ancestors of one another.
    let members = prop::sample::subsequence(vec!["a", "b/a", "b/c", "c/a/b"], 1..4);
    prop_oneof![
        (small_path(), small_value()).prop_map(|(at, value)| set(&at, value)),
        (
            small_path(),
            members,
            prop::collection::vec(small_value(), 4)
        )
            .prop_map(|(at, members, values)| {
                let members: Vec<(&str, Value)> = members.into_iter().zip(values).collect();
                merge(&at, &members)
            }),
    ]
}

proptest! {
    /// A client that starts with the value at the feed's location and applies each event
    /// holds what the database holds there, after every write.
    #[test]
    fn a_client_applying_the_feed_holds_the_database(
        data in small_value(),
        writes in prop::collection::vec(small_write(), 1..6),
        at in small_path(),
    ) {
        let at = path(&at);
        let mut root = node(data);
        let mut client = root.get(&at);
        for write in &writes {
            root = write.apply(&root);
            if let Some(push) = feed_push(write, &at) {
                client = apply(&client, &at, &push);
            }
            prop_assert_eq!(client.to_json(true), root.get(&at).to_json(true));
        }
    }
}

#[test]
fn records_out_of_order_are_ignored_and_a_gap_raises_the_floor() {
    let mut log = ChangeLog::new(3);
    log.record(3, Arc::new(set("/a", json!(3))));
    log.record(5, Arc::new(set("/a", json!(5))));
    log.record(4, Arc::new(set("/a", json!(4))));
    assert_eq!(log.len(), 1, "only 5: 3 is the floor, 4 comes after 5");
    let bytes = log.bytes();
    assert!(bytes > 0);
    // A record that cannot be kept: nothing up to it may be offered as complete.
    log.forget_through(6);
    assert_eq!((log.len(), log.bytes(), log.floor()), (0, 0, 6));
    assert_eq!(
        log.since(5, 9).err(),
        Some(ResumeError::TooOld { floor: 6 })
    );
}
