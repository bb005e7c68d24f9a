//! Scenario tests of the database state machine: requests in, effects and replies out.

use super::*;
use crate::access::WriteScope;
use crate::write::WriteTarget;
use serde_json::json;

fn path(text: &str) -> Path {
    Path::parse(text).expect("valid test path")
}

fn target(text: &str) -> WriteTarget {
    WriteTarget::parse(text).expect("valid test target")
}

fn query(value: Value) -> QueryParams {
    QueryParams::from_wire(&value).expect("valid test query")
}

/// The pushes in `effects`, as (connection, tag, path, JSON of the data) rows.
fn pushes(effects: &Effects) -> Vec<(ConnId, Option<Tag>, String, Value)> {
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

fn put(db: &mut Database, conn: ConnId, p: &str, data: Value) -> (Reply, Effects) {
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

fn listen(
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

fn rules(text: &str) -> Access {
    Access::Rules(std::sync::Arc::new(
        hearth_rules::Rules::parse(text).expect("valid test rules"),
    ))
}

const OWN_DATA_RULES: &str = r#"{"rules": {"users": {"$uid": {
    ".read": "auth != null && auth.uid === $uid",
    ".write": "auth != null && auth.uid === $uid",
    "age": {".validate": "newData.isNumber()"}
}}}}"#;

fn user(uid: &str) -> AuthState {
    AuthState::User(json!({"uid": uid, "provider": "custom", "token": {"sub": uid}}))
}

#[test]
fn rules_decide_reads_and_writes() {
    let mut db = Database::new();
    let mut out = Effects::new();
    db.set_access(rules(OWN_DATA_RULES), 0, &mut out);
    db.connect(1);
    db.set_auth(1, user("alice"), 0, &mut out);
    let (reply, _) = put(&mut db, 1, "/users/alice/name", json!("Alice"));
    assert!(reply.is_ok());
    let (reply, out) = put(&mut db, 1, "/users/bob/name", json!("Mallory"));
    assert_eq!(reply.status, Status::PermissionDenied);
    assert!(out.is_empty(), "a refused write has no effects");
    let (reply, _) = put(&mut db, 1, "/users/alice/age", json!("old"));
    assert_eq!(reply.status, Status::PermissionDenied, ".validate refuses");
    let (reply, out) = listen(&mut db, 1, "/users/bob", None, None);
    assert_eq!(reply.status, Status::PermissionDenied);
    assert!(pushes(&out).is_empty(), "no data for a refused listen");
    let (reply, _) = listen(&mut db, 1, "/users/alice", None, None);
    assert!(reply.is_ok());
}

#[test]
fn coverage_records_checks_and_starts_afresh_with_new_rules() {
    let mut db = Database::new();
    let mut out = Effects::new();
    db.set_access(rules(OWN_DATA_RULES), 0, &mut out);
    assert_eq!(db.coverage_report(None), None, "not kept unless asked");
    db.record_coverage();
    db.connect(1);
    db.set_auth(1, user("alice"), 0, &mut out);
    assert!(put(&mut db, 1, "/users/alice/age", json!(3)).0.is_ok());
    assert!(!put(&mut db, 1, "/users/bob/age", json!(3)).0.is_ok());
    let report: Value =
        serde_json::from_str(&db.coverage_report(None).expect("kept")).expect("json");
    let write = &report["exprs"][1];
    assert_eq!(write["rule"], "/rules/users/$uid/.write");
    assert_eq!(
        write["values"],
        json!([{"value": true, "count": 1}, {"value": false, "count": 1}])
    );
    // Admins bypass the rules: nothing is evaluated, nothing recorded.
    db.connect(2);
    db.set_auth(2, AuthState::Admin, 0, &mut out);
    assert!(put(&mut db, 2, "/users/bob/age", json!(3)).0.is_ok());
    let again: Value =
        serde_json::from_str(&db.coverage_report(None).expect("kept")).expect("json");
    assert_eq!(again, report);
    assert!(db
        .coverage_report(Some("t"))
        .is_some_and(|html| html.contains("auth.uid === $uid")));

    db.set_access(rules(OWN_DATA_RULES), 0, &mut out);
    let fresh: Value =
        serde_json::from_str(&db.coverage_report(None).expect("kept")).expect("json");
    assert_eq!(fresh["exprs"][1]["values"], json!([]));
    db.set_access(Access::Open, 0, &mut out);
    assert_eq!(
        db.coverage_report(None),
        None,
        "no rules document, no report"
    );
}

