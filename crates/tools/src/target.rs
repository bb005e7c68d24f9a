//! The database an export or import works on and where it is: a stopped server's data
//! directory (offline) or a running server (online).

use std::path::PathBuf;

use crate::client::{self, Client};
use crate::error::{self, Result, ToolsError};

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
pub(crate) enum Place<'a> {
    Offline(&'a std::path::Path),
    Online(&'a str),
}

impl Target {
    pub(crate) fn place(&self) -> Result<Place<'_>> {
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
    pub(crate) fn client(&self, url: &str) -> Result<Client> {
        Client::connect(url, Some(&self.ns), &self.connection)
    }
}

/// Opens the data directory and recovers the shard that holds the database. Without `create`,
/// `dir` must be a data directory already (a mistyped path is refused, not made); `creatable`
/// says that the command has `--create`, for the hint of that refusal.
pub(crate) fn open_shard(
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
