//! After a restart, a database that its snapshot fully covers stays on disk until its first
//! use, and both the start and the load say so in the log.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use hearth_server::persist::{Durability, PersistConfig};
use hearth_server::{ServeConfig, Server};

fn config(dir: &Path) -> ServeConfig {
    let mut config = ServeConfig::for_tests(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.data_dir = dir.to_owned();
    config.persist = PersistConfig {
        durability: Durability::Strict,
        ..PersistConfig::default()
    };
    config
}

fn http(address: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    common::http(address, method, path, Some("owner"), body)
}

#[test]
fn a_covered_database_is_loaded_on_first_use_after_a_restart() {
    let captured = common::CapturedLog::install();
    let dir = std::env::temp_dir().join(format!("hearth-lazy-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    let server = Server::start(config(&dir)).expect("the server starts");
    for ns in ["cold", "warm"] {
        let path = format!("/a.json?ns={ns}");
        assert_eq!(http(server.address, "PUT", &path, "[1, 2]").0, 200);
    }
    // A graceful stop snapshots the databases written in this run.
    server.stop();

    let server = Server::start(config(&dir)).expect("the server starts again");
    let start = captured.text();
    assert!(
        start.contains("databases_loaded=0 databases_on_disk=2"),
        "both databases stay on disk at start: {start}"
    );
    assert!(!start.contains("database loaded from its snapshot"));
    assert_eq!(
        http(server.address, "GET", "/a.json?ns=warm", ""),
        (200, "[1,2]".to_owned())
    );
    // The load is logged on the shard's thread before it answers: no wait is needed.
    let after = captured.text();
    let loads: Vec<&str> = after
        .lines()
        .filter(|line| line.contains("database loaded from its snapshot"))
        .collect();
    assert_eq!(loads.len(), 1, "only the database in use: {after}");
    assert!(loads[0].contains("namespace=\"warm\""), "{}", loads[0]);
    assert_eq!(
        http(server.address, "GET", "/a.json?ns=cold", ""),
        (200, "[1,2]".to_owned()),
        "the other one loads just as well when it is used"
    );
    server.stop();
    let _ = std::fs::remove_dir_all(dir);
}
