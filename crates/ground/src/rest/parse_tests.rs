use super::*;
use hearth_tree::Path;
use hyper::Request;

fn parts(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
    let mut builder = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).expect("valid test request").into_parts().0
}

fn parse(method: &str, uri: &str, headers: &[(&str, &str)]) -> RestRequest {
    parse_request(
        &parts(method, uri, headers),
        &AuthConfig::development(),
        "default",
    )
    .expect("a valid request")
}

fn refuse(method: &str, uri: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let response = parse_request(
        &parts(method, uri, headers),
        &AuthConfig::development(),
        "default",
    )
    .expect_err("an invalid request");
    (
        response.status,
        response.error_message().unwrap_or_default(),
    )
}

fn data_of(request: RestRequest) -> DataRequest {
    match request.endpoint {
        Endpoint::Data(data) => *data,
        other => panic!("not a data request: {other:?}"),
    }
}

#[test]
fn a_shallow_read_with_a_limit_alone_is_the_emulators_in_development_only() {
    let url = "/.json?ns=p&shallow=true&limitToFirst=1";
    let data = data_of(parse("GET", url, &[]));
    assert!(data.shallow && data.query.is_none());
    let production = parse_request(&parts("GET", url, &[]), &AuthConfig::default(), "default");
    assert_eq!(production.err().map(|r| r.status), Some(400));
    let ordered = "/.json?shallow=true&orderBy=%22%24key%22&limitToFirst=1";
    assert_eq!(
        refuse("GET", ordered, &[]).0,
        400,
        "a real query is still refused"
    );
}

#[test]
fn the_emulators_database_list_is_for_admins() {
    assert_eq!(refuse("GET", "/.inspect/databases.json", &[]).0, 401);
    let listed = parse(
        "GET",
        "/.inspect/databases.json?ns=p",
        &[("authorization", "Bearer owner")],
    );
    assert!(matches!(listed.endpoint, Endpoint::InspectDatabases));
}

#[test]
fn paths_and_namespaces() {
    let request = parse("GET", "/users/ada.json?ns=demo", &[]);
    assert_eq!(request.namespace, "demo");
    assert_eq!(request.auth, AuthState::Anonymous);
    let data = data_of(request);
    assert_eq!(data.method, DataMethod::Get);
    assert_eq!(data.target.path, Path::parse("/users/ada").expect("valid"));
    assert!(data_request_root("/.json"));
    assert!(data_request_root("/.json?ns=x"));
    let slash = data_of(parse("GET", "/a/.json", &[]));
    assert_eq!(slash.target.path, Path::parse("/a").expect("valid"));
    let escaped = data_of(parse("GET", "/caf%C3%A9/x%20y.json", &[]));
    assert_eq!(escaped.target.path.to_string(), "/café/x y");
    let priority = data_of(parse("PUT", "/a/.priority.json", &[]));
    assert!(priority.target.priority_only);
    let host = parse("GET", "/.json", &[("host", "proj.example.com")]);
    assert_eq!(host.namespace, "proj");
    assert_eq!(refuse("GET", "/a.b.json", &[]).0, 400);
    assert_eq!(refuse("GET", "/.info/connected.json", &[]).0, 400);
    assert_eq!(refuse("GET", "/a", &[]).0, 404);
    assert_eq!(refuse("GET", "/.json?ns=bad/name", &[]).0, 404);
    assert_eq!(refuse("GET", "/.ws", &[]).0, 400);
    assert!(matches!(parse("GET", "/", &[]).endpoint, Endpoint::Status));
}

fn data_request_root(uri: &str) -> bool {
    data_of(parse("GET", uri, &[])).target.path.is_root()
}

#[test]
fn methods_and_overrides() {
    assert_eq!(
        data_of(parse("HEAD", "/a.json", &[])).method,
        DataMethod::Get
    );
    assert_eq!(
        data_of(parse("DELETE", "/a.json", &[])).method,
        DataMethod::Delete
    );
    let overridden = parse("POST", "/a.json", &[("X-HTTP-Method-Override", "patch")]);
    assert_eq!(data_of(overridden).method, DataMethod::Patch);
    let by_query = parse("POST", "/a.json?x-http-method-override=DELETE", &[]);
    assert_eq!(data_of(by_query).method, DataMethod::Delete);
    assert_eq!(
        refuse("POST", "/a.json", &[("X-HTTP-Method-Override", "GET")]).0,
        400
    );
    let (status, _) = refuse("TRACE", "/a.json", &[]);
    assert_eq!(status, 405);
    assert_eq!(
        data_of(parse(
            "PUT",
            "/a.json",
            &[("X-HTTP-Method-Override", "DELETE")]
        ))
        .method,
        DataMethod::Put
    );
    assert!(matches!(
        parse("OPTIONS", "/a.json", &[]).endpoint,
        Endpoint::Preflight { .. }
    ));
}

