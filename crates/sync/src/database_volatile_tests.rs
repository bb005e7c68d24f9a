//! Volatile writes: applied at once, pushed once per path per flush, never logged.

use std::sync::Arc;

use hearth_query::QueryParams;
use hearth_rules::Rules;
use hearth_tree::{Node, Path};
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::access::{Access, AuthState};
use crate::effect::{Effect, PushData};
use crate::request::{ConnId, Reply, Request, Status};
use crate::write::WriteTarget;

const RULES: &str = r#"{"rules": {
    ".read": true,
    "rooms": {"$room": {
        "cursors": {".volatile": true, "$uid": {
            ".write": "auth != null && auth.uid === $uid",
            ".validate": "!newData.hasChild('locked') && !data.child('frozen').exists()"
        }},
        ".write": "auth != null && auth.uid === 'alice'"
    }},
    "v": {".volatile": true, ".write": true}
}}"#;

fn path(text: &str) -> Path {
    Path::parse(text).expect("valid test path")
}

fn database() -> Database {
    let mut db = Database::new();
    let rules = Rules::parse(RULES).expect("valid rules");
    db.set_access(Access::Rules(Arc::new(rules)), 0, &mut Effects::new());
    for (conn, uid) in [(1, "alice"), (2, "bob")] {
        db.connect(conn);
        db.set_auth(
            conn,
            AuthState::User(json!({ "uid": uid })),
            0,
            &mut Effects::new(),
        );
    }
    db.connect(3);
    db
}

fn put(
    db: &mut Database,
    conn: ConnId,
    p: &str,
    data: Value,
    hash: Option<&str>,
) -> (Reply, Effects) {
    let mut out = Effects::new();
    let reply = db.handle(
        conn,
        Request::Put {
            target: WriteTarget::parse(p).expect("valid target"),
            data,
            hash: hash.map(str::to_owned),
        },
        1_000,
        &mut out,
    );
    (reply, out)
}

fn update(db: &mut Database, conn: ConnId, p: &str, entries: Value) -> (Reply, Effects) {
    let Value::Object(map) = entries else {
        panic!("entries must be an object");
    };
    let entries = map
        .into_iter()
        .map(|(k, v)| (WriteTarget::parse(&k).expect("valid target"), v))
        .collect();
    let mut out = Effects::new();
    let reply = db.handle(
        conn,
        Request::Merge {
            path: path(p),
            entries,
        },
        1_000,
        &mut out,
    );
    (reply, out)
}

fn listen(db: &mut Database, conn: ConnId, p: &str) -> Effects {
    let mut out = Effects::new();
    let reply = db.handle(
        conn,
        Request::Listen {
            path: path(p),
            query: QueryParams::default(),
            query_wire: None,
            tag: None,
            hash: None,
        },
        1_000,
        &mut out,
    );
    assert_eq!(reply.status, Status::Ok);
    out
}

fn flush(db: &mut Database) -> Effects {
    let mut out = Effects::new();
    db.flush_volatile(&mut out);
    out
}

fn push_count(effects: &Effects) -> usize {
    effects
        .iter()
        .filter(|effect| matches!(effect, Effect::Push { .. }))
        .count()
}

fn logs(effects: &Effects) -> usize {
    effects
        .iter()
        .filter(|effect| matches!(effect, Effect::Log(_)))
        .count()
}

fn is_volatile(effects: &Effects) -> bool {
    effects
        .iter()
        .any(|effect| matches!(effect, Effect::Volatile))
}

/// Applies the pushes in `effects` to `local`, as a client's cache would.
fn apply(local: &mut Node, effects: &Effects, conn: ConnId) {
    for effect in effects {
        let Effect::Push { push, targets } = effect else {
            continue;
        };
        if !targets.iter().any(|target| target.conn == conn) {
            continue;
        }
        match &push.data {
            PushData::Put(node) => *local = local.set(&push.path, node.clone()),
            PushData::Merge(entries) => {
                for (relative, node) in entries {
                    *local = local.set(&push.path.join(relative), node.clone());
                }
            }
        }
    }
}

#[test]
fn writes_are_applied_at_once_and_pushed_on_the_flush() {
    let mut db = database();
    listen(&mut db, 2, "/rooms/r1");
    for x in 0..5 {
        let (reply, out) = put(
            &mut db,
            1,
            "/rooms/r1/cursors/alice",
            json!({ "x": x }),
            None,
        );
        assert_eq!(reply.status, Status::Ok);
        assert!(is_volatile(&out), "the reply waits for the tick");
        assert_eq!(logs(&out), 0, "nothing is logged");
        assert_eq!(push_count(&out), 0, "nothing is pushed before the tick");
    }
    assert_eq!(
        db.root()
            .get(&path("/rooms/r1/cursors/alice/x"))
            .to_json(false),
        json!(4)
    );
    assert!(db.has_pending_volatile());
    let out = flush(&mut db);
    assert_eq!(push_count(&out), 1, "five writes, one push");
    let mut local = Node::empty();
    apply(&mut local, &out, 2);
    assert_eq!(
        local.get(&path("/rooms/r1/cursors/alice/x")).to_json(false),
        json!(4)
    );
    assert!(!db.has_pending_volatile());
    assert!(flush(&mut db).is_empty(), "nothing changed since");
}

