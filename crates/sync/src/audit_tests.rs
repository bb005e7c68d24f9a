//! Scenario tests of an audited database: every logged write is followed by one
//! [`Effect::Audit`] naming who wrote, how and why it was allowed; refused and volatile writes,
//! and every write of a database that is not audited, have none.

use std::sync::Arc;

use super::tests::{path, target};
use super::*;
use crate::audit::{AuditFacts, AuditOp, Grant, Writer};
use crate::write::{PreparedMerge, PreparedSet, WriteTarget};
use serde_json::json;

/// Rooms anyone signed in may write, a log only its own user may, and a volatile cursor.
const RULES: &str = r#"{"rules": {
    ".read": true,
    "rooms": {"$room": {".write": "auth != null"}},
    "logs": {"$uid": {".write": "auth != null && auth.uid === $uid"}},
    "cursor": {".volatile": true, ".write": true}
}}"#;

const ROOM_RULE: &str = "/rooms/$room/.write";
const LOG_RULE: &str = "/logs/$uid/.write";

fn rules(text: &str) -> Access {
    Access::Rules(Arc::new(
        hearth_rules::Rules::parse(text).expect("valid test rules"),
    ))
}

fn user(uid: &str) -> AuthState {
    AuthState::User(json!({"uid": uid, "provider": "custom", "token": {"sub": uid}}))
}

fn granted_by(names: &[&str]) -> Grant {
    Grant::Rules(names.iter().map(|name| Arc::from(*name)).collect())
}

/// A database with `access`, audited or not, and connection 1 signed in as alice.
fn database(access: Access, audited: bool) -> Database {
    let mut db = Database::new();
    let mut out = Effects::new();
    db.set_access(access, 0, &mut out);
    db.set_audited(audited);
    db.connect(1);
    db.set_auth(1, user("alice"), 0, &mut out);
    db
}

fn entries(value: Value) -> Vec<(WriteTarget, Value)> {
    let Value::Object(map) = value else {
        panic!("entries are an object")
    };
    map.into_iter()
        .map(|(name, data)| (target(&name), data))
        .collect()
}

/// The audit records in `effects`, checking that each follows a log record at once and that
/// every log record has one.
fn audits(effects: &Effects) -> Vec<AuditFacts> {
    let mut found = Vec::new();
    for (i, effect) in effects.iter().enumerate() {
        let next = effects.get(i + 1);
        match effect {
            Effect::Log(_) => assert!(
                matches!(next, Some(Effect::Audit(_))),
                "a log record without its audit record: {effects:?}"
            ),
            Effect::Audit(facts) => {
                let before = i.checked_sub(1).and_then(|j| effects.get(j));
                assert!(
                    matches!(before, Some(Effect::Log(_))),
                    "an audit record not right after a log record: {effects:?}"
                );
                found.push((**facts).clone());
            }
            _ => {}
        }
    }
    found
}

fn facts(writer: AuthState, op: AuditOp, grant: Grant) -> AuditFacts {
    AuditFacts {
        writer: Writer::of(&writer),
        op,
        grant,
    }
}

fn handle(db: &mut Database, request: Request) -> (Reply, Effects) {
    let mut out = Effects::new();
    let reply = db.handle(1, request, 1_000, &mut out);
    (reply, out)
}

#[test]
fn realtime_sets_and_updates_name_the_rules_that_granted() {
    let mut db = database(rules(RULES), true);
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/rooms/r1/title"),
            data: json!("hello"),
            hash: None,
        },
    );
    assert!(reply.is_ok());
    assert_eq!(
        audits(&out),
        [facts(user("alice"), AuditOp::Set, granted_by(&[ROOM_RULE]))]
    );

    // Two targets granted by two rules, and two by the same rule: each rule once.
    let (reply, out) = handle(
        &mut db,
        Request::Merge {
            path: Path::root(),
            entries: entries(json!({"rooms/a/t": 1, "rooms/b/t": 2, "logs/alice/1": "x"})),
        },
    );
    assert!(reply.is_ok());
    assert_eq!(
        audits(&out),
        [facts(
            user("alice"),
            AuditOp::Update,
            granted_by(&[LOG_RULE, ROOM_RULE])
        )]
    );

    // The prepared forms are audited as the requests they came from.
    let prepared = PreparedSet::prepare(&target("/rooms/r2"), &json!(1)).expect("prepared");
    let (_, out) = handle(
        &mut db,
        Request::PutPrepared {
            target: target("/rooms/r2"),
            data: prepared,
            hash: None,
        },
    );
    assert_eq!(
        audits(&out),
        [facts(user("alice"), AuditOp::Set, granted_by(&[ROOM_RULE]))]
    );
    let update = entries(json!({"1": "y"}));
    let prepared = PreparedMerge::prepare(&path("/logs/alice"), &update).expect("prepared");
    let (_, out) = handle(
        &mut db,
        Request::MergePrepared {
            path: path("/logs/alice"),
            entries: prepared,
        },
    );
    assert_eq!(
        audits(&out),
        [facts(
            user("alice"),
            AuditOp::Update,
            granted_by(&[LOG_RULE])
        )]
    );
}

