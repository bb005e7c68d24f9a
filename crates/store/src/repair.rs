//! Making the disk match what recovery decided, before the first new record is appended.
//!
//! * Segments after a cut are removed, newest first, so that a crash part way still leaves
//!   consecutively numbered segments (and the next recovery makes the same cut).
//! * Bytes after the last valid record of the last segment are zeroed. Otherwise a new record
//!   could end exactly where an old, dropped one begins, and the old one would be read back
//!   as the next record: recovery would invent a write.
//! * Records after the last record's synced number are written again and synced. They were
//!   read from the page cache, which after a failed sync may hold pages the disk never got;
//!   once rewritten and synced, everything the recovered state contains is really durable.
//! * Nothing is done about segment creation: a segment is made and synced under a temporary
//!   name and renamed when complete, so every named segment is whole.
//!
//! The repair only removes or zeroes what recovery already dropped and rewrites bytes that are
//! already there, so a crash part way through leaves a log that the next recovery reads the
//! same way.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::batch::zero_fill;
use crate::error::{Operation, StoreError};
use crate::record::{padded_size, RECORD_HEADER_BYTES};
use crate::scan::WalScan;
use crate::segment::{SegmentTable, SEGMENT_HEADER_BYTES};
use crate::storage::{Storage, StorageFile};
use crate::writer::{WalOptions, WalWriter};

/// Repairs the log and returns a writer that continues it with `next_seq`.
pub(crate) fn resume<S: Storage>(
    storage: Arc<S>,
    scan: WalScan<S::File>,
    options: WalOptions,
    next_seq: u64,
) -> Result<WalWriter<S>, StoreError> {
    for name in scan.dropped.iter().rev() {
        storage
            .remove(name)
            .map_err(|error| StoreError::io(name, Operation::Remove, error))?;
    }
    let mut touched = Vec::new();
    let directory_changed = !scan.dropped.is_empty();
    if let Some(last) = scan.segments.last() {
        // A segment's name only appears once its creation (zeros and header) was synced, see
        // `batch::create_segment`, so only bytes after a cut need zeroing again.
        if last.needs_zeroing {
            zero_fill(
                &last.file,
                &last.name,
                last.info.used,
                last.info.header.size,
            )?;
            touched.push(scan.segments.len() - 1);
        }
    }
    for (position, segment) in scan.segments.iter().enumerate() {
        let unsure = segment
            .info
            .last_seq
            .is_some_and(|last| last > scan.last_synced_seq);
        if unsure {
            rewrite_after(
                &segment.file,
                &segment.name,
                segment.info.header.first_seq,
                segment.info.used,
                scan.last_synced_seq,
            )?;
            if !touched.contains(&position) {
                touched.push(position);
            }
        }
    }
    for position in touched {
        let segment = &scan.segments[position];
        segment
            .file
            .sync_data()
            .map_err(|error| StoreError::io(&segment.name, Operation::Sync, error))?;
    }
    if directory_changed {
        storage
            .sync_dir()
            .map_err(|error| StoreError::io("the log", Operation::SyncDir, error))?;
    }
    let epochs = scan.epochs;
    let mut files = BTreeMap::new();
    let mut infos = Vec::with_capacity(scan.segments.len());
    for segment in scan.segments {
        files.insert(segment.info.header.index, Arc::new(segment.file));
        infos.push(segment.info);
    }
    let table = SegmentTable::new(infos, options.segment_bytes, scan.index_next);
    Ok(WalWriter::resume(
        storage,
        table,
        files,
        scan.log_last_seq,
        next_seq.max(scan.log_last_seq + 1),
        epochs,
    ))
}

/// Writes again the records numbered above `synced_seq` in a segment whose valid records
/// (already checked by the scan) start at `first_seq` and end at `used`.
fn rewrite_after<F: StorageFile>(
    file: &F,
    name: &str,
    first_seq: u64,
    used: u64,
    synced_seq: u64,
) -> Result<(), StoreError> {
    let start = SEGMENT_HEADER_BYTES as u64;
    let mut bytes = vec![0u8; used.saturating_sub(start) as usize];
    file.read_at(start, &mut bytes)
        .map_err(|error| StoreError::io(name, Operation::Read, error))?;
    // Walk the record lengths to the first record to rewrite.
    let mut offset = 0usize;
    let mut seq = first_seq;
    while seq <= synced_seq && offset + RECORD_HEADER_BYTES <= bytes.len() {
        let length = &bytes[offset + 4..offset + 8];
        let payload = u32::from_le_bytes([length[0], length[1], length[2], length[3]]);
        offset += padded_size(payload as usize);
        seq += 1;
    }
    if offset < bytes.len() {
        file.write_at(start + offset as u64, &bytes[offset..])
            .map_err(|error| StoreError::io(name, Operation::Write, error))?;
    }
    Ok(())
}
