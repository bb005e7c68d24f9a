//! REST answers to refused requests must not depend on data the caller may not read:
//! `If-Match`, `X-Firebase-ETag` and `writeSizeLimit` are decided after the access checks.

use std::sync::Arc;

use hearth_sync::{Access, Effects, WriteTarget};
use hearth_tree::{Node, Path};
use serde_json::{json, Value};

use super::answer::NULL_ETAG;
use super::execute::tests::{call, etag, json_body, owner, value_at};
use crate::state::Owner;
use hearth_ground::rest::RestResponse;
use std::rc::Rc;

const NS: &str = "t";

/// Anyone may write `/secret` (numbers only), nobody may read it.
const WRITE_ONLY_RULES: &str =
    r#"{"rules": {"secret": {".write": true, ".validate": "newData.isNumber()"}}}"#;
/// Anyone may read and write everything.
const OPEN_RULES: &str = r#"{"rules": {".read": true, ".write": true}}"#;

fn rules(text: &str) -> Access {
    Access::Rules(Arc::new(
        hearth_rules::Rules::parse(text).expect("valid test rules"),
    ))
}

/// A owner whose database `t` holds `{"secret": secret}` under `access`.
fn owner_with(access: Access, secret: Value) -> Rc<Owner> {
    let owner = owner();
    owner.with_database(NS, |database| {
        let mut out = Effects::new();
        let target = WriteTarget::whole(Path::parse("/secret").expect("valid"));
        database
            .put(&target, &secret, None, 0, &mut out)
            .expect("an admin write");
        database.set_access(access, 0, &mut out);
    });
    owner
}

fn hash_of(value: Value) -> String {
    Node::from_json(&value).expect("valid").hash().to_string()
}

fn assert_denied(response: &RestResponse, what: &str) {
    assert_eq!(
        (response.status, response.error_message().as_deref()),
        (401, Some("Permission denied")),
        "{what}"
    );
    assert_eq!(etag(response), None, "{what}: no ETag on a refusal");
}

#[test]
fn a_refused_if_match_is_401_whatever_the_data() {
    let stored = json!(42);
    for (name, access) in [
        ("locked", Access::Locked),
        ("write-only", rules(WRITE_ONLY_RULES)),
    ] {
        let owner = owner_with(access, stored.clone());
        let right = hash_of(stored.clone());
        let guesses = [
            ("PUT", "/secret.json", right.as_str()),
            ("PUT", "/secret.json", "wrong-guess"),
            ("PUT", "/secret.json", NULL_ETAG),
            ("DELETE", "/secret.json", right.as_str()),
            ("PUT", "/secret/none.json", NULL_ETAG),
            ("PATCH", "/.json", NULL_ETAG),
            ("POST", "/secret.json", right.as_str()),
        ];
        for (method, uri, guess) in guesses {
            let body = if method == "PATCH" {
                "{\"secret\": 7}"
            } else {
                "7"
            };
            let response = call(
                &owner,
                method,
                &format!("{uri}?ns={NS}"),
                &[("if-match", guess)],
                Some(body),
            );
            assert_denied(&response, &format!("{name}: {method} {uri} {guess}"));
        }
        let with_etag = call(
            &owner,
            "PUT",
            &format!("/secret.json?ns={NS}"),
            &[("x-firebase-etag", "true")],
            Some("7"),
        );
        assert_denied(&with_etag, &format!("{name}: an ETag asked with a write"));
        assert_eq!(value_at(&owner, NS, "/secret"), stored, "{name}");
    }
}

#[test]
fn a_refused_write_size_limit_is_401_whatever_the_size() {
    let big = Value::String("x".repeat(2 * 1024 * 1024));
    for stored in [json!(1), big] {
        let owner = owner_with(Access::Locked, stored.clone());
        for (method, body) in [
            ("DELETE", None),
            ("PUT", Some("1")),
            ("PATCH", Some("{\"secret\": 1}")),
        ] {
            let uri = match method {
                "PATCH" => format!("/.json?ns={NS}&writeSizeLimit=tiny"),
                _ => format!("/secret.json?ns={NS}&writeSizeLimit=tiny"),
            };
            let response = call(&owner, method, &uri, &[], body);
            assert_denied(
                &response,
                &format!("{method} over {} bytes", stored.to_string().len()),
            );
        }
        assert_eq!(value_at(&owner, NS, "/secret"), stored);
    }
}

