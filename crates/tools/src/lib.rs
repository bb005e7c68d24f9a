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
mod tls;
mod watch;

pub use backup::{backup, BackupArgs};
pub use client::{Client, Connection, DatabaseArgs, ServerArgs, DEFAULT_URL};
pub use error::{Result, ToolsError};
pub use export::{export, ExportArgs};
pub use import::{import, ImportArgs};
pub use remote::{data, databases, rules_get, rules_set, DataCommand};
pub use restore::{restore, RestoreArgs};

use std::path::PathBuf;

/// The database and where it is: a stopped server's data directory, or a running server.
/// `--data-dir` chooses offline; without it, `--url` (or `HEARTH_URL`) chooses online; one of
/// the two is required, since an export or import must not guess which side is meant.
#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    /// The data directory of a stopped server (offline; the directory is locked meanwhile).
    /// Wins over HEARTH_URL.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// A running server, as `http://HOST:PORT` or `https://HOST:PORT` (online, through the
    /// REST API).
    #[arg(long, env = "HEARTH_URL")]
    pub url: Option<String>,
    /// The database (namespace).
    #[arg(long, alias = "db", env = "HEARTH_NS")]
    pub ns: String,
    #[command(flatten)]
    pub connection: client::Connection,
    /// No progress bar, and no summary once done.
    #[arg(long)]
    pub quiet: bool,
}

/// Where a [`Target`] is.
enum Place<'a> {
    Offline(&'a std::path::Path),
    Online(&'a str),
}

impl Target {
    fn place(&self) -> Result<Place<'_>> {
        match (&self.data_dir, &self.url) {
            (Some(dir), _) => Ok(Place::Offline(dir)),
            (None, Some(url)) => Ok(Place::Online(url)),
            (None, None) => Err(ToolsError::CommandLine(
                "give --data-dir DIR (a stopped server's data directory) or --url URL (a \
                 running server; or set HEARTH_URL)"
                    .to_owned(),
            )),
        }
    }

    /// The client of the running server at `url`, for the database `--ns`.
    fn client(&self, url: &str) -> Result<Client> {
        Client::connect(url, Some(&self.ns), &self.connection)
    }
}

/// Opens the data directory and recovers the shard that holds the database. Without `create`,
/// `dir` must be a data directory already (a mistyped path is refused, not made); `creatable`
/// says that the command has `--create`, for the hint of that refusal.
fn open_shard(
    target: &Target,
    dir: &std::path::Path,
    threads: Option<usize>,
    create: bool,
    creatable: bool,
) -> Result<(
    hearth_server::persist::data_dir::DataDir,
    hearth_server::persist::Opened,
)> {
    hearth_server::offline::open_database(dir, &target.ns, threads, create)
        .map_err(|error| error::offline_with_hint(error, creatable && !create))
}
