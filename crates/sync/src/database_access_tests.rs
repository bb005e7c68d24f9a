//! Scenario tests of what the database allows: reads and writes decided by rules, locked and
//! read-only databases, prechecks, rule coverage, and the indexes that the rules declare.

use super::tests::{listen, path, pushes, put, query, target};
use super::*;
use crate::access::WriteScope;
use serde_json::json;

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
