//! A large PUT converted into the tree off the owner's thread (`prepare_large_put`), and
//! answered with a body serialized later (`LateBody`), must answer and store exactly what the
//! same PUT does on the ordinary path.

use std::sync::Arc;

use hearth_sync::{Access, Effects};
use serde_json::Value;

use super::execute::tests::{call_prepared, owner, value_at};
use super::execute::OFF_THREAD_ANSWER_BYTES;
use crate::state::Owner;
use hearth_ground::rest::{make_call, parse_request, prepare_large_put, CallOp, RestCall};
use std::rc::Rc;
use std::time::Instant;

const NS: &str = "t";

type Headers<'a> = &'a [(&'a str, &'a str)];

/// Anyone may read and write `/open`; anyone may write `/wo`, nobody may read it.
const RULES: &str =
    r#"{"rules": {"open": {".read": true, ".write": true}, "wo": {".write": true}}}"#;

fn owner_with_rules() -> Rc<Owner> {
    let owner = owner();
    owner.with_database(NS, |database| {
        let rules = hearth_rules::Rules::parse(RULES).expect("valid test rules");
        database.set_access(Access::Rules(Arc::new(rules)), 0, &mut Effects::new());
    });
    owner
}

/// What a PUT answers and leaves stored, on the ordinary path or converted ahead.
fn put(prepare: bool, uri: &str, headers: &[(&str, &str)], body: &str) -> String {
    let owner = owner_with_rules();
    let response = call_prepared(&owner, "PUT", uri, headers, Some(body), prepare);
    let path = uri.split(['.', '?']).next().unwrap_or("/");
    let stored: Value = value_at(&owner, NS, path);
    format!(
        "{} {:?} {} | stored {}",
        response.status,
        response.headers,
        String::from_utf8_lossy(&response.body),
        stored
    )
}

#[test]
fn a_prepared_put_answers_and_stores_as_the_ordinary_one() {
    // Just above the size whose answer is serialized later.
    let big_array = format!("[{}1]", "1,".repeat(OFF_THREAD_ANSWER_BYTES / 2));
    let big_object = format!(
        "{{{}\"z\": {{\".value\": 1, \".priority\": 2}}}}",
        (0..OFF_THREAD_ANSWER_BYTES / 12)
            .map(|i| format!("\"k{i}\": \"v{i}\", "))
            .collect::<String>()
    );
    let etag = [("x-firebase-etag", "true")];
    let cases: [(&str, Headers<'_>, &str); 9] = [
        ("/open/a.json?ns=t", &[], &big_array),
        ("/open/a.json?ns=t&print=pretty", &[], &big_array),
        ("/open/a.json?ns=t&print=silent", &[], &big_array),
        ("/open/a.json?ns=t", &etag, &big_array),
        ("/open/a.json?ns=t", &[], &big_object),
        (
            "/open/a.json?ns=t",
            &[],
            r#"{"b": [1, {"c": null}], "d": 2.50}"#,
        ),
        ("/wo/a.json?ns=t", &[], &big_array),
        ("/wo/a.json?ns=t", &[], "7"),
        ("/locked/a.json?ns=t", &[], &big_array),
    ];
    for (uri, headers, body) in cases {
        let ordinary = put(false, uri, headers, body);
        let prepared = put(true, uri, headers, body);
        assert!(
            ordinary == prepared,
            "{uri}: {}",
            &prepared[..200.min(prepared.len())]
        );
    }
}

/// The call of a PUT, built as for a large body and converted ahead.
fn prepared_call(method: &str, uri: &str, body: &str) -> RestCall {
    let parts = hyper::Request::builder()
        .method(method)
        .uri(uri)
        .body(())
        .expect("valid test request")
        .into_parts()
        .0;
    let request = parse_request(&parts, &hearth_auth::AuthConfig::development(), "default")
        .expect("a valid request");
    let call =
        make_call(request, Some(body.as_bytes().to_vec()), Instant::now()).expect("a valid call");
    prepare_large_put(call)
}

fn is_prepared(call: &RestCall) -> bool {
    matches!(
        &call.op,
        CallOp::Data {
            prepared: Some(_),
            body: None,
            ..
        }
    )
}

#[test]
fn only_puts_without_server_values_are_converted_ahead() {
    let uri = "/a.json?ns=t";
    assert!(is_prepared(&prepared_call("PUT", uri, "[1, 2, 3]")));
    assert!(!is_prepared(&prepared_call(
        "PUT",
        uri,
        r#"{"t": {".sv": "timestamp"}}"#
    )));
    assert!(!is_prepared(&prepared_call("PUT", uri, r#"{"a.b": 1}"#)));
    assert!(!is_prepared(&prepared_call("POST", uri, "[1, 2, 3]")));
    assert!(!is_prepared(&prepared_call("PATCH", uri, r#"{"a": 1}"#)));
}
