//! Reading a log back: every valid record in order, and a decision about the first bad spot.
//!
//! The reader walks the segments in index order and the records of each in offset order,
//! expecting consecutive sequence numbers. It stops at the first spot that is not the next
//! valid record (a *break*): damaged bytes, a record with the wrong number, non-zero bytes
//! after the last record, or a segment header that says records are missing before it.
//!
//! Whether the log may be cut at a break depends on whether anything after it was promised
//! durable. Every record carries the highest sequence number that was durable when it was
//! written (its *synced* number). The reader searches everything after the break for valid
//! records; if any says the missing record was already durable, the break is damage to
//! acknowledged data and recovery stops with an error naming the file and offset. Otherwise
//! the break is where a crash interrupted writes that nobody was promised: the log is cut
//! there, and the cut (with the number of valid records after it that were dropped) is
//! reported. A rule of the form "cut only in the last segment" would not be enough: a batch
//! can span two segments, and a crash can persist the later pages of an unsynced write and
//! lose earlier ones, so a torn tail can be followed by valid records anywhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Corruption, Operation, StoreError};
use crate::names::{parse_segment_name, segment_name};
use crate::record::{
    check_record, decode_record_in, is_end, Record, RECORD_ALIGN_BYTES, RECORD_HEADER_BYTES,
};
use crate::segment::{
    HeaderError, SegmentHeader, SegmentInfo, SEGMENT_HEADER_BYTES, WAL_FORMAT_VERSION,
};
use crate::storage::{read_all, Storage};

/// Where recovery cut the log, and what it dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct TailCut {
    /// The segment and offset of the first byte that was not a valid next record.
    pub file: String,
    pub offset: u64,
    pub reason: Corruption,
    /// Valid records found after the cut and dropped: they follow a missing record, so
    /// replaying them would apply writes out of order, and none of them was durable.
    pub records_dropped: u64,
    /// Segment files after the cut, removed.
    pub segments_dropped: Vec<String>,
}

/// A segment kept by the scan.
pub(crate) struct ScannedSegment<F> {
    pub(crate) name: String,
    pub(crate) file: F,
    pub(crate) info: SegmentInfo,
    /// Bytes after the last record that must be zeroed before appending (garbage from a torn
    /// write, or a file shorter than its header says).
    pub(crate) needs_zeroing: bool,
}

/// What the scan found.
pub(crate) struct WalScan<F> {
    pub(crate) segments: Vec<ScannedSegment<F>>,
    /// Segment files after a cut.
    pub(crate) dropped: Vec<String>,
    /// The last sequence number in the kept log (records, or a header's declared start).
    pub(crate) log_last_seq: u64,
    /// The synced number of the last record: records after it may exist only in the page
    /// cache of a process whose sync failed, so they are rewritten before appending.
    pub(crate) last_synced_seq: u64,
    pub(crate) cut: Option<TailCut>,
    /// The index of the next new segment: after the last kept one, so that names stay
    /// consecutive (dropped segments are removed, durably, before it is created).
    pub(crate) index_next: u64,
    /// For each database with a record of a non-zero fencing epoch in the kept log, the
    /// highest such epoch: the writer refuses to log anything older for it.
    pub(crate) epochs: BTreeMap<Arc<str>, u64>,
}

struct Break {
    segment: String,
    offset: u64,
    /// The sequence number that should have been there.
    expected: u64,
    reason: Corruption,
    /// Whether the segment holding the break is itself dropped (its header is unreadable).
    drop_segment: bool,
}

/// The segments among `names` (other files left out), by index; an index missing between two
/// of them is an error, since only the last segment may be lost (in a crash while creating it).
fn numbered_segments(names: &[String]) -> Result<Vec<(u64, &String)>, StoreError> {
    let mut indexed: Vec<(u64, &String)> = names
        .iter()
        .filter_map(|name| Some((parse_segment_name(name)?, name)))
        .collect();
    indexed.sort();
    for pair in indexed.windows(2) {
        if pair[1].0 != pair[0].0 + 1 {
            return Err(StoreError::MissingSegment {
                missing: segment_name(pair[0].0 + 1),
                after: pair[0].1.clone(),
            });
        }
    }
    Ok(indexed)
}

/// A segment's bytes up to the size its header gives, as read.
struct Segment<'a> {
    name: &'a str,
    bytes: &'a [u8],
    version: u32,
}