#[test]
fn credentials() {
    let bearer = parse("GET", "/.json", &[("authorization", "Bearer owner")]);
    assert_eq!(bearer.auth, AuthState::Admin);
    let access = parse("GET", "/.json?access_token=owner", &[]);
    assert_eq!(access.auth, AuthState::Admin);
    let auth = parse("GET", "/.json?auth=owner", &[]);
    assert_eq!(auth.auth, AuthState::Admin);
    let overridden = parse(
        "GET",
        "/.json?auth_variable_override=%7B%22uid%22%3A%22u1%22%7D",
        &[("authorization", "Bearer owner")],
    );
    assert_eq!(
        overridden.auth,
        AuthState::User(serde_json::json!({"uid": "u1"}))
    );
    let none = parse(
        "GET",
        "/.json?auth_variable_override=null",
        &[("authorization", "Bearer owner")],
    );
    assert_eq!(none.auth, AuthState::Anonymous);
    assert_eq!(refuse("GET", "/.json?auth=garbage", &[]).0, 401);
    assert_eq!(
        refuse(
            "GET",
            "/.json?auth_variable_override=5",
            &[("authorization", "Bearer owner")]
        )
        .0,
        400
    );
    let production = parse_request(
        &parts("GET", "/.json?auth=owner", &[]),
        &AuthConfig::default(),
        "default",
    )
    .expect_err("owner is a development credential");
    assert_eq!(production.status, 401);
}

#[test]
fn a_backup_is_an_admin_post() {
    let owner = [("authorization", "Bearer owner")];
    let post = parse("POST", "/.admin/backup", &owner);
    assert!(matches!(post.endpoint, Endpoint::Backup));
    assert_eq!(refuse("POST", "/.admin/backup", &[]).0, 401);
    assert_eq!(refuse("GET", "/.admin/backup", &owner).0, 405);
    // An unsigned mock token of a user (accepted in development mode): not an admin.
    let user = [(
        "authorization",
        "Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsInVzZXJfaWQiOiJhbGljZSJ9.",
    )];
    assert_eq!(refuse("POST", "/.admin/backup", &user).0, 403);
}

#[test]
fn coverage_is_read_without_a_credential() {
    let json = parse("GET", "/.inspect/coverage.json?ns=demo", &[]);
    assert!(matches!(json.endpoint, Endpoint::Coverage { html: false }));
    assert_eq!(json.namespace, "demo");
    let page = parse("GET", "/.inspect/coverage?ns=demo", &[]);
    assert!(matches!(page.endpoint, Endpoint::Coverage { html: true }));
    assert_eq!(refuse("PUT", "/.inspect/coverage.json", &[]).0, 405);
}

#[test]
fn settings_need_an_admin() {
    assert_eq!(refuse("GET", "/.settings/rules.json", &[]).0, 401);
    let get = parse(
        "GET",
        "/.settings/rules.json?format=strict",
        &[("authorization", "Bearer owner")],
    );
    assert!(matches!(get.endpoint, Endpoint::RulesGet { strict: true }));
    let put = parse(
        "PUT",
        "/.settings/rules.json",
        &[("authorization", "Bearer owner")],
    );
    assert!(matches!(put.endpoint, Endpoint::RulesPut));
    assert_eq!(
        refuse(
            "GET",
            "/.settings/other.json",
            &[("authorization", "Bearer owner")]
        )
        .0,
        404
    );
}

#[test]
fn parameters() {
    let request = data_of(parse(
        "GET",
        "/a.json?print=pretty&format=export&timeout=2s&download=a.json&callback=cb",
        &[("x-firebase-etag", "true"), ("if-none-match", "\"abc=\"")],
    ));
    assert!(request.style.pretty && request.style.export);
    assert!(request.want_etag);
    assert_eq!(request.if_none_match.as_deref(), Some("abc="));
    assert_eq!(request.timeout, Some(std::time::Duration::from_secs(2)));
    assert_eq!(request.download.as_deref(), Some("a.json"));
    assert_eq!(request.callback.as_deref(), Some("cb"));
    let silent = data_of(parse(
        "PUT",
        "/a.json?print=silent&writeSizeLimit=tiny",
        &[],
    ));
    assert!(silent.silent);
    assert_eq!(silent.body_limit(), Some(1024 * 1024));
    assert_eq!(data_of(parse("DELETE", "/a.json", &[])).body_limit(), None);
    for bad in [
        "/a.json?print=loud",
        "/a.json?format=xml",
        "/a.json?shallow=maybe",
        "/a.json?timeout=16min",
        "/a.json?writeSizeLimit=huge",
        "/a.json?limitToFirst=2",
        "/a.json?orderBy=age",
        "/a.json?orderBy=%22%24key%22&startAt=1",
        "/a.json?shallow=true&orderBy=%22%24key%22",
        "/a.json?callback=alert(1)",
    ] {
        assert_eq!(refuse("GET", bad, &[]).0, 400, "{bad}");
    }
}

