//! A caller who is refused must get the same answer whatever the data it may not read holds:
//! compare-and-set, server values and onDisconnect must not be oracles on hidden data.

use super::*;
use crate::write::WriteTarget;
use serde_json::json;

const CALLER: ConnId = 1;

fn target(text: &str) -> WriteTarget {
    WriteTarget::parse(text).expect("valid test target")
}

fn rules(text: &str) -> Access {
    Access::Rules(Arc::new(
        hearth_rules::Rules::parse(text).expect("valid test rules"),
    ))
}

/// Nobody but an admin may read or write `/secret`.
const HIDDEN_RULES: &str = r#"{"rules": {"open": {".read": true, ".write": true}}}"#;
/// Anyone may write `/secret` (and only numbers), nobody may read it.
const WRITE_ONLY_RULES: &str =
    r#"{"rules": {"secret": {".write": true, ".validate": "newData.isNumber()"}}}"#;
/// Anyone may read and write `/secret`.
const OPEN_RULES: &str = r#"{"rules": {"secret": {".read": true, ".write": true}}}"#;

/// A database with the given rules, `/secret` holding `secret`, and an anonymous session.
fn database(access: Access, secret: Value) -> Database {
    let mut db = Database::new();
    let mut out = Effects::new();
    db.put(&target("/secret"), &secret, None, 0, &mut out)
        .expect("an admin write");
    db.set_access(access, 0, &mut out);
    db.connect(CALLER);
    db
}

fn request(db: &mut Database, request: Request) -> (Reply, Effects) {
    let mut out = Effects::new();
    let reply = db.handle(CALLER, request, 1_000, &mut out);
    (reply, out)
}

fn cas(db: &mut Database, p: &str, data: Value, hash: &str) -> (Reply, Effects) {
    let put = Request::Put {
        target: target(p),
        data,
        hash: Some(hash.to_owned()),
    };
    request(db, put)
}

fn hash_of(value: Value) -> String {
    Node::from_json(&value).expect("valid").hash().to_string()
}

fn denied_reply() -> Reply {
    Reply::error(Status::PermissionDenied, "Permission denied")
}

fn increment(by: f64) -> Value {
    json!({".sv": {"increment": by}})
}

/// Every access setup under which the anonymous caller may not compare-and-set `/secret`.
fn refusing_setups() -> Vec<(&'static str, Access)> {
    vec![
        ("locked", Access::Locked),
        ("hidden by rules", rules(HIDDEN_RULES)),
        ("write-only", rules(WRITE_ONLY_RULES)),
    ]
}

#[test]
fn a_refused_compare_and_set_answers_the_same_whatever_the_data() {
    let stored = json!(42);
    for (name, access) in refusing_setups() {
        let mut db = database(access, stored.clone());
        let guesses = [
            ("/secret", hash_of(stored.clone()), "the right guess"),
            ("/secret", hash_of(json!(41)), "a wrong guess"),
            ("/secret", String::new(), "a guess that it is empty"),
            (
                "/secret/none",
                String::new(),
                "an empty path, rightly guessed",
            ),
        ];
        for (p, hash, guess) in guesses {
            let (reply, out) = cas(&mut db, p, json!(7), &hash);
            assert_eq!(reply, denied_reply(), "{name}: {guess}");
            assert!(out.is_empty(), "{name}: {guess} has no effects");
        }
        assert_eq!(db.root().get(&target("/secret").path).to_json(true), stored);
    }
}

#[test]
fn allowed_callers_still_compare_and_set() {
    let mut db = database(rules(OPEN_RULES), json!(42));
    let (reply, out) = cas(&mut db, "/secret", json!(7), &hash_of(json!(41)));
    assert_eq!(reply.status, Status::DataStale);
    assert!(out.is_empty());
    let (reply, _) = cas(&mut db, "/secret", json!(7), "");
    assert_eq!(reply.status, Status::DataStale, "the location is not empty");
    let (reply, _) = cas(&mut db, "/secret", json!(7), &hash_of(json!(42)));
    assert_eq!(reply, Reply::write_ok());
    assert_eq!(db.root().to_json(true), json!({"secret": 7}));
}

#[test]
fn an_overflowing_increment_is_refused_and_keeps_the_value() {
    let huge = json!(1.7e308);
    let mut db = database(rules(OPEN_RULES), huge.clone());
    let put = Request::Put {
        target: target("/secret"),
        data: increment(1e308),
        hash: None,
    };
    let (reply, out) = request(&mut db, put);
    assert_eq!(
        reply,
        Reply::error(
            Status::InvalidData,
            "invalid server value: the increment would overflow the number stored at the location"
        )
    );
    assert!(out.is_empty());
    let merge = Request::Merge {
        path: Path::root(),
        entries: vec![(target("/secret"), increment(1e308))],
    };
    assert_eq!(request(&mut db, merge).0.status, Status::InvalidData);
    assert_eq!(db.root().to_json(true), json!({"secret": huge}));
    let (reply, _) = cas(&mut db, "/secret", increment(1e308), &hash_of(json!(1)));
    assert_eq!(reply.status, Status::DataStale, "a stale hash comes first");
}

#[test]
fn a_refused_increment_is_denied_whether_or_not_it_would_overflow() {
    for (name, access) in [
        ("locked", Access::Locked),
        ("hidden by rules", rules(HIDDEN_RULES)),
    ] {
        for stored in [json!(1), json!(1.7e308)] {
            let mut db = database(access.clone(), stored.clone());
            let put = Request::Put {
                target: target("/secret"),
                data: increment(1e308),
                hash: None,
            };
            assert_eq!(request(&mut db, put).0, denied_reply(), "{name} {stored}");
            let merge = Request::Merge {
                path: Path::root(),
                entries: vec![(target("/secret"), increment(1e308))],
            };
            assert_eq!(request(&mut db, merge).0, denied_reply(), "{name} {stored}");
            let queued = Request::OnDisconnectPut {
                target: target("/secret"),
                data: increment(1e308),
            };
            assert_eq!(
                request(&mut db, queued).0,
                denied_reply(),
                "{name} {stored}"
            );
        }
    }
}

#[test]
fn on_disconnect_increments_are_judged_when_they_run() {
    let huge = json!(1.7e308);
    let mut db = database(rules(OPEN_RULES), huge.clone());
    let queued = Request::OnDisconnectPut {
        target: target("/secret"),
        data: increment(1e308),
    };
    // It may not overflow by the time it runs, so it is accepted now ...
    assert_eq!(request(&mut db, queued).0, Reply::write_ok());
    let mut out = Effects::new();
    db.disconnect(CALLER, 2_000, &mut out);
    // ... and dropped when it runs and would overflow.
    assert!(out.is_empty());
    assert_eq!(db.root().to_json(true), json!({"secret": huge}));
}

#[test]
fn a_refused_listen_with_a_hash_answers_the_same_whatever_the_data() {
    let stored = json!(42);
    for (name, access) in refusing_setups() {
        let mut db = database(access, stored.clone());
        for hash in [hash_of(stored.clone()), hash_of(json!(41)), String::new()] {
            let listen = Request::Listen {
                path: target("/secret").path,
                query: QueryParams::default(),
                query_wire: None,
                tag: None,
                hash: Some(hash),
            };
            let (reply, out) = request(&mut db, listen);
            assert_eq!(reply, denied_reply(), "{name}");
            assert!(out.is_empty(), "{name}");
        }
    }
}
