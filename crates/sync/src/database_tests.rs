//! Scenario tests of the database state machine: requests in, effects and replies out.
//! The request helpers are `pub(super)` because `database_access_tests.rs` drives the database
//! the same way.

use super::*;
use crate::write::WriteTarget;
use serde_json::json;

pub(super) fn path(text: &str) -> Path {
    Path::parse(text).expect("valid test path")
}

pub(super) fn target(text: &str) -> WriteTarget {
    WriteTarget::parse(text).expect("valid test target")
}

pub(super) fn query(value: Value) -> QueryParams {
    QueryParams::from_wire(&value).expect("valid test query")
}

/// The pushes in `effects`, as (connection, tag, path, JSON of the data) rows.
pub(super) fn pushes(effects: &Effects) -> Vec<(ConnId, Option<Tag>, String, Value)> {
    let mut rows = Vec::new();
    for effect in effects {
        if let Effect::Push { push, targets } = effect {
            let data = match &push.data {
                PushData::Put(node) => node.to_json(true),
                PushData::Merge(entries) => Value::Object(
                    entries
                        .iter()
                        .map(|(p, n)| (p.to_string(), n.to_json(true)))
                        .collect(),
                ),
            };
            for t in targets {
                rows.push((t.conn, t.tag, push.path.to_string(), data.clone()));
            }
        }
    }
    rows
}

pub(super) fn put(db: &mut Database, conn: ConnId, p: &str, data: Value) -> (Reply, Effects) {
    let mut out = Effects::new();
    let reply = db.handle(
        conn,
        Request::Put {
            target: target(p),
            data,
            hash: None,
        },
        1_000,
        &mut out,
    );
    (reply, out)
}

pub(super) fn listen(
    db: &mut Database,
    conn: ConnId,
    p: &str,
    q: Option<Value>,
    tag: Option<Tag>,
) -> (Reply, Effects) {
    let mut out = Effects::new();
    let query = q.as_ref().map(|q| query(q.clone())).unwrap_or_default();
    let reply = db.handle(
        conn,
        Request::Listen {
            path: path(p),
            query,
            query_wire: q,
            tag,
            hash: None,
        },
        1_000,
        &mut out,
    );
    (reply, out)
}

#[test]
fn listen_sends_data_then_ok() {
    let mut db = Database::new();
    db.connect(1);
    put(&mut db, 1, "/a", json!({"b": 1}));
    let (reply, out) = listen(&mut db, 1, "/a", None, None);
    assert_eq!(reply, Reply::listen_ok());
    assert_eq!(pushes(&out), vec![(1, None, "/a".into(), json!({"b": 1}))]);
    let (_, out) = listen(&mut db, 1, "/missing", None, None);
    assert_eq!(
        pushes(&out),
        vec![(1, None, "/missing".into(), Value::Null)]
    );
}

#[test]
fn writes_reach_listeners_above_at_and_below() {
    let mut db = Database::new();
    for conn in 1..=4 {
        db.connect(conn);
    }
    put(&mut db, 1, "/a", json!({"b": {"c": 1}, "x": 2}));
    listen(&mut db, 1, "/", None, None);
    listen(&mut db, 2, "/a/b", None, None);
    listen(&mut db, 3, "/a/b/c", None, None);
    listen(&mut db, 4, "/a/x", None, None);
    let (reply, out) = put(&mut db, 1, "/a/b", json!({"c": 5}));
    assert!(reply.is_ok());
    let mut rows = pushes(&out);
    rows.sort_by_key(|row| row.0);
    assert_eq!(
        rows,
        vec![
            (1, None, "/a/b".into(), json!({"c": 5})),
            (2, None, "/a/b".into(), json!({"c": 5})),
            (3, None, "/a/b/c".into(), json!(5)),
        ]
    );
    assert!(matches!(out[0], Effect::Log(_)));
}

#[test]
fn merges_are_atomic_and_pushed_once() {
    let mut db = Database::new();
    db.connect(1);
    db.connect(2);
    listen(&mut db, 1, "/w", None, None);
    listen(&mut db, 2, "/w/d", None, None);
    let mut out = Effects::new();
    let reply = db.handle(
        1,
        Request::Merge {
            path: path("/w"),
            entries: vec![
                (target("d/e"), json!(1)),
                (target("f"), json!({".sv": "timestamp"})),
            ],
        },
        42,
        &mut out,
    );
    assert!(reply.is_ok());
    let mut rows = pushes(&out);
    rows.sort_by_key(|row| row.0);
    assert_eq!(
        rows,
        vec![
            (1, None, "/w".into(), json!({"/d/e": 1, "/f": 42})),
            (2, None, "/w/d/e".into(), json!(1)),
        ]
    );
    assert_eq!(
        db.root().to_json(true),
        json!({"w": {"d": {"e": 1}, "f": 42}})
    );
}

