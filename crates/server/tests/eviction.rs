//! Idle databases are snapshotted, dropped from memory and loaded again on their next use,
//! with their data and their rules; a restart recovers them too.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hearth_server::persist::{Durability, PersistConfig};
use hearth_server::{ServeConfig, Server};
use hearth_store::SnapshotPolicy;

fn config(dir: &Path) -> ServeConfig {
    let mut config = ServeConfig::for_tests(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.data_dir = dir.to_owned();
    config.persist = PersistConfig {
        durability: Durability::Strict,
        evict_idle: Some(Duration::from_millis(200)),
        snapshots: SnapshotPolicy {
            interval_ms_min: 0,
            ..SnapshotPolicy::default()
        },
        ..PersistConfig::default()
    };
    config
}

fn http(address: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    common::http(address, method, path, Some("owner"), body)
}

const EVICTED: [&str; 2] = [
    "idle databases evicted from memory",
    r#"databases=["idle"]"#,
];
const LOADED: [&str; 2] = ["database loaded from its snapshot", r#"namespace="idle""#];

fn snapshots(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("shard-0"))
        .expect("the shard directory")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("snap-idle-"))
        .collect();
    names.sort();
    names
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hearth-eviction-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn an_idle_database_is_evicted_and_loaded_again_with_its_data_and_rules() {
    let log = common::CapturedLog::install();
    let dir = temp_dir();
    let server = Server::start(config(&dir)).expect("the server starts");
    let address = server.address;
    let rules = r#"{"rules": {".read": true, ".write": true, "locked": {".write": false}}}"#;
    assert_eq!(
        http(address, "PUT", "/.settings/rules.json?ns=idle", rules).0,
        200
    );
    assert_eq!(
        http(address, "PUT", "/a.json?ns=idle", r#"{"b": [1, 2]}"#),
        (200, r#"{"b":[1,2]}"#.to_owned())
    );
    // The maintenance tick runs every second: the first snapshots, a later one evicts. A
    // loaded machine may be slower; wait boundedly for the eviction to be logged.
    let deadline = Instant::now() + Duration::from_secs(20);
    while log.count(&EVICTED) == 0 {
        assert!(Instant::now() < deadline, "the idle database was evicted");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(snapshots(&dir).len(), 1, "evicted after its one snapshot");
    assert_eq!(
        log.count(&LOADED),
        0,
        "not loaded again before its next use"
    );
    assert_eq!(
        http(address, "GET", "/a.json?ns=idle", ""),
        (200, r#"{"b":[1,2]}"#.to_owned()),
        "loaded again with its data"
    );
    assert_eq!(log.count(&LOADED), 1, "loaded from its snapshot once");
    assert_eq!(
        http(address, "GET", "/.settings/rules.json?ns=idle", ""),
        (200, rules.to_owned()),
        "and its rules"
    );
    assert_eq!(
        http(address, "PUT", "/a/c.json?ns=idle", "3").0,
        200,
        "it takes writes again"
    );
    server.stop();

    let server = Server::start(config(&dir)).expect("the server starts again");
    assert_eq!(
        http(server.address, "GET", "/a.json?ns=idle", ""),
        (200, r#"{"b":[1,2],"c":3}"#.to_owned())
    );
    server.stop();
    let _ = std::fs::remove_dir_all(dir);
}
