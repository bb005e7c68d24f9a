//! The state machine of one database: it applies writes, keeps listens (views) current, runs
//! compare-and-set and onDisconnect queues, and says what must be sent.
//!
//! The crate does no IO. Callers hand it decoded requests together with the current time and
//! receive [`Effect`]s (pushes to connections, records for the write-ahead log) plus one
//! [`Reply`] per request. The order of the effects is the order in which they must reach the
//! connections: a listen's data before its reply, a write's pushes before its acknowledgement.

mod access;
pub mod audit;
mod database;
mod effect;
mod events;
pub mod feed;
mod indexes;
mod limits;
mod ondisconnect;
mod request;
mod server_values;
#[cfg(test)]
mod test_writes;
pub mod triggers;
mod views;
mod write;

pub use access::{Access, AuthState, WriteScope};
pub use database::{
    CheckedWrite, Condition, Database, DatabaseStats, WritePrecheck, MAX_VOLATILE_PATHS_PER_TICK,
    MIXED_WRITE_MESSAGE,
};
pub use effect::{Effect, Effects, Push, PushData, Target};
pub use limits::{
    MAX_LISTENS_PER_SESSION, MAX_MERGE_ENTRIES, MAX_ONDISCONNECT_BYTES, MAX_ONDISCONNECT_OPS,
};
pub use request::{ConnId, Reply, ReplyData, Request, Status, Tag};
pub use server_values::{resolve_server_values, Resolved, ServerValueError};
pub use write::{Change, PreparedMerge, PreparedSet, Write, WriteError, WriteOp, WriteTarget};
