//! The options of `hearth serve` ([`ServeArgs`]), their enums, and the persistence settings
//! they make.

use std::path::PathBuf;
use std::time::Duration;

use hearth_server::budget;
use hearth_server::persist::{Durability, PersistConfig};
use hearth_store::SnapshotPolicy;

use crate::logging::LogFormat;

/// A mebibyte: the budgets and the cache are given in MiB.
pub(crate) const MIB: usize = 1024 * 1024;

/// The options of `hearth serve`. Each also has a `HEARTH_*` variable and a config-file key,
/// given to every argument by `layers` (an `env` written here must be the name it would get).
#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// A TOML file with settings for any of these options, keyed by their long names
    /// (`data-dir = "/var/lib/hearth"`, `jwt-keys = ["a.pem", "b.pem"]`).
    #[arg(long, env = "HEARTH_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Print the settings in effect as TOML, each with where it came from (flag, env, file or
    /// default; secrets shown as `<hidden>`), and exit.
    #[arg(long)]
    pub(crate) print_config: bool,
    /// Log lines as text, or as one JSON object per line.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
    /// Which log events are written, in RUST_LOG syntax (`debug`, `hearth_server=debug,info`).
    /// Without it, RUST_LOG is read, and without that, `info`.
    #[arg(long)]
    pub(crate) log_level: Option<String>,
    /// Address to listen on (`host:port`), for WebSocket and HTTP. `localhost` binds both
    /// 127.0.0.1 and ::1.
    #[arg(long, default_value = "localhost:9000", env = "HEARTH_LISTEN")]
    pub(crate) listen: String,
    /// Directory for the data: a write-ahead log and snapshots per shard. Created if missing;
    /// locked while the server runs.
    #[arg(long, default_value = "./hearth-data", env = "HEARTH_DATA_DIR")]
    pub(crate) data_dir: PathBuf,
    /// When a write is acknowledged. strict: after its log record is synced to disk (no
    /// acknowledged write is ever lost, and no client sees a write before it is durable).
    /// batch: at once, with the log written and synced every --sync-interval-ms (a crash may
    /// lose the writes of the last interval). none: memory only, nothing is written to disk.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Strict, env = "HEARTH_DURABILITY")]
    pub(crate) durability: DurabilityArg,
    /// With --durability batch: the longest time between two syncs of the log.
    #[arg(long, default_value_t = 10)]
    pub(crate) sync_interval_ms: u64,
    /// Snapshot a database once this many MiB of log records accumulated for it.
    #[arg(long, default_value_t = 64)]
    pub(crate) snapshot_wal_mib: u64,
    /// Snapshot a database with new records at least this often (seconds).
    #[arg(long, default_value_t = 600)]
    pub(crate) snapshot_max_age_secs: u64,
    /// Never snapshot the same database more often than this (seconds).
    #[arg(long, default_value_t = 10)]
    pub(crate) snapshot_min_interval_secs: u64,
    /// Drop a database from memory after this many seconds without clients or requests (it
    /// is snapshotted first and loaded again on its next use); 0 keeps every database loaded.
    #[arg(long, default_value_t = 600)]
    pub(crate) evict_idle_secs: u64,
    /// Shards (threads, one per core). Defaults to the number of cores, or to the shard count
    /// of an existing data directory.
    #[arg(long, env = "HEARTH_THREADS")]
    pub(crate) threads: Option<usize>,
    /// Development mode, compatible with the Firebase emulator: accepts the `owner` token and
    /// unsigned mock tokens, creates databases on first use, and leaves rules open.
    #[arg(long)]
    pub(crate) dev: bool,
    /// Seconds between WebSocket pings to each client.
    #[arg(long, default_value_t = 20)]
    pub(crate) ping_interval_secs: u64,
    /// Seconds of silence (no frame, no pong) after which a connection counts as dead.
    #[arg(long, default_value_t = 60)]
    pub(crate) idle_timeout_secs: u64,
    /// The most MiB of HTTP request bodies held in memory at once while they arrive, over all
    /// connections. A body that would pass it is refused with 503, one larger than it with 413.
    #[arg(long, default_value_t = budget::DEFAULT_BODY_BUDGET_BYTES / MIB, env = "HEARTH_BODY_BUDGET_MIB")]
    pub(crate) body_budget_mib: usize,
    /// The most MiB of answers held in memory that their clients have not read yet, over all
    /// connections: REST answers, event-stream chunks and WebSocket pushes waiting for their
    /// socket. Past it, new REST answers are refused with 503, and a WebSocket connection whose
    /// push does not fit is closed (1008, as a slow reader).
    #[arg(long, default_value_t = budget::DEFAULT_ANSWER_BUDGET_BYTES / MIB, env = "HEARTH_ANSWER_BUDGET_MIB")]
    pub(crate) answer_budget_mib: usize,
    /// Seconds an HTTP answer or a WebSocket connection's queued pushes may make no progress
    /// into the socket (the client reads nothing) before the connection is closed.
    #[arg(long, default_value_t = budget::DEFAULT_HTTP_WRITE_TIMEOUT.as_secs(), env = "HEARTH_HTTP_WRITE_TIMEOUT_SECS")]
    pub(crate) http_write_timeout_secs: u64,
    /// Seconds between `keep-alive` events on REST event streams (server-sent events).
    #[arg(long, default_value_t = 30)]
    pub(crate) sse_keep_alive_secs: u64,
    /// Ticks per second of volatile paths (`".volatile": true` in the rules): changes there
    /// are pushed once per tick, each listener getting the newest value of each changed path,
    /// and their writers' acknowledgements follow. From 1 to 120.
    #[arg(long, default_value_t = hearth_server::DEFAULT_VOLATILE_HZ, env = "HEARTH_VOLATILE_HZ",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(hearth_server::MAX_VOLATILE_HZ)))]
    pub(crate) volatile_hz: u32,
    /// MiB of serialized REST answers each shard keeps for reads that come again (answers of
    /// 1 KiB and more; each served only while the data it shows is unchanged, and only after
    /// the caller's access is checked). 0 serializes every answer.
    #[arg(long, default_value_t = hearth_server::DEFAULT_REST_CACHE_BYTES / MIB, env = "HEARTH_REST_CACHE_MIB")]
    pub(crate) rest_cache_mib: usize,
    /// Send each core's WebSocket bytes (plain TCP) in batches through io_uring: the writes of
    /// one batch from an owner, one log sync's release or one burst of requests leave in one
    /// system call instead of one `write` per connection (about 14% less server CPU per push,
    /// BENCHMARKS.md §11). `false` writes each connection's bytes with its own `write`. Falls
    /// back to plain writes when the kernel refuses io_uring.
    #[arg(long, env = "HEARTH_IO_URING_SENDS", default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) io_uring_sends: bool,
    /// Rules every database starts with (Firebase `database.rules.json` format). Without it,
    /// databases are open with --dev and locked (admins only) otherwise.
    #[arg(long, env = "HEARTH_RULES")]
    pub(crate) rules: Option<PathBuf>,
    /// A Firebase project file (`firebase.json`) to read as the Firebase emulator does: its
    /// `database` rules file stands for --rules, and `emulators.database` `host` and `port`
    /// for --listen, where those are not given.
    #[arg(long)]
    pub(crate) firebase_json: Option<PathBuf>,
    /// A secret that grants admin access (rules bypassed), sent as a bearer token or as the
    /// credential of `auth`/`gauth`.
    #[arg(long, env = "HEARTH_ADMIN_TOKEN", hide_env_values = true)]
    pub(crate) admin_token: Option<String>,
    /// Secret for HS256-signed tokens.
    #[arg(long, env = "HEARTH_JWT_SECRET", hide_env_values = true)]
    pub(crate) jwt_secret: Option<String>,
    /// Public keys for RS256/ES256 tokens: a PEM file or a JWKS file (repeatable).
    #[arg(long)]
    pub(crate) jwt_keys: Vec<PathBuf>,
    /// Accept Firebase Authentication ID tokens of this project (issuer and audience are
    /// checked); the signing keys are fetched from --firebase-jwks-url and kept fresh.
    #[arg(long, env = "HEARTH_FIREBASE_PROJECT")]
    pub(crate) firebase_project: Option<String>,
    /// Where the signing keys of Firebase ID tokens are fetched from (a JWKS, or Google's
    /// X.509 key document), refreshed as its Cache-Control max-age says and cached in the data
    /// directory. Use https: plain http is accepted for tests and local proxies only.
    #[arg(long, env = "HEARTH_FIREBASE_JWKS_URL", requires = "firebase_project", default_value = hearth_server::jwks::GOOGLE_SECURETOKEN_JWKS_URL)]
    pub(crate) firebase_jwks_url: String,
    /// A JWKS file with the signing keys of Firebase ID tokens, used only when the URL cannot
    /// be fetched and nothing is cached (machines without internet).
    #[arg(long, env = "HEARTH_FIREBASE_JWKS", requires = "firebase_project")]
    pub(crate) firebase_jwks: Option<PathBuf>,
    /// Test knob: the shortest time between two fetches of the Firebase keys, whatever their
    /// max-age says (default 60 s). Lowered only by tests of key rotation.
    #[arg(long, hide = true, default_value_t = hearth_server::jwks::MIN_REFRESH.as_millis() as u64)]
    pub(crate) firebase_jwks_min_refresh_ms: u64,
    /// Verify Firebase App Check tokens of the project with this number (issuer and audience
    /// are checked; the keys are fetched from --app-check-jwks-url and kept fresh). Without
    /// it App Check tokens are acknowledged and not checked (docs/app-check.md).
    #[arg(long, env = "HEARTH_APP_CHECK_PROJECT_NUMBER")]
    pub(crate) app_check_project_number: Option<String>,
    /// Where the App Check keys are fetched from, refreshed as its Cache-Control max-age says
    /// and cached in the data directory. Use https: plain http is for tests and local proxies.
    #[arg(long, env = "HEARTH_APP_CHECK_JWKS_URL", requires = "app_check_project_number", default_value = hearth_server::auth::app_check::APP_CHECK_JWKS_URL)]
    pub(crate) app_check_jwks_url: String,
    /// A JWKS file with the App Check keys, used only when the URL cannot be fetched and
    /// nothing is cached (machines without internet).
    #[arg(
        long,
        env = "HEARTH_APP_CHECK_JWKS",
        requires = "app_check_project_number"
    )]
    pub(crate) app_check_jwks: Option<PathBuf>,
    /// Refuse clients without a valid App Check token on every database that does not say
    /// otherwise (`/.settings/appCheck.json`); without it, tokens are verified and counted
    /// only.
    #[arg(
        long,
        env = "HEARTH_APP_CHECK_ENFORCE",
        requires = "app_check_project_number"
    )]
    pub(crate) app_check_enforce: bool,
    /// Audit the writes of every database that does not say otherwise
    /// (`/.settings/audit.json`): each acknowledged write's time, path, uid, provider,
    /// transport, client address and granting rule, kept in `DATA_DIR/audit/` and read with
    /// `hearth audit query` (docs/audit.md). Needs a data directory.
    #[arg(long, env = "HEARTH_AUDIT")]
    pub(crate) audit: bool,
    /// Days the audit trail keeps a database's entries when its settings name none.
    #[arg(long, env = "HEARTH_AUDIT_RETENTION_DAYS", default_value_t = hearth_server::config::DEFAULT_AUDIT_RETENTION_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(hearth_server::config::MAX_AUDIT_RETENTION_DAYS)))]
    pub(crate) audit_retention_days: u32,
    /// Serve https:// and wss:// (on the same port, instead of http:// and ws://) with this
    /// certificate chain: a PEM file, the server's certificate first. Read again on SIGHUP.
    #[arg(long, env = "HEARTH_TLS_CERT", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1). Read again on SIGHUP.
    #[arg(long, env = "HEARTH_TLS_KEY", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Serve /metrics (Prometheus), /healthz and /readyz on this address (`host:port`) too,
    /// to anyone who can reach it, and /metrics no longer on the main port. Bind it to an
    /// address only your monitoring reaches.
    #[arg(long, env = "HEARTH_METRICS_LISTEN")]
    pub(crate) metrics_listen: Option<String>,
    /// Serve /metrics on the main port without a credential. Without it, the main port's
    /// /metrics needs the admin token as a bearer token (or `owner` with --dev).
    #[arg(long, env = "HEARTH_METRICS_PUBLIC")]
    pub(crate) metrics_public: bool,
    /// Serve WebTransport (HTTP/3, UDP) on this address (`host:port`) for volatile paths over
    /// datagrams (docs/volatile.md). With --tls-cert its certificate is used; without, a
    /// self-signed one valid for 13 days, whose SHA-256 the log shows for browsers to pin.
    /// SIGHUP renews it (the --tls-cert pair read again, or a new self-signed one).
    #[arg(long, env = "HEARTH_WEBTRANSPORT_LISTEN")]
    pub(crate) webtransport_listen: Option<String>,
    /// Join a cluster coordinated by the etcd at this URL (its client URL, e.g.
    /// `http://127.0.0.1:2379`; etcd 3.4 or later, through its JSON gateway): this node holds
    /// a lease there, and acknowledges writes only to databases it has claimed (docs/cluster.md).
    /// With --cluster-secret-file the nodes link to each other (on their --advertise
    /// addresses) and a node forwards the WebSocket clients, REST requests and event streams of
    /// a database another node owns to it; without, each node serves only the databases it owns and refuses writes to the
    /// others. Without this flag the server is a single node that owns every database.
    #[arg(long, requires_all = ["node_id", "advertise"], conflicts_with = "cluster_peers")]
    pub(crate) cluster_etcd: Option<String>,
    /// This node's id in the cluster (letters, digits, `-`, `_`, `.`; unique among the nodes),
    /// with --cluster-etcd or --cluster-peers.
    #[arg(long, env = "HEARTH_NODE_ID")]
    pub(crate) node_id: Option<String>,
    /// Where the other nodes of the cluster reach this one (`host:port`), published in etcd:
    /// with --cluster-secret-file this node's node-to-node link listens there (a port of its
    /// own, not --listen's).
    #[arg(long, requires = "cluster_etcd")]
    pub(crate) advertise: Option<String>,
    /// Seconds of the node's etcd lease: a node silent for this long loses its databases to
    /// the others. It acknowledges writes only within two thirds of it after etcd last
    /// confirmed the lease (at least 2).
    #[arg(long, default_value_t = DEFAULT_LEASE_TTL_SECS)]
    pub(crate) cluster_lease_ttl_secs: u64,
    /// Run as one node of a cluster with a static placement (docs/cluster-link.md): every
    /// node gets the same list of every node, itself included, as `ID=HOST:PORT,...`, where
    /// HOST:PORT is that node's node-to-node link. A database is owned by the listed node
    /// whose id scores highest for its name (rendezvous hashing); the others forward its
    /// WebSocket clients, REST requests and event streams there. Needs --node-id and --cluster-secret-file; not with
    /// --cluster-etcd (whose live nodes replace the list).
    #[arg(long, env = "HEARTH_CLUSTER_PEERS", value_delimiter = ',',
          requires_all = ["node_id", "cluster_secret_file"])]
    pub(crate) cluster_peers: Vec<String>,
    /// A file with the secret every node of the cluster shares (16 to 4096 bytes), for the
    /// node-to-node link of --cluster-peers or --cluster-etcd: a node proves it on the link's
    /// handshake, so that whoever reaches the link's port cannot act as any client. The link
    /// also needs either --cluster-tls-cert, --cluster-tls-key and --cluster-ca (mutual TLS)
    /// or --cluster-plaintext.
    #[arg(long, env = "HEARTH_CLUSTER_SECRET_FILE")]
    pub(crate) cluster_secret_file: Option<PathBuf>,
    /// This node's certificate for the node-to-node link (PEM, the node's own certificate
    /// first): issued by --cluster-ca, with a SAN DNS name equal to --node-id, usable as a
    /// TLS server and client certificate (docs/cluster-link.md). The link then runs over TLS
    /// 1.3 and both ends check each other's certificate. Read again on SIGHUP.
    #[arg(long, env = "HEARTH_CLUSTER_TLS_CERT")]
    pub(crate) cluster_tls_cert: Option<PathBuf>,
    /// The private key of --cluster-tls-cert (PEM: PKCS#8, PKCS#1 or SEC1). Read again on
    /// SIGHUP.
    #[arg(long, env = "HEARTH_CLUSTER_TLS_KEY")]
    pub(crate) cluster_tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM; several are all trusted): a node's link accepts
    /// only peers whose certificate it issued and that name the node they announce, and dials
    /// only peers whose certificate it issued for the node dialed. Read again on SIGHUP.
    #[arg(long, env = "HEARTH_CLUSTER_CA")]
    pub(crate) cluster_ca: Option<PathBuf>,
    /// Run the node-to-node link unencrypted, without certificates (the shared secret alone
    /// proves the peers): for tests on one machine, never across a network. Not with
    /// --cluster-tls-cert.
    #[arg(long, env = "HEARTH_CLUSTER_PLAINTEXT")]
    pub(crate) cluster_plaintext: bool,
    /// With --cluster-peers or --cluster-etcd: how an owner ships its write-ahead log to each database's
    /// follower (the runner-up of the placement). sync: with --durability strict a write is
    /// acknowledged once both nodes have it on disk; with etcd, a follower that is down or
    /// does not answer within 2 s is first taken out of the database's sync set in etcd (it
    /// may then not take the database over) and writes go on without it until it has caught
    /// up and is back in (docs/cluster.md). async: shipped, but acknowledged at the owner's
    /// durability: a failover may lose the writes of the last moments. off: nothing is
    /// shipped. Without a cluster it means nothing.
    #[arg(long, value_enum, default_value_t = ReplicationArg::Sync, env = "HEARTH_REPLICATION")]
    pub(crate) replication: ReplicationArg,
    /// Deliver database triggers to the Firebase Functions emulator at HOST:PORT. Cloud
    /// Functions code (firebase-functions v1 database.ref().onWrite and its kin, v2
    /// onValueWritten and its kin) registers its triggers with
    /// POST /.settings/functionTriggers.json, as the Functions emulator does by itself, and
    /// each change reaches its function once it is durable (docs/triggers.md).
    #[arg(long, env = "HEARTH_FUNCTIONS_EMULATOR")]
    pub(crate) functions_emulator: Option<String>,
    /// A triggers file (JSON): path patterns whose changes are delivered, at least once and
    /// in order per database, to an HTTP endpoint as CloudEvents or to a NATS JetStream
    /// subject, from an outbox in DATA_DIR/triggers (docs/triggers.md). Needs a data
    /// directory.
    #[arg(long, env = "HEARTH_TRIGGERS")]
    pub(crate) triggers: Option<std::path::PathBuf>,
}

