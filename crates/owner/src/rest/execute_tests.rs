//! Tests of REST execution: every method, ETags and conditions, parameters, refusals.

use super::*;
use hearth_config::ServeConfig;
use hearth_ground::rest::{make_call, parse_request, RestRequest};
use hearth_tree::Path;
use hyper::Request;
use serde_json::json;
use std::rc::Rc;
use std::time::Instant;

/// The value (export form) at `path` of `namespace`.
pub fn value_at(owner: &Owner, namespace: &str, path: &str) -> Value {
    owner
        .databases()
        .get(namespace)
        .map(|database| {
            database
                .root()
                .get(&Path::parse(path).expect("valid test path"))
                .to_json(true)
        })
        .unwrap_or(Value::Null)
}

pub fn owner() -> Rc<Owner> {
    let config = ServeConfig::for_tests(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    Owner::for_tests(config)
}

pub fn call(
    owner: &Owner,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> RestResponse {
    call_prepared(owner, method, uri, headers, body, false)
}

/// [`call`], with the call's body converted ahead as a large body is, when `prepare`.
pub fn call_prepared(
    owner: &Owner,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    prepare: bool,
) -> RestResponse {
    let mut builder = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let parts = builder.body(()).expect("valid test request").into_parts().0;
    let request: RestRequest =
        match parse_request(&parts, &hearth_auth::AuthConfig::development(), "default") {
            Ok(request) => request,
            Err(response) => return response,
        };
    match make_call(request, body.map(|b| b.as_bytes().to_vec()), Instant::now()) {
        Ok(call) if prepare => execute(owner, hearth_ground::rest::prepare_large_put(call)),
        Ok(call) => execute(owner, call),
        Err(response) => response,
    }
}

pub fn json_body(response: &RestResponse) -> Value {
    serde_json::from_slice(&response.body).expect("a JSON body")
}

pub fn etag(response: &RestResponse) -> Option<&str> {
    response
        .headers
        .iter()
        .find(|(name, _)| *name == "etag")
        .map(|(_, value)| value.as_str())
}

#[test]
fn put_get_patch_delete() {
    let owner = owner();
    let put = call(
        &owner,
        "PUT",
        "/a.json?ns=t",
        &[],
        Some(r#"{"x": 1.0, "y": [1, 2]}"#),
    );
    assert_eq!(put.status, 200);
    assert_eq!(&put.body[..], br#"{"x":1,"y":[1,2]}"#);
    let patch = call(
        &owner,
        "PATCH",
        "/a.json?ns=t",
        &[],
        Some(r#"{"x": null, "z/w": {".sv": "timestamp"}}"#),
    );
    assert_eq!(patch.status, 200);
    assert_eq!(json_body(&patch)["x"], Value::Null);
    assert!(json_body(&patch)["z/w"].as_u64().is_some());
    let get = call(&owner, "GET", "/a.json?ns=t", &[], None);
    assert_eq!(json_body(&get)["y"], json!([1, 2]));
    assert!(json_body(&get).get("x").is_none());
    let delete = call(&owner, "DELETE", "/a.json?ns=t", &[], None);
    assert_eq!((delete.status, &delete.body[..]), (200, &b"null"[..]));
    assert_eq!(value_at(&owner, "t", "/a"), Value::Null);
}

#[test]
fn post_creates_ordered_children() {
    let owner = owner();
    let first = json_body(&call(&owner, "POST", "/list.json?ns=t", &[], Some("1")));
    let second = json_body(&call(&owner, "POST", "/list.json?ns=t", &[], Some("2")));
    let (first, second) = (
        first["name"].as_str().expect("a name").to_owned(),
        second["name"].as_str().expect("a name").to_owned(),
    );
    assert!(first < second);
    assert_eq!(value_at(&owner, "t", &format!("/list/{second}")), json!(2));
}

#[test]
fn etags_and_conditions() {
    let owner = owner();
    let empty = call(
        &owner,
        "GET",
        "/c.json",
        &[("x-firebase-etag", "true")],
        None,
    );
    assert_eq!(etag(&empty), Some(NULL_ETAG));
    let created = call(
        &owner,
        "PUT",
        "/c.json",
        &[("if-match", NULL_ETAG)],
        Some("1"),
    );
    assert_eq!(created.status, 200);
    let tag = etag(&created).expect("an etag").to_owned();
    assert_ne!(tag, NULL_ETAG);
    let stale = call(
        &owner,
        "PUT",
        "/c.json",
        &[("if-match", NULL_ETAG)],
        Some("2"),
    );
    assert_eq!(stale.status, 412);
    assert_eq!(&stale.body[..], b"1");
    assert_eq!(etag(&stale), Some(tag.as_str()));
    let unchanged = call(&owner, "GET", "/c.json", &[("if-none-match", &tag)], None);
    assert_eq!(unchanged.status, 304);
    assert!(unchanged.body.is_empty());
    let changed = call(
        &owner,
        "GET",
        "/c.json",
        &[("if-none-match", "other")],
        None,
    );
    assert_eq!(changed.status, 200);
    assert_eq!(etag(&changed), Some(tag.as_str()));
}

#[test]
fn reads_with_parameters() {
    let owner = owner();
    call(
        &owner,
        "PUT",
        "/p.json",
        &[],
        Some(r#"{"a": {"age": 3, ".priority": 1}, "b": {"age": 7}, "c": {"age": 9}}"#),
    );
    let query = call(
        &owner,
        "GET",
        "/p.json?orderBy=%22age%22&startAt=5&limitToFirst=1",
        &[],
        None,
    );
    assert_eq!(json_body(&query), json!({"b": {"age": 7}}));
    let none = call(
        &owner,
        "GET",
        "/p.json?orderBy=%22age%22&limitToLast=0",
        &[],
        None,
    );
    assert_eq!(&none.body[..], b"null");
    let shallow = call(&owner, "GET", "/p.json?shallow=true", &[], None);
    assert_eq!(
        json_body(&shallow),
        json!({"a": true, "b": true, "c": true})
    );
    let export = call(&owner, "GET", "/p/a.json?format=export", &[], None);
    assert_eq!(json_body(&export), json!({"age": 3, ".priority": 1}));
    let priority = call(&owner, "GET", "/p/a/.priority.json", &[], None);
    assert_eq!(&priority.body[..], b"1");
    let silent = call(&owner, "GET", "/p.json?print=silent", &[], None);
    assert_eq!((silent.status, silent.body.len()), (204, 0));
    let jsonp = call(&owner, "GET", "/p/b/age.json?callback=cb", &[], None);
    assert_eq!(&jsonp.body[..], b"cb(7);");
    let pretty = call(&owner, "GET", "/p/b.json?print=pretty", &[], None);
    assert_eq!(&pretty.body[..], b"{\n  \"age\" : 7\n}");
}

#[test]
fn bad_writes() {
    let owner = owner();
    assert_eq!(
        call(&owner, "PUT", "/a.json", &[], Some("{nope")).status,
        400
    );
    assert_eq!(call(&owner, "PUT", "/a.json", &[], Some("")).status, 400);
    assert_eq!(
        call(&owner, "PUT", "/a.json", &[], Some(r#"{"b.c": 1}"#)).status,
        400
    );
    assert_eq!(
        call(
            &owner,
            "PUT",
            "/a.json",
            &[],
            Some(r#"{".value": 1, "x": 2}"#)
        )
        .status,
        400
    );
    assert_eq!(
        call(&owner, "PATCH", "/a.json", &[], Some("[1]")).status,
        400
    );
    assert_eq!(
        call(
            &owner,
            "PATCH",
            "/a.json",
            &[],
            Some(r#"{"b": 1, "b/c": 2}"#)
        )
        .status,
        400
    );
    let big = format!("\"{}\"", "x".repeat(2 * 1024 * 1024));
    let too_big = call(
        &owner,
        "PUT",
        "/a.json?writeSizeLimit=tiny",
        &[],
        Some(&big),
    );
    assert_eq!(too_big.status, 413);
    call(
        &owner,
        "PUT",
        "/a.json?writeSizeLimit=small",
        &[],
        Some(&big),
    );
    let delete = call(&owner, "DELETE", "/a.json?writeSizeLimit=tiny", &[], None);
    assert_eq!(delete.status, 413, "deleting 2 MiB costs 2 MiB");
    assert_eq!(
        call(&owner, "DELETE", "/a.json?writeSizeLimit=small", &[], None).status,
        200
    );
}

#[test]
fn priority_targets() {
    let owner = owner();
    call(&owner, "PUT", "/a.json", &[], Some("{\"x\":1}"));
    let set = call(&owner, "PUT", "/a/.priority.json", &[], Some("5"));
    assert_eq!((set.status, &set.body[..]), (200, &b"5"[..]));
    assert_eq!(
        value_at(&owner, "default", "/a"),
        json!({"x": 1, ".priority": 5})
    );
}
