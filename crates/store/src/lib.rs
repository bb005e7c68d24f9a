//! Durable storage for Hearth: the write-ahead log, snapshots, and recovery, behind a small
//! storage trait.
//!
//! The crate promises what the server needs to acknowledge a write only once it is on disk:
//!
//! * [`WalWriter`] appends one record per applied write (or rules change) to a shard's log,
//!   a series of preallocated segment files, and writes and syncs them in batches (group
//!   commit) that may run on another thread. It reports the highest durable sequence number;
//!   writes up to it may be acknowledged. After a disk error it stops rather than guess.
//! * [`write_snapshot`] streams a database's tree to a snapshot file that records which log
//!   records it covers; [`SnapshotPolicy`] says when; [`SnapshotCatalog`] says which files to
//!   keep and how far the log may be truncated.
//! * [`open`] recovers every database of a shard: newest usable snapshot plus the log after
//!   it, with torn tails cut and reported and damage to durable records refused.
//!
//! All IO goes through [`Storage`]: [`FileStorage`] for real directories, [`MemoryStorage`],
//! and [`FaultStorage`], which injects ENOSPC and EIO and builds the disk a crash would leave
//! so that tests can check that everything synced survives. The encoders, decoders and the
//! segment accounting are pure functions over bytes. Byte layouts: FORMAT.md.
//!
//! What the crate does not do: it starts no threads, reads no clocks (time is an argument) and
//! knows nothing of connections; deciding when to batch, sync or snapshot is the server's.

mod batch;
mod catalog;
mod codec;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod names;
mod policy;
mod record;
mod recovery;
mod repair;
mod scan;
mod segment;
mod snapshot;
mod storage;
mod storage_fault;
mod storage_file;
mod storage_memory;
mod writer;

pub use batch::{Batch, BatchDone, Removal, SpareDone, SpareJob, SPARE_FILL_CHUNK_BYTES};
pub use catalog::{remove_files, SnapshotCatalog, SNAPSHOTS_KEPT};
pub use codec::{DecodeError, DECODE_DEPTH_MAX, DECODE_STRING_BYTES_MAX};
pub use error::{Corruption, Operation, StoreError};
pub use names::{snapshot_name, validate_database_name, MAX_DATABASE_NAME_BYTES};
pub use policy::{SnapshotDecision, SnapshotPolicy, SnapshotReason};
pub use record::{
    decode_record, encode_record, Record, RecordBody, RecordRef, MAX_AUDIT_BYTES, MAX_EPOCH,
    MAX_RECORD_BYTES, MAX_RULES_BYTES, MAX_SETTINGS_BYTES, MAX_TRIGGERED_BYTES, RECORD_ALIGN_BYTES,
    RECORD_HEADER_BYTES,
};
pub use recovery::{
    open, open_lazily, Recovered, RecoveredDatabase, RecoveryReport, SideKind, SideRecord,
    StaleEpochs, MAX_ON_DISK_FEED_BYTES,
};
pub use scan::TailCut;
pub use segment::{
    SegmentHeader, SegmentInfo, SegmentTable, INLINE_SEGMENT_BYTES, SEGMENT_BYTES,
    SEGMENT_HEADER_BYTES, SEGMENT_MAGIC, WAL_FORMAT_VERSION, WAL_FORMAT_VERSION_NO_AUDIT,
    WAL_FORMAT_VERSION_NO_EPOCH, WAL_FORMAT_VERSION_NO_SETTINGS, WAL_FORMAT_VERSION_NO_TRIGGERED,
};
pub use snapshot::{
    read_snapshot, verify_snapshot, write_database_snapshot, write_snapshot,
    write_snapshot_with_epoch, Snapshot, SnapshotHeader, SnapshotInfo, SNAPSHOT_FORMAT_VERSION,
    SNAPSHOT_FRAME_BYTES, SNAPSHOT_HEADER_BYTES, SNAPSHOT_MAGIC,
};
pub use storage::{Storage, StorageFile};
pub use storage_fault::{
    CallCounts, Fault, FaultFile, FaultPoint, FaultRule, FaultStorage, SplitMix64, SECTOR_BYTES,
};
pub use storage_file::{FileStorage, RealFile};
pub use storage_memory::{MemoryFile, MemoryStorage};
pub use writer::{Appended, WalOptions, WalWriter};
