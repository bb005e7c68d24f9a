//! The log writer and group commit.
//!
//! The shard thread appends one record per applied write ([`WalWriter::append_write`]); that
//! only encodes into memory. At the end of its loop turn it calls
//! [`WalWriter::prepare_batch`], which hands over everything appended since the last batch as
//! a [`Batch`]: a few `(file, offset, bytes)` pieces, usually one. [`Batch::execute`] does the
//! IO (one positional write per piece, one fdatasync per file) and may run on any thread; the
//! shard keeps appending meanwhile. [`WalWriter::complete`] takes the outcome back and returns
//! the durable sequence number, up to which the shard may acknowledge writes.
//!
//! ```text
//! shard thread:  append append append │prepare_batch│ append append ... │complete│ ack ≤ seq
//! sync thread:                        └── execute: write_at, sync_data ─┘
//! ```
//!
//! One batch is in flight at a time: `prepare_batch` returns `None` while one is, and the
//! records appended meanwhile form the next batch. That keeps durability in order without any
//! bookkeeping of overlapping syncs, and batches grow by themselves when the disk is slow.
//!
//! Fencing epochs: every record carries the epoch its database is owned under
//! ([`WalWriter::append`]). The writer remembers the highest epoch logged for each database
//! (seeded by recovery from the log) and refuses a record under an older one with
//! [`StoreError::StaleEpoch`]: another node claimed the database since, and the log must not
//! hold a write of an owner that lost its claim after one of the new owner's.
//!
//! Disk errors: if a batch fails (ENOSPC, EIO, from a write or a sync), no record of it or of
//! any later batch is reported durable, and the writer refuses every further call with
//! [`StoreError::Failed`]. It never retries: after a failed fdatasync Linux may have dropped
//! the pages it could not write and will report the next fdatasync as successful. The way on
//! is to reopen the log ([`crate::open`]), which re-reads what is really there, rewrites the
//! records that might only be in the page cache, and syncs them.

use std::collections::BTreeMap;
use std::sync::Arc;

use hearth_sync::Write;

use crate::batch::{Batch, BatchDone, BatchPiece, Removal, SpareDone, SpareJob};
use crate::error::{Operation, StoreError};
use crate::names::segment_name;
use crate::record::{encode_record, RecordRef};
use crate::segment::{
    Placement, SegmentHeader, SegmentTable, INLINE_SEGMENT_BYTES, SEGMENT_BYTES,
    SEGMENT_HEADER_BYTES,
};
use crate::storage::Storage;

/// Spare batch buffers kept for reuse, so that a steady stream of batches does not allocate.
const SPARE_BUFFERS_MAX: usize = 4;

/// How the log is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalOptions {
    /// Size of a new segment (tests use small ones to exercise rollover).
    pub segment_bytes: u64,
}

impl Default for WalOptions {
    fn default() -> WalOptions {
        WalOptions {
            segment_bytes: SEGMENT_BYTES,
        }
    }
}

/// The result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The record's sequence number; acknowledge its write once `durable_seq` reaches it.
    pub seq: u64,
    /// Bytes the record takes in the log (for the snapshot policy).
    pub bytes: u64,
}

/// Encoded records for one segment, not yet handed to a batch.
#[derive(Debug)]
struct Piece {
    index: u64,
    create: Option<SegmentHeader>,
    offset: u64,
    bytes: Vec<u8>,
}

/// The appending end of a shard's log.
pub struct WalWriter<S: Storage> {
    storage: Arc<S>,
    table: SegmentTable,
    files: BTreeMap<u64, Arc<S::File>>,
    pending: Vec<Piece>,
    /// The sequence number of the first pending record.
    pending_first_seq: Option<u64>,
    /// The last sequence number in the log (pending records included).
    log_last_seq: u64,
    next_seq: u64,
    durable_seq: u64,
    /// The last sequence number of the batch being executed.
    in_flight: Option<u64>,
    failure: Option<(String, Operation)>,
    spare: Vec<Vec<u8>>,
    /// The zero-filled segment made ahead of time, with its size.
    spare_segment: Option<(u64, Arc<S::File>)>,
    spare_in_flight: bool,
    /// The highest fencing epoch logged for each database that has a non-zero one (none
    /// outside a cluster).
    epochs: BTreeMap<Arc<str>, u64>,
}