#[test]
fn updates_coalesce_with_sets_and_a_late_listener_gets_the_newest_value() {
    let mut db = database();
    let (reply, out) = update(
        &mut db,
        1,
        "/rooms/r1/cursors",
        json!({"alice/x": 1, "alice/y": 2}),
    );
    assert_eq!(reply.status, Status::Ok);
    assert!(is_volatile(&out));
    let out = listen(&mut db, 2, "/rooms/r1/cursors");
    let mut local = Node::empty();
    apply(&mut local, &out, 2);
    assert_eq!(
        local.get(&path("/rooms/r1/cursors")).to_json(false),
        json!({"alice": {"x": 1, "y": 2}})
    );
    put(&mut db, 1, "/rooms/r1/cursors/alice/x", json!(3), None);
    let out = flush(&mut db);
    assert_eq!(push_count(&out), 1);
    apply(&mut local, &out, 2);
    assert_eq!(
        local.get(&path("/rooms/r1/cursors")).to_json(false),
        json!({"alice": {"x": 3, "y": 2}})
    );
}

#[test]
fn a_listener_above_many_changed_siblings_gets_them_in_one_push() {
    let mut db = database();
    listen(&mut db, 3, "/rooms/r1");
    for uid in ["alice", "bob"] {
        let conn = if uid == "alice" { 1 } else { 2 };
        for x in 0..3 {
            let at = format!("/rooms/r1/cursors/{uid}");
            assert_eq!(
                put(&mut db, conn, &at, json!({ "x": x }), None).0.status,
                Status::Ok
            );
        }
    }
    let out = flush(&mut db);
    assert_eq!(push_count(&out), 1, "six writes of two cursors, one push");
    let mut local = Node::empty();
    apply(&mut local, &out, 3);
    assert_eq!(
        local.get(&path("/rooms/r1/cursors")).to_json(false),
        json!({"alice": {"x": 2}, "bob": {"x": 2}})
    );
}

#[test]
fn rules_apply_and_see_the_newest_volatile_value() {
    let mut db = database();
    // .write: only alice writes alice's cursor; anonymous nobody.
    let (reply, _) = put(&mut db, 2, "/rooms/r1/cursors/alice", json!(1), None);
    assert_eq!(reply.status, Status::PermissionDenied);
    let (reply, _) = put(&mut db, 3, "/rooms/r1/cursors/alice", json!(1), None);
    assert_eq!(reply.status, Status::PermissionDenied);
    // .validate reads newData and data, which holds the newest volatile value.
    let (reply, _) = put(
        &mut db,
        1,
        "/rooms/r1/cursors/alice",
        json!({"locked": 1}),
        None,
    );
    assert_eq!(reply.status, Status::PermissionDenied);
    let (reply, _) = put(
        &mut db,
        1,
        "/rooms/r1/cursors/alice",
        json!({"frozen": 1}),
        None,
    );
    assert_eq!(reply.status, Status::Ok);
    let (reply, _) = put(&mut db, 1, "/rooms/r1/cursors/alice", json!({"x": 1}), None);
    assert_eq!(
        reply.status,
        Status::PermissionDenied,
        "data sees the frozen value"
    );
}

#[test]
fn mixed_writes_are_refused_and_durable_ones_are_untouched() {
    let mut db = database();
    listen(&mut db, 2, "/rooms/r1");
    let (reply, out) = update(
        &mut db,
        1,
        "/rooms/r1",
        json!({"cursors/alice": 1, "title": "x"}),
    );
    assert_eq!(reply.status, Status::InvalidData);
    assert!(out.is_empty());
    assert!(db.root().get(&path("/rooms/r1")).is_empty());
    // A durable write beside volatile data is logged and pushed at once.
    put(&mut db, 1, "/rooms/r1/cursors/alice", json!(1), None);
    let (reply, out) = put(&mut db, 1, "/rooms/r1/title", json!("hello"), None);
    assert_eq!(reply.status, Status::Ok);
    assert_eq!(logs(&out), 1);
    assert_eq!(push_count(&out), 1);
    assert!(!is_volatile(&out));
    // A write above a mark is durable: removing the room removes its cursors too.
    let (reply, out) = put(&mut db, 1, "/rooms/r1", Value::Null, None);
    assert_eq!(reply.status, Status::Ok);
    assert_eq!(logs(&out), 1);
    let mut local = Node::empty();
    apply(&mut local, &out, 2);
    let out = flush(&mut db);
    apply(&mut local, &out, 2);
    assert!(
        local.get(&path("/rooms/r1")).is_empty(),
        "the tick does not bring it back"
    );
}

