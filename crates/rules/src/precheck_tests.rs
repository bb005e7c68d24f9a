use hearth_tree::Node;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

fn path(s: &str) -> Path {
    Path::parse(s).expect("valid path")
}

fn rules(v: Value) -> Rules {
    Rules::parse(&v.to_string()).expect("valid rules")
}

#[test]
fn no_write_rule_means_never() {
    let r = rules(json!({"rules": {".read": true, "a": {".read": true}}}));
    assert!(!r.could_set(&path("/a"), &json!(null)));
    assert!(!r.could_set(&path("/"), &json!({"uid": "u"})));
    assert!(!r.could_write_below(&path("/"), &json!(null)));
}

#[test]
fn the_write_rules_on_a_path_are_named_root_first() {
    let r = Rules::parse(
        "{\"rules\": {\".write\": false,\n  \"users\": {\"$uid\": {\".write\": \"auth.uid === $uid\"}}}}",
    )
    .expect("valid rules");
    let sites: Vec<String> = r
        .write_rules_on(&path("/users/bob/name"))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        sites,
        [
            "/rules/.write at / (line 1, column 22)",
            "/rules/users/$uid/.write at /users/bob (line 2, column 32)"
        ]
    );
    assert_eq!(r.write_rules_on(&path("/other")).len(), 1);
}

#[test]
fn literal_false_and_auth_checks_are_decided() {
    let r = rules(json!({"rules": {
        "closed": {".write": false},
        "members": {".write": "auth != null"},
        "either": {".write": "false || auth.uid === 'root'"},
        "not": {".write": "!(auth == null)"},
        "cond": {".write": "auth == null ? false : data.exists()"}
    }}));
    let anon = json!(null);
    let user = json!({"uid": "u"});
    assert!(!r.could_set(&path("/closed/x"), &user));
    assert!(!r.could_set(&path("/members/x"), &anon));
    assert!(r.could_set(&path("/members/x"), &user));
    assert!(!r.could_set(&path("/either"), &user));
    assert!(r.could_set(&path("/either"), &json!({"uid": "root"})));
    assert!(!r.could_set(&path("/not"), &anon));
    assert!(r.could_set(&path("/not"), &user));
    assert!(!r.could_set(&path("/cond"), &anon));
    assert!(r.could_set(&path("/cond"), &user));
    // A runtime error fails the rule: `auth.uid.length` of null is not an error but a
    // method of null is.
    let failing = rules(json!({"rules": {".write": "auth.uid.beginsWith('a')"}}));
    assert!(!failing.could_set(&path("/x"), &anon));
}

#[test]
fn wildcards_of_the_path_are_known() {
    let r = rules(
        json!({"rules": {"users": {"$uid": {".write": "auth != null && auth.uid === $uid"}}}}),
    );
    assert!(r.could_set(&path("/users/alice"), &json!({"uid": "alice"})));
    assert!(r.could_set(&path("/users/alice/name"), &json!({"uid": "alice"})));
    assert!(!r.could_set(&path("/users/bob"), &json!({"uid": "alice"})));
    assert!(!r.could_set(&path("/users"), &json!({"uid": "alice"})));
    // Below /users the key is in the data: maybe, for a signed-in user only.
    assert!(r.could_write_below(&path("/users"), &json!({"uid": "alice"})));
    assert!(!r.could_write_below(&path("/users"), &json!(null)));
    assert!(!r.could_write_below(&path("/users/bob"), &json!({"uid": "alice"})));
}

#[test]
fn data_and_time_are_unknown() {
    let r = rules(json!({"rules": {
        "a": {".write": "data.exists() || newData.val() == 1"},
        "b": {".write": "now > 0"},
        "c": {".write": "root.child('open').val() === true && auth != null"}
    }}));
    assert!(r.could_set(&path("/a"), &json!(null)));
    assert!(r.could_set(&path("/b"), &json!(null)));
    assert!(!r.could_set(&path("/c"), &json!(null)));
    assert!(r.could_set(&path("/c"), &json!({"uid": "u"})));
}

#[test]
fn only_rules_at_and_above_a_set_count() {
    let r = rules(json!({"rules": {"a": {"b": {".write": true}}}}));
    assert!(!r.could_set(&path("/a"), &json!(null)));
    assert!(r.could_set(&path("/a/b/c"), &json!(null)));
    assert!(r.could_write_below(&path("/a"), &json!(null)));
    assert!(!r.could_write_below(&path("/z"), &json!(null)));
}

// ---- Soundness against the full evaluator ----

