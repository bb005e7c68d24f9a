//! The `hearth` command.

mod cluster_link;
mod config_file;
mod firebase_json;
mod layers;
mod logging;
#[cfg(test)]
mod options_table;
mod print_config;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use hearth_server::auth::AuthConfig;
use hearth_server::budget::{self, HttpBudgets};
use hearth_server::config::MetricsConfig;
use hearth_server::jwks::{FirebaseKeys, JwksSource};
use hearth_server::persist::{Durability, PersistConfig};
use hearth_server::rules_file::load_rules;
use hearth_server::tls::TlsCerts;
use hearth_server::{ServeConfig, Server, DEFAULT_NAMESPACE};
use hearth_store::SnapshotPolicy;
use tracing::{info, warn};

use crate::firebase_json::FirebaseJson;
use crate::logging::LogFormat;

const MIB: usize = 1024 * 1024;

#[derive(Parser)]
#[command(
    name = "hearth",
    version,
    about = "A self-hosted realtime JSON database that speaks the Firebase protocol"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server.
    Serve(Box<ServeArgs>),
    /// Check a security rules file, or get and set the rules of a running server.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Write a database as JSON (export form, priorities kept), from a stopped server's data
    /// directory or from a running server.
    Export(Box<hearth_tools::ExportArgs>),
    /// Replace a database with a JSON file, in a stopped server's data directory (atomic) or
    /// on a running server (member by member).
    Import(Box<hearth_tools::ImportArgs>),
    /// Read, write and watch the data of a running server.
    #[command(subcommand)]
    Data(hearth_tools::DataCommand),
    /// List the databases of a running server with their size and clients (admins only).
    Databases {
        /// The server's JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
    /// Write a consistent backup of a running server into a new directory
    /// (`POST /.admin/backup`, as an admin); the server keeps serving meanwhile.
    Backup(Box<hearth_tools::BackupArgs>),
    /// Turn a backup directory into a new data directory that `hearth serve` starts from.
    Restore(Box<hearth_tools::RestoreArgs>),
    /// Look at a cluster of Hearth nodes in its etcd.
    #[command(subcommand)]
    Cluster(ClusterCommand),
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// The nodes (address, lease, seconds left of it) and each claimed database's owner,
    /// follower and fencing epoch (the replication lag is in each owner's /metrics).
    Status {
        /// The etcd client URL (`http://127.0.0.1:2379`).
        #[arg(long)]
        etcd: String,
        /// JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Move one database to its follower while every node stays up (for maintenance of its
    /// owner, or to spread the load): the owner stops its writes for a moment, waits until
    /// the follower has every one, and hands its claim over; clients kept by other nodes
    /// follow it, the owner's own clients reconnect. Exits with 1 if it did not move.
    Move {
        /// The etcd client URL (`http://127.0.0.1:2379`).
        #[arg(long)]
        etcd: String,
        /// The database (namespace) to move.
        namespace: String,
        /// How long to wait for the follower's claim.
        #[arg(long, default_value_t = 30)]
        wait_secs: u64,
    },
}

#[derive(Subcommand)]
enum RulesCommand {
    /// Check a `database.rules.json` file; errors are printed with line and column.
    Check {
        /// The rules file.
        file: PathBuf,
    },
    /// Print the rules of a database of a running server (admins only).
    Get {
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
    /// Check a rules file as `rules check` does, then give it to a database of a running
    /// server (admins only).
    Set {
        /// The rules file.
        file: PathBuf,
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
}

/// The options of `hearth serve`. Each also has a `HEARTH_*` variable and a config-file key,
/// given to every argument by `layers` (an `env` written here must be the name it would get).
#[derive(clap::Args)]
struct ServeArgs {
    /// A TOML file with settings for any of these options, keyed by their long names
    /// (`data-dir = "/var/lib/hearth"`, `jwt-keys = ["a.pem", "b.pem"]`).
    #[arg(long, env = "HEARTH_CONFIG")]
    config: Option<PathBuf>,
    /// Print the settings in effect as TOML, each with where it came from (flag, env, file or
    /// default; secrets shown as `<hidden>`), and exit.
    #[arg(long)]
    print_config: bool,
    /// Log lines as text, or as one JSON object per line.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Which log events are written, in RUST_LOG syntax (`debug`, `hearth_server=debug,info`).
    /// Without it, RUST_LOG is read, and without that, `info`.
    #[arg(long)]
    log_level: Option<String>,
    /// Address to listen on (`host:port`), for WebSocket and HTTP. `localhost` binds both
    /// 127.0.0.1 and ::1.
    #[arg(long, default_value = "localhost:9000", env = "HEARTH_LISTEN")]
    listen: String,
    /// Directory for the data: a write-ahead log and snapshots per shard. Created if missing;
    /// locked while the server runs.
    #[arg(long, default_value = "./hearth-data", env = "HEARTH_DATA_DIR")]
    data_dir: PathBuf,
    /// When a write is acknowledged. strict: after its log record is synced to disk (no
    /// acknowledged write is ever lost, and no client sees a write before it is durable).
    /// batch: at once, with the log written and synced every --sync-interval-ms (a crash may
    /// lose the writes of the last interval). none: memory only, nothing is written to disk.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Strict, env = "HEARTH_DURABILITY")]
    durability: DurabilityArg,
    /// With --durability batch: the longest time between two syncs of the log.
    #[arg(long, default_value_t = 10)]
    sync_interval_ms: u64,
    /// Snapshot a database once this many MiB of log records accumulated for it.
    #[arg(long, default_value_t = 64)]
    snapshot_wal_mib: u64,
    /// Snapshot a database with new records at least this often (seconds).
    #[arg(long, default_value_t = 600)]
    snapshot_max_age_secs: u64,
    /// Never snapshot the same database more often than this (seconds).
    #[arg(long, default_value_t = 10)]
    snapshot_min_interval_secs: u64,
    /// Drop a database from memory after this many seconds without clients or requests (it
    /// is snapshotted first and loaded again on its next use); 0 keeps every database loaded.
    #[arg(long, default_value_t = 600)]
    evict_idle_secs: u64,
    /// Shards (threads, one per core). Defaults to the number of cores, or to the shard count
    /// of an existing data directory.
    #[arg(long, env = "HEARTH_THREADS")]
    threads: Option<usize>,
    /// Development mode, compatible with the Firebase emulator: accepts the `owner` token and
    /// unsigned mock tokens, creates databases on first use, and leaves rules open.
    #[arg(long)]
    dev: bool,
    /// Seconds between WebSocket pings to each client.
    #[arg(long, default_value_t = 20)]
    ping_interval_secs: u64,
    /// Seconds of silence (no frame, no pong) after which a connection counts as dead.
    #[arg(long, default_value_t = 60)]
    idle_timeout_secs: u64,
    /// The most MiB of HTTP request bodies held in memory at once while they arrive, over all
    /// connections. A body that would pass it is refused with 503, one larger than it with 413.
    #[arg(long, default_value_t = budget::DEFAULT_BODY_BUDGET_BYTES / MIB, env = "HEARTH_BODY_BUDGET_MIB")]
    body_budget_mib: usize,
    /// The most MiB of answers held in memory that their clients have not read yet, over all
    /// connections: REST answers, event-stream chunks and WebSocket pushes waiting for their
    /// socket. Past it, new REST answers are refused with 503, and a WebSocket connection whose
    /// push does not fit is closed (1008, as a slow reader).
    #[arg(long, default_value_t = budget::DEFAULT_ANSWER_BUDGET_BYTES / MIB, env = "HEARTH_ANSWER_BUDGET_MIB")]
    answer_budget_mib: usize,
    /// Seconds an HTTP answer or a WebSocket connection's queued pushes may make no progress
    /// into the socket (the client reads nothing) before the connection is closed.
    #[arg(long, default_value_t = budget::DEFAULT_HTTP_WRITE_TIMEOUT.as_secs(), env = "HEARTH_HTTP_WRITE_TIMEOUT_SECS")]
    http_write_timeout_secs: u64,
    /// Seconds between `keep-alive` events on REST event streams (server-sent events).
    #[arg(long, default_value_t = 30)]
    sse_keep_alive_secs: u64,
    /// Ticks per second of volatile paths (`".volatile": true` in the rules): changes there
    /// are pushed once per tick, each listener getting the newest value of each changed path,
    /// and their writers' acknowledgements follow. From 1 to 120.
    #[arg(long, default_value_t = hearth_server::DEFAULT_VOLATILE_HZ, env = "HEARTH_VOLATILE_HZ",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(hearth_server::MAX_VOLATILE_HZ)))]
    volatile_hz: u32,
    /// MiB of serialized REST answers each shard keeps for reads that come again (answers of
    /// 1 KiB and more; each served only while the data it shows is unchanged, and only after
    /// the caller's access is checked). 0 serializes every answer.
    #[arg(long, default_value_t = hearth_server::DEFAULT_REST_CACHE_BYTES / MIB, env = "HEARTH_REST_CACHE_MIB")]
    rest_cache_mib: usize,
    /// Send each core's WebSocket bytes (plain TCP) in batches through io_uring: the writes of
    /// one batch from an owner, one log sync's release or one burst of requests leave in one
    /// system call instead of one `write` per connection (about 14% less server CPU per push,
    /// BENCHMARKS.md §11). `false` writes each connection's bytes with its own `write`. Falls
    /// back to plain writes when the kernel refuses io_uring.
    #[arg(long, env = "HEARTH_IO_URING_SENDS", default_value_t = true, action = clap::ArgAction::Set)]
    io_uring_sends: bool,
    /// Rules every database starts with (Firebase `database.rules.json` format). Without it,
    /// databases are open with --dev and locked (admins only) otherwise.
    #[arg(long, env = "HEARTH_RULES")]
    rules: Option<PathBuf>,
    /// A Firebase project file (`firebase.json`) to read as the Firebase emulator does: its
    /// `database` rules file stands for --rules, and `emulators.database` `host` and `port`
    /// for --listen, where those are not given.
    #[arg(long)]
    firebase_json: Option<PathBuf>,
    /// A secret that grants admin access (rules bypassed), sent as a bearer token or as the
    /// credential of `auth`/`gauth`.
    #[arg(long, env = "HEARTH_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Secret for HS256-signed tokens.
    #[arg(long, env = "HEARTH_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
    /// Public keys for RS256/ES256 tokens: a PEM file or a JWKS file (repeatable).
    #[arg(long)]
    jwt_keys: Vec<PathBuf>,
    /// Accept Firebase Authentication ID tokens of this project (issuer and audience are
    /// checked); the signing keys are fetched from --firebase-jwks-url and kept fresh.
    #[arg(long, env = "HEARTH_FIREBASE_PROJECT")]
    firebase_project: Option<String>,
    /// Where the signing keys of Firebase ID tokens are fetched from (a JWKS, or Google's
    /// X.509 key document), refreshed as its Cache-Control max-age says and cached in the data
    /// directory. Use https: plain http is accepted for tests and local proxies only.
    #[arg(long, env = "HEARTH_FIREBASE_JWKS_URL", requires = "firebase_project", default_value = hearth_server::jwks::GOOGLE_SECURETOKEN_JWKS_URL)]
    firebase_jwks_url: String,
    /// A JWKS file with the signing keys of Firebase ID tokens, used only when the URL cannot
    /// be fetched and nothing is cached (machines without internet).
    #[arg(long, env = "HEARTH_FIREBASE_JWKS", requires = "firebase_project")]
    firebase_jwks: Option<PathBuf>,
    /// Test knob: the shortest time between two fetches of the Firebase keys, whatever their
    /// max-age says (default 60 s). Lowered only by tests of key rotation.
    #[arg(long, hide = true, default_value_t = hearth_server::jwks::MIN_REFRESH.as_millis() as u64)]
    firebase_jwks_min_refresh_ms: u64,
    /// Serve https:// and wss:// (on the same port, instead of http:// and ws://) with this
    /// certificate chain: a PEM file, the server's certificate first. Read again on SIGHUP.
    #[arg(long, env = "HEARTH_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1). Read again on SIGHUP.
    #[arg(long, env = "HEARTH_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve /metrics (Prometheus), /healthz and /readyz on this address (`host:port`) too,
    /// to anyone who can reach it, and /metrics no longer on the main port. Bind it to an
    /// address only your monitoring reaches.
    #[arg(long, env = "HEARTH_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// Serve /metrics on the main port without a credential. Without it, the main port's
    /// /metrics needs the admin token as a bearer token (or `owner` with --dev).
    #[arg(long, env = "HEARTH_METRICS_PUBLIC")]
    metrics_public: bool,
    /// Serve WebTransport (HTTP/3, UDP) on this address (`host:port`) for volatile paths over
    /// datagrams (docs/volatile.md). With --tls-cert its certificate is used; without, a
    /// self-signed one valid for 13 days, whose SHA-256 the log shows for browsers to pin.
    /// SIGHUP renews it (the --tls-cert pair read again, or a new self-signed one).
    #[arg(long, env = "HEARTH_WEBTRANSPORT_LISTEN")]
    webtransport_listen: Option<String>,
    /// Join a cluster coordinated by the etcd at this URL (its client URL, e.g.
    /// `http://127.0.0.1:2379`; etcd 3.4 or later, through its JSON gateway): this node holds
    /// a lease there, and acknowledges writes only to databases it has claimed (docs/cluster.md).
    /// With --cluster-secret-file the nodes link to each other (on their --advertise
    /// addresses) and a node forwards the WebSocket clients, REST requests and event streams of
    /// a database another node owns to it; without, each node serves only the databases it owns and refuses writes to the
    /// others. Without this flag the server is a single node that owns every database.
    #[arg(long, requires_all = ["node_id", "advertise"], conflicts_with = "cluster_peers")]
    cluster_etcd: Option<String>,
    /// This node's id in the cluster (letters, digits, `-`, `_`, `.`; unique among the nodes),
    /// with --cluster-etcd or --cluster-peers.
    #[arg(long, env = "HEARTH_NODE_ID")]
    node_id: Option<String>,
    /// Where the other nodes of the cluster reach this one (`host:port`), published in etcd:
    /// with --cluster-secret-file this node's node-to-node link listens there (a port of its
    /// own, not --listen's).
    #[arg(long, requires = "cluster_etcd")]
    advertise: Option<String>,
    /// Seconds of the node's etcd lease: a node silent for this long loses its databases to
    /// the others. It acknowledges writes only within two thirds of it after etcd last
    /// confirmed the lease (at least 2).
    #[arg(long, default_value_t = DEFAULT_LEASE_TTL_SECS)]
    cluster_lease_ttl_secs: u64,
    /// Run as one node of a cluster with a static placement (docs/cluster-link.md): every
    /// node gets the same list of every node, itself included, as `ID=HOST:PORT,...`, where
    /// HOST:PORT is that node's node-to-node link. A database is owned by the listed node
    /// whose id scores highest for its name (rendezvous hashing); the others forward its
    /// WebSocket clients, REST requests and event streams there. Needs --node-id and --cluster-secret-file; not with
    /// --cluster-etcd (whose live nodes replace the list).
    #[arg(long, env = "HEARTH_CLUSTER_PEERS", value_delimiter = ',',
          requires_all = ["node_id", "cluster_secret_file"])]
    cluster_peers: Vec<String>,
    /// A file with the secret every node of the cluster shares (16 to 4096 bytes), for the
    /// node-to-node link of --cluster-peers or --cluster-etcd: a node proves it on the link's
    /// handshake, so that whoever reaches the link's port cannot act as any client. The link
    /// also needs either --cluster-tls-cert, --cluster-tls-key and --cluster-ca (mutual TLS)
    /// or --cluster-plaintext.
    #[arg(long, env = "HEARTH_CLUSTER_SECRET_FILE")]
    cluster_secret_file: Option<PathBuf>,
    /// This node's certificate for the node-to-node link (PEM, the node's own certificate
    /// first): issued by --cluster-ca, with a SAN DNS name equal to --node-id, usable as a
    /// TLS server and client certificate (docs/cluster-link.md). The link then runs over TLS
    /// 1.3 and both ends check each other's certificate. Read again on SIGHUP.
    #[arg(long, env = "HEARTH_CLUSTER_TLS_CERT")]
    cluster_tls_cert: Option<PathBuf>,
    /// The private key of --cluster-tls-cert (PEM: PKCS#8, PKCS#1 or SEC1). Read again on
    /// SIGHUP.
    #[arg(long, env = "HEARTH_CLUSTER_TLS_KEY")]
    cluster_tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM; several are all trusted): a node's link accepts
    /// only peers whose certificate it issued and that name the node they announce, and dials
    /// only peers whose certificate it issued for the node dialed. Read again on SIGHUP.
    #[arg(long, env = "HEARTH_CLUSTER_CA")]
    cluster_ca: Option<PathBuf>,
    /// Run the node-to-node link unencrypted, without certificates (the shared secret alone
    /// proves the peers): for tests on one machine, never across a network. Not with
    /// --cluster-tls-cert.
    #[arg(long, env = "HEARTH_CLUSTER_PLAINTEXT")]
    cluster_plaintext: bool,
    /// With --cluster-peers or --cluster-etcd: how an owner ships its write-ahead log to each database's
    /// follower (the runner-up of the placement). sync: with --durability strict a write is
    /// acknowledged once both nodes have it on disk; with etcd, a follower that is down or
    /// does not answer within 2 s is first taken out of the database's sync set in etcd (it
    /// may then not take the database over) and writes go on without it until it has caught
    /// up and is back in (docs/cluster.md). async: shipped, but acknowledged at the owner's
    /// durability: a failover may lose the writes of the last moments. off: nothing is
    /// shipped. Without a cluster it means nothing.
    #[arg(long, value_enum, default_value_t = ReplicationArg::Sync, env = "HEARTH_REPLICATION")]
    replication: ReplicationArg,
}