impl<S: Storage> std::fmt::Debug for WalWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalWriter")
            .field("next_seq", &self.next_seq)
            .field("durable_seq", &self.durable_seq)
            .field("in_flight", &self.in_flight)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl<S: Storage> WalWriter<S> {
    /// A writer that continues a recovered log. `log_last_seq` is the last record in it;
    /// `next_seq` may be larger when snapshots cover more than the log kept.
    pub(crate) fn resume(
        storage: Arc<S>,
        table: SegmentTable,
        files: BTreeMap<u64, Arc<S::File>>,
        log_last_seq: u64,
        next_seq: u64,
        epochs: BTreeMap<Arc<str>, u64>,
    ) -> WalWriter<S> {
        WalWriter {
            storage,
            table,
            files,
            pending: Vec::new(),
            pending_first_seq: None,
            log_last_seq,
            next_seq,
            durable_seq: next_seq - 1,
            in_flight: None,
            failure: None,
            spare: Vec::new(),
            spare_segment: None,
            spare_in_flight: false,
            epochs,
        }
    }

    /// Appends a write applied to `database`, under the epoch last logged for it (0 outside
    /// a cluster).
    pub fn append_write(&mut self, database: &str, write: &Write) -> Result<Appended, StoreError> {
        self.append(database, self.epoch_of(database), RecordRef::Write(write))
    }

    /// Appends "the rules of `database` are now `rules`", under the epoch last logged for it.
    pub fn append_rules(&mut self, database: &str, rules: &str) -> Result<Appended, StoreError> {
        self.append(database, self.epoch_of(database), RecordRef::Rules(rules))
    }

    /// Appends "the settings document of `database` is now `settings`", under the epoch last
    /// logged for it.
    pub fn append_settings(
        &mut self,
        database: &str,
        settings: &str,
    ) -> Result<Appended, StoreError> {
        self.append(
            database,
            self.epoch_of(database),
            RecordRef::Settings(settings),
        )
    }

    /// Encodes one record of `database`, owned under fencing `epoch` (0 outside a cluster),
    /// into memory. Nothing is durable until its batch completes. An epoch older than the
    /// last logged for the database is refused ([`StoreError::StaleEpoch`]) and, like any
    /// refused record, takes no sequence number and leaves the writer working.
    pub fn append(
        &mut self,
        database: &str,
        epoch: u64,
        body: RecordRef<'_>,
    ) -> Result<Appended, StoreError> {
        self.check_failed()?;
        let logged = self.epoch_of(database);
        if epoch < logged {
            return Err(StoreError::StaleEpoch {
                database: database.to_owned(),
                epoch,
                logged,
            });
        }
        let seq = self.next_seq;
        if self.pending.is_empty() {
            let bytes = self.spare.pop().unwrap_or_default();
            self.pending.push(Piece {
                index: 0,
                create: None,
                offset: 0,
                bytes,
            });
        }
        let last = self.pending.len() - 1;
        let start = self.pending[last].bytes.len();
        let encoded = encode_record(
            &mut self.pending[last].bytes,
            seq,
            self.durable_seq,
            epoch,
            database,
            body,
        );
        let size = match encoded {
            Ok(size) => size as u64,
            Err(error) => {
                self.pending.retain(|piece| !piece.bytes.is_empty());
                return Err(error);
            }
        };
        let piece = &mut self.pending[last];
        // Without a spare, a rollover makes its segment on the commit path: make it small.
        let target = match self.spare_segment {
            Some(_) => self.table.size_target(),
            None => self.table.size_target().min(INLINE_SEGMENT_BYTES),
        };
        match self.table.place_in(seq, self.log_last_seq, size, target) {
            Placement::Append { index, offset } if start == 0 => {
                piece.index = index;
                piece.offset = offset;
            }
            Placement::Append { index, offset } => {
                debug_assert_eq!(
                    (index, offset),
                    (piece.index, piece.offset + start as u64),
                    "pending bytes always end where the active segment's records end"
                );
            }
            Placement::Rollover { header } if start == 0 => {
                piece.index = header.index;
                piece.create = Some(header);
                piece.offset = SEGMENT_HEADER_BYTES as u64;
            }
            Placement::Rollover { header } => {
                let bytes = piece.bytes.split_off(start);
                self.pending.push(Piece {
                    index: header.index,
                    create: Some(header),
                    offset: SEGMENT_HEADER_BYTES as u64,
                    bytes,
                });
            }
        }
        self.table.add(seq, database, size);
        if epoch > logged {
            self.epochs.insert(Arc::from(database), epoch);
        }
        self.pending_first_seq.get_or_insert(seq);
        self.log_last_seq = seq;
        self.next_seq += 1;
        Ok(Appended { seq, bytes: size })
    }

    /// Hands everything appended since the last batch over for writing. `None` when there is
    /// nothing to write or a batch is still in flight (call again after [`Self::complete`]).
    pub fn prepare_batch(&mut self) -> Result<Option<Batch<S>>, StoreError> {
        self.check_failed()?;
        if self.in_flight.is_some() {
            return Ok(None);
        }
        let Some(first_seq) = self.pending_first_seq.take() else {
            return Ok(None);
        };
        let last_seq = self.log_last_seq;
        let mut spare_segment = self.spare_segment.take();
        let pieces = self
            .pending
            .drain(..)
            .map(|piece| {
                // The spare fits a segment of the usual size; a larger one (for a huge
                // record) is made the slow way.
                let spare = match (&piece.create, &spare_segment) {
                    (Some(header), Some((size, _))) if header.size == *size => {
                        spare_segment.take().map(|(_, file)| file)
                    }
                    _ => None,
                };
                BatchPiece {
                    name: segment_name(piece.index),
                    file: self.files.get(&piece.index).cloned(),
                    create: piece.create,
                    spare,
                    offset: piece.offset,
                    bytes: piece.bytes,
                }
            })
            .collect();
        self.spare_segment = spare_segment;
        self.in_flight = Some(last_seq);
        Ok(Some(Batch {
            storage: self.storage.clone(),
            pieces,
            first_seq,
            last_seq,
        }))
    }

    /// Takes back an executed batch. Returns the new durable sequence number, or the batch's
    /// error, after which the writer is failed for good.
    pub fn complete(&mut self, done: BatchDone<S>) -> Result<u64, StoreError> {
        if self.in_flight != Some(done.last_seq) {
            return Err(StoreError::Misuse(
                "completed a batch that is not in flight",
            ));
        }
        self.in_flight = None;
        self.files.extend(done.created);
        for mut buffer in done.buffers {
            if self.spare.len() < SPARE_BUFFERS_MAX {
                buffer.clear();
                self.spare.push(buffer);
            }
        }
        match done.result {
            Ok(()) => {
                self.durable_seq = done.last_seq;
                Ok(self.durable_seq)
            }
            Err(error) => {
                let failure = error
                    .disk_failure()
                    .unwrap_or_else(|| ("write-ahead log".to_owned(), Operation::Write));
                self.failure = Some(failure);
                Err(error)
            }
        }
    }

    /// The job of making a spare segment ahead of time, so that rolling over to a new
    /// segment does not zero-fill one on the commit path. `None` when a spare exists or is
    /// being made, while a batch is in flight (it may be renaming the spare), or after a
    /// failure. Run [`SpareJob::execute`] anywhere and hand the result to [`Self::add_spare`].
    pub fn prepare_spare(&mut self) -> Option<SpareJob<S>> {
        if self.spare_segment.is_some()
            || self.spare_in_flight
            || self.in_flight.is_some()
            || self.failure.is_some()
        {
            return None;
        }
        self.spare_in_flight = true;
        Some(SpareJob {
            storage: self.storage.clone(),
            size: self.table.size_target(),
        })
    }

    /// Takes back a made spare segment. A failure to make one is not a failure of the log:
    /// the next rollover makes its segment the slow way.
    pub fn add_spare(&mut self, done: SpareDone<S>) -> Result<(), StoreError> {
        self.spare_in_flight = false;
        let file = done.result?;
        self.spare_segment = Some((done.size, Arc::new(file)));
        Ok(())
    }

    /// Prepares, executes and completes a batch on this thread (tools, tests, shutdown).
    pub fn commit(&mut self) -> Result<u64, StoreError> {
        if self.in_flight.is_some() {
            return Err(StoreError::Misuse("commit while a batch is in flight"));
        }
        if let Some(batch) = self.prepare_batch()? {
            self.complete(batch.execute())?;
        }
        Ok(self.durable_seq)
    }

    /// Takes the segments that [`SegmentTable::removable`] allows out of the log; the caller
    /// removes their files with [`Removal::execute`], on any thread.
    pub fn take_removable(&mut self, covered: impl Fn(&str) -> u64) -> Removal<S> {
        let count = self.table.removable(self.durable_seq, covered);
        let names = self
            .table
            .remove_front(count)
            .into_iter()
            .map(|segment| {
                self.files.remove(&segment.header.index);
                segment_name(segment.header.index)
            })
            .collect();
        Removal {
            storage: self.storage.clone(),
            names,
        }
    }

    /// The highest fencing epoch logged (or appended) for `database`; 0 if none of its
    /// records in the log has one.
    pub fn epoch_of(&self, database: &str) -> u64 {
        self.epochs.get(database).copied().unwrap_or(0)
    }

    /// The databases whose records in the log carry a non-zero fencing epoch, with the
    /// highest one.
    pub fn epochs(&self) -> &BTreeMap<Arc<str>, u64> {
        &self.epochs
    }

    /// The highest sequence number known durable: every record up to it is on disk.
    pub fn durable_seq(&self) -> u64 {
        self.durable_seq
    }

    /// The sequence number of the last appended record.
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Whether a batch has failed; the writer then refuses everything.
    pub fn is_failed(&self) -> bool {
        self.failure.is_some()
    }

    pub fn segments(&self) -> &SegmentTable {
        &self.table
    }

    fn check_failed(&self) -> Result<(), StoreError> {
        match &self.failure {
            None => Ok(()),
            Some((file, operation)) => Err(StoreError::Failed {
                file: file.clone(),
                operation: *operation,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{open, MemoryStorage, Storage, RECORD_HEADER_BYTES};
    use hearth_sync::{Change, WriteOp};
    use hearth_tree::{Node, Path};

    fn write(n: u64) -> Write {
        Write {
            base: Path::parse(&format!("/k{n}")).expect("valid path"),
            ops: vec![WriteOp {
                path: Path::root(),
                change: Change::Set(Node::leaf(hearth_tree::Leaf::Number(n as f64))),
            }],
        }
    }

    fn writer(segment_bytes: u64) -> WalWriter<MemoryStorage> {
        let options = WalOptions { segment_bytes };
        open(Arc::new(MemoryStorage::new()), options)
            .expect("an empty directory opens")
            .wal
    }

    #[test]
    fn a_batch_across_a_rollover_has_one_piece_per_segment() -> Result<(), StoreError> {
        let mut wal = writer(256);
        let mut sizes = Vec::new();
        while wal.segments().segments().len() < 2 {
            sizes.push(wal.append_write("db", &write(sizes.len() as u64))?.bytes);
        }
        let batch = wal.prepare_batch()?.expect("records are pending");
        let writes: Vec<(String, u64, usize)> = batch
            .writes()
            .map(|(name, offset, bytes)| (name.to_owned(), offset, bytes.len()))
            .collect();
        let last = *sizes.last().expect("appended") as usize;
        let first_len: u64 = sizes[..sizes.len() - 1].iter().sum();
        assert_eq!(
            writes,
            vec![
                (
                    segment_name(1),
                    SEGMENT_HEADER_BYTES as u64,
                    first_len as usize
                ),
                (segment_name(2), SEGMENT_HEADER_BYTES as u64, last),
            ]
        );
        let created: Vec<u64> = batch
            .segments_created()
            .map(|header| header.index)
            .collect();
        assert_eq!(created, vec![1, 2]);
        assert_eq!(wal.complete(batch.execute())?, sizes.len() as u64);
        Ok(())
    }

    #[test]
    fn a_rollover_adopts_the_spare_segment_and_recovery_removes_a_leftover_one(
    ) -> Result<(), StoreError> {
        let storage = Arc::new(MemoryStorage::new());
        let options = WalOptions { segment_bytes: 256 };
        let mut wal = open(storage.clone(), options)?.wal;
        let job = wal.prepare_spare().expect("no spare yet");
        assert!(wal.prepare_spare().is_none(), "one spare job at a time");
        wal.add_spare(job.execute())?;
        let mut n = 0;
        while wal.segments().segments().len() < 2 {
            n += 1;
            wal.append_write("db", &write(n))?;
            wal.commit()?;
        }
        let names = storage
            .list()
            .map_err(|error| StoreError::io("dir", Operation::List, error))?;
        assert!(names.contains(&segment_name(2)), "{names:?}");
        assert!(
            !names
                .iter()
                .any(|name| name == crate::names::SPARE_SEGMENT_NAME),
            "{names:?}"
        );
        // A new spare, then a restart: the leftover is removed and every record is back.
        let job = wal.prepare_spare().expect("the spare was used");
        wal.add_spare(job.execute())?;
        drop(wal);
        let recovered = open(storage.clone(), options)?;
        assert_eq!(recovered.report.records_replayed, n);
        assert_eq!(
            recovered.report.temporary_files_removed,
            vec![crate::names::SPARE_SEGMENT_NAME.to_owned()]
        );
        Ok(())
    }

    #[test]
    fn without_a_spare_a_rollover_makes_a_small_segment() -> Result<(), StoreError> {
        let storage = Arc::new(MemoryStorage::new());
        let mut wal = open(storage.clone(), WalOptions::default())?.wal;
        wal.append_write("db", &write(1))?;
        wal.commit()?;
        let sizes: Vec<u64> = wal.segments().segments().map(|s| s.header.size).collect();
        assert_eq!(sizes, vec![INLINE_SEGMENT_BYTES], "made on the commit path");
        let file = storage.contents(&segment_name(1)).expect("the segment");
        assert_eq!(file.len() as u64, INLINE_SEGMENT_BYTES);
        Ok(())
    }

    #[test]
    fn a_refused_record_takes_no_sequence_number() -> Result<(), StoreError> {
        let mut wal = writer(SEGMENT_HEADER_BYTES as u64 + 1024);
        assert_eq!(wal.append_write("db", &write(1))?.seq, 1);
        let huge = "r".repeat(crate::MAX_RULES_BYTES as usize + 1);
        assert!(matches!(
            wal.append_rules("db", &huge),
            Err(StoreError::RecordTooLarge { .. })
        ));
        assert_eq!(wal.append_write("db", &write(2))?.seq, 2);
        assert!(!wal.is_failed());
        let batch = wal.prepare_batch()?.expect("pending");
        assert!(batch.byte_len() > 2 * RECORD_HEADER_BYTES as u64);
        assert_eq!(wal.complete(batch.execute())?, 2);
        Ok(())
    }
}
