//! The `hearth` command.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use hearth_server::{ServeConfig, Server, DEFAULT_NAMESPACE};
use tracing::info;

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
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on (`host:port`), for WebSocket and HTTP. `localhost` binds both
    /// 127.0.0.1 and ::1.
    #[arg(long, default_value = "localhost:9000", env = "HEARTH_LISTEN")]
    listen: String,
    /// Directory for the data (not used yet: data is held in memory).
    #[arg(long, default_value = "./hearth-data", env = "HEARTH_DATA_DIR")]
    data_dir: PathBuf,
    /// Shards (threads, one per core). Defaults to the number of cores.
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
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve(args),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let listen = hearth_server::resolve_listen(&args.listen)
        .with_context(|| format!("resolving --listen {}", args.listen))?;
    let config = ServeConfig {
        listen,
        data_dir: args.data_dir,
        threads,
        dev: args.dev,
        ping_interval: Duration::from_secs(args.ping_interval_secs.max(1)),
        idle_timeout: Duration::from_secs(args.idle_timeout_secs.max(2)),
        default_namespace: DEFAULT_NAMESPACE.to_owned(),
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
