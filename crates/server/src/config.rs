//! The settings of a running server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything `hearth serve` was told, resolved to concrete values.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Addresses to listen on (all with the same port).
    pub listen: Vec<SocketAddr>,
    pub data_dir: PathBuf,
    pub threads: usize,
    /// Emulator-compatible mode: `owner` and unsigned mock tokens are accepted.
    pub dev: bool,
    /// How often the server pings each WebSocket.
    pub ping_interval: Duration,
    /// A connection from which nothing (not even a pong) arrived for this long is dead; its
    /// onDisconnect queue runs.
    pub idle_timeout: Duration,
    /// The namespace used when a request names none.
    pub default_namespace: String,
}

impl ServeConfig {
    pub fn for_tests(listen: SocketAddr) -> ServeConfig {
        ServeConfig {
            listen: vec![listen],
            data_dir: PathBuf::from("hearth-data"),
            threads: 1,
            dev: true,
            ping_interval: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            default_namespace: DEFAULT_NAMESPACE.to_owned(),
        }
    }
}

/// The namespace of requests that name none (for example `http://localhost:9000` with no `ns`).
pub const DEFAULT_NAMESPACE: &str = "default";
