use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::test_writes::{merge, node, path, set, small_path, small_value};

fn trigger(name: &str, pattern: &str, on: TriggerOn) -> Trigger {
    Trigger {
        name: name.into(),
        pattern: PathPattern::parse(pattern).expect("pattern"),
        on,
    }
}

/// The changes of `write` on `before`, as (trigger, path, before, after) in JSON.
fn run(triggers: &[Trigger], write: &Write, before: &Node) -> Vec<(String, String, Value, Value)> {
    let after = write.apply(before);
    let (found, dropped) = changes(triggers, write, before, &after);
    assert_eq!(dropped, 0);
    found
        .into_iter()
        .map(|change| {
            (
                change.trigger.to_string(),
                format!("/{}", joined(&change.path)),
                change.before.to_json(false),
                change.after.to_json(false),
            )
        })
        .collect()
}

fn joined(path: &Path) -> String {
    let keys: Vec<&str> = path.keys().iter().map(Key::as_str).collect();
    keys.join("/")
}

#[test]
fn patterns_parse_and_print() {
    let pattern = PathPattern::parse("/rooms/{room}/messages/{id}").expect("parses");
    assert_eq!(pattern.to_string(), "/rooms/{room}/messages/{id}");
    assert_eq!(pattern.len(), 4);
    assert_eq!(PathPattern::parse("").expect("root").to_string(), "/");
    let globs = PathPattern::parse("rooms/{room=*}/*").expect("parses");
    assert_eq!(globs.to_string(), "/rooms/{room}/*");
    assert_eq!(globs.params(&path("/rooms/r/m")).len(), 1);
    for bad in [
        "/a/{b", "/a/b}", "/a/{}", "/{x=**}", "/**", "/a*", "/{x}/{x}", "/a.b",
    ] {
        assert!(PathPattern::parse(bad).is_err(), "{bad}");
    }
    let params = pattern.params(&path("/rooms/r1/messages/m9"));
    let params: Vec<(String, String)> = params
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
    assert_eq!(
        params,
        vec![("room".into(), "r1".into()), ("id".into(), "m9".into())]
    );
}

#[test]
fn a_write_below_a_pattern_changes_the_matched_path_once() {
    let before = node(json!({"rooms": {"r1": {"messages": {"m1": {"text": "hi", "by": "a"}}}}}));
    let triggers = [trigger(
        "t",
        "/rooms/{room}/messages/{id}",
        TriggerOn::Write,
    )];
    let write = merge(
        "/rooms/r1/messages/m1",
        &[("text", json!("hello")), ("by", json!("b"))],
    );
    assert_eq!(
        run(&triggers, &write, &before),
        vec![(
            "t".into(),
            "/rooms/r1/messages/m1".into(),
            json!({"text": "hi", "by": "a"}),
            json!({"text": "hello", "by": "b"}),
        )]
    );
}

#[test]
fn a_write_above_a_pattern_changes_every_path_it_adds_removes_or_changes() {
    let before = node(json!({"rooms": {"r1": {"messages": {
        "m1": "kept", "m2": "changed", "m3": "removed"
    }}}}));
    let triggers = [trigger(
        "t",
        "/rooms/{room}/messages/{id}",
        TriggerOn::Write,
    )];
    let write = set(
        "/rooms/r1",
        json!({"messages": {"m1": "kept", "m2": "new text", "m4": "added"}}),
    );
    let found = run(&triggers, &write, &before);
    let paths: Vec<&str> = found.iter().map(|(_, p, _, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "/rooms/r1/messages/m2",
            "/rooms/r1/messages/m3",
            "/rooms/r1/messages/m4"
        ]
    );
}

