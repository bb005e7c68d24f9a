//! The `hearth` command's tools beside the server.
//!
//! `hearth export` and `hearth import`: a database's JSON out of, and into, a data directory
//! (offline, the server stopped) or a running server (online, through the REST API as an
//! admin). Both stream: an import never holds the whole file as a `serde_json::Value`, only
//! one top-level child at a time, and an export writes one top-level child at a time.
//!
//! `hearth data`, `hearth rules get|set` and `hearth databases`: a running server's data,
//! rules and databases through its REST API (`remote`, `watch`). Every online tool talks
//! through one HTTP client (`client`).
//!
//! `hearth backup` and `hearth restore`: a consistent backup of a running server into a
//! directory, and a new data directory from it.

mod backup;
mod client;
mod error;
mod export;
mod import;
mod progress;
mod remote;
mod restore;
mod stream;
mod watch;

pub use backup::{backup, BackupArgs};
pub use client::{Client, ServerArgs, DEFAULT_URL};
pub use error::{Result, ToolsError};
pub use export::{export, ExportArgs};
pub use import::{import, ImportArgs};
pub use remote::{data, databases, rules_get, rules_set, DataCommand};
pub use restore::{restore, RestoreArgs};

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
    /// Online: a PEM file of CA certificates to trust for `https` instead of the built-in
    /// roots.
    #[arg(long, env = "HEARTH_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// No progress bar, and no summary once done.
    #[arg(long)]
    pub quiet: bool,
}

impl Target {
    /// The client of the running server at `--url`, for the database `--db`.
    fn client(&self) -> Result<Client> {
        let url = self.location.url.as_deref().unwrap_or(DEFAULT_URL);
        Client::connect(
            url,
            Some(&self.db),
            Some(&self.admin_token),
            self.ca_cert.as_deref(),
            std::time::Duration::from_secs(client::DEFAULT_TIMEOUT_SECS),
        )
    }
}

/// Opens the data directory and recovers the shard that holds `db`. Without `create`, `dir`
/// must be a data directory already (a mistyped path is refused, not made).
fn open_shard(
    target: &Target,
    dir: &std::path::Path,
    create: bool,
) -> Result<(
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
