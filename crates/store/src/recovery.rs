//! Opening a shard's directory: the newest usable snapshot of each database, the log records
//! after it replayed in sequence order, the log repaired, and a writer to go on with.
//!
//! Recovery never invents data (every record it replays passed its checksum and follows the
//! previous one without a gap) and never drops a valid record silently: a cut is reported with
//! the number of records after it, and where dropping would lose a record that was promised
//! durable it stops with an error instead (see `scan.rs` for the rule).

use std::collections::BTreeMap;
use std::sync::Arc;

use hearth_tree::Node;

use crate::catalog::SnapshotCatalog;
use crate::error::{Operation, StoreError};
use crate::names::{is_temporary, parse_segment_name};
use crate::record::{Record, RecordBody};
use crate::repair::resume;
use crate::scan::{scan_wal, TailCut};
use crate::segment::SegmentHeader;
use crate::snapshot::read_snapshot;
use crate::storage::{Storage, StorageFile};
use crate::writer::{WalOptions, WalWriter};

/// The recovered state of one database.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredDatabase {
    pub root: Node,
    pub rules: Option<Arc<str>>,
    /// The last sequence number reflected in the state (snapshot or replayed record).
    pub seq: u64,
}

/// What recovery did, for the log and for operators.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveryReport {
    pub snapshots_loaded: Vec<String>,
    /// Snapshot files that could not be read, with the reason; recovery fell back to an
    /// older snapshot (or none) because the log still covered the difference.
    pub snapshots_unreadable: Vec<(String, String)>,
    pub records_replayed: u64,
    /// Records already contained in the snapshot of their database.
    pub records_skipped: u64,
    pub tail_cut: Option<TailCut>,
    /// Snapshots interrupted by a crash while being written, removed.
    pub temporary_files_removed: Vec<String>,
}

/// An opened shard directory.
pub struct Recovered<S: Storage> {
    pub databases: BTreeMap<Arc<str>, RecoveredDatabase>,
    pub snapshots: SnapshotCatalog,
    pub wal: WalWriter<S>,
    pub report: RecoveryReport,
}

/// Recovers the databases of a shard's directory and opens its log for appending.
pub fn open<S: Storage>(storage: Arc<S>, options: WalOptions) -> Result<Recovered<S>, StoreError> {
    let names = storage
        .list()
        .map_err(|error| StoreError::io("the shard directory", Operation::List, error))?;
    let mut report = RecoveryReport::default();
    let log_start = log_start(&*storage, &names);
    let mut databases = BTreeMap::new();
    let mut snapshots = SnapshotCatalog::new();
    for (database, candidates) in SnapshotCatalog::candidates(&names) {
        let state = load_newest(&*storage, database, &candidates, log_start, &mut report)?;
        // Unreadable snapshots stay on disk for inspection but never count for truncation.
        for &(covered_seq, name) in &candidates {
            if !report
                .snapshots_unreadable
                .iter()
                .any(|(bad, _)| bad == name)
            {
                snapshots.add_seq(database, covered_seq);
            }
        }
        databases.insert(Arc::from(database), state);
    }
    let covered_max = databases.values().map(|state| state.seq).max().unwrap_or(0);
    let scan = scan_wal(&*storage, &names, |record| {
        replay(&mut databases, record, &mut report);
        Ok(())
    })?;
    report.tail_cut = scan.cut.clone();
    let next_seq = scan.log_last_seq.max(covered_max) + 1;
    let wal = resume(storage.clone(), scan, options, next_seq)?;
    let temporary: Vec<String> = names
        .into_iter()
        .filter(|name| is_temporary(name))
        .collect();
    crate::catalog::remove_files(&*storage, &temporary)?;
    report.temporary_files_removed = temporary;
    Ok(Recovered {
        databases,
        snapshots,
        wal,
        report,
    })
}

/// The first sequence number of the log, if its first segment's header is readable. A
/// snapshot older than the newest is only usable if the log reaches back to it.
fn log_start<S: Storage>(storage: &S, names: &[String]) -> Option<u64> {
    let first = names
        .iter()
        .filter_map(|name| Some((parse_segment_name(name)?, name)))
        .min()?;
    let file = storage.open(first.1).ok()?;
    let mut header = [0u8; crate::segment::SEGMENT_HEADER_BYTES];
    file.read_at(0, &mut header).ok()?;
    SegmentHeader::parse(&header)
        .ok()
        .map(|header| header.first_seq)
}

/// Loads the newest readable snapshot of `database` that the log can continue from.
fn load_newest<S: Storage>(
    storage: &S,
    database: &str,
    candidates: &[(u64, &str)],
    log_start: Option<u64>,
    report: &mut RecoveryReport,
) -> Result<RecoveredDatabase, StoreError> {
    let reaches_back = |covered_seq: u64| log_start.is_some_and(|start| start <= covered_seq + 1);
    let mut reasons = Vec::new();
    for (position, &(covered_seq, name)) in candidates.iter().enumerate() {
        // Only the newest snapshot may be used if the log has been truncated past the others.
        if position > 0 && !reaches_back(covered_seq) {
            break;
        }
        match read_snapshot(storage, name) {
            Ok(snapshot) => {
                report.snapshots_loaded.push(name.to_owned());
                return Ok(RecoveredDatabase {
                    root: snapshot.root,
                    rules: snapshot.rules,
                    seq: snapshot.covered_seq,
                });
            }
            Err(error @ StoreError::Corrupt { .. }) => {
                reasons.push(error.to_string());
                report
                    .snapshots_unreadable
                    .push((name.to_owned(), error.to_string()));
            }
            // An unreadable disk or a newer format is not damage to fall back from.
            Err(error) => return Err(error),
        }
    }
    // No snapshot is usable: the log must hold the database's whole history.
    if reaches_back(0) {
        return Ok(RecoveredDatabase {
            root: Node::empty(),
            rules: None,
            seq: 0,
        });
    }
    Err(StoreError::SnapshotUnrecoverable {
        database: database.to_owned(),
        reason: reasons.join("; "),
        log_start: log_start.unwrap_or(0),
    })
}

fn replay(
    databases: &mut BTreeMap<Arc<str>, RecoveredDatabase>,
    record: Record,
    report: &mut RecoveryReport,
) {
    let state = databases
        .entry(record.database.clone())
        .or_insert_with(|| RecoveredDatabase {
            root: Node::empty(),
            rules: None,
            seq: 0,
        });
    if record.seq <= state.seq {
        report.records_skipped += 1;
        return;
    }
    match record.body {
        RecordBody::Write(write) => state.root = write.apply(&state.root),
        RecordBody::Rules(rules) => state.rules = Some(rules),
    }
    state.seq = record.seq;
    report.records_replayed += 1;
}
