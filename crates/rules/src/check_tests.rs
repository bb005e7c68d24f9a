//! Tests of the type checker (`check.rs`): typical rules accepted, each kind of mistake refused
//! with its offset and reason.

use super::*;
use crate::parser::parse;

fn scope(kind: RuleKind) -> Scope<'static> {
    static WILDCARDS: std::sync::LazyLock<Vec<(String, usize)>> =
        std::sync::LazyLock::new(|| vec![("$uid".to_owned(), 1)]);
    Scope {
        kind,
        wildcards: &WILDCARDS,
    }
}

fn ok(src: &str) {
    let ast = parse(src).expect("parses");
    if let Err((at, reason)) = check_rule(&ast, &scope(RuleKind::Write)) {
        panic!("{src}: {at}: {reason}");
    }
}

fn refused_as(kind: RuleKind, src: &str) -> (usize, String) {
    let ast = parse(src).expect("parses");
    let (at, reason) = check_rule(&ast, &scope(kind)).expect_err(src);
    (at, reason.to_string())
}

fn refused(src: &str) -> (usize, String) {
    refused_as(RuleKind::Write, src)
}

#[test]
fn accepts_typical_rules() {
    ok("auth != null && auth.uid === $uid");
    ok("newData.hasChildren(['name', 'age']) && newData.child('name').isString()");
    ok("newData.child('name').val().length < 30");
    ok("root.child('admins/' + auth.uid).val() === true");
    ok("root.child('allowed').child(auth.token.email.replace('.', ',')).exists()");
    ok("newData.val().matches(/^[a-z]+$/i)");
    ok("auth.foo[$uid] == 1 && auth.roles['admin'] === true");
    ok("root['exists']() && 'abc'['length'] == 3");
    ok("query.orderByKey && query.limitToLast <= 20");
    ok("query['orderByChild'] === 'ts'");
    ok("data.val() != null && data.getPriority() === 5");
    ok("(newData.val() + '').matches(/^-?[0-9]+$/)");
    ok("newData.isString() ? newData.val().length < 5 : newData.val() < 10");
    ok("-newData.val() < 0 && now - newData.val() % 2 > 0");
    ok("auth.uid.beginsWith('a') && !auth.uid.contains(newData.val())");
    ok("root.child(null).exists()");
    ok("newData.hasChildren(auth.token.required)");
    ok("(auth == null ? data : newData).exists()");
}

#[test]
fn scoping() {
    assert_eq!(
        refused_as(RuleKind::Read, "newData.exists()"),
        (0, "Unknown variable 'newData'.".into())
    );
    assert_eq!(
        refused("skies === 'blue'"),
        (0, "Unknown variable 'skies'.".into())
    );
    assert_eq!(refused("$x === 'y'"), (0, "Unknown variable '$x'.".into()));
}

#[test]
fn rule_must_be_boolean() {
    assert!(refused("7").1.contains("boolean expression"));
    assert!(refused("auth.uid === 'a' ? 7 : true")
        .1
        .contains("boolean expression"));
    assert!(refused("auth.token.admin").1.contains("auth value"));
    assert!(refused("newData.val()").1.contains("value"));
}

#[test]
fn operator_rules() {
    assert_eq!(
        refused("!newData.child('disabled').val()"),
        (0, "! only operates on booleans.".into())
    );
    assert!(refused("auth.admin && true").1.contains("&& only operates"));
    assert!(refused("root.child('foo') != null")
        .1
        .contains("cannot be compared"));
    assert!(refused("query == null").1.contains("cannot be compared"));
    assert!(refused("root.val() > true")
        .1
        .contains("numbers or strings"));
    assert!(refused("root.val() > null")
        .1
        .contains("numbers or strings"));
    assert!(refused("1 < 'a'").1.contains("number with a string"));
    assert!(refused("true + 1 == 2").1.contains("adds numbers"));
    assert!(refused("'a' - 1 == 2").1.contains("needs numbers"));
    assert!(refused("-'a' == 2").1.contains("unary '-'"));
    assert!(refused("(auth == null ? 1 : data).exists()")
        .1
        .contains("branches"));
    assert!(refused("(1 ? true : false)").1.contains("condition"));
}

#[test]
fn members_and_methods() {
    let (at, reason) = refused("newData.isArray()");
    assert_eq!(
        (at, reason.as_str()),
        (8, "No such method/property 'isArray'.")
    );
    assert!(refused("root.exists == true").1.contains("must be called"));
    assert!(refused("root.val().notFound == 1").1.contains("'notFound'"));
    assert!(refused("auth.foo.notFound()").1.contains("'notFound'"));
    assert!(refused("query.foo == 1").1.contains("'foo'"));
    assert!(refused("root['exi' + 'sts']() == false")
        .1
        .contains("string literal"));
    assert!(refused("root[$uid]() == false")
        .1
        .contains("string literal"));
    assert!(refused("'abc'[auth.x] == 1").1.contains("string literal"));
    assert!(refused("now.foo == 1").1.contains("'foo'"));
    assert!(refused("'abc'.length() == 3").1.contains("'length'"));
    assert!(refused("auth() == 1").1.contains("only methods"));
}

#[test]
fn argument_rules() {
    assert!(refused("root.child('s').val().matches('/foo/')")
        .1
        .contains("regular expression literal"));
    assert!(refused("root.hasChildren('foo', 'bar')")
        .1
        .contains("no arguments or one array"));
    assert!(refused("root.hasChildren('foo')")
        .1
        .contains("array of strings"));
    assert!(refused("root.hasChildren(['foo', 7])")
        .1
        .contains("takes a string"));
    assert!(refused("root.hasChildren([])").1.contains("at least one"));
    assert!(refused("auth.foo.contains(7)").1.contains("takes a string"));
    assert!(refused("root.child(1).exists()")
        .1
        .contains("takes a string"));
    assert!(refused("root.child().exists()").1.contains("one argument"));
    assert!(refused("root.exists(1)").1.contains("no arguments"));
    assert!(refused("'a'.replace('a') == 'b'")
        .1
        .contains("two arguments"));
    assert!(refused("root.val().matches(/(^foo$|bar)/)")
        .1
        .contains("regular expression"));
    assert!(refused("/a/ == 1").1.contains("argument of matches"));
    assert!(refused("['a'] == 1").1.contains("argument of hasChildren"));
}
