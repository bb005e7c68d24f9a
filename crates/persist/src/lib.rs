//! Durability: the shard's side of the write-ahead log, group commit, snapshots and the data
//! directory. The byte formats and recovery live in `hearth-store`; this crate decides when
//! to append, sync and snapshot, and holds back every message that depends on a write until
//! that write is on disk. It knows no database, session or shard: the server's owner drives
//! it (`server/src/owner/durability/`: the commit task, snapshots, eviction, a failed log).
//!
//! The flow of one write under `--durability strict`:
//!
//! ```text
//! request ─ engine applies ─ Effect::Log ─ append (memory) ─ messages tagged with its seq
//!                                              │
//!            commit task: prepare_batch ─ fdatasync on a blocking thread ─ complete
//!                                              │
//!                          gate advances ─ held acks, pushes and REST answers go out
//! ```

mod config;
pub mod data_dir;
mod gate;
mod held_queue;
mod pipeline;
mod storage;
mod store;

pub use config::{Durability, PersistConfig, DEFAULT_EVICT_IDLE, DEFAULT_SYNC_INTERVAL};
pub use gate::{Gate, Tagger};
pub use held_queue::{HeldQueue, Pushed, MAX_OUTBOUND_BYTES};
pub use pipeline::{BatchResult, Chore, DatabaseFacts, Pipeline, Release};
pub use storage::{ShardFile, ShardStorage};
pub use store::{open_shard_dir, open_storage, DurableState, Loading, Opened, ShardStore};