/// A locked database with an anonymous session 1 and an admin session 2.
fn locked_with_admin() -> Database {
    let mut db = Database::new();
    let mut out = Effects::new();
    db.set_access(Access::Locked, 0, &mut out);
    db.connect(1);
    db.connect(2);
    db.set_auth(2, AuthState::Admin, 0, &mut out);
    db
}

#[test]
fn locked_databases_admit_only_admins() {
    let mut db = locked_with_admin();
    assert_eq!(
        put(&mut db, 1, "/a", json!(1)).0.status,
        Status::PermissionDenied
    );
    assert!(put(&mut db, 2, "/a", json!(1)).0.is_ok());
}

#[test]
fn prechecks_refuse_like_the_full_check() {
    let mut db = locked_with_admin();
    let mut out = Effects::new();
    let full = put(&mut db, 1, "/a", json!(1)).0;
    let early = db
        .precheck_write(1, &path("/a"), WriteScope::At)
        .expect_err("anonymous on a locked database");
    assert_eq!((early.status, early.data), (full.status, full.data));
    assert!(db.precheck_write(2, &path("/a"), WriteScope::Below).is_ok());
    assert!(
        db.precheck_write(9, &path("/a"), WriteScope::At).is_ok(),
        "left to handle"
    );

    db.set_access(rules(OWN_DATA_RULES), 0, &mut out);
    db.set_auth(1, user("alice"), 0, &mut out);
    assert!(db
        .precheck_write(1, &path("/users/alice/age"), WriteScope::At)
        .is_ok());
    let refused = db.precheck_write(1, &path("/users/bob"), WriteScope::At);
    assert_eq!(refused.map_err(|r| r.status), Err(Status::PermissionDenied));
    assert!(db
        .precheck_write(1, &path("/users"), WriteScope::Below)
        .is_ok());

    db.set_read_only(Some("the disk failed".into()));
    let read_only = db.precheck_write(1, &path("/users/bob"), WriteScope::At);
    assert_eq!(read_only.map_err(|r| r.status), Err(Status::Unavailable));
}