/// A compare-and-set of `/n` by connection 1.
fn cas(db: &mut Database, hash: &str, data: Value, out: &mut Effects) -> Reply {
    db.handle(
        1,
        Request::Put {
            target: target("/n"),
            data,
            hash: Some(hash.into()),
        },
        0,
        out,
    )
}

#[test]
fn compare_and_set_by_hash() {
    let mut db = Database::new();
    db.connect(1);
    let mut out = Effects::new();
    assert!(cas(&mut db, "", json!(1), &mut out).is_ok());
    assert_eq!(
        cas(&mut db, "", json!(2), &mut out).status,
        Status::DataStale
    );
    assert!(cas(&mut db, "YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=", json!(2), &mut out).is_ok());
    assert_eq!(db.root().to_json(true), json!({"n": 2}));
}

/// The Java client prints some numbers from their exact bits (2^53−1 as `433fffffffffffff`
/// where the JS client prints `4340000000000000`): its compare-and-set and its listen's cached
/// hash are accepted in either form, and a hash of neither form is still stale.
#[test]
fn compare_and_set_accepts_the_java_clients_hash() {
    let mut db = Database::new();
    db.connect(1);
    let mut out = Effects::new();
    for value in [
        json!(9007199254740991u64),
        json!({"score": 281474976710655u64, "name": "x"}),
        json!({".value": 1, ".priority": 3.9999999999999996}),
    ] {
        put(&mut db, 1, "/n", value.clone());
        let node = db.root().get(&path("/n"));
        let (js, java) = (node.hash(), node.java_hash());
        assert_ne!(js, java, "{value}");
        // Neither the hash of other data nor a mangled one is accepted.
        let other = Node::from_json(&json!(12345)).expect("valid").hash();
        assert_eq!(
            cas(&mut db, &other, json!(0), &mut out).status,
            Status::DataStale
        );
        assert!(cas(&mut db, &java, json!(1), &mut out).is_ok(), "{value}");
        assert_eq!(db.root().get(&path("/n")).to_json(true), json!(1));
        put(&mut db, 1, "/n", value.clone());
        assert!(cas(&mut db, &js, json!(2), &mut out).is_ok(), "{value}");
        assert_eq!(db.root().get(&path("/n")).to_json(true), json!(2));
    }
    // A listen whose cached copy is current in the Java form gets no data again.
    put(&mut db, 1, "/n", json!({"k": 9007199254740991u64}));
    let java = db.root().get(&path("/n")).java_hash();
    let mut out = Effects::new();
    let reply = db.handle(
        1,
        Request::Listen {
            path: path("/n"),
            query: QueryParams::default(),
            query_wire: None,
            tag: None,
            hash: Some(java.to_string()),
        },
        1_000,
        &mut out,
    );
    assert_eq!(reply, Reply::listen_ok());
    assert_eq!(pushes(&out), vec![]);
}

#[test]
fn priority_writes() {
    let mut db = Database::new();
    db.connect(1);
    put(&mut db, 1, "/a/.priority", json!(5));
    assert!(
        db.root().is_empty(),
        "a priority on an empty node has no effect"
    );
    put(&mut db, 1, "/a", json!({"x": 1}));
    put(&mut db, 1, "/a/.priority", json!("p"));
    assert_eq!(
        db.root().to_json(true),
        json!({"a": {"x": 1, ".priority": "p"}})
    );
}

#[test]
fn invalid_writes_are_refused_with_a_reason() {
    let mut db = Database::new();
    db.connect(1);
    let (reply, out) = put(&mut db, 1, "/a", json!({"b.c": 1}));
    assert_eq!(reply.status, Status::InvalidData);
    assert!(out.is_empty());
    let mut deep = json!(1);
    for _ in 0..32 {
        deep = json!({ "k": deep });
    }
    let (reply, _) = put(&mut db, 1, "/a", deep);
    assert_eq!(reply.status, Status::InvalidData);
}

#[test]
fn filtered_listens_follow_their_window() {
    let mut db = Database::new();
    db.connect(1);
    db.connect(2);
    put(
        &mut db,
        2,
        "/s",
        json!({"a": {"score": 1}, "b": {"score": 2}, "c": {"score": 3}}),
    );
    let q = json!({"l": 2, "vf": "r", "i": "score"});
    let (_, out) = listen(&mut db, 1, "/s", Some(q.clone()), Some(7));
    assert_eq!(
        pushes(&out),
        vec![(
            1,
            Some(7),
            "/s".into(),
            json!({"b": {"score": 2}, "c": {"score": 3}})
        )]
    );
    // `a` climbs into the window; `b` must leave in the same push.
    let (_, out) = put(&mut db, 2, "/s/a/score", json!(10));
    assert_eq!(
        pushes(&out),
        vec![(
            1,
            Some(7),
            "/s".into(),
            json!({"/a": {"score": 10}, "/b": null})
        )]
    );
    // A deletion inside the window refills it from outside.
    let (_, out) = put(&mut db, 2, "/s/c", Value::Null);
    assert_eq!(
        pushes(&out),
        vec![(
            1,
            Some(7),
            "/s".into(),
            json!({"/b": {"score": 2}, "/c": null})
        )]
    );
    // A change outside the window sends nothing.
    put(&mut db, 2, "/s/z", json!({"score": -5}));
    let (_, out) = put(&mut db, 2, "/s/z/score", json!(-6));
    assert!(pushes(&out).is_empty());
}