/// `--cluster-lease-ttl-secs` when not given: a dead owner's databases are claimed again
/// within about this long, and a pause of a third of it already refuses writes.
const DEFAULT_LEASE_TTL_SECS: u64 = 5;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DurabilityArg {
    Strict,
    Batch,
    None,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ReplicationArg {
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

fn persist_config(args: &ServeArgs) -> PersistConfig {
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

fn main() -> anyhow::Result<()> {
    hearth_alloc::return_freed_memory_at_once();
    let command = layers::with_env_vars(Cli::command());
    let layered = match layers::parse(command.clone(), std::env::args_os().collect()) {
        Ok(layered) => layered,
        Err(error) => {
            // A config file is refused like a command line: a message, exit code 2.
            eprintln!("error: {error}");
            std::process::exit(2);
        }
    };
    let cli = Cli::from_arg_matches(&layered.matches).unwrap_or_else(|error| error.exit());
    if let Command::Serve(args) = cli.command {
        if args.print_config {
            let (Some(serve_command), Some(serve)) = (
                command.find_subcommand(layers::SERVE),
                layered.matches.subcommand_matches(layers::SERVE),
            ) else {
                anyhow::bail!("no serve options to print");
            };
            print!(
                "{}",
                print_config::render(
                    serve_command,
                    serve,
                    &layered.sources,
                    layered.config_file.as_deref()
                )
            );
            return Ok(());
        }
        logging::init(args.log_format, args.log_level.as_deref())?;
        let mut args = *args;
        if let Some(file) = args.firebase_json.clone() {
            let given = |id: &str| {
                !matches!(
                    layered.sources.get(id),
                    None | Some(layers::Source::Default | layers::Source::Unset)
                )
            };
            apply_firebase_json(&mut args, &file, given("listen"), given("rules"))?;
        }
        return serve(args);
    }
    logging::init(LogFormat::Text, None)?;
    let tool = match cli.command {
        Command::Serve(_) => return Ok(()),
        Command::Rules(RulesCommand::Check { file }) => return check_rules(&file),
        Command::Rules(RulesCommand::Get { server }) => hearth_tools::rules_get(&server),
        Command::Rules(RulesCommand::Set { file, server }) => {
            hearth_tools::rules_set(&server, &file)
        }
        Command::Export(args) => hearth_tools::export(*args),
        Command::Import(args) => hearth_tools::import(*args),
        Command::Data(command) => hearth_tools::data(command),
        Command::Databases { json, server } => hearth_tools::databases(&server, json),
        Command::Backup(args) => hearth_tools::backup(*args),
        Command::Restore(args) => hearth_tools::restore(*args),
        Command::Cluster(ClusterCommand::Status { etcd, json }) => {
            return cluster_status(&etcd, json)
        }
        Command::Cluster(ClusterCommand::Move {
            etcd,
            namespace,
            wait_secs,
        }) => return cluster_move(&etcd, &namespace, wait_secs),
    };
    if let Err(error) = tool {
        // The tools' errors are written for people: no "Error:" debug form, and an exit
        // code a script can tell apart (unreachable, refused credential, anything else).
        eprintln!("{error}");
        std::process::exit(error.exit_code());
    }
    Ok(())
}

/// `hearth cluster status`: exits with 1 when etcd cannot be read.
fn cluster_status(url: &str, json: bool) -> anyhow::Result<()> {
    let etcd = hearth_cluster::etcd::Etcd::new(url, Duration::from_secs(10));
    match hearth_cluster::status::read(&etcd) {
        Ok(status) if json => println!("{}", serde_json::to_string_pretty(&status)?),
        Ok(status) => print!("{status}"),
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
    Ok(())
}

/// `hearth cluster move`: exits with 1 when the database did not move.
fn cluster_move(url: &str, namespace: &str, wait_secs: u64) -> anyhow::Result<()> {
    let etcd = hearth_cluster::etcd::Etcd::new(url, Duration::from_secs(10));
    let wait = Duration::from_secs(wait_secs.max(1));
    match hearth_cluster::moves::request(&etcd, namespace, wait) {
        Ok(moved) => println!(
            "{namespace}: moved from {} to {} (epoch {})",
            moved.from, moved.to, moved.epoch
        ),
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
    Ok(())
}

/// `hearth rules check FILE`: exits non-zero, with the error, for an invalid file.
fn check_rules(file: &std::path::Path) -> anyhow::Result<()> {
    match load_rules(file) {
        Ok(_) => {
            println!("{}: ok", file.display());
            Ok(())
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
}

fn auth_config(args: &ServeArgs) -> anyhow::Result<AuthConfig> {
    let mut keys = Vec::new();
    for file in &args.jwt_keys {
        keys.extend(AuthConfig::load_keys(file, false)?);
    }
    let firebase_keys = args
        .firebase_project
        .as_ref()
        .map(|_| FirebaseKeys::default());
    Ok(AuthConfig {
        dev: args.dev,
        admin_token: args.admin_token.clone().filter(|token| !token.is_empty()),
        hs256_secret: args
            .jwt_secret
            .as_ref()
            .filter(|secret| !secret.is_empty())
            .map(|secret| secret.as_bytes().to_vec()),
        keys,
        firebase_project: args.firebase_project.clone(),
        firebase_keys,
    })
}

/// Where the Firebase keys come from, when `--firebase-project` is set.
fn jwks_source(args: &ServeArgs, auth: &AuthConfig) -> anyhow::Result<Option<JwksSource>> {
    let Some(keys) = auth.firebase_keys.clone() else {
        return Ok(None);
    };
    let fallback = match &args.firebase_jwks {
        Some(file) => AuthConfig::load_keys(file, true)?,
        None => Vec::new(),
    };
    Ok(Some(JwksSource {
        url: args.firebase_jwks_url.clone(),
        fallback,
        min_refresh: Duration::from_millis(args.firebase_jwks_min_refresh_ms.max(1)),
        keys,
    }))
}

/// Fills --listen and --rules from a Firebase project file where they were not given.
fn apply_firebase_json(
    args: &mut ServeArgs,
    file: &std::path::Path,
    listen_given: bool,
    rules_given: bool,
) -> anyhow::Result<()> {
    let project = FirebaseJson::read(file)?;
    if !listen_given {
        if let Some(listen) = project.listen() {
            info!(listen = %listen, "listening where {} says", file.display());
            args.listen = listen;
        }
    }
    if !rules_given {
        if let Some(rules) = project.rules {
            info!(rules = %rules.display(), "rules from {}", file.display());
            args.rules = Some(rules);
        }
    }
    Ok(())
}

/// The node-to-node link's settings: with --cluster-peers its static placement, with
/// --cluster-etcd (`etcd`, already joined) and --cluster-secret-file etcd's; `None` without a
/// link (a single node, or etcd alone: each node serves only the databases it owns).
fn cluster_config(
    args: &ServeArgs,
    secret: Option<Vec<u8>>,
    security: Option<hearth_server::peer::LinkSecurity>,
    etcd: Option<&hearth_cluster::Placement>,
) -> anyhow::Result<Option<std::sync::Arc<hearth_server::peer::ClusterConfig>>> {
    use hearth_server::peer::{placement, ClusterConfig, Membership, Placement};
    let (Some(secret), Some(security)) = (secret, security) else {
        return Ok(None);
    };
    let membership = match etcd {
        Some(etcd) => Membership::Etcd(etcd.clone()),
        None if args.cluster_peers.is_empty() => return Ok(None),
        None => {
            let mut entries = Vec::with_capacity(args.cluster_peers.len());
            for entry in &args.cluster_peers {
                let (id, address) = placement::split_entry(entry.trim())?;
                let address = first_address("--cluster-peers", Some(address))?
                    .with_context(|| format!("--cluster-peers: `{address}` resolves to nothing"))?;
                entries.push((id.to_owned(), address));
            }
            let me = args
                .node_id
                .as_deref()
                .context("--cluster-peers needs --node-id")?;
            Membership::Static(Placement::new(entries, me)?)
        }
    };
    Ok(Some(std::sync::Arc::new(ClusterConfig {
        membership,
        secret,
        security,
        replication: args.replication.into(),
    })))
}

/// The cluster's shared secret, when --cluster-secret-file is given: read before the node
/// joins etcd, so that a bad file stops it before it holds a lease.
fn cluster_secret(args: &ServeArgs) -> anyhow::Result<Option<Vec<u8>>> {
    let Some(file) = &args.cluster_secret_file else {
        if !args.cluster_peers.is_empty() {
            anyhow::bail!("--cluster-peers needs --cluster-secret-file");
        }
        return Ok(None);
    };
    let mut secret = std::fs::read(file)
        .with_context(|| format!("reading --cluster-secret-file {}", file.display()))?;
    while secret.last().is_some_and(u8::is_ascii_whitespace) {
        secret.pop();
    }
    let (min, max) = (
        hearth_server::peer::MIN_SECRET_BYTES,
        hearth_server::peer::MAX_SECRET_BYTES,
    );
    if !(min..=max).contains(&secret.len()) {
        anyhow::bail!("--cluster-secret-file must hold {min} to {max} bytes");
    }
    Ok(Some(secret))
}

/// The first address of `address`, a `host:port` given to `flag`, if given.
fn first_address(
    flag: &str,
    address: Option<&str>,
) -> anyhow::Result<Option<std::net::SocketAddr>> {
    let Some(address) = address else {
        return Ok(None);
    };
    let resolved = hearth_server::resolve_listen(address)
        .with_context(|| format!("resolving {flag} {address}"))?;
    Ok(resolved.first().copied())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let listen = hearth_server::resolve_listen(&args.listen)
        .with_context(|| format!("resolving --listen {}", args.listen))?;
    let default_rules = match &args.rules {
        Some(file) => Some(std::sync::Arc::new(load_rules(file)?)),
        None => None,
    };
    if default_rules.is_none() && !args.dev {
        warn!(
            "every database is locked: only admins can read or write, because neither --rules \
             nor --dev was given. To open it: --dev for development (open rules, emulator \
             credentials), --rules FILE for rules every database starts with, or \
             --admin-token TOKEN to act as an admin (and set rules per database with \
             PUT /.settings/rules.json?ns=NAME)"
        );
    }
    let auth = auth_config(&args)?;
    let firebase_jwks = jwks_source(&args, &auth)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(std::sync::Arc::new(TlsCerts::load(cert, key)?)),
        _ => None,
    };
    let metrics_listen = first_address("--metrics-listen", args.metrics_listen.as_deref())?;
    let webtransport_listen =
        first_address("--webtransport-listen", args.webtransport_listen.as_deref())?;
    let secret = cluster_secret(&args)?;
    let security = cluster_link::security(&cluster_link::Flags::of(&args))?;
    let cluster = start_cluster(&args)?;
    let peers = match cluster_config(&args, secret, security, cluster.as_ref()) {
        Ok(peers) => peers,
        Err(error) => {
            if let Some(cluster) = &cluster {
                cluster.stop();
            }
            return Err(error);
        }
    };
    let config = ServeConfig {
        cluster: cluster.clone(),
        peers,
        webtransport_listen,
        auth,
        firebase_jwks,
        default_rules,
        listen,
        persist: persist_config(&args),
        data_dir: args.data_dir,
        threads,
        threads_from_flag: args.threads.is_some(),
        dev: args.dev,
        ping_interval: Duration::from_secs(args.ping_interval_secs.max(1)),
        idle_timeout: Duration::from_secs(args.idle_timeout_secs.max(2)),
        default_namespace: DEFAULT_NAMESPACE.to_owned(),
        sse_keep_alive: Duration::from_secs(args.sse_keep_alive_secs.max(1)),
        volatile_hz: args.volatile_hz,
        rest_cache_bytes: args.rest_cache_mib.saturating_mul(MIB),
        io_uring_sends: args.io_uring_sends,
        http: std::sync::Arc::new(HttpBudgets::new(
            args.body_budget_mib.saturating_mul(MIB),
            args.answer_budget_mib.saturating_mul(MIB),
            Duration::from_secs(args.http_write_timeout_secs.max(1)),
        )),
        tls,
        metrics: MetricsConfig {
            listen: metrics_listen,
            public: args.metrics_public,
        },
    };
    // Listening before the start, so that a SIGHUP during recovery does not end the process.
    let signals = Signals::listen().context("listening for signals")?;
    let server = match Server::start(config) {
        Ok(server) => server,
        Err(error) => {
            // Leave the cluster at once rather than when the lease runs out.
            if let Some(cluster) = &cluster {
                cluster.stop();
            }
            return Err(error).context("starting the server");
        }
    };
    signals
        .wait(&server)
        .context("waiting for a shutdown signal")?;
    info!("shutting down");
    server.stop();
    if let Some(cluster) = cluster {
        cluster.stop();
    }
    info!("stopped");
    Ok(())
}

/// Joins the cluster of `--cluster-etcd`, if given: the node's lease is granted and the
/// node registered before the server starts, so a node that cannot reach etcd does not start.
fn start_cluster(args: &ServeArgs) -> anyhow::Result<Option<hearth_cluster::Placement>> {
    let (Some(etcd), Some(node_id), Some(advertise)) =
        (&args.cluster_etcd, &args.node_id, &args.advertise)
    else {
        return Ok(None);
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if node_id.is_empty() || node_id.len() > 64 || !node_id.chars().all(valid) {
        anyhow::bail!(
            "--node-id {node_id:?}: 1 to 64 letters, digits, '-', '_' or '.' are allowed"
        );
    }
    let Some(advertise) = first_address("--advertise", Some(advertise))? else {
        anyhow::bail!("--advertise {advertise}: no address");
    };
    let placement = hearth_cluster::Placement::start(hearth_cluster::ClusterConfig {
        etcd: etcd.clone(),
        node_id: node_id.clone(),
        advertise,
        lease_ttl: Duration::from_secs(args.cluster_lease_ttl_secs),
        // The sync set guards failover only where logs are shipped (the link's secret).
        sync_set: matches!(args.replication, ReplicationArg::Sync)
            && args.cluster_secret_file.is_some(),
    })
    .with_context(|| format!("joining the cluster at {etcd}"))?;
    Ok(Some(placement))
}

/// The signals `hearth serve` answers.
struct Signals {
    runtime: tokio::runtime::Runtime,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _entered = runtime.enter();
        let terminate = signal(SignalKind::terminate())?;
        let hangup = signal(SignalKind::hangup())?;
        Ok(Signals {
            runtime,
            terminate,
            hangup,
        })
    }

    /// Blocks until SIGINT or SIGTERM. SIGHUP renews the certificates
    /// (`Server::reload_certificates`: the TLS pair read again, for TCP and WebTransport, or a
    /// new self-signed WebTransport certificate; new connections get it, open ones keep
    /// theirs); a pair that cannot be used is logged and the one in force stays.
    fn wait(mut self, server: &Server) -> anyhow::Result<()> {
        self.runtime.block_on(async {
            loop {
                tokio::select! {
                    result = tokio::signal::ctrl_c() => return result,
                    _ = self.terminate.recv() => return Ok(()),
                    _ = self.hangup.recv() => server.reload_certificates(),
                }
            }
        })?;
        Ok(())
    }
}