#[test]
fn rule_and_auth_changes_cancel_listens() {
    let mut db = Database::new();
    let mut out = Effects::new();
    db.connect(1);
    db.set_auth(1, user("alice"), 0, &mut out);
    let q = json!({"l": 5, "vf": "l"});
    listen(&mut db, 1, "/users/alice", None, None);
    listen(&mut db, 1, "/users/bob", Some(q.clone()), Some(3));
    let mut out = Effects::new();
    db.set_access(rules(OWN_DATA_RULES), 0, &mut out);
    let cancels: Vec<_> = out
        .iter()
        .filter_map(|effect| match effect {
            Effect::Cancel {
                conn,
                path,
                query_wire,
            } => Some((*conn, path.to_string(), query_wire.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(cancels, vec![(1, "/users/bob".to_owned(), Some(q))]);
    assert_eq!(db.view_count(), 1);
    let mut out = Effects::new();
    db.set_auth(1, AuthState::Anonymous, 0, &mut out);
    assert!(matches!(out.as_slice(), [Effect::Cancel { .. }]));
    assert_eq!(db.view_count(), 0);
}

#[test]
fn on_disconnect_is_checked_when_queued_and_when_run() {
    let mut db = Database::new();
    let mut out = Effects::new();
    db.set_access(rules(OWN_DATA_RULES), 0, &mut out);
    db.connect(1);
    db.set_auth(1, user("alice"), 0, &mut out);
    let queue = |db: &mut Database, p: &str| {
        let mut out = Effects::new();
        db.handle(
            1,
            Request::OnDisconnectPut {
                target: target(p),
                data: json!("offline"),
            },
            0,
            &mut out,
        )
    };
    assert_eq!(
        queue(&mut db, "/users/bob/status").status,
        Status::PermissionDenied
    );
    assert!(queue(&mut db, "/users/alice/status").is_ok());
    // The rules tighten before the connection ends: the queued write no longer runs.
    db.set_access(Access::Locked, 0, &mut out);
    let mut out = Effects::new();
    db.disconnect(1, 5, &mut out);
    assert!(db.root().is_empty());
}

#[test]
fn a_read_only_database_refuses_writes_and_keeps_serving_reads() {
    let mut db = Database::new();
    db.connect(1);
    let (reply, _) = put(&mut db, 1, "/a", json!(1));
    assert!(reply.is_ok());
    db.set_read_only(Some(Arc::from("the disk failed")));
    let (reply, effects) = put(&mut db, 1, "/a", json!(2));
    assert_eq!(reply.status, Status::Unavailable);
    assert!(
        effects.is_empty(),
        "a refused write logs and pushes nothing"
    );
    let mut out = Effects::new();
    let queued = db.handle(
        1,
        Request::OnDisconnectPut {
            target: target("/gone"),
            data: json!(true),
        },
        1_000,
        &mut out,
    );
    assert_eq!(queued.status, Status::Unavailable);
    assert_eq!(db.root().get(&path("/a")).to_json(false), json!(1));
    db.set_read_only(None);
    assert!(put(&mut db, 1, "/a", json!(3)).0.is_ok());
}

#[test]
fn unindexed_value_and_child_queries_are_answered_with_a_warning() {
    let mut db = Database::new();
    db.connect(1);
    put(
        &mut db,
        1,
        "/rooms/r1/scores",
        json!({"a": {"s": 1}, "b": {"s": 2}}),
    );
    let by_child = json!({"i": "s", "l": 1, "vf": "r"});
    let by_deep_child = json!({"i": "m/t", "l": 1});
    let by_value = json!({"i": ".value", "l": 1});
    let at = "/rooms/r1/scores";
    // Open (development) and locked databases have no rules, so nothing is indexed.
    for (tag, q) in [(1, &by_child), (2, &by_deep_child), (3, &by_value)] {
        let (reply, out) = listen(&mut db, 1, at, Some(q.clone()), Some(tag));
        assert_eq!(reply, Reply::listen_ok_no_index(), "{q}");
        assert_eq!(pushes(&out).len(), 1, "the data is sent all the same");
    }
    assert_eq!(db.index_count(), 0);
    // Key and priority order need no index, and a plain listen names none.
    for (tag, q) in [(4, json!({"i": ".key", "l": 1})), (5, json!({"l": 1}))] {
        let (reply, _) = listen(&mut db, 1, at, Some(q), Some(tag));
        assert_eq!(reply, Reply::listen_ok());
    }
    let (reply, _) = listen(&mut db, 1, at, None, None);
    assert_eq!(reply, Reply::listen_ok());

    // Declared at a wildcard location: no warning, and the views share one index per index.
    let indexed = r#"{"rules": {".read": true, ".write": true,
        "rooms": {"$room": {"scores": {".indexOn": ["s", "m/t", ".value"]}}}}}"#;
    let mut out = Effects::new();
    db.set_access(rules(indexed), 0, &mut out);
    assert_eq!(
        db.index_count(),
        3,
        "the rules built the indexes of the live views"
    );
    for (tag, q) in [(6, &by_child), (7, &by_deep_child), (8, &by_value)] {
        let (reply, _) = listen(&mut db, 1, at, Some(q.clone()), Some(tag));
        assert_eq!(reply, Reply::listen_ok(), "{q}");
    }
    let other = json!({"i": "s", "l": 2});
    let (reply, _) = listen(&mut db, 1, at, Some(other), Some(9));
    assert_eq!(reply, Reply::listen_ok());
    assert_eq!(db.index_count(), 3);
    // Somewhere the rules do not declare it, the warning is back.
    let (reply, _) = listen(&mut db, 1, "/rooms", Some(by_child.clone()), Some(10));
    assert_eq!(reply, Reply::listen_ok_no_index());

    // A write moves the indexed window; new rules without the index drop it.
    let (_, out) = put(&mut db, 1, "/rooms/r1/scores/a/s", json!(5));
    let rows = pushes(&out);
    let moved = json!({"a": {"s": 5}});
    assert!(
        rows.iter()
            .any(|(_, tag, _, data)| *tag == Some(1) && *data == moved),
        "{rows:?}"
    );
    db.set_access(
        rules(r#"{"rules": {".read": true}}"#),
        0,
        &mut Effects::new(),
    );
    assert_eq!(db.index_count(), 0);
    let mut out = Effects::new();
    let reply = db.handle(
        1,
        Request::Get {
            path: path(at),
            query: query(by_child),
        },
        1_000,
        &mut out,
    );
    assert_eq!(
        reply.data,
        ReplyData::Value(Node::from_json(&json!({"a": {"s": 5}})).expect("data"))
    );
}
