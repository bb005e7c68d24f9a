//! The one error type of the tools' public API. The command maps it to an exit code
//! ([`ToolsError::exit_code`]) and prints it as it reads.

use std::path::PathBuf;

use hearth_server::offline::OfflineError;
use hearth_server::persist::data_dir::DataDirError;
use hearth_server::rules_file::RulesFileError;

/// Why a tool failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    /// No HTTP answer at all: nothing listens there, the name does not resolve, TLS failed,
    /// or the server did not answer in time. `reason` says what to check next.
    #[error("cannot reach the server at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The server answered with an error status; `message` is its `error` text.
    #[error("the server answered {status} to {request}: {message}")]
    Refused {
        request: String,
        status: u16,
        message: String,
    },
    /// An answer or a stream broke off, or did not have the expected form.
    #[error("{request}: {reason}")]
    BadAnswer { request: String, reason: String },
    #[error("{0}")]
    Usage(String),
    /// The command line does not say enough to act on; exit code 2, as clap's own errors.
    #[error("{0}")]
    CommandLine(String),
    #[error(
        "no database given: add --ns NAME (or set HEARTH_NS, or end --url with ?ns=NAME); \
         a request without one reaches the database `default` of a server addressed by IP \
         address or as localhost"
    )]
    NoDatabase,
    #[error("invalid JSON in {what}: {source}")]
    Json {
        what: String,
        source: serde_json::Error,
    },
    /// A `data set|update|push` value that is a bare word: `hint` says how to quote it.
    #[error("invalid JSON in the value: {source}; {hint}")]
    NotJsonValue {
        source: serde_json::Error,
        hint: String,
    },
    /// What was wrong with the document of an import, named by its file.
    #[error("{}: {source}", file.display())]
    InFile {
        file: PathBuf,
        source: Box<ToolsError>,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("cannot read the CA certificates in {}: {reason}", path.display())]
    CaCert { path: PathBuf, reason: String },
    /// The text is exactly `hearth rules check`'s.
    #[error(transparent)]
    Rules(#[from] RulesFileError),
    #[error(transparent)]
    Offline(#[from] OfflineError),
    /// A data directory an offline tool cannot use, with what to do instead.
    #[error("{error}; {hint}")]
    OfflineHint {
        error: OfflineError,
        hint: &'static str,
    },
    #[error(transparent)]
    Tree(#[from] hearth_tree::TreeError),
    #[error(transparent)]
    Store(#[from] hearth_store::StoreError),
}

impl ToolsError {
    /// The exit code of the command: 3 when the server could not be reached, 4 when it
    /// refused the credential (401 or 403), 1 for every other failure (2 is the command
    /// line parser's, for usage errors).
    pub fn exit_code(&self) -> i32 {
        match self {
            ToolsError::Unreachable { .. } => 3,
            ToolsError::CommandLine(_) | ToolsError::NoDatabase => 2,
            ToolsError::Refused {
                status: 401 | 403, ..
            } => 4,
            _ => 1,
        }
    }

    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ToolsError {
        let what = what.into();
        move |source| ToolsError::Io { what, source }
    }

    /// A JSON error in `what`.
    pub fn json(what: impl Into<String>) -> impl FnOnce(serde_json::Error) -> ToolsError {
        let what = what.into();
        move |source| ToolsError::Json { what, source }
    }
}

/// Said when an offline tool finds its data directory locked: a running server holds it.
pub const LOCKED_HINT: &str =
    "stop the server that runs on it, or go through the running server with --url URL";

/// Said when `import` without `--create` finds no data directory at the path.
pub const CREATE_HINT: &str =
    "if the path is right, add --create to make a new data directory there";

/// `error` of opening a data directory offline, with the next step when there is an obvious
/// one. `creatable`: the command has `--create` and it was not given.
pub(crate) fn offline_with_hint(error: OfflineError, creatable: bool) -> ToolsError {
    let hint = match &error {
        OfflineError::DataDir(DataDirError::Locked(_)) => LOCKED_HINT,
        OfflineError::DataDir(DataDirError::Missing(_) | DataDirError::NotADataDir(_))
            if creatable =>
        {
            CREATE_HINT
        }
        _ => return ToolsError::Offline(error),
    };
    ToolsError::OfflineHint { error, hint }
}

pub type Result<T, E = ToolsError> = std::result::Result<T, E>;
