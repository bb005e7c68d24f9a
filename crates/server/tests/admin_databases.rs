//! `GET /.admin/databases`: every database of every shard, loaded or only on disk, with its
//! size and clients; admins only.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use hearth_server::namespace::owner_shard;
use hearth_server::persist::{Durability, PersistConfig};
use hearth_server::{ServeConfig, Server};
use serde_json::{json, Value};

const SHARDS: usize = 3;

fn config(dir: &Path) -> ServeConfig {
    let mut config = ServeConfig::for_tests(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.data_dir = dir.to_owned();
    config.threads = SHARDS;
    config.persist = PersistConfig {
        durability: Durability::Strict,
        evict_idle: None,
        ..PersistConfig::default()
    };
    config
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hearth-admin-dbs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The listing, as an admin (`owner` in development mode) sees it.
fn listing(address: SocketAddr) -> Vec<Value> {
    let (status, body) = common::http(address, "GET", "/.admin/databases", Some("owner"), "");
    assert_eq!(status, 200, "{body}");
    let value: Value = serde_json::from_str(&body).expect("JSON");
    value["databases"].as_array().expect("a list").clone()
}

/// An event stream of `namespace`, open once its first event arrived.
fn open_stream(address: SocketAddr, namespace: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).expect("HTTP connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let request = format!(
        "GET /.json?ns={namespace} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer owner\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).expect("sent");
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("event: put") {
        let read = stream.read(&mut buffer).expect("the first event in time");
        assert!(read > 0, "the stream stays open");
        seen.extend_from_slice(&buffer[..read]);
    }
    stream
}

#[test]
fn databases_of_every_shard_are_listed_loaded_or_on_disk() {
    let dir = temp_dir();
    // On shards 2, 1, 0 and 2 of three (pinned in `namespace.rs`).
    let names = ["demo", "home-0-abc", "one", "six"];
    let server = Server::start(config(&dir)).expect("the server starts");
    for name in names {
        let body = json!({"items": {"a": name, "b": [1, 2, 3]}}).to_string();
        let path = format!("/.json?ns={name}");
        assert_eq!(
            common::http(server.address, "PUT", &path, Some("owner"), &body).0,
            200
        );
    }
    let shards: std::collections::BTreeSet<usize> =
        names.iter().map(|name| owner_shard(name, SHARDS)).collect();
    assert_eq!(shards.len(), SHARDS, "the names spread over every shard");
    let listed = listing(server.address);
    assert_eq!(listed.len(), names.len(), "{listed:?}");
    for entry in &listed {
        assert_eq!(entry["loaded"], true);
        assert_eq!(entry["clients"], 0);
        assert!(entry["bytes"].as_u64().is_some_and(|bytes| bytes > 20));
    }
    server.stop();

    // After a restart the databases stay on disk until their first use.
    let server = Server::start(config(&dir)).expect("the server starts again");
    let listed = listing(server.address);
    let mut sorted: Vec<&str> = names.to_vec();
    sorted.sort_unstable();
    let listed_names: Vec<&str> = listed
        .iter()
        .filter_map(|entry| entry["name"].as_str())
        .collect();
    assert_eq!(listed_names, sorted, "sorted by name");
    for entry in &listed {
        let name = entry["name"].as_str().unwrap_or_default();
        assert_eq!(entry["loaded"], false, "{entry}");
        assert_eq!(entry["shard"], owner_shard(name, SHARDS), "{entry}");
        assert!(
            entry["bytes"].as_u64().is_some_and(|bytes| bytes > 0),
            "a snapshot's size: {entry}"
        );
    }

    // A stream of `six` is one client, and loads it; `one` stays on disk.
    let stream = open_stream(server.address, "six");
    let listed = listing(server.address);
    let entry = |name: &str| {
        listed
            .iter()
            .find(|entry| entry["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(entry("six")["loaded"], true);
    assert_eq!(entry("six")["clients"], 1);
    assert_eq!(entry("one")["loaded"], false);
    drop(stream);
    server.stop();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn only_admins_may_list_databases() {
    let mut config = ServeConfig::for_tests(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.threads = 2;
    let server = Server::start(config).expect("the server starts");
    let address = server.address;
    let get = |bearer: Option<&str>| common::http(address, "GET", "/.admin/databases", bearer, "");
    assert_eq!(get(None).0, 401, "anonymous");
    assert_eq!(get(Some("not-a-token")).0, 401, "an invalid credential");
    // An unsigned development token of a user: {"alg":"none"} . {"sub":"ada","user_id":"ada"}
    let user = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZGEiLCJ1c2VyX2lkIjoiYWRhIn0.";
    assert_eq!(get(Some(user)).0, 403, "a user who is not an admin");
    assert_eq!(get(Some("owner")).0, 200);
    let (status, _) = common::http(address, "POST", "/.admin/databases", Some("owner"), "{}");
    assert_eq!(status, 405);
    let (status, _) = common::http(address, "GET", "/.admin/nothing", Some("owner"), "");
    assert_eq!(status, 404);
    // No request created a database.
    assert_eq!(get(Some("owner")).1, r#"{"databases":[]}"#);
    server.stop();
}
