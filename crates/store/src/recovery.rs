//! Opening a shard's directory: the newest usable snapshot of each database, the log records
//! after it replayed in sequence order, the log repaired, and a writer to go on with.
//!
//! Recovery never invents data (every record it replays passed its checksum and follows the
//! previous one without a gap) and never drops a valid record silently: a cut is reported with
//! the number of records after it, and where dropping would lose a record that was promised
//! durable it stops with an error instead (see `scan.rs` for the rule).
//!
//! Fencing epochs: within one database, the epochs of its records never go down, because the
//! writer refuses a record older than the database's last (`WalWriter::append`). A record
//! whose epoch is lower than one already seen for its database is therefore a write of an
//! owner that had lost its claim when it wrote it (a follower's log can receive one late):
//! it was never validly acknowledged, and the new owner's state does not contain it. It is
//! skipped, counted and reported per database ([`RecoveryReport::stale_epochs`]), not treated
//! as corruption: its bytes are intact, and refusing to start would turn a fence that worked
//! into an outage. Its sequence number still counts, so the log stays consecutive.

use std::collections::BTreeMap;
use std::sync::Arc;

use hearth_sync::feed::ChangeLog;
use hearth_tree::Node;

use crate::catalog::SnapshotCatalog;
use crate::error::{Operation, StoreError};
use crate::names::{is_temporary, parse_segment_name};
use crate::record::{Record, RecordBody};
use crate::repair::resume;
use crate::scan::{scan_wal, TailCut};
use crate::segment::SegmentHeader;
use crate::snapshot::{read_snapshot, verify_snapshot, SnapshotHeader};
use crate::storage::{Storage, StorageFile};
use crate::writer::{WalOptions, WalWriter};

/// The recovered state of one database.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredDatabase {
    pub root: Node,
    pub rules: Option<Arc<str>>,
    /// Its settings document (`RecordBody::Settings`), if one was ever set.
    pub settings: Option<Arc<str>>,
    /// The last sequence number reflected in the state (snapshot or replayed record).
    pub seq: u64,
    /// The highest fencing epoch of the database: its snapshot's, or among its records in
    /// the log (0 if none had one: a single node).
    pub epoch: u64,
    /// Its write records replayed from the log (the newest, within the change feed's limits),
    /// so that a change feed resumes across a restart.
    pub changes: ChangeLog,
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
    /// Records not applied because their fencing epoch is older than one already seen for
    /// their database (a deposed owner's late writes), by database: how many, and the
    /// highest stale epoch and the epoch that superseded it.
    pub stale_epochs: BTreeMap<Arc<str>, StaleEpochs>,
    pub tail_cut: Option<TailCut>,
    /// Snapshots interrupted by a crash while being written, removed.
    pub temporary_files_removed: Vec<String>,
}

/// Records of one database skipped for their fencing epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaleEpochs {
    pub records: u64,
    /// The highest epoch among the skipped records.
    pub epoch: u64,
    /// The epoch already applied when the last of them was read.
    pub superseded_by: u64,
}

/// An entry kept beside the data that the log holds (`RecordBody::Audit` or
/// `RecordBody::Triggered`), with its position: the audit trail's and the triggers' copiers
/// append those their files do not have yet (docs/audit.md, docs/triggers.md).
#[derive(Debug, Clone, PartialEq)]
pub struct SideRecord {
    pub seq: u64,
    pub database: Arc<str>,
    pub kind: SideKind,
    pub entry: Arc<str>,
}

/// What a [`SideRecord`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideKind {
    /// An audit entry (record kind 4).
    Audit,
    /// A change for a declared trigger (record kind 5).
    Triggered,
}

impl SideRecord {
    /// `record`'s entry, when it holds one.
    pub fn of(record: &Record) -> Option<SideRecord> {
        let (kind, entry) = match &record.body {
            RecordBody::Audit(entry) => (SideKind::Audit, entry),
            RecordBody::Triggered(event) => (SideKind::Triggered, event),
            _ => return None,
        };
        Some(SideRecord {
            seq: record.seq,
            database: record.database.clone(),
            kind,
            entry: entry.clone(),
        })
    }
}