#[test]
fn a_put_with_a_hash_is_a_transaction() {
    let mut db = database(rules(RULES), true);
    let current = db.root().get(&path("/rooms/r1")).hash().to_string();
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/rooms/r1"),
            data: json!({"n": 1}),
            hash: Some(current),
        },
    );
    assert!(reply.is_ok());
    assert_eq!(
        audits(&out),
        [facts(
            user("alice"),
            AuditOp::Transaction,
            granted_by(&[ROOM_RULE])
        )]
    );
    // A stale hash: nothing applied, nothing audited.
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/rooms/r1"),
            data: json!({"n": 2}),
            hash: Some("stale".to_owned()),
        },
    );
    assert_eq!(reply.status, Status::DataStale);
    assert!(audits(&out).is_empty());
}

#[test]
fn rest_writes_are_audited_as_their_caller() {
    let mut db = database(rules(RULES), true);
    let bob = user("bob");
    let mut out = Effects::new();
    db.put_as(&bob, &target("/logs/bob/1"), &json!("x"), None, 0, &mut out)
        .expect("allowed");
    db.merge_as(
        &bob,
        &path("/rooms/r1"),
        &entries(json!({"a": 1, "b": 2})),
        0,
        &mut out,
    )
    .expect("allowed");
    assert_eq!(
        audits(&out),
        [
            facts(bob.clone(), AuditOp::Set, granted_by(&[LOG_RULE])),
            facts(bob, AuditOp::Update, granted_by(&[ROOM_RULE])),
        ]
    );
    // The admin API bypasses the rules: the writer and the grant say so.
    let mut out = Effects::new();
    db.put(&target("/anywhere"), &json!(1), None, 0, &mut out)
        .expect("an admin write");
    assert_eq!(
        audits(&out),
        [facts(AuthState::Admin, AuditOp::Set, Grant::Admin)]
    );
}

#[test]
fn on_disconnect_writes_are_audited_as_the_session() {
    let mut db = database(rules(RULES), true);
    for request in [
        Request::OnDisconnectPut {
            target: target("/logs/alice/gone"),
            data: json!(true),
        },
        Request::OnDisconnectMerge {
            path: path("/rooms/r1"),
            entries: entries(json!({"present": null, "left": 1})),
        },
    ] {
        let (reply, out) = handle(&mut db, request);
        assert!(reply.is_ok());
        assert!(out.is_empty(), "queued, not written");
    }
    let mut out = Effects::new();
    db.disconnect(1, 2_000, &mut out);
    assert_eq!(
        audits(&out),
        [
            facts(
                user("alice"),
                AuditOp::OnDisconnect,
                granted_by(&[LOG_RULE])
            ),
            facts(
                user("alice"),
                AuditOp::OnDisconnect,
                granted_by(&[ROOM_RULE])
            ),
        ]
    );
}

#[test]
fn refused_volatile_and_unaudited_writes_have_no_audit_record() {
    let mut db = database(rules(RULES), true);
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/logs/bob/1"),
            data: json!("forged"),
            hash: None,
        },
    );
    assert_eq!(reply.status, Status::PermissionDenied);
    assert!(out.is_empty());
    // A volatile write is not logged, so not audited.
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/cursor"),
            data: json!(3),
            hash: None,
        },
    );
    assert!(reply.is_ok());
    assert!(out.iter().any(|effect| matches!(effect, Effect::Volatile)));
    assert!(audits(&out).is_empty());

    let mut quiet = database(rules(RULES), false);
    assert!(!quiet.is_audited());
    let (reply, out) = handle(
        &mut quiet,
        Request::Put {
            target: target("/rooms/r1"),
            data: json!(1),
            hash: None,
        },
    );
    assert!(reply.is_ok());
    assert!(out.iter().any(|effect| matches!(effect, Effect::Log(_))));
    assert!(!out.iter().any(|effect| matches!(effect, Effect::Audit(_))));
}

#[test]
fn open_and_locked_access_grants() {
    let mut db = database(Access::Open, true);
    assert!(db.is_audited());
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/x"),
            data: json!(1),
            hash: None,
        },
    );
    assert!(reply.is_ok());
    assert_eq!(
        audits(&out),
        [facts(user("alice"), AuditOp::Set, Grant::Open)]
    );
    // Locked: only admins write, and their writes say so.
    let mut db = database(Access::Locked, true);
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/x"),
            data: json!(1),
            hash: None,
        },
    );
    assert_eq!(reply.status, Status::PermissionDenied);
    assert!(out.is_empty());
    let mut out = Effects::new();
    db.set_auth(1, AuthState::Admin, 0, &mut out);
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/x"),
            data: json!(1),
            hash: None,
        },
    );
    assert!(reply.is_ok());
    assert_eq!(
        audits(&out),
        [facts(AuthState::Admin, AuditOp::Set, Grant::Admin)]
    );
}

#[test]
fn the_audit_record_comes_before_the_triggered_changes() {
    let mut db = database(rules(RULES), true);
    let trigger = Trigger {
        name: "rooms".into(),
        pattern: crate::triggers::PathPattern::parse("/rooms/{id}").expect("valid pattern"),
        on: crate::triggers::TriggerOn::Write,
    };
    db.set_triggers(Arc::from(vec![trigger]));
    let (reply, out) = handle(
        &mut db,
        Request::Put {
            target: target("/rooms/r1"),
            data: json!(1),
            hash: None,
        },
    );
    assert!(reply.is_ok());
    let kinds: Vec<&str> = out
        .iter()
        .map(|effect| match effect {
            Effect::Log(_) => "log",
            Effect::Audit(_) => "audit",
            Effect::Triggered { .. } => "triggered",
            Effect::Push { .. } => "push",
            Effect::Cancel { .. } => "cancel",
            Effect::Volatile => "volatile",
        })
        .collect();
    assert_eq!(kinds[..3], ["log", "audit", "triggered"]);
}