/// `--cluster-lease-ttl-secs` when not given: a dead owner's databases are claimed again
/// within about this long, and a pause of a third of it already refuses writes.
const DEFAULT_LEASE_TTL_SECS: u64 = 5;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DurabilityArg {
    Strict,
    Batch,
    None,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReplicationArg {
    Sync,
    Async,
    Off,
}

impl From<ReplicationArg> for hearth_server::replica_messages::ReplicationMode {
    fn from(arg: ReplicationArg) -> Self {
        use hearth_server::replica_messages::ReplicationMode;
        match arg {
            ReplicationArg::Sync => ReplicationMode::Sync,
            ReplicationArg::Async => ReplicationMode::Async,
            ReplicationArg::Off => ReplicationMode::Off,
        }
    }
}

impl From<DurabilityArg> for Durability {
    fn from(arg: DurabilityArg) -> Durability {
        match arg {
            DurabilityArg::Strict => Durability::Strict,
            DurabilityArg::Batch => Durability::Batch,
            DurabilityArg::None => Durability::None,
        }
    }
}

pub(crate) fn persist_config(args: &ServeArgs) -> PersistConfig {
    PersistConfig {
        durability: args.durability.into(),
        sync_interval: Duration::from_millis(args.sync_interval_ms.max(1)),
        snapshots: SnapshotPolicy {
            wal_bytes_max: args.snapshot_wal_mib.max(1).saturating_mul(1024 * 1024),
            age_ms_max: args.snapshot_max_age_secs.max(1).saturating_mul(1000),
            interval_ms_min: args.snapshot_min_interval_secs.saturating_mul(1000),
        },
        evict_idle: (args.evict_idle_secs > 0).then(|| Duration::from_secs(args.evict_idle_secs)),
        fault_storage: None,
    }
}