#[test]
fn each_kind_of_trigger_sees_its_changes_only() {
    let before = node(json!({"a": {"x": 1, "y": 2}}));
    let triggers = [
        trigger("write", "/a/{k}", TriggerOn::Write),
        trigger("create", "/a/{k}", TriggerOn::Create),
        trigger("update", "/a/{k}", TriggerOn::Update),
        trigger("delete", "/a/{k}", TriggerOn::Delete),
    ];
    let write = merge(
        "/a",
        &[("x", json!(10)), ("y", Value::Null), ("z", json!(3))],
    );
    let found: Vec<(String, String)> = run(&triggers, &write, &before)
        .into_iter()
        .map(|(t, p, _, _)| (t, p))
        .collect();
    let expected = [
        ("write", "/a/x"),
        ("write", "/a/y"),
        ("write", "/a/z"),
        ("create", "/a/z"),
        ("update", "/a/x"),
        ("delete", "/a/y"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(t, p)| (t.to_string(), p.to_string()))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn a_write_that_changes_nothing_triggers_nothing() {
    let before = node(json!({"a": {"x": 1}}));
    let triggers = [trigger("t", "/a/{k}", TriggerOn::Write)];
    assert!(run(&triggers, &set("/a/x", json!(1)), &before).is_empty());
    assert!(run(&triggers, &set("/b", json!(1)), &before).is_empty());
}

#[test]
fn one_write_reports_at_most_the_limit() {
    let before = Node::empty();
    let many: serde_json::Map<String, Value> = (0..MAX_TRIGGER_CHANGES_PER_WRITE + 5)
        .map(|i| (format!("k{i}"), json!(i)))
        .collect();
    let write = set("/a", Value::Object(many));
    let after = write.apply(&before);
    let triggers = [trigger("t", "/a/{k}", TriggerOn::Write)];
    let (found, dropped) = changes(&triggers, &write, &before, &after);
    assert_eq!(found.len(), MAX_TRIGGER_CHANGES_PER_WRITE);
    assert!(dropped >= 1);
}

// The naive model: every path the pattern matches in either tree, and a change wherever the
// data there differs.

fn model(pattern: &PathPattern, before: &Node, after: &Node) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut frontier = vec![Path::root()];
    for depth in 0..pattern.len() {
        let mut next = Vec::new();
        for at in frontier {
            let mut keys = BTreeSet::new();
            for tree in [before, after] {
                for (key, _) in tree.get(&at).children() {
                    keys.insert(key.into_owned());
                }
            }
            for key in keys {
                if pattern.admits(depth, &key) {
                    next.push(at.child(key));
                }
            }
        }
        frontier = next;
    }
    for at in frontier {
        if before.get(&at) != after.get(&at) {
            out.insert(format!("/{}", joined(&at)));
        }
    }
    out
}

fn small_write() -> impl Strategy<Value = Write> {
    prop_oneof![
        (small_path(), small_value()).prop_map(|(at, value)| set(&at, value)),
        (
            small_path(),
            prop::collection::btree_map(
                prop::sample::select(vec!["a", "b", "c"]),
                small_value(),
                1..3
            )
        )
            .prop_map(|(at, children)| {
                let children: Vec<(&str, Value)> = children.into_iter().collect();
                merge(&at, &children)
            }),
    ]
}

proptest! {
    #[test]
    fn changes_agree_with_the_naive_model(
        data in small_value(),
        write in small_write(),
        pattern in prop::sample::select(vec![
            "/", "/a", "/{x}", "/a/{y}", "/{x}/b", "/{x}/{y}", "/a/b/c", "/{x}/{y}/{z}", "/c/{y}/a",
        ]),
    ) {
        let before = node(data);
        let after = write.apply(&before);
        let triggers = [trigger("t", pattern, TriggerOn::Write)];
        let (found, dropped) = changes(&triggers, &write, &before, &after);
        prop_assert_eq!(dropped, 0);
        let got: BTreeSet<String> =
            found.iter().map(|c| format!("/{}", joined(&c.path))).collect();
        prop_assert_eq!(got.len(), found.len(), "a path reported twice");
        let pattern = PathPattern::parse(pattern).expect("pattern");
        prop_assert_eq!(got, model(&pattern, &before, &after));
        for change in &found {
            prop_assert_eq!(&change.before, &before.get(&change.path));
            prop_assert_eq!(&change.after, &after.get(&change.path));
        }
    }
}

#[test]
fn a_database_reports_its_triggers_changes_after_the_log_record_with_the_writer() {
    use crate::access::{Access, AuthState};
    use crate::database::Database;
    use crate::effect::Effect;
    use crate::write::WriteTarget;

    let mut db = Database::new();
    db.set_access(Access::Open, 0, &mut Vec::new());
    let target = WriteTarget::parse("/rooms/r1/messages/m1").expect("target");
    let mut out = Vec::new();
    db.put_as(
        &AuthState::Anonymous,
        &target,
        &json!("a"),
        None,
        0,
        &mut out,
    )
    .expect("no triggers yet");
    assert!(
        !out.iter().any(|e| matches!(e, Effect::Triggered { .. })),
        "a database without triggers reports nothing"
    );
    db.set_triggers(
        vec![trigger(
            "t",
            "/rooms/{room}/messages/{id}",
            TriggerOn::Write,
        )]
        .into(),
    );
    let ada = AuthState::User(json!({"uid": "ada", "provider": "password"}));
    let mut out = Vec::new();
    db.put_as(&ada, &target, &json!("b"), None, 0, &mut out)
        .expect("open");
    let log = out.iter().position(|e| matches!(e, Effect::Log(_)));
    let triggered = out
        .iter()
        .position(|e| matches!(e, Effect::Triggered { .. }));
    assert!(log.is_some() && triggered > log, "{out:?}");
    let Some(Effect::Triggered {
        changes, writer, ..
    }) = triggered.map(|i| &out[i])
    else {
        panic!("no change reported");
    };
    assert_eq!(writer, &ada);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].after.to_json(false), json!("b"));
}