/// Rule atoms; `$w` is replaced by the innermost wildcard in scope (or dropped when none).
const ATOMS: &[&str] = &[
    "true",
    "false",
    "auth != null",
    "auth == null",
    "auth.uid === 'u1'",
    "auth.uid === $w",
    "data.exists()",
    "!newData.exists()",
    "newData.val() === 1",
    "root.child('a').exists()",
    "now > 5",
    "auth.uid.beginsWith('u')",
];

fn expression() -> impl Strategy<Value = String> {
    let atom = proptest::sample::select(ATOMS).prop_map(str::to_owned);
    atom.prop_recursive(3, 8, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
            inner.clone().prop_map(|a| format!("!({a})")),
            (inner.clone(), inner.clone(), inner)
                .prop_map(|(a, b, c)| format!("({a}) ? ({b}) : ({c})")),
        ]
    })
}

/// A rule node: an optional `.write`, and children among `a`, `b` and a wildcard.
fn rule_node(depth: u32) -> BoxedStrategy<Value> {
    let write = proptest::option::weighted(0.5, expression());
    if depth == 0 {
        return write.prop_map(|w| with_write(json!({}), w)).boxed();
    }
    let child = || proptest::option::weighted(0.4, rule_node(depth - 1));
    (write, child(), child(), child())
        .prop_map(|(w, a, b, any)| {
            let mut node = with_write(json!({}), w);
            for (name, child) in [("a", a), ("b", b), ("$w", any)] {
                if let Some(child) = child {
                    node[name] = child;
                }
            }
            node
        })
        .boxed()
}

fn with_write(mut node: Value, write: Option<String>) -> Value {
    if let Some(w) = write {
        node[".write"] = json!(w);
    }
    node
}

/// Gives each wildcard a name of its own (`$w0`, `$w1`, … by depth: a path may not repeat
/// one) and resolves `$w` in every `.write` to the innermost one in scope, or to a constant
/// where none is.
fn bind_wildcards(node: &mut Value, scope: Option<&str>, level: usize) {
    let Value::Object(map) = node else { return };
    if let Some(Value::String(w)) = map.get_mut(".write") {
        *w = w.replace("$w", scope.unwrap_or("'u2'"));
    }
    if let Some(mut child) = map.remove("$w") {
        let name = format!("$w{level}");
        bind_wildcards(&mut child, Some(&name), level + 1);
        map.insert(name, child);
    }
    for (name, child) in map.iter_mut() {
        if !name.starts_with('.') && !name.starts_with('$') {
            bind_wildcards(child, scope, level + 1);
        }
    }
}

fn key_path() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(&["a", "b", "u1", "c"][..]), 0..4)
        .prop_map(|keys| format!("/{}", keys.join("/")))
}

fn auth() -> impl Strategy<Value = Value> {
    proptest::sample::select(vec![json!(null), json!({"uid": "u1"}), json!({"uid": "b"})])
}

fn data() -> impl Strategy<Value = Value> {
    proptest::sample::select(vec![
        json!(null),
        json!(1),
        json!({"a": 1}),
        json!({"a": {"u1": 1, "b": {"a": 1}}, "b": 2}),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_means_never(
        mut doc in rule_node(3),
        auth in auth(),
        old in data(),
        at in key_path(),
        value in data(),
        relative in proptest::collection::vec(key_path(), 1..3),
        now in 0u64..10,
    ) {
        bind_wildcards(&mut doc, None, 0);
        let rules = rules(json!({"rules": doc}));
        let old = Node::from_json(&old).expect("valid");
        let value = Node::from_json(&value).expect("valid");
        let at = path(&at);

        let new = old.set(&at, value.clone());
        if rules.can_write(&old, &new, &at, &auth, now).is_allowed() {
            prop_assert!(rules.could_set(&at, &auth), "set at {at} allowed but pre-check said never");
            prop_assert!(rules.could_write_below(&at, &auth));
        }

        let relative: Vec<Path> = relative.iter().map(|p| path(p)).filter(|p| !p.is_root()).collect();
        let overlapping = relative.iter().enumerate().any(|(i, p)| {
            relative.iter().skip(i + 1).any(|q| p.keys().starts_with(q.keys()) || q.keys().starts_with(p.keys()))
        });
        if !relative.is_empty() && !overlapping {
            let mut merged = old.clone();
            for rel in &relative {
                merged = merged.set(&at.join(rel), value.clone());
            }
            if rules.can_update(&old, &merged, &at, &relative, &auth, now).is_allowed() {
                prop_assert!(
                    rules.could_write_below(&at, &auth),
                    "update at {at} of {relative:?} allowed but pre-check said never"
                );
            }
        }
    }
}
