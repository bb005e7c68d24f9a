//! The audit trail of a Hearth server (docs/audit.md): for each database that asks for it,
//! every acknowledged write with its time, location, the credential's uid and provider, the
//! transport, the client's address and the rules that allowed it.
//!
//! The owner logs each entry as an audit record right after its write's record, so the entry
//! is durable exactly when the write is, and a refused write has none. Once durable, entries
//! go to the trail's thread ([`AuditTrail`]), which appends them to JSON-lines files per
//! database and day (`files.rs`), each line with its log position. After a crash, recovery
//! hands the trail every entry the log still holds and the files skip those they have, so that
//! each acknowledged write is traced exactly once; the log lets go of an entry only after the
//! trail synced it.

mod entry;
mod files;
mod trail;

pub use entry::{AuditEntry, AuditQuery, DEFAULT_QUERY_LINES, MAX_QUERY_LINES};
pub use files::MAX_QUERY_BYTES;
pub use trail::{
    AuditError, AuditTrail, Copied, TrailStats, DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS,
};