#[test]
fn unlisten_stops_pushes_and_frees_the_view() {
    let mut db = Database::new();
    db.connect(1);
    listen(&mut db, 1, "/a", None, None);
    assert_eq!(db.view_count(), 1);
    let mut out = Effects::new();
    db.handle(
        1,
        Request::Unlisten {
            path: path("/a"),
            tag: None,
        },
        0,
        &mut out,
    );
    assert_eq!(db.view_count(), 0);
    let (_, out) = put(&mut db, 1, "/a", json!(1));
    assert!(pushes(&out).is_empty());
}

#[test]
fn listens_are_bounded_per_connection() {
    let mut db = Database::new();
    db.connect(1);
    for i in 0..MAX_LISTENS_PER_SESSION {
        let (reply, _) = listen(&mut db, 1, &format!("/p{i}"), None, None);
        assert!(reply.is_ok());
    }
    let (reply, _) = listen(&mut db, 1, "/one-more", None, None);
    assert_eq!(reply.status, Status::LimitExceeded);
    // Re-listening on an existing path replaces it and is still allowed.
    let (reply, _) = listen(&mut db, 1, "/p0", None, None);
    assert!(reply.is_ok());
}

#[test]
fn on_disconnect_runs_when_the_connection_ends() {
    let mut db = Database::new();
    db.connect(1);
    db.connect(2);
    listen(&mut db, 2, "/presence", None, None);
    let mut out = Effects::new();
    let reply = db.handle(
        1,
        Request::OnDisconnectPut {
            target: target("/presence/u1"),
            data: json!({".sv": "timestamp"}),
        },
        10,
        &mut out,
    );
    assert!(reply.is_ok());
    db.handle(
        1,
        Request::OnDisconnectPut {
            target: target("/presence/u2"),
            data: json!("gone"),
        },
        10,
        &mut out,
    );
    db.handle(
        1,
        Request::OnDisconnectCancel {
            path: path("/presence/u2"),
        },
        10,
        &mut out,
    );
    assert_eq!(db.on_disconnect_len(1), 1);
    let mut out = Effects::new();
    db.disconnect(1, 99, &mut out);
    assert_eq!(
        pushes(&out),
        vec![(2, None, "/presence/u1".into(), json!(99))]
    );
    assert_eq!(db.session_count(), 1);
}

#[test]
fn a_session_that_leaves_runs_no_on_disconnect_and_gets_no_pushes() {
    let mut db = Database::new();
    db.connect(1);
    db.connect(2);
    listen(&mut db, 1, "/presence", None, None);
    listen(&mut db, 2, "/presence", None, None);
    let mut out = Effects::new();
    let queued = db.handle(
        1,
        Request::OnDisconnectPut {
            target: target("/presence/u1"),
            data: json!("gone"),
        },
        10,
        &mut out,
    );
    assert!(queued.is_ok());
    let mut out = Effects::new();
    db.leave(1);
    assert!(pushes(&out).is_empty(), "the queue did not run");
    assert_eq!(db.session_count(), 1);
    let (_, written) = put(&mut db, 2, "/presence/u2", json!("here"));
    assert!(
        pushes(&written).iter().all(|push| push.0 == 2),
        "its listens went with it"
    );
    out = Effects::new();
    db.disconnect(1, 20, &mut out);
    assert!(
        pushes(&out).is_empty(),
        "gone already: nothing runs later either"
    );
}

#[test]
fn get_reads_without_listening() {
    let mut db = Database::new();
    db.connect(1);
    put(&mut db, 1, "/g", json!({"a": 1, "b": 2, "c": 3}));
    let mut out = Effects::new();
    let reply = db.handle(
        1,
        Request::Get {
            path: path("/g"),
            query: query(json!({"l": 2, "vf": "l", "i": ".key"})),
        },
        0,
        &mut out,
    );
    assert_eq!(
        reply.data,
        ReplyData::Value(Node::from_json(&json!({"a": 1, "b": 2})).expect("valid"))
    );
    assert!(out.is_empty());
    assert_eq!(db.view_count(), 0);
}