#[test]
fn strict_trigger_validation_refuses_writes_past_the_limits_unless_turned_off() {
    use crate::access::{Access, AuthState};
    use crate::database::Database;
    use crate::effect::Effect;
    use crate::request::Status;
    use crate::write::WriteTarget;

    let mut db = Database::new();
    db.set_access(Access::Open, 0, &mut Vec::new());
    db.set_triggers(vec![trigger("t", "/a/{k}", TriggerOn::Write)].into());
    let many: serde_json::Map<String, Value> = (0..=MAX_TRIGGER_CHANGES_PER_WRITE)
        .map(|i| (format!("k{i}"), json!(i)))
        .collect();
    let many = Value::Object(many);
    let big = json!({ "k": "x".repeat(MAX_TRIGGER_EVENT_BYTES) });
    let at = |p: &str| WriteTarget::parse(p).expect("target");
    let anyone = AuthState::Anonymous;
    for (target, value) in [("/a", &many), ("/a", &big)] {
        let mut out = Vec::new();
        let refused = db
            .put_as(&anyone, &at(target), value, None, 0, &mut out)
            .expect_err("past a limit");
        assert_eq!(refused.status, Status::LimitExceeded);
        assert!(out.is_empty(), "nothing applied: {out:?}");
        assert!(db.root().is_empty());
    }
    // Exactly at the limit is within it.
    let mut out = Vec::new();
    db.put_as(&anyone, &at("/a/k0"), &json!(1), None, 0, &mut out)
        .expect("one change");
    // Off, the write is applied and the changes past the limit are counted.
    db.set_strict_triggers(false);
    let mut out = Vec::new();
    db.put_as(&anyone, &at("/a"), &many, None, 0, &mut out)
        .expect("lenient");
    let dropped = out.iter().find_map(|effect| match effect {
        Effect::Triggered {
            changes, dropped, ..
        } => Some((changes.len(), *dropped)),
        _ => None,
    });
    assert_eq!(dropped, Some((MAX_TRIGGER_CHANGES_PER_WRITE, 1)));
    // Without triggers the limits do not apply.
    db.set_strict_triggers(true);
    db.set_triggers(Vec::new().into());
    db.put_as(&anyone, &at("/b"), &many, None, 0, &mut Vec::new())
        .expect("no triggers");
    let mut again = db;
    again.set_triggers(vec![trigger("t", "/a/{k}", TriggerOn::Write)].into());
    let within = again.without_trigger_validation(|db| {
        db.put_as(&anyone, &at("/a"), &big, None, 0, &mut Vec::new())
    });
    assert!(
        within.is_ok(),
        "an import without triggers is not validated"
    );
}
