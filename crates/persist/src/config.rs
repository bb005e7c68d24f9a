//! The durability settings of a server (`hearth serve --durability` and the flags beside it).

use std::time::Duration;

use hearth_store::SnapshotPolicy;

/// When a write is acknowledged, and what a crash may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// A write is acknowledged, and any client sees it, only after its log record is synced
    /// to disk. A crash of the process or the machine loses no acknowledged write.
    Strict,
    /// Writes are acknowledged and delivered at once; the log is written and synced every
    /// `sync_interval`. A crash of the process or of the machine may lose the writes of the
    /// last interval (the crash test shows it does).
    Batch,
    /// Nothing is written to disk: data lives in memory and is gone when the server stops.
    /// For tests and caches.
    None,
}

/// The durability settings of a server.
#[derive(Debug, Clone)]
pub struct PersistConfig {
    pub durability: Durability,
    /// With [`Durability::Batch`], the longest time between syncs.
    pub sync_interval: Duration,
    pub snapshots: SnapshotPolicy,
    /// A database with no clients and no writes for this long is snapshotted and dropped
    /// from memory; it is loaded again on its next use. `None` keeps every database loaded.
    pub evict_idle: Option<Duration>,
    /// Test only: run the (single) shard on this in-memory storage, which injects disk
    /// errors, instead of its directory.
    pub fault_storage: Option<std::sync::Arc<hearth_store::FaultStorage>>,
}

/// The default time between syncs under `--durability batch`.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(10);

/// The default idle time before a database is dropped from memory.
pub const DEFAULT_EVICT_IDLE: Duration = Duration::from_secs(10 * 60);

impl Default for PersistConfig {
    fn default() -> PersistConfig {
        PersistConfig {
            durability: Durability::Strict,
            sync_interval: DEFAULT_SYNC_INTERVAL,
            snapshots: SnapshotPolicy::default(),
            evict_idle: Some(DEFAULT_EVICT_IDLE),
            fault_storage: None,
        }
    }
}

impl PersistConfig {
    /// Memory only (`--durability none`, and unit tests).
    pub fn memory() -> PersistConfig {
        PersistConfig {
            durability: Durability::None,
            evict_idle: None,
            ..PersistConfig::default()
        }
    }
}