#[test]
fn allowed_callers_still_get_412_and_413() {
    let owner = owner_with(rules(OPEN_RULES), json!(42));
    let uri = format!("/secret.json?ns={NS}");
    let stale = call(&owner, "PUT", &uri, &[("if-match", NULL_ETAG)], Some("7"));
    assert_eq!((stale.status, json_body(&stale)), (412, json!(42)));
    let right = hash_of(json!(42));
    assert_eq!(etag(&stale), Some(right.as_str()));
    let empty_etag = call(&owner, "PUT", &uri, &[("if-match", "\"\"")], Some("7"));
    assert_eq!(empty_etag.status, 412, "an empty ETag matches nothing");
    let big = format!("\"{}\"", "x".repeat(2 * 1024 * 1024));
    let too_big = call(
        &owner,
        "PUT",
        &format!("{uri}&writeSizeLimit=tiny"),
        &[],
        Some(&big),
    );
    assert_eq!(too_big.status, 413);
    let done = call(
        &owner,
        "PUT",
        &uri,
        &[("if-match", right.as_str())],
        Some("7"),
    );
    assert_eq!((done.status, json_body(&done)), (200, json!(7)));
    assert_eq!(etag(&done), Some(hash_of(json!(7)).as_str()));
    let created = call(
        &owner,
        "PUT",
        &format!("/fresh.json?ns={NS}"),
        &[("if-match", NULL_ETAG)],
        Some("1"),
    );
    assert_eq!(created.status, 200);
}

#[test]
fn an_overflowing_increment_is_400_and_keeps_the_value() {
    let owner = owner_with(rules(OPEN_RULES), json!(1.7e308));
    let response = call(
        &owner,
        "PUT",
        &format!("/secret.json?ns={NS}"),
        &[],
        Some(r#"{".sv": {"increment": 1e308}}"#),
    );
    assert_eq!(
        (response.status, response.error_message().as_deref()),
        (
            400,
            Some("invalid server value: the increment would overflow the number stored at the location")
        )
    );
    assert_eq!(value_at(&owner, NS, "/secret"), json!(1.7e308));
}

#[test]
fn a_write_only_caller_gets_back_what_it_sent() {
    let owner = owner_with(rules(r#"{"rules": {"$key": {".write": true}}}"#), json!(42));
    let increment = r#"{".sv": {"increment": 1}}"#;
    let put = call(
        &owner,
        "PUT",
        &format!("/secret.json?ns={NS}"),
        &[],
        Some(increment),
    );
    assert_eq!(
        (put.status, json_body(&put)),
        (200, json!({".sv": {"increment": 1}})),
        "not the sum, which would reveal the hidden base"
    );
    assert_eq!(value_at(&owner, NS, "/secret"), json!(43));
    for missing in ["/missing", "/secret"] {
        let priority = call(
            &owner,
            "PUT",
            &format!("{missing}/.priority.json?ns={NS}"),
            &[],
            Some("5"),
        );
        assert_eq!(
            (priority.status, json_body(&priority)),
            (200, json!(5)),
            "{missing}: whether the node exists is hidden"
        );
    }
    let patch = call(
        &owner,
        "PATCH",
        &format!("/.json?ns={NS}"),
        &[],
        Some(r#"{"secret": {".sv": {"increment": 1}}, "missing/.priority": 5}"#),
    );
    assert_eq!(
        (patch.status, json_body(&patch)),
        (
            200,
            json!({"secret": {".sv": {"increment": 1}}, "missing/.priority": 5})
        )
    );
    let readable = owner_with(rules(OPEN_RULES), json!(42));
    let put = call(
        &readable,
        "PUT",
        &format!("/secret.json?ns={NS}"),
        &[],
        Some(increment),
    );
    assert_eq!(json_body(&put), json!(43), "a reader sees the stored value");
}