/// An opened shard directory.
pub struct Recovered<S: Storage> {
    pub databases: BTreeMap<Arc<str>, RecoveredDatabase>,
    /// Databases left on disk by [`open_lazily`]: their newest snapshot holds their whole state
    /// (no log record follows it) and its checksums were verified, with the sequence number
    /// it covers. Empty after [`open`].
    pub on_disk: BTreeMap<Arc<str>, u64>,
    /// The write records the log still holds of the databases in `on_disk`, for their change
    /// feeds once they are loaded (all of the shard's within [`MAX_ON_DISK_FEED_BYTES`]).
    pub on_disk_changes: BTreeMap<Arc<str>, ChangeLog>,
    /// Every audit entry and trigger event the log holds, in log order, snapshots or not (a
    /// stale epoch's excepted, as its write is).
    pub side: Vec<SideRecord>,
    pub snapshots: SnapshotCatalog,
    pub wal: WalWriter<S>,
    pub report: RecoveryReport,
}

/// Recovers every database of a shard's directory and opens its log for appending.
pub fn open<S: Storage>(storage: Arc<S>, options: WalOptions) -> Result<Recovered<S>, StoreError> {
    recover(storage, options, false)
}

/// Like [`open`], but a database that no log record changed since its newest snapshot is not
/// loaded: the snapshot's checksums are verified (a read of the file, no tree built) and the
/// database is listed in [`Recovered::on_disk`], for the caller to load on first use with
/// [`crate::read_snapshot`]. A database whose newest snapshot fails the check is loaded at once,
/// so that recovery can still fall back to an older snapshot and the log. The log is read
/// twice: once to learn which databases it touches, once to replay it.
pub fn open_lazily<S: Storage>(
    storage: Arc<S>,
    options: WalOptions,
) -> Result<Recovered<S>, StoreError> {
    recover(storage, options, true)
}

/// Bytes of write records a lazy recovery keeps, across all of a shard's databases left on
/// disk, for their change feeds (each database's own share is bounded as a loaded one's is).
pub const MAX_ON_DISK_FEED_BYTES: usize = 64 * 1024 * 1024;

fn recover<S: Storage>(
    storage: Arc<S>,
    options: WalOptions,
    lazy: bool,
) -> Result<Recovered<S>, StoreError> {
    let names = storage
        .list()
        .map_err(|error| StoreError::io("the shard directory", Operation::List, error))?;
    let mut report = RecoveryReport::default();
    let log_start = log_start(&*storage, &names);
    let logged = if lazy {
        last_logged(&*storage, &names)?
    } else {
        BTreeMap::new()
    };
    let mut databases = BTreeMap::new();
    let mut on_disk = BTreeMap::new();
    let mut snapshots = SnapshotCatalog::new();
    // The epochs the snapshots used carry: the log's records of them may be truncated.
    let mut snapshot_epochs = BTreeMap::new();
    for (database, candidates) in SnapshotCatalog::candidates(&names) {
        let newest = candidates[0];
        let untouched = logged.get(database).is_none_or(|&last| last <= newest.0);
        let header = match lazy && untouched {
            true => verified(&*storage, newest)?,
            false => None,
        };
        if let Some(header) = header {
            on_disk.insert(Arc::from(database), newest.0);
            snapshot_epochs.insert(Arc::from(database), header.epoch);
        } else {
            let state = load_newest(&*storage, database, &candidates, log_start, &mut report)?;
            snapshot_epochs.insert(Arc::from(database), state.epoch);
            databases.insert(Arc::from(database), state);
        }
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
    }
    let covered_max = databases
        .values()
        .map(|state| state.seq)
        .chain(on_disk.values().copied())
        .max()
        .unwrap_or(0);
    let mut on_disk_changes: BTreeMap<Arc<str>, ChangeLog> = BTreeMap::new();
    let mut on_disk_bytes = 0;
    let mut side = Vec::new();
    let scan = scan_wal(&*storage, &names, |record| {
        if on_disk.contains_key(&record.database) {
            side.extend(SideRecord::of(&record));
            // Every record of such a database is older than its snapshot (checked above); its
            // writes are still kept for change feeds, within a budget for the whole shard,
            // since the database itself is not loaded.
            report.records_skipped += 1;
            if let RecordBody::Write(write) = record.body {
                let changes = on_disk_changes
                    .entry(record.database.clone())
                    .or_insert_with(|| {
                        let covered = on_disk.get(&record.database).copied().unwrap_or(0);
                        ChangeLog::new(log_start.unwrap_or(1).saturating_sub(1).min(covered))
                    });
                let before = changes.bytes();
                if on_disk_bytes < MAX_ON_DISK_FEED_BYTES {
                    changes.record(record.seq, write);
                } else {
                    changes.forget_through(record.seq);
                }
                // `before` is part of the sum, so this never goes below zero.
                on_disk_bytes = on_disk_bytes - before + changes.bytes();
            }
        } else {
            replay(&mut databases, record, &mut report, &mut side);
        }
        Ok(())
    })?;
    report.tail_cut = scan.cut.clone();
    let mut scan = scan;
    for (database, epoch) in snapshot_epochs {
        if epoch > 0 {
            let highest = scan.epochs.entry(database).or_default();
            *highest = (*highest).max(epoch);
        }
    }
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
        on_disk,
        on_disk_changes,
        side,
        snapshots,
        wal,
        report,
    })
}