#[test]
fn compare_and_set_on_a_volatile_path_compares_the_newest_value() {
    let mut db = database();
    put(&mut db, 1, "/v/n", json!(1), None);
    let hash = db.root().get(&path("/v/n")).hash().to_string();
    let (reply, out) = put(&mut db, 1, "/v/n", json!(2), Some(&hash));
    assert_eq!(reply.status, Status::Ok);
    assert!(is_volatile(&out));
    let (reply, _) = put(&mut db, 1, "/v/n", json!(3), Some(&hash));
    assert_eq!(reply.status, Status::DataStale);
}

#[test]
fn on_disconnect_on_a_volatile_path_runs_as_a_volatile_write() {
    let mut db = database();
    listen(&mut db, 2, "/rooms/r1/cursors");
    put(&mut db, 1, "/rooms/r1/cursors/alice", json!(1), None);
    let mut out = Effects::new();
    let reply = db.handle(
        1,
        Request::OnDisconnectPut {
            target: WriteTarget::parse("/rooms/r1/cursors/alice").expect("target"),
            data: Value::Null,
        },
        1_000,
        &mut out,
    );
    assert_eq!(reply.status, Status::Ok);
    let mut local = Node::empty();
    apply(&mut local, &flush(&mut db), 2);
    assert_eq!(
        local.get(&path("/rooms/r1/cursors/alice")).to_json(false),
        json!(1)
    );
    let mut out = Effects::new();
    db.disconnect(1, 2_000, &mut out);
    assert!(is_volatile(&out));
    assert_eq!(logs(&out), 0);
    apply(&mut local, &flush(&mut db), 2);
    assert!(local.get(&path("/rooms/r1/cursors/alice")).is_empty());
}

#[test]
fn too_many_paths_in_one_tick_are_pushed_early() {
    let mut db = database();
    listen(&mut db, 2, "/v");
    let entries: serde_json::Map<String, Value> = (0..MAX_VOLATILE_PATHS_PER_TICK)
        .map(|i| (format!("k{i}"), json!(i)))
        .collect();
    let (reply, out) = update(&mut db, 1, "/v", Value::Object(entries));
    assert_eq!(reply.status, Status::Ok);
    assert_eq!(push_count(&out), 0, "the set is full, not past the limit");
    let (reply, out) = put(&mut db, 1, "/v/one-more", json!(1), None);
    assert_eq!(reply.status, Status::Ok);
    assert_eq!(push_count(&out), 1, "the full set was pushed once, early");
    assert_eq!(push_count(&flush(&mut db)), 1);
}

#[derive(Debug, Clone)]
enum Step {
    Write(usize, i64),
    Delete(usize),
    Flush,
}

/// Paths that nest inside one another, so that coalescing must merge ancestors.
const PATHS: [&str; 6] = ["/v/a", "/v/a/x", "/v/a/y", "/v/b", "/v/b/deep/z", "/v"];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..PATHS.len(), 0..5i64).prop_map(|(p, v)| Step::Write(p, v)),
        1 => (0..PATHS.len()).prop_map(Step::Delete),
        2 => Just(Step::Flush),
    ]
}

proptest! {
    /// After every flush, each listener's cache equals the database at its path, and no
    /// listener got more pushes from it than paths were written; writes alone never push.
    #[test]
    fn flushes_rebuild_exactly_the_data(steps in proptest::collection::vec(step(), 1..60)) {
        let mut db = database();
        let listeners: [(ConnId, &str); 3] = [(1, "/v"), (2, "/v/a"), (3, "/v/b/deep")];
        let mut caches: Vec<Node> = Vec::new();
        for (conn, at) in listeners {
            let mut cache = Node::empty();
            apply(&mut cache, &listen(&mut db, conn, at), conn);
            caches.push(cache);
        }
        let mut written = std::collections::BTreeSet::new();
        for step in steps.into_iter().chain([Step::Flush]) {
            let out = match step {
                Step::Write(p, v) => put(&mut db, 1, PATHS[p], json!(v), None).1,
                Step::Delete(p) => put(&mut db, 1, PATHS[p], Value::Null, None).1,
                Step::Flush => flush(&mut db),
            };
            if let Step::Write(p, _) | Step::Delete(p) = step {
                prop_assert_eq!(push_count(&out), 0);
                written.insert(p);
                continue;
            }
            let paths = std::mem::take(&mut written).len();
            for ((conn, at), cache) in listeners.iter().zip(caches.iter_mut()) {
                let received = out.iter().filter(|effect| matches!(
                    effect,
                    Effect::Push { targets, .. } if targets.iter().any(|t| t.conn == *conn)
                )).count();
                prop_assert!(received <= paths, "{} got {} pushes for {} paths", conn, received, paths);
                apply(cache, &out, *conn);
                let at = path(at);
                prop_assert_eq!(cache.get(&at), db.root().get(&at));
            }
        }
    }
}
