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

mod audit;
mod backup;
mod client;
mod error;
mod export;
mod import;
mod progress;
mod remote;
mod restore;
mod settings;
mod stream;
mod target;
mod tls;
mod triggers;
mod watch;

pub use audit::{audit_erase, audit_query, AuditFilter};
pub use backup::{backup, BackupArgs};
pub use client::{Client, Connection, DatabaseArgs, ServerArgs, DEFAULT_URL};
pub use error::{Result, ToolsError};
pub use export::{export, ExportArgs};
pub use import::{import, ImportArgs};
pub use remote::{data, databases, rules_get, rules_set, DataCommand};
pub use restore::{restore, RestoreArgs};
pub use settings::{rules_history, rules_rollback, settings_get, settings_set};
pub use target::Target;
pub use triggers::{
    triggers_dead, triggers_drop, triggers_get, triggers_retry, triggers_set, triggers_status,
};