/// For each database with records in the log, the sequence number of its last valid record.
/// A read-only pass: the cut it may find is made by the replaying pass.
fn last_logged<S: Storage>(
    storage: &S,
    names: &[String],
) -> Result<BTreeMap<Arc<str>, u64>, StoreError> {
    let mut last = BTreeMap::new();
    scan_wal(storage, names, |record| {
        last.insert(record.database.clone(), record.seq);
        Ok(())
    })?;
    Ok(last)
}

/// The header of the snapshot `(covered_seq, name)` if it passes its checksums. Damage is
/// answered with `None`: the caller then loads the database, which reports the damage and
/// falls back past the snapshot. An unreadable disk is an error.
fn verified<S: Storage>(
    storage: &S,
    (covered_seq, name): (u64, &str),
) -> Result<Option<SnapshotHeader>, StoreError> {
    match verify_snapshot(storage, name) {
        Ok(header) => Ok((header.covered_seq == covered_seq).then_some(header)),
        Err(StoreError::Corrupt { .. }) => Ok(None),
        Err(error) => Err(error),
    }
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
                    settings: snapshot.settings,
                    seq: snapshot.covered_seq,
                    epoch: snapshot.epoch,
                    // The log may still hold the database's records the snapshot covers:
                    // from its start on, every one is there, for feeds to resume from.
                    changes: ChangeLog::new(match log_start {
                        Some(start) if start <= covered_seq + 1 => start.saturating_sub(1),
                        _ => covered_seq,
                    }),
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
            settings: None,
            seq: 0,
            epoch: 0,
            changes: ChangeLog::new(0),
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
    side: &mut Vec<SideRecord>,
) {
    let state = databases
        .entry(record.database.clone())
        .or_insert_with(|| RecoveredDatabase {
            root: Node::empty(),
            rules: None,
            settings: None,
            seq: 0,
            epoch: 0,
            changes: ChangeLog::new(0),
        });
    // An audit entry is kept whether or not a snapshot covers its write: whether the audit
    // files have it is their copier's question. One under a stale epoch goes with its write.
    if record.epoch >= state.epoch {
        side.extend(SideRecord::of(&record));
    }
    if record.seq <= state.seq {
        // Covered by the snapshot, which already holds it; its epoch still counts: a later
        // record older than it is stale all the same.
        if let (RecordBody::Write(write), true) = (&record.body, record.epoch >= state.epoch) {
            state.changes.record(record.seq, write.clone());
        }
        state.epoch = state.epoch.max(record.epoch);
        report.records_skipped += 1;
        return;
    }
    if record.epoch < state.epoch {
        let stale = report
            .stale_epochs
            .entry(record.database.clone())
            .or_default();
        stale.records += 1;
        stale.epoch = stale.epoch.max(record.epoch);
        stale.superseded_by = state.epoch;
        return;
    }
    state.epoch = record.epoch;
    match record.body {
        RecordBody::Write(write) => {
            state.root = write.apply(&state.root);
            state.changes.record(record.seq, write);
        }
        // An empty text is the server's default rules (a follower's full copy of a database
        // whose rules were never set through the API).
        RecordBody::Rules(rules) => state.rules = (!rules.is_empty()).then_some(rules),
        RecordBody::Settings(settings) => state.settings = Some(settings),
        // Kept above; it changes nothing of the database.
        RecordBody::Audit(_) | RecordBody::Triggered(_) => {}
    }
    state.seq = record.seq;
    report.records_replayed += 1;
}
