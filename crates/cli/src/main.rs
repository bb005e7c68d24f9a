//! The `hearth` command.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use hearth_server::auth::AuthConfig;
use hearth_server::budget::{self, HttpBudgets};
use hearth_server::persist::{Durability, PersistConfig};
use hearth_server::rules_file::load_rules;
use hearth_server::{ServeConfig, Server, DEFAULT_NAMESPACE};
use hearth_store::SnapshotPolicy;
use tracing::{info, warn};

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

#[derive(clap::Args)]
struct ServeArgs {
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
    /// Rules every database starts with (Firebase `database.rules.json` format). Without it,
    /// databases are open with --dev and locked (admins only) otherwise.
    #[arg(long, env = "HEARTH_RULES")]
    rules: Option<PathBuf>,
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
    /// checked); the signing keys come from --firebase-jwks.
    #[arg(long, requires = "firebase_jwks")]
    firebase_project: Option<String>,
    /// JWKS file with the signing keys of Firebase ID tokens (there is no internet access to
    /// fetch them).
    #[arg(long, requires = "firebase_project")]
    firebase_jwks: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DurabilityArg {
    Strict,
    Batch,
    None,
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colors only on a terminal: log files and tests that read them get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let tool = match Cli::parse().command {
        Command::Serve(args) => return serve(*args),
        Command::Rules(RulesCommand::Check { file }) => return check_rules(&file),
        Command::Rules(RulesCommand::Get { server }) => hearth_tools::rules_get(&server),
        Command::Rules(RulesCommand::Set { file, server }) => {
            hearth_tools::rules_set(&server, &file)
        }
        Command::Export(args) => hearth_tools::export(*args),
        Command::Import(args) => hearth_tools::import(*args),
        Command::Data(command) => hearth_tools::data(command),
        Command::Databases { json, server } => hearth_tools::databases(&server, json),
    };
    if let Err(error) = tool {
        // The tools' errors are written for people: no "Error:" debug form, and an exit
        // code a script can tell apart (unreachable, refused credential, anything else).
        eprintln!("{error}");
        std::process::exit(error.exit_code());
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
    if let Some(file) = &args.firebase_jwks {
        keys.extend(AuthConfig::load_keys(file, true)?);
    }
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
    })
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
            "no --rules given and not in --dev mode: every database is locked; only admins \
             (--admin-token) can read or write until rules are set"
        );
    }
    let auth = auth_config(&args)?;
    let config = ServeConfig {
        auth,
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
        http: std::sync::Arc::new(HttpBudgets::new(
            args.body_budget_mib.saturating_mul(MIB),
            args.answer_budget_mib.saturating_mul(MIB),
            Duration::from_secs(args.http_write_timeout_secs.max(1)),
        )),
    };
    let server = Server::start(config).context("starting the server")?;
    wait_for_signal().context("waiting for a shutdown signal")?;
    info!("shutting down");
    server.stop();
    info!("stopped");
    Ok(())
}

/// Blocks until SIGINT or SIGTERM.
fn wait_for_signal() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result,
            _ = terminate.recv() => Ok(()),
        }
    })?;
    Ok(())
}
