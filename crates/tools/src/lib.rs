//! `hearth export` and `hearth import`: a database's JSON out of, and into, a data directory
//! (offline, the server stopped) or a running server (online, through the REST API as an
//! admin). Both stream: an import never holds the whole file as a `serde_json::Value`, only
//! one top-level child at a time, and an export writes one top-level child at a time.

mod export;
mod http_client;
mod import;
mod progress;
mod stream;

pub use export::{export, ExportArgs};
pub use import::{import, ImportArgs};

use std::path::PathBuf;

/// Where the database is: a stopped server's data directory, or a running server.
#[derive(clap::Args, Debug, Clone)]
#[group(required = true, multiple = false)]
pub struct Location {
    /// The data directory of a stopped server (offline; the directory is locked meanwhile).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// A running server, as `http://HOST:PORT` (online, through the REST API).
    #[arg(long)]
    pub url: Option<String>,
}

/// The database and how to reach it.
#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    #[command(flatten)]
    pub location: Location,
    /// The database (namespace).
    #[arg(long)]
    pub db: String,
    /// Online: the admin token of the server (`owner` for a --dev server).
    #[arg(
        long,
        env = "HEARTH_ADMIN_TOKEN",
        hide_env_values = true,
        default_value = "owner"
    )]
    pub admin_token: String,
    /// Offline, for a data directory that `import --create` makes: its shard count (defaults
    /// to the number of cores, as `hearth serve` does).
    #[arg(long)]
    pub threads: Option<usize>,
    /// No progress bar, and no summary once done.
    #[arg(long)]
    pub quiet: bool,
}

/// Opens the data directory and recovers the shard that holds `db`. Without `create`, `dir`
/// must be a data directory already (a mistyped path is refused, not made).
fn open_shard(
    target: &Target,
    dir: &std::path::Path,
    create: bool,
) -> anyhow::Result<(
    hearth_server::persist::data_dir::DataDir,
    hearth_server::persist::Opened,
)> {
    Ok(hearth_server::offline::open_database(
        dir,
        &target.db,
        target.threads,
        create,
    )?)
}
