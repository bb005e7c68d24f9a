//! The settings of a running server (`ServeConfig`), as the command line, the `HEARTH_*`
//! variables and the config file give them: read by both roles and the server, and reading
//! nothing of a role.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hearth_rules::Rules;

pub use hearth_audit::{
    DEFAULT_RETENTION_DAYS as DEFAULT_AUDIT_RETENTION_DAYS,
    MAX_RETENTION_DAYS as MAX_AUDIT_RETENTION_DAYS,
};
use hearth_auth::jwks::JwksSource;
use hearth_auth::AuthConfig;
use hearth_net::budget::SharedBudgets;
use hearth_net::tls::TlsCerts;
use hearth_persist::PersistConfig;
pub use hearth_triggers as triggers;
pub use hearth_triggers::ServerTriggers;

/// Everything `hearth serve` was told, resolved to concrete values.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Addresses to listen on (all with the same port).
    pub listen: Vec<SocketAddr>,
    pub data_dir: PathBuf,
    pub threads: usize,
    /// Whether `threads` was asked for (`--threads`) rather than defaulted: a data directory
    /// created with another shard count is then refused instead of followed.
    pub threads_from_flag: bool,
    /// Emulator-compatible mode: `owner` and unsigned mock tokens are accepted.
    pub dev: bool,
    /// How often the server pings each WebSocket.
    pub ping_interval: Duration,
    /// A connection from which nothing (not even a pong) arrived for this long is dead; its
    /// onDisconnect queue runs.
    pub idle_timeout: Duration,
    /// The namespace used when a request names none.
    pub default_namespace: String,
    /// How often a REST event stream sends a `keep-alive` event.
    pub sse_keep_alive: Duration,
    /// Credentials the server accepts.
    pub auth: AuthConfig,
    /// Where the Firebase ID token keys are fetched from, and kept fresh (`jwks`); the keys
    /// land in `auth.firebase_keys`.
    pub firebase_jwks: Option<JwksSource>,
    /// Where the App Check keys are fetched from, and kept fresh; the keys land in
    /// `auth.app_check`'s fetched set.
    pub app_check_jwks: Option<JwksSource>,
    /// Whether a database that says nothing of App Check enforces it (`--app-check-enforce`).
    pub app_check_enforced: bool,
    /// The rules every database starts with (`--rules`); without them a database is open in
    /// development mode and locked otherwise.
    pub default_rules: Option<Arc<Rules>>,
    /// Durability, snapshots and eviction.
    pub persist: PersistConfig,
    /// HTTP memory budgets and write timeout; one set of counters for all shards.
    pub http: SharedBudgets,
    /// The certificate of `https://` and `wss://` (`--tls-cert`, `--tls-key`); plain TCP
    /// without it. Shared with whoever reloads it.
    pub tls: Option<Arc<TlsCerts>>,
    /// Where `/metrics` is served and to whom.
    pub metrics: MetricsConfig,
    /// Volatile ticks per second: how often changes under `.volatile` paths are pushed
    /// (`owner::volatile`, at most `MAX_VOLATILE_HZ`).
    pub volatile_hz: u32,
    /// Bytes of serialized REST answers each shard keeps (`--rest-cache-mib`, `rest::cache`);
    /// 0 serializes every answer.
    pub rest_cache_bytes: usize,
    /// Where WebTransport sessions are served (`--webtransport-listen`, UDP), if anywhere.
    pub webtransport_listen: Option<SocketAddr>,
    /// This node's place in a cluster (`--cluster-etcd`): writes are acknowledged only for
    /// databases it holds a valid claim on (fencing, `cluster/`). `None`: a single node
    /// that owns every database, as without a cluster.
    pub cluster: Option<hearth_cluster::Placement>,
    /// Whether each edge sends its plain TCP sockets' bytes in batches through io_uring
    /// (`--io-uring-sends`, `edge::uring`) rather than with one `write` per connection.
    pub io_uring_sends: bool,
    /// The other nodes of a cluster and the link's secret (`--cluster-peers`, `peer`).
    pub peers: Option<Arc<hearth_peer::ClusterConfig>>,
    /// Database triggers: the registry the shards share and, with `--functions-emulator`,
    /// where their changes are delivered.
    pub triggers: hearth_triggers::ServerTriggers,
    /// The audit trail (docs/audit.md): whether a database that says nothing of it is
    /// audited, and how long its entries are kept.
    pub audit: AuditConfig,
}

/// The audit trail's settings (`--audit`, `--audit-retention-days`) and, once the server has
/// opened its data directory, the trail itself.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// Whether a database that sets nothing is audited.
    pub by_default: bool,
    /// Days a database that sets nothing keeps its entries.
    pub retention_days: u32,
    /// The trail's thread: `None` without a data directory (`--durability none`), where no
    /// database is audited.
    pub trail: Option<hearth_audit::AuditTrail>,
}

impl Default for AuditConfig {
    fn default() -> AuditConfig {
        AuditConfig {
            by_default: false,
            retention_days: hearth_audit::DEFAULT_RETENTION_DAYS,
            trail: None,
        }
    }
}

impl ServeConfig {
    pub fn for_tests(listen: SocketAddr) -> ServeConfig {
        ServeConfig {
            listen: vec![listen],
            data_dir: PathBuf::from("hearth-data"),
            threads: 1,
            threads_from_flag: false,
            dev: true,
            ping_interval: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            default_namespace: DEFAULT_NAMESPACE.to_owned(),
            sse_keep_alive: DEFAULT_SSE_KEEP_ALIVE,
            auth: AuthConfig {
                dev: true,
                ..AuthConfig::default()
            },
            firebase_jwks: None,
            app_check_jwks: None,
            app_check_enforced: false,
            default_rules: None,
            persist: PersistConfig::memory(),
            http: SharedBudgets::default(),
            tls: None,
            metrics: MetricsConfig::default(),
            volatile_hz: DEFAULT_VOLATILE_HZ,
            rest_cache_bytes: hearth_ground::rest::cache::DEFAULT_REST_CACHE_BYTES,
            webtransport_listen: None,
            cluster: None,
            io_uring_sends: false,
            peers: None,
            triggers: hearth_triggers::ServerTriggers::default(),
            audit: AuditConfig::default(),
        }
    }
}

/// The namespace of requests that name none (for example `http://localhost:9000` with no `ns`).
pub const DEFAULT_NAMESPACE: &str = "default";

/// The keep-alive period of REST event streams, as production uses (spec §15.6).
pub const DEFAULT_SSE_KEEP_ALIVE: Duration = Duration::from_secs(30);

/// Where metrics are served and to whom (`hearth serve --metrics-listen`, `--metrics-public`).
#[derive(Debug, Clone, Default)]
pub struct MetricsConfig {
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address, to anyone who can reach
    /// it, and `/metrics` no longer on the main port.
    pub listen: Option<SocketAddr>,
    /// Serve `/metrics` on the main port without a credential (otherwise admins only).
    pub public: bool,
}

/// Ticks per second when `--volatile-hz` is not given.
pub const DEFAULT_VOLATILE_HZ: u32 = 30;

/// The most ticks per second `--volatile-hz` accepts: past it a tick costs more in wake-ups
/// and small writes than coalescing saves, and 120 already beats any display's refresh rate.
pub const MAX_VOLATILE_HZ: u32 = 120;
