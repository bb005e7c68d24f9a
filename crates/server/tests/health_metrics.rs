//! `/healthz`, `/readyz` and who may read `/metrics`, against the running server: ready until a
//! disk failure makes a shard read-only, alive throughout; `/metrics` for admins on the main
//! port, for anyone with `--metrics-public` or on `--metrics-listen` (and then not on the main
//! port).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

mod common;

use hearth_server::auth::AuthConfig;
use hearth_server::budget::HttpBudgets;
use hearth_server::config::MetricsConfig;
use hearth_server::persist::{Durability, PersistConfig};
use hearth_server::{ServeConfig, Server};
use hearth_store::{Fault, FaultPoint, FaultRule, FaultStorage};
use serde_json::Value;

fn local() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON: {body}"))
}

/// The value of the unlabelled sample `name` in exposition text.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .find_map(|value| value.parse().ok())
}

#[test]
fn readyz_turns_503_after_a_disk_failure_and_healthz_stays_200() {
    let faults = Arc::new(FaultStorage::new());
    let dir = std::env::temp_dir().join(format!("hearth-readyz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = ServeConfig::for_tests(local());
    config.data_dir = dir.clone();
    config.persist = PersistConfig {
        durability: Durability::Strict,
        fault_storage: Some(faults.clone()),
        ..PersistConfig::default()
    };
    let server = Server::start(config).expect("the server starts");
    let address = server.address;

    let (status, body) = common::http(address, "GET", "/readyz", None, "");
    assert_eq!((status, json(&body)["status"].clone()), (200, "ok".into()));
    let (status, _) = common::http(address, "PUT", "/a.json?ns=disk", None, "1");
    assert_eq!(status, 200, "a durable write");

    faults.inject(FaultRule::always(FaultPoint::Sync, Fault::Io));
    // Its answer is whatever a failed write gets; the failure is recorded before it.
    let _ = common::http(address, "PUT", "/a.json?ns=disk", None, "2");
    let (status, body) = common::http(address, "GET", "/readyz", None, "");
    assert_eq!(status, 503, "{body}");
    let body = json(&body);
    assert_eq!(body["status"], "read_only", "{body}");
    assert!(
        body["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("injected EIO")),
        "the reason names the failure: {body}"
    );
    let (status, body) = common::http(address, "GET", "/healthz", None, "");
    assert_eq!((status, body.as_str()), (200, "{\"status\":\"ok\"}"));

    let (status, text) = common::http(address, "GET", "/metrics", Some("owner"), "");
    assert_eq!(status, 200, "{text}");
    assert_eq!(sample(&text, "hearth_ready"), Some(0.0), "{text}");
    assert_eq!(
        sample(&text, "hearth_shard_read_only{shard=\"0\"}"),
        Some(1.0)
    );
    server.stop();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn metrics_on_the_main_port_are_for_admins_unless_public() {
    let mut config = ServeConfig::for_tests(local());
    config.auth = AuthConfig {
        dev: false,
        admin_token: Some("s3cret".to_owned()),
        ..AuthConfig::default()
    };
    config.dev = false;
    let server = Server::start(config.clone()).expect("the server starts");
    let address = server.address;
    let (status, body) = common::http(address, "GET", "/metrics", None, "");
    assert_eq!(status, 401, "{body}");
    let (status, _) = common::http(address, "GET", "/metrics", Some("wrong"), "");
    assert_eq!(status, 401);
    let (status, _) = common::http(address, "GET", "/metrics", Some("owner"), "");
    assert_eq!(status, 401, "owner is an admin only with --dev");
    let (status, text) = common::http(address, "GET", "/metrics", Some("s3cret"), "");
    assert_eq!(status, 200);
    assert_eq!(sample(&text, "hearth_ready"), Some(1.0), "{text}");
    let (status, _) = common::http(address, "POST", "/metrics", Some("s3cret"), "");
    assert_eq!(status, 405);
    let (status, _) = common::http(address, "GET", "/readyz", None, "");
    assert_eq!(status, 200, "health needs no credential");
    server.stop();

    config.metrics.public = true;
    let server = Server::start(config).expect("the server starts");
    let (status, _) = common::http(server.address, "GET", "/metrics", None, "");
    assert_eq!(status, 200, "--metrics-public");
    server.stop();
}

#[test]
fn metrics_listen_serves_there_and_not_on_the_main_port() {
    let mut config = ServeConfig::for_tests(local());
    config.metrics = MetricsConfig {
        listen: Some(local()),
        public: false,
    };
    let server = Server::start(config).expect("the server starts");
    let metrics = server.metrics_address.expect("the metrics address");
    assert_ne!(metrics.port(), server.address.port());

    let (status, text) = common::http(metrics, "GET", "/metrics", None, "");
    assert_eq!(status, 200, "open on the metrics address");
    assert_eq!(sample(&text, "hearth_shards"), Some(1.0), "{text}");
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            common::http(metrics, "GET", path, None, "").0,
            200,
            "{path}"
        );
        let main = server.address;
        assert_eq!(common::http(main, "GET", path, None, "").0, 200, "{path}");
    }
    let (status, _) = common::http(metrics, "GET", "/.json", None, "");
    assert_eq!(status, 404, "the metrics address serves no data");
    let (status, body) = common::http(server.address, "GET", "/metrics", Some("owner"), "");
    assert_eq!(
        status, 404,
        "not on the main port, even for an admin: {body}"
    );
    server.stop();
}

#[test]
fn health_and_metrics_answer_while_the_answer_budget_is_spent() {
    let mut config = ServeConfig::for_tests(local());
    // No room for any answer: every REST request is refused with 503.
    config.http = Arc::new(HttpBudgets::new(1024, 0, Duration::from_secs(5)));
    let server = Server::start(config).expect("the server starts");
    let address = server.address;
    let (status, _) = common::http(address, "GET", "/.json", None, "");
    assert_eq!(status, 503, "the budget is spent");
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            common::http(address, "GET", path, None, "").0,
            200,
            "{path}"
        );
    }
    let (status, text) = common::http(address, "GET", "/metrics", Some("owner"), "");
    assert_eq!(status, 200);
    let refused = "hearth_http_refused_total{reason=\"answers_busy\"}";
    assert_eq!(sample(&text, refused), Some(1.0), "{text}");
    server.stop();
}
