//! Tests of evaluation (`eval.rs`): values, operators, snapshot and string methods, runtime
//! errors and the step budget, over small trees.

use super::*;
use crate::check::{check_rule, Scope};
use crate::parser::parse;
use crate::query::UNQUERIED;
use crate::RuleKind;
use hearth_tree::Node;
use serde_json::json;

/// Evaluates `src` as a .write rule at /users/alice (with `$uid` bound to "alice"), with
/// `old` and `new` as the whole trees.
fn run_with(
    src: &str,
    auth: serde_json::Value,
    old: serde_json::Value,
    new: serde_json::Value,
) -> Result<bool, EvalError> {
    let wildcards = vec![("$uid".to_owned(), 1)];
    let scope = Scope {
        kind: RuleKind::Write,
        wildcards: &wildcards,
    };
    let expr = check_rule(&parse(src).expect("parses"), &scope).expect("checks");
    let keys = vec![
        Key::new("users").expect("key"),
        Key::new("alice").expect("key"),
    ];
    let stack = |root: serde_json::Value| -> Vec<Node> {
        let root = Node::from_json(&root).expect("valid");
        let users = root.child(&keys[0]);
        let alice = users.child(&keys[1]);
        vec![root, users, alice]
    };
    let (old, new) = (stack(old), stack(new));
    let env = Env {
        auth: &auth,
        now: 1000.0,
        query: &UNQUERIED,
        keys: &keys,
        frames: Frames {
            old: &old,
            new: &new,
        },
        depth: 2,
    };
    eval_rule(&expr, &env, &mut Budget::new(10_000))
}

fn run(src: &str) -> Result<bool, EvalError> {
    run_with(
        src,
        json!({"uid": "alice", "token": {"email": "a.b@x.io", "roles": ["admin", "dev"], "n": 2}}),
        json!({"users": {"alice": {"name": "Alice", "age": 30, "tags": {"x": true}}}, "cfg": {"max": 5}}),
        json!({"users": {"alice": {"name": "Alicia", "age": 31}}, "cfg": {"max": 5}}),
    )
}

fn yes(src: &str) {
    assert_eq!(run(src), Ok(true), "{src}");
}

fn no(src: &str) {
    assert_eq!(run(src), Ok(false), "{src}");
}

fn fails(src: &str) -> EvalError {
    run(src).expect_err(src)
}

#[test]
fn variables_and_snapshots() {
    yes("auth.uid === $uid");
    yes("data.child('name').val() === 'Alice' && newData.child('name').val() === 'Alicia'");
    yes("root.child('cfg/max').val() === 5 && newData.parent().parent().child('cfg').hasChild('max')");
    yes("data.parent().child('alice').child('tags').hasChildren()");
    yes("data.hasChildren(['name', 'age']) && !newData.hasChildren(['name', 'tags'])");
    yes("newData.child('age').val() > data.child('age').val()");
    yes("now === 1000");
    yes("query.orderByKey && query.limitToFirst == null");
    yes("data.val() != null && root.child('nothing').val() == null");
    no("newData.child('tags').exists()");
    yes("newData.child('name').isString() && newData.child('age').isNumber() && !newData.child('age').isBoolean()");
    yes("newData.child($uid).val() == null");
    yes("root.child('users/' + auth.uid + '/name').val() === 'Alice'");
    yes("newData.hasChildren(auth.token.roles) == false");
}

#[test]
fn auth_values() {
    yes("auth.token.email.replace('.', ',') === 'a,b@x,io'");
    yes("auth.token.roles[0] === 'admin' && auth.token.roles[1] === 'dev' && auth.token.roles[2] == null");
    yes("auth.token.roles.length === 2 && auth.uid.length === 5");
    yes("auth.token['n'] === 2 && auth.token.missing.deeper == null");
    yes("auth.token == auth.token && auth.token != null");
    yes("auth.token[auth.token.n] == null");
    assert_eq!(
        run_with("auth.uid !== 'x'", json!(null), json!(null), json!(null)),
        Ok(true)
    );
    assert!(run_with(
        "auth.uid.beginsWith('a')",
        json!(null),
        json!(null),
        json!(null)
    )
    .is_err());
}

#[test]
fn strings() {
    yes("'abab'.endsWith('ab') && 'abab'.beginsWith('ab') && 'abc'.contains('b')");
    yes("'a.b.c'.replace('.', ',') === 'a,b,c' && 'abc'.replace('x', 'y') === 'abc'");
    yes("'ab'.replace('', '-') === '-a-b-'");
    yes("'ÉCOLE'.toLowerCase() === 'école' && 'abc'.toUpperCase() === 'ABC' && 'abc'.toLowerCase() === 'abc'");
    yes("'😀'.length === 2 && ''.length === 0");
    yes("(newData.child('age').val() + '').matches(/^\\d+$/) && 'x' + 1.5 === 'x1.5'");
    yes("'b' > 'a' && 'B' < 'a'");
    assert!(matches!(
        fails("newData.child('age').val().contains('3')"),
        EvalError::Receiver {
            member: "contains",
            found: "number"
        }
    ));
    assert!(matches!(
        fails("'foo'.contains(root.child('x').val())"),
        EvalError::Argument { found: "null", .. }
    ));
    assert!(matches!(
        fails("newData.child('age').val().length > 0"),
        EvalError::Receiver {
            member: "length",
            ..
        }
    ));
    assert!(matches!(
        fails("data.val().matches(/x/)"),
        EvalError::Receiver {
            found: "object",
            ..
        }
    ));
}

#[test]
fn errors_abort_the_whole_expression() {
    assert_eq!(
        fails("root.parent().exists() || true"),
        EvalError::RootParent
    );
    assert_eq!(
        fails("!(root.child('x').val() > 5)"),
        EvalError::Operands {
            op: ">",
            left: "null",
            right: "number"
        }
    );
    yes("true || root.parent().exists()");
    no("false && root.parent().exists()");
    yes("newData.isString() ? newData.val().length < 5 : true");
    assert!(fails("root.child('x').val() + 1 === 1")
        .to_string()
        .contains("'+'"));
    assert!(fails("root.child(root.child('x').val()).exists()")
        .to_string()
        .contains("child()"));
}

#[test]
fn arithmetic() {
    yes("7 / 2 === 3.5 && 7 % 2 === 1 && -7 % 2 === -1 && 1 + 2 * 3 === 7 && -(2 - 5) === 3");
    yes("(1 / 0 + '') === 'NaN'");
    yes("(0.1 + 0.2) + '' === '0.30000000000000004'");
}

#[test]
fn budget_is_enforced() {
    let wildcards: Vec<(String, usize)> = Vec::new();
    let scope = Scope {
        kind: RuleKind::Read,
        wildcards: &wildcards,
    };
    let expr = check_rule(&parse("1 + 1 + 1 == 3").expect("parses"), &scope).expect("checks");
    let old = vec![Node::empty()];
    let env = Env {
        auth: &serde_json::Value::Null,
        now: 0.0,
        query: &UNQUERIED,
        keys: &[],
        frames: Frames {
            old: &old,
            new: &[],
        },
        depth: 0,
    };
    assert_eq!(eval_rule(&expr, &env, &mut Budget::new(100)), Ok(true));
    assert_eq!(
        eval_rule(&expr, &env, &mut Budget::new(4)),
        Err(EvalError::Budget)
    );
}