#[test]
fn python_query_string() {
    let request = data_of(parse(
        "GET",
        "/people.json?endAt=%22z%22&limitToFirst=3&orderBy=%22age%22&startAt=5&ns=demo",
        &[],
    ));
    let query = request.query.expect("a query");
    assert!(query.params.is_filtered());
    assert!(!query.matches_nothing);
}

#[test]
fn streams() {
    let stream = data_of(parse("GET", "/a.json", &[("accept", "text/event-stream")]));
    assert!(stream.stream);
    let put = data_of(parse("PUT", "/a.json", &[("accept", "text/event-stream")]));
    assert!(!put.stream);
    assert_eq!(
        refuse(
            "GET",
            "/a.json?shallow=true",
            &[("accept", "text/event-stream")]
        )
        .0,
        400
    );
}

#[test]
fn a_change_feed_starts_where_it_is_told_and_a_reconnection_where_it_left() {
    let sse = ("accept", "text/event-stream");
    let start =
        |uri: &str, headers: &[(&str, &str)]| data_of(parse("GET", uri, headers)).changes_since;
    assert_eq!(start("/a.json", &[sse]), None);
    assert_eq!(
        start("/a.json?changesSince=now", &[sse]),
        Some(FeedStart::Now)
    );
    assert_eq!(
        start("/a.json?changesSince=42", &[sse]),
        Some(FeedStart::After {
            epoch: None,
            seq: 42
        })
    );
    assert_eq!(
        start(
            "/a.json?changesSince=now",
            &[sse, ("last-event-id", "3.17")]
        ),
        Some(FeedStart::After {
            epoch: Some(3),
            seq: 17
        })
    );
    // Without changesSince a Last-Event-ID means nothing: a plain stream has no ids.
    assert_eq!(start("/a.json", &[sse, ("last-event-id", "5")]), None);
    for bad in ["x", "-1", "1.2.3", "", ".5", "99999999999999999999999"] {
        let uri = format!("/a.json?changesSince={bad}");
        assert_eq!(refuse("GET", &uri, &[sse]).0, 400, "{bad}");
    }
    // A feed is an event stream of everything under its path: no query, no plain read.
    assert_eq!(refuse("GET", "/a.json?changesSince=now", &[]).0, 400);
    let ordered = "/a.json?changesSince=now&orderBy=%22%24key%22&limitToFirst=1";
    assert_eq!(refuse("GET", ordered, &[sse]).0, 400);
}

#[test]
fn the_profiler_is_an_admins_event_stream_of_the_whole_database() {
    let sse = ("accept", "text/event-stream");
    let admin = ("authorization", "Bearer owner");
    let profile = data_of(parse("GET", "/.settings/profile.json?ns=db", &[sse, admin]));
    assert!(profile.profile && profile.stream);
    assert!(profile.target.path.is_root());
    assert_eq!(refuse("GET", "/.settings/profile.json", &[sse]).0, 401);
    assert_eq!(refuse("GET", "/.settings/profile.json", &[admin]).0, 400);
    assert_eq!(
        refuse("PUT", "/.settings/profile.json", &[sse, admin]).0,
        405
    );
    let ordered = "/.settings/profile.json?orderBy=%22%24key%22&limitToFirst=1";
    assert_eq!(refuse("GET", ordered, &[sse, admin]).0, 400);
    // A data path of that name is not the profiler.
    assert!(!data_of(parse("GET", "/settings/profile.json", &[sse])).profile);
}

#[test]
fn a_data_request_carries_the_address_its_transport_saw() {
    let address: std::net::IpAddr = "2001:db8::7".parse().expect("an IPv6 address");
    for accept in ["*/*", "text/event-stream"] {
        let mut seen = parts("GET", "/a.json?ns=db", &[("accept", accept)]);
        seen.extensions.insert(PeerAddress(address));
        let data =
            data_of(parse_request(&seen, &AuthConfig::development(), "default").expect("valid"));
        assert_eq!(data.address, Some(address), "{accept}");
    }
    // (X-Forwarded-For is no proxy's word to take.)
    let forwarded = ("x-forwarded-for", "198.51.100.1");
    assert_eq!(data_of(parse("GET", "/a.json", &[forwarded])).address, None);
}
