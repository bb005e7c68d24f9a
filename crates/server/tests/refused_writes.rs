//! A REST write that no rule could allow is refused before its body is read: the answer does
//! not wait for the body, and a body that is not even JSON gets the same `401`.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use hearth_server::{ServeConfig, Server};

fn server(rules: Option<&str>) -> Server {
    let mut config = ServeConfig::for_tests(SocketAddr::from(([127, 0, 0, 1], 0)));
    // Without --dev and without rules, a database is locked.
    config.dev = false;
    config.default_rules =
        rules.map(|text| Arc::new(hearth_rules::Rules::parse(text).expect("valid rules")));
    Server::start(config).expect("the server starts")
}

/// Sends a request head announcing a large body and only its first bytes, then waits for the
/// answer: only a server that answers before reading the body answers at all.
fn announce(address: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("HTTP connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("a read timeout");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\nConnection: close\r\n\r\n[1,1,1,"
    );
    stream.write_all(head.as_bytes()).expect("the head is sent");
    let mut answer = vec![0u8; 4096];
    let read = stream.read(&mut answer).expect("an answer before the body");
    common::status_and_body(&String::from_utf8_lossy(&answer[..read]))
}

/// Production's answer, pretty-printed as it prints errors.
const DENIED: &str = "{\n  \"error\" : \"Permission denied\"\n}\n";

#[test]
fn locked_databases_refuse_anonymous_writes_before_their_body() {
    let server = server(None);
    for (method, path) in [("PUT", "/a.json"), ("POST", "/a.json"), ("PATCH", "/.json")] {
        assert_eq!(
            announce(server.address, method, path),
            (401, DENIED.to_owned()),
            "{method} {path}"
        );
        // Not JSON at all: the body is never parsed.
        assert_eq!(
            common::http(server.address, method, path, None, "not json"),
            (401, DENIED.to_owned()),
            "{method} {path}"
        );
    }
    // An admin's write still reads and parses its body.
    assert_eq!(
        common::http(server.address, "PUT", "/a.json", Some("owner"), "not json").0,
        400
    );
    assert_eq!(
        common::http(server.address, "PUT", "/a.json", Some("owner"), "[1,2]"),
        (200, "[1,2]".to_owned())
    );
    server.stop();
}

#[test]
fn rules_refuse_early_only_where_no_data_could_be_allowed() {
    let server = server(Some(
        r#"{"rules": {"open": {".write": "newData.val() == 1"}, "users": {"$uid": {".write": "auth != null && auth.uid == $uid"}}}}"#,
    ));
    assert_eq!(
        announce(server.address, "PUT", "/users/alice.json"),
        (401, DENIED.to_owned())
    );
    assert_eq!(
        announce(server.address, "PATCH", "/users.json"),
        (401, DENIED.to_owned())
    );
    // Data decides at /open: the body is read and checked.
    assert_eq!(
        common::http(server.address, "PUT", "/open.json", None, "2"),
        (401, DENIED.to_owned())
    );
    assert_eq!(
        common::http(server.address, "PUT", "/open.json", None, "not json").0,
        400
    );
    assert_eq!(
        common::http(server.address, "PUT", "/open.json", None, "1"),
        (200, "1".to_owned())
    );
    server.stop();
}