/// Reads the records of `segment` after its header while each is whole and the next in
/// sequence, adding each to `info` and `scan` and handing it to `deliver`. Returns the offset
/// where reading stopped, and why if not at the end of the records.
fn read_records<F>(
    segment: Segment<'_>,
    scan: &mut WalScan<F>,
    info: &mut SegmentInfo,
    deliver: &mut impl FnMut(Record) -> Result<(), StoreError>,
) -> Result<(usize, Option<Corruption>), StoreError> {
    let Segment {
        name,
        bytes,
        version,
    } = segment;
    let mut offset = SEGMENT_HEADER_BYTES;
    loop {
        if offset + RECORD_HEADER_BYTES > bytes.len() || is_end(&bytes[offset..]) {
            return Ok((offset, None));
        }
        let expected = scan.log_last_seq + 1;
        match check_record(&bytes[offset..], version) {
            Ok(record) if record.seq == expected => {
                let (record, size) = decode_record_in(&bytes[offset..], version)
                    .map_err(|reason| StoreError::corrupt(name, offset as u64, reason))?;
                info.add(record.seq, &record.database, size as u64);
                if record.epoch > 0 {
                    let highest = scan.epochs.entry(record.database.clone()).or_default();
                    *highest = (*highest).max(record.epoch);
                }
                scan.log_last_seq = record.seq;
                scan.last_synced_seq = record.synced_seq;
                deliver(record)?;
                offset += size;
            }
            Ok(record) => {
                let found = record.seq;
                return Ok((offset, Some(Corruption::Sequence { expected, found })));
            }
            Err(reason) => return Ok((offset, Some(reason))),
        }
    }
}

/// The header of segment `name` (number `index`), checked against the file's name and the
/// segments scanned before it. `Ok(Err(..))` is where the log breaks: a header left unreadable
/// by a crash while the last segment was created, or records missing at the end of the
/// previous segment.
fn checked_header<F>(
    name: &str,
    bytes: &[u8],
    index: u64,
    is_last: bool,
    scan: &WalScan<F>,
) -> Result<Result<SegmentHeader, Break>, StoreError> {
    let header = match SegmentHeader::parse(bytes) {
        Ok(header) => header,
        Err(HeaderError::Version(found)) => {
            return Err(StoreError::UnsupportedVersion {
                file: name.to_owned(),
                found,
                supported: WAL_FORMAT_VERSION,
            })
        }
        // A later segment is only created once this one was complete and synced, so an
        // unreadable header can only be a crash part way through creating the last one.
        Err(HeaderError::Corrupt(reason)) if is_last => {
            return Ok(Err(Break {
                segment: name.to_owned(),
                offset: 0,
                expected: scan.log_last_seq + 1,
                reason,
                drop_segment: true,
            }));
        }
        Err(HeaderError::Corrupt(reason)) => return Err(StoreError::corrupt(name, 0, reason)),
    };
    if header.index != index {
        let reason = Corruption::Header("the index differs from the file name");
        return Err(StoreError::corrupt(name, 16, reason));
    }
    if let Some(previous) = scan.segments.last() {
        if header.previous_seq < scan.log_last_seq {
            let reason = Corruption::Header("the previous sequence number goes backwards");
            return Err(StoreError::corrupt(name, 32, reason));
        }
        if header.previous_seq > scan.log_last_seq {
            // The previous segment ends before records this one says came first.
            let expected = scan.log_last_seq + 1;
            return Ok(Err(Break {
                segment: previous.name.clone(),
                offset: previous.info.used,
                expected,
                reason: Corruption::MissingRecords { expected },
                drop_segment: false,
            }));
        }
    }
    Ok(Ok(header))
}

/// Scans the segments among `names`, handing each valid record to `deliver` in order.
pub(crate) fn scan_wal<S: Storage>(
    storage: &S,
    names: &[String],
    mut deliver: impl FnMut(Record) -> Result<(), StoreError>,
) -> Result<WalScan<S::File>, StoreError> {
    let indexed = numbered_segments(names)?;
    let mut scan = WalScan {
        segments: Vec::new(),
        dropped: Vec::new(),
        log_last_seq: 0,
        last_synced_seq: 0,
        cut: None,
        index_next: indexed.first().map_or(1, |(index, _)| *index),
        epochs: BTreeMap::new(),
    };
    let last_position = indexed.len().saturating_sub(1);
    let mut found: Option<(Break, usize)> = None;
    for (position, &(index, name)) in indexed.iter().enumerate() {
        let io = |operation| move |error| StoreError::io(name, operation, error);
        let file = storage.open(name).map_err(io(Operation::Open))?;
        let bytes = read_all(&file).map_err(io(Operation::Read))?;
        let is_last = position == last_position;
        let header = match checked_header(name, &bytes, index, is_last, &scan)? {
            Ok(header) => header,
            Err(broken) => {
                found = Some((broken, position));
                break;
            }
        };
        scan.log_last_seq = header.first_seq - 1;
        scan.index_next = index + 1;
        let limit = bytes
            .len()
            .min(usize::try_from(header.size).unwrap_or(usize::MAX));
        let mut info = SegmentInfo::new(header);
        let segment = Segment {
            name,
            bytes: &bytes[..limit],
            version: header.version,
        };
        let (offset, stop) = read_records(segment, &mut scan, &mut info, &mut deliver)?;
        let garbage = bytes[offset..limit].iter().any(|&byte| byte != 0);
        let short = (bytes.len() as u64) < header.size;
        let reason = stop.or(garbage.then_some(Corruption::Garbage));
        scan.segments.push(ScannedSegment {
            name: name.clone(),
            file,
            info,
            needs_zeroing: reason.is_some() || short,
        });
        if let Some(reason) = reason {
            let broken = Break {
                segment: name.clone(),
                offset: offset as u64,
                expected: scan.log_last_seq + 1,
                reason,
                drop_segment: false,
            };
            // The rest of this segment is searched for evidence together with later ones.
            found = Some((broken, position));
            break;
        }
    }
    let Some((broken, position)) = found else {
        return Ok(scan);
    };
    decide(storage, scan, broken, &indexed[position..])
}

