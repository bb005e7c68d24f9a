//! A put whose data was converted ahead ([`PreparedSet`]) must behave exactly as the put it
//! came from: the same reply, the same log record and pushes, the same data afterwards.

use super::*;
use crate::limits::MAX_MERGE_ENTRIES;
use crate::write::{PreparedSet, WriteTarget};
use serde_json::json;

use crate::write::PreparedMerge;

const CALLER: ConnId = 1;
const LISTENER: ConnId = 2;

fn target(text: &str) -> WriteTarget {
    WriteTarget::parse(text).expect("valid test target")
}

/// The effects in a comparable form: log records, and pushes as (path, JSON, targets).
fn comparable(effects: &Effects) -> Vec<String> {
    effects
        .iter()
        .map(|effect| match effect {
            Effect::Log(write) => format!("log {write:?}"),
            Effect::Push { push, targets } => format!("push {push:?} to {targets:?}"),
            Effect::Cancel { conn, path, .. } => format!("cancel {conn} {path}"),
            Effect::Volatile => "volatile".to_owned(),
            Effect::Audit(facts) => format!("audit {facts:?}"),
            Effect::Triggered {
                changes, dropped, ..
            } => format!("triggered {changes:?} {dropped}"),
        })
        .collect()
}

/// A database where `/locked` is the admin's only, `/open` anyone's; `/open/old` holds data,
/// the caller is anonymous and a listener watches the root.
fn database() -> Database {
    let mut db = Database::new();
    let mut out = Effects::new();
    db.put(&target("/open/old"), &json!({"x": 1}), None, 0, &mut out)
        .expect("an admin write");
    let rules = r#"{"rules": {".read": true, "open": {".write": true}}}"#;
    let rules = hearth_rules::Rules::parse(rules).expect("valid test rules");
    db.set_access(Access::Rules(Arc::new(rules)), 0, &mut out);
    db.connect(CALLER);
    db.connect(LISTENER);
    let listen = Request::Listen {
        path: Path::root(),
        query: QueryParams::default(),
        query_wire: None,
        tag: None,
        hash: None,
    };
    db.handle(LISTENER, listen, 0, &mut out);
    db
}

fn run(request: Request) -> (Reply, Vec<String>, Value) {
    let mut db = database();
    let mut out = Effects::new();
    let reply = db.handle(CALLER, request, 1_000, &mut out);
    (reply, comparable(&out), db.root().to_json(true))
}

#[test]
fn a_prepared_put_behaves_as_the_put_it_came_from() {
    let old_hash = Node::from_json(&json!({"x": 1}))
        .expect("valid")
        .hash()
        .to_string();
    let cases = [
        ("/open/new", json!([1, 2, {"a": "b"}]), None),
        (
            "/open/old",
            json!({"y": {".value": 2, ".priority": 1}}),
            None,
        ),
        ("/open/old", json!(null), None),
        ("/open/old/.priority", json!(7), None),
        ("/open/old", json!(3), Some(old_hash.clone())),
        ("/open/old", json!(3), Some("stale".to_owned())),
        ("/locked/a", json!(1), None),
        ("/locked/a", json!(1), Some(String::new())),
    ];
    for (path, data, hash) in cases {
        let prepared = PreparedSet::prepare(&target(path), &data).expect("no placeholder");
        let plain = run(Request::Put {
            target: target(path),
            data: data.clone(),
            hash: hash.clone(),
        });
        let ahead = run(Request::PutPrepared {
            target: target(path),
            data: prepared,
            hash,
        });
        assert_eq!(ahead, plain, "{path} {data}");
    }
}

#[test]
fn data_the_engine_must_resolve_or_refuse_is_not_prepared() {
    let placeholder = json!({"a": [{"t": {".sv": "timestamp"}}]});
    assert_eq!(PreparedSet::prepare(&target("/x"), &placeholder), None);
    assert_eq!(
        PreparedSet::prepare(&target("/x"), &json!({"b.c": 1})),
        None
    );
    let mut deep = json!(1);
    for _ in 0..31 {
        deep = json!({ "k": deep });
    }
    assert!(PreparedSet::prepare(&target("/x"), &deep).is_some());
    assert_eq!(PreparedSet::prepare(&target("/x/y"), &deep), None);
    assert_eq!(
        PreparedSet::prepare(&target("/x/.priority"), &json!([])),
        None
    );
}

fn entries(value: Value) -> Vec<(WriteTarget, Value)> {
    match value {
        Value::Object(map) => map
            .into_iter()
            .map(|(name, data)| (target(&name), data))
            .collect(),
        _ => panic!("entries are an object"),
    }
}

#[test]
fn a_prepared_merge_behaves_as_the_merge_it_came_from() {
    let cases = [
        (
            "/open",
            json!({"new": [1, 2], "old/x": null, "old/y/.priority": 3}),
        ),
        (
            "/open",
            json!({"old": {"x": {".value": 1, ".priority": "p"}}}),
        ),
        ("/open", json!({})),
        ("/", json!({"open/a": 1, "locked/b": 2})),
        ("/locked", json!({"a": 1})),
    ];
    for (path, update) in cases {
        let path = Path::parse(path).expect("valid test path");
        let update = entries(update);
        let prepared = PreparedMerge::prepare(&path, &update).expect("nothing to resolve");
        let plain = run(Request::Merge {
            path: path.clone(),
            entries: update.clone(),
        });
        let ahead = run(Request::MergePrepared {
            path: path.clone(),
            entries: prepared,
        });
        assert_eq!(ahead, plain, "{path}");
    }
}

#[test]
fn updates_the_engine_must_resolve_or_refuse_are_not_prepared() {
    let root = Path::root();
    let prepare = |update: Value| PreparedMerge::prepare(&root, &entries(update));
    assert_eq!(prepare(json!({"a": {".sv": "timestamp"}, "b": 1})), None);
    assert_eq!(prepare(json!({"a": 1, "a/b": 2})), None);
    assert_eq!(prepare(json!({"a": {"b.c": 1}})), None);
    let too_many: Vec<(WriteTarget, Value)> = (0..=MAX_MERGE_ENTRIES)
        .map(|i| (target(&format!("/k{i}")), json!(1)))
        .collect();
    assert_eq!(PreparedMerge::prepare(&root, &too_many), None);
}
