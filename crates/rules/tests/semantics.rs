//! Behaviour the spec vectors do not pin down but the engine's callers rely on: rules files as
//! operators write them (comments, multi-line expressions), real query parameters, priorities,
//! deep expressions, and the shape of denials.

use hearth_query::QueryParams;
use hearth_rules::{DenialReason, RuleKind, Rules, MAX_EXPR_DEPTH};
use hearth_tree::{Node, Path};
use serde_json::{json, Value};

fn node(v: Value) -> Node {
    Node::from_json(&v).expect("valid node")
}

fn path(s: &str) -> Path {
    Path::parse(s).expect("valid path")
}

fn alice() -> Value {
    json!({"uid": "alice", "provider": "password", "token": {"sub": "alice", "email": "alice@example.com"}})
}

#[test]
fn commented_multi_line_documents_load_and_evaluate() {
    let text = r#"
    // Chat rules.
    {
      /* Only members read a room. */
      "rules": {
        "rooms": {
          "$room": {
            ".read": "auth != null &&
                      root.child('members/' + $room + '/' + auth.uid).exists()", // membership
            ".write": false,
          },
        },
      },
    }
    "#;
    let rules = Rules::parse(text).expect("valid document");
    let data = node(json!({"members": {"r1": {"alice": true}}}));
    assert!(rules
        .can_read(&data, &path("/rooms/r1"), &alice(), None, 0)
        .is_allowed());
    assert!(!rules
        .can_read(&data, &path("/rooms/r2"), &alice(), None, 0)
        .is_allowed());
    assert!(!rules
        .can_read(&data, &path("/rooms/r1"), &Value::Null, None, 0)
        .is_allowed());
    assert_eq!(
        rules.strict_json(),
        r#"{"rules":{"rooms":{"$room":{".read":"auth != null &&\n                      root.child('members/' + $room + '/' + auth.uid).exists()",".write":false}}}}"#
    );
}

#[test]
fn errors_in_multi_line_expressions_point_at_the_right_line() {
    let text = "{\"rules\": {\".read\": \"auth != null &&\n    auth.uid === 'a' &&\n    nope\"}}";
    let err = Rules::parse(text).expect_err("unknown variable");
    assert_eq!(
        err.to_string(),
        "line 3, column 5: Unknown variable 'nope'."
    );
}

#[test]
fn query_rules_with_wire_queries() {
    let rules = Rules::parse(
        r#"{"rules": {"messages": {
            ".read": "query.orderByChild === 'ts' && query.startAt >= now - 86400000 && query.limitToLast <= 50",
            ".indexOn": "ts"
        }}}"#,
    )
    .expect("valid");
    let now = 1_700_000_000_000u64;
    let read = |q: Value| {
        let params = QueryParams::from_wire(&q).expect("valid query");
        rules
            .can_read(
                &Node::empty(),
                &path("/messages"),
                &Value::Null,
                Some(&params),
                now,
            )
            .is_allowed()
    };
    let recent = now - 1000;
    assert!(read(json!({"i": "ts", "sp": recent, "l": 50, "vf": "r"})));
    assert!(!read(json!({"i": "ts", "sp": recent, "l": 51, "vf": "r"})));
    assert!(!read(json!({"i": "ts", "sp": recent, "l": 50, "vf": "l"})));
    assert!(!read(json!({"i": "ts", "sp": 0, "l": 10, "vf": "r"})));
    assert!(!read(
        json!({"i": "other", "sp": recent, "l": 10, "vf": "r"})
    ));
    assert!(!read(json!({})));
    assert!(rules.is_indexed(&path("/messages"), &hearth_query::Index::Child(path("ts"))));
}

#[test]
fn priorities_are_visible_to_rules() {
    let rules = Rules::parse(
        r#"{"rules": {".write": true, "ranked": {"$id": {".validate": "newData.getPriority() !== null && newData.getPriority() === newData.child('score').val()"}}}}"#,
    )
    .expect("valid");
    let old = Node::empty();
    let write = |value: Value| {
        let target = path("/ranked/a");
        let new = old.set(&target, node(value));
        rules
            .can_write(&old, &new, &target, &Value::Null, 0)
            .is_allowed()
    };
    assert!(write(json!({"score": 5, ".priority": 5})));
    assert!(!write(json!({"score": 5, ".priority": 4})));
    assert!(!write(json!({"score": 5})));
}