/// Cuts the log at `broken` or fails, depending on the evidence in `rest` (the segment of the
/// break, or the one after it for a break at a segment end, and all later ones).
fn decide<S: Storage>(
    storage: &S,
    mut scan: WalScan<S::File>,
    broken: Break,
    rest: &[(u64, &String)],
) -> Result<WalScan<S::File>, StoreError> {
    let mut evidence = Evidence {
        after_seq: scan.log_last_seq,
        synced_max: 0,
        records: 0,
    };
    for (position, &(_, name)) in rest.iter().enumerate() {
        let io = |operation| move |error| StoreError::io(name, operation, error);
        let file = storage.open(name).map_err(io(Operation::Open))?;
        let bytes = read_all(&file).map_err(io(Operation::Read))?;
        let from = if position == 0 && *name == broken.segment && !broken.drop_segment {
            broken.offset as usize
        } else {
            SEGMENT_HEADER_BYTES
        };
        // An unreadable header cannot say the segment is of the first format; then records
        // with epochs count too.
        let version = SegmentHeader::parse(&bytes).map_or(WAL_FORMAT_VERSION, |h| h.version);
        evidence.search(&bytes, from, version);
        let kept = position == 0 && *name == broken.segment && !broken.drop_segment;
        if !kept {
            scan.dropped.push(name.clone());
        }
    }
    if evidence.synced_max >= broken.expected {
        return Err(StoreError::corrupt(
            &broken.segment,
            broken.offset,
            broken.reason,
        ));
    }
    scan.cut = Some(TailCut {
        file: broken.segment,
        offset: broken.offset,
        reason: broken.reason,
        records_dropped: evidence.records,
        segments_dropped: scan.dropped.clone(),
    });
    Ok(scan)
}

/// Valid records found after a break.
struct Evidence {
    /// Only records numbered above this count: older ones cannot follow the break.
    after_seq: u64,
    synced_max: u64,
    records: u64,
}

impl Evidence {
    /// Looks for valid records at every aligned offset of `bytes` (a segment of log format
    /// `version`) from `from`.
    fn search(&mut self, bytes: &[u8], from: usize, version: u32) {
        let mut offset = from.next_multiple_of(RECORD_ALIGN_BYTES);
        while offset + RECORD_HEADER_BYTES <= bytes.len() {
            let window = &bytes[offset..];
            if is_end(window) {
                offset += RECORD_ALIGN_BYTES;
                continue;
            }
            match check_record(window, version) {
                Ok(record) if record.seq > self.after_seq => {
                    self.synced_max = self.synced_max.max(record.synced_seq);
                    self.records += 1;
                    offset += record.size.max(RECORD_ALIGN_BYTES);
                }
                _ => offset += RECORD_ALIGN_BYTES,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_record, RecordRef};

    #[test]
    fn the_search_finds_valid_records_past_damage() {
        let mut bytes = vec![0u8; 16];
        bytes.extend_from_slice(&[0xab; 40]);
        for (seq, synced) in [(3, 1), (4, 2), (1, 0)] {
            encode_record(&mut bytes, seq, synced, 0, "db", RecordRef::Rules("r"))
                .expect("encodes");
            bytes.extend_from_slice(&[0u8; 24]);
        }
        let mut evidence = Evidence {
            after_seq: 2,
            synced_max: 0,
            records: 0,
        };
        evidence.search(&bytes, 5, WAL_FORMAT_VERSION);
        // Records 3 and 4 count; record 1 is older than the break and cannot follow it.
        assert_eq!((evidence.records, evidence.synced_max), (2, 2));
    }
}