#[test]
fn deep_updates_bind_wildcards_along_each_path() {
    let rules = Rules::parse(
        r#"{"rules": {
            "users": {"$uid": {".write": "auth.uid === $uid",
                "posts": {"$post": {".validate": "newData.child('author').val() === $uid"}}}}
        }}"#,
    )
    .expect("valid");
    let old = Node::empty();
    let base = path("/users");
    let rels = [path("alice/posts/p1"), path("alice/posts/p2")];
    let ok = old
        .set(
            &path("/users/alice/posts/p1"),
            node(json!({"author": "alice"})),
        )
        .set(
            &path("/users/alice/posts/p2"),
            node(json!({"author": "alice"})),
        );
    assert!(rules
        .can_update(&old, &ok, &base, &rels, &alice(), 0)
        .is_allowed());
    let forged = ok.set(&path("/users/alice/posts/p2/author"), node(json!("bob")));
    let decision = rules.can_update(&old, &forged, &base, &rels, &alice(), 0);
    let denial = decision.denial().expect("denied");
    assert_eq!(denial.path, path("/users/alice/posts/p2"));
    match &denial.reason {
        DenialReason::Invalid(outcome) => {
            assert_eq!(outcome.site.kind, RuleKind::Validate);
            assert_eq!(outcome.site.location, path("/users/alice/posts/p2"));
            assert_eq!(outcome.site.line, 3);
        }
        other => panic!("unexpected {other:?}"),
    }
    let foreign = [path("bob/posts/p1")];
    let theirs = old.set(&path("/users/bob/posts/p1"), node(json!({"author": "bob"})));
    let decision = rules.can_update(&old, &theirs, &base, &foreign, &alice(), 0);
    assert!(matches!(
        decision.denial().map(|d| &d.reason),
        Some(DenialReason::NotGranted {
            kind: RuleKind::Write,
            last: Some(_)
        })
    ));
}

#[test]
fn server_time_is_the_same_for_rules_and_timestamps() {
    let rules =
        Rules::parse(r#"{"rules": {".write": true, "t": {".validate": "newData.val() === now"}}}"#)
            .expect("valid");
    let old = Node::empty();
    let now = 1_234_567u64;
    let new = old.set(&path("/t"), node(json!(now)));
    assert!(rules
        .can_write(&old, &new, &path("/t"), &Value::Null, now)
        .is_allowed());
    assert!(!rules
        .can_write(&old, &new, &path("/t"), &Value::Null, now + 1)
        .is_allowed());
}

#[test]
fn deepest_allowed_expressions_evaluate() {
    // Nesting right at the limit must load and run without exhausting the stack.
    // `!` x 126 over `true` is 127 tall; `===` over the sum adds the last level.
    let negations = format!("{}true", "!".repeat(MAX_EXPR_DEPTH - 2));
    let terms = MAX_EXPR_DEPTH - 2;
    let nested_sum = format!(
        "{}1{} === {}",
        "(1 + ".repeat(terms - 1),
        ")".repeat(terms - 1),
        terms
    );
    for rule in [negations, nested_sum] {
        let text = json!({"rules": {".read": rule}}).to_string();
        let rules = Rules::parse(&text).expect("within the limit");
        assert!(rules
            .can_read(&Node::empty(), &Path::root(), &Value::Null, None, 0)
            .is_allowed());
    }
    let too_deep = format!("{}true", "!".repeat(MAX_EXPR_DEPTH + 1));
    let text = json!({"rules": {".read": too_deep}}).to_string();
    assert!(Rules::parse(&text).is_err());
}

#[test]
fn long_or_chains_are_fine() {
    let chain: Vec<String> = (0..2000)
        .map(|i| format!("auth.uid === 'user{i}'"))
        .collect();
    let text = json!({"rules": {".read": chain.join(" || ")}}).to_string();
    let rules = Rules::parse(&text).expect("flat chain");
    let user = json!({"uid": "user1999"});
    assert!(rules
        .can_read(&Node::empty(), &Path::root(), &user, None, 0)
        .is_allowed());
    assert!(!rules
        .can_read(&Node::empty(), &Path::root(), &json!({"uid": "x"}), None, 0)
        .is_allowed());
}
