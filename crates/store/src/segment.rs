//! Log segments: the header format and the pure accounting of what each segment holds.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "HEARTHWL"
//!      8     4  log format version (u32 LE): 2, or 1 for a log written before records
//!               carried the fencing epoch
//!     12     4  crc32c of bytes 0..12 and 16..64
//!     16     8  segment index (u64 LE), the number in the file name
//!     24     8  first sequence number stored in this segment
//!     32     8  previous sequence number: the last one in the log before this segment (0: none)
//!     40     8  segment size in bytes, header included (the preallocated file length)
//!     48    16  zero
//!     64     …  records, then zeros to the end
//! ```
//!
//! A segment is created at its full size and filled with zeros before any record goes into it,
//! so that appending never changes the file's size or block map and fdatasync writes only data.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::error::Corruption;

/// Size of a new segment. Large enough that creating one (a zero fill and two syncs) is rare,
/// small enough that truncation frees space in useful steps and recovery reads a bounded tail.
pub const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// Size of a segment made on the commit path because no spare was ready (the writes of that
/// batch wait for its zero fill). Small, so that the wait is milliseconds; the next rollover
/// usually finds the spare made in the background meanwhile.
pub const INLINE_SEGMENT_BYTES: u64 = 1024 * 1024;

/// Bytes of a segment header; records start here.
pub const SEGMENT_HEADER_BYTES: usize = 64;

/// The first bytes of every segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"HEARTHWL";

/// The version of the log format this build writes (see FORMAT.md for its history). It also
/// reads [`WAL_FORMAT_VERSION_NO_TRIGGERED`], [`WAL_FORMAT_VERSION_NO_AUDIT`],
/// [`WAL_FORMAT_VERSION_NO_SETTINGS`] and [`WAL_FORMAT_VERSION_NO_EPOCH`].
pub const WAL_FORMAT_VERSION: u32 = 5;

/// The log format before trigger event records (kind 5): the same layout, read and never
/// appended to, for the same reason as [`WAL_FORMAT_VERSION_NO_SETTINGS`].
pub const WAL_FORMAT_VERSION_NO_TRIGGERED: u32 = 4;

/// The log format before audit records (kind 4): the same layout, read and never appended
/// to, for the same reason as [`WAL_FORMAT_VERSION_NO_SETTINGS`].
pub const WAL_FORMAT_VERSION_NO_AUDIT: u32 = 3;

/// The log format before settings records (kind 3): the same layout, which this build reads
/// and never appends to, so that a build that knows no settings record refuses a log that
/// may hold one (`UnsupportedVersion`) rather than take it for damage.
pub const WAL_FORMAT_VERSION_NO_SETTINGS: u32 = 2;

/// The first log format, whose records have zeros where format 2 has the fencing epoch. Its
/// segments are read as if every record carried epoch 0, and never appended to: the first
/// record after recovery starts a new segment of the current format, so that a build that
/// only knows format 1 refuses the log (`UnsupportedVersion`) instead of reading epochs as
/// damage.
pub const WAL_FORMAT_VERSION_NO_EPOCH: u32 = 1;

/// The header of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The log format of the segment's records ([`WAL_FORMAT_VERSION`] for a new one).
    pub version: u32,
    pub index: u64,
    pub first_seq: u64,
    pub previous_seq: u64,
    pub size: u64,
}

/// Why a segment header was refused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HeaderError {
    Corrupt(Corruption),
    Version(u32),
}

impl SegmentHeader {
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES] {
        let mut bytes = [0u8; SEGMENT_HEADER_BYTES];
        bytes[..8].copy_from_slice(&SEGMENT_MAGIC);
        bytes[8..12].copy_from_slice(&self.version.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.index.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.first_seq.to_le_bytes());
        bytes[32..40].copy_from_slice(&self.previous_seq.to_le_bytes());
        bytes[40..48].copy_from_slice(&self.size.to_le_bytes());
        let crc = header_crc(&bytes);
        bytes[12..16].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Parses the header at the start of `bytes`. The version is checked before the checksum
    /// so that a file of a newer format is reported as such, not as damage.
    pub(crate) fn parse(bytes: &[u8]) -> Result<SegmentHeader, HeaderError> {
        let corrupt = |reason| Err(HeaderError::Corrupt(reason));
        let Some(bytes) = bytes.get(..SEGMENT_HEADER_BYTES) else {
            return corrupt(Corruption::ShortHeader);
        };
        if bytes[..8] != SEGMENT_MAGIC {
            return corrupt(Corruption::Magic);
        }
        let word = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(word)
        };
        let version = word(8) as u32;
        if !(WAL_FORMAT_VERSION_NO_EPOCH..=WAL_FORMAT_VERSION).contains(&version) {
            return Err(HeaderError::Version(version));
        }
        if header_crc(bytes) != (word(12) as u32) {
            return corrupt(Corruption::HeaderChecksum);
        }
        let header = SegmentHeader {
            version,
            index: word(16),
            first_seq: word(24),
            previous_seq: word(32),
            size: word(40),
        };
        if header.first_seq == 0 || header.previous_seq >= header.first_seq {
            return corrupt(Corruption::Header("sequence numbers out of order"));
        }
        if header.size < SEGMENT_HEADER_BYTES as u64 || !header.size.is_multiple_of(8) {
            return corrupt(Corruption::Header("impossible segment size"));
        }
        if bytes[48..].iter().any(|&byte| byte != 0) {
            return corrupt(Corruption::Reserved);
        }
        Ok(header)
    }
}

fn header_crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(
        crc32c::crc32c(&bytes[..12]),
        &bytes[16..SEGMENT_HEADER_BYTES],
    )
}

/// What one segment holds, as far as appending and truncation care.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentInfo {
    pub header: SegmentHeader,
    /// Bytes in use: the header and the records (the next record goes here).
    pub used: u64,
    /// The last sequence number stored, if any record is.
    pub last_seq: Option<u64>,
    /// For each database with records here, the last sequence number of its records.
    pub databases: BTreeMap<Arc<str>, u64>,
}

impl SegmentInfo {
    pub(crate) fn new(header: SegmentHeader) -> SegmentInfo {
        SegmentInfo {
            header,
            used: SEGMENT_HEADER_BYTES as u64,
            last_seq: None,
            databases: BTreeMap::new(),
        }
    }

    /// Accounts for a record of `size` bytes at the end of the segment.
    pub(crate) fn add(&mut self, seq: u64, database: &str, size: u64) {
        self.used += size;
        self.last_seq = Some(seq);
        match self.databases.get_mut(database) {
            Some(last) => *last = seq,
            None => {
                self.databases.insert(Arc::from(database), seq);
            }
        }
    }
}

/// Where the next record goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// At `offset` of the current segment.
    Append { index: u64, offset: u64 },
    /// At the start of a new segment with this header, which must be created first.
    Rollover { header: SegmentHeader },
}

/// The segments of a log, oldest first; the last one is the one being appended to.
#[derive(Debug, Clone)]
pub struct SegmentTable {
    segments: VecDeque<SegmentInfo>,
    size_target: u64,
    index_next: u64,
}

impl SegmentTable {
    /// A table of recovered `segments` (oldest first). New segments get `size_target` bytes,
    /// or more for a record that would not fit.
    pub(crate) fn new(segments: Vec<SegmentInfo>, size_target: u64, index_next: u64) -> Self {
        let index_next = segments
            .last()
            .map_or(index_next, |last| last.header.index + 1);
        SegmentTable {
            segments: segments.into(),
            size_target: size_target.next_multiple_of(8),
            index_next,
        }
    }

    /// The size of a new segment.
    pub fn size_target(&self) -> u64 {
        self.size_target
    }

    pub fn segments(&self) -> impl ExactSizeIterator<Item = &SegmentInfo> {
        self.segments.iter()
    }

    /// The sequence number the log starts at (recovery falls back to an older snapshot only
    /// if the log reaches back past it).
    pub fn first_seq(&self) -> Option<u64> {
        self.segments
            .front()
            .map(|segment| segment.header.first_seq)
    }

    /// Places a record of `size` bytes with sequence number `seq` after `previous_seq`, the
    /// last one in the log. A new segment is needed when there is none, when the record does
    /// not fit, when the sequence jumps (after recovery found snapshots newer than the log;
    /// a segment header is the only place where the log may skip numbers), or when the last
    /// segment is of an older log format.
    #[cfg(test)]
    pub(crate) fn place(&mut self, seq: u64, previous_seq: u64, size: u64) -> Placement {
        self.place_in(seq, previous_seq, size, self.size_target)
    }

    /// Like `place`, with `target` bytes for a new segment (still at least what the record
    /// needs).
    pub(crate) fn place_in(
        &mut self,
        seq: u64,
        previous_seq: u64,
        size: u64,
        target: u64,
    ) -> Placement {
        if let Some(active) = self.segments.back() {
            let fits = active.used + size <= active.header.size;
            let current = active.header.version == WAL_FORMAT_VERSION;
            if fits && current && seq == previous_seq + 1 {
                return Placement::Append {
                    index: active.header.index,
                    offset: active.used,
                };
            }
        }
        let header = SegmentHeader {
            version: WAL_FORMAT_VERSION,
            index: self.index_next,
            first_seq: seq,
            previous_seq,
            size: target
                .next_multiple_of(8)
                .max((SEGMENT_HEADER_BYTES as u64 + size).next_multiple_of(8)),
        };
        self.index_next += 1;
        self.segments.push_back(SegmentInfo::new(header));
        Placement::Rollover { header }
    }

    /// Accounts for the record just placed.
    pub(crate) fn add(&mut self, seq: u64, database: &str, size: u64) {
        if let Some(active) = self.segments.back_mut() {
            active.add(seq, database, size);
        }
    }

    /// How many segments at the front can be removed: those, never the active one, whose
    /// records are all durable and covered, for their database, by a durable snapshot.
    /// `covered(database)` is the sequence number the snapshot that recovery would load
    /// covers (0 without one).
    pub fn removable(&self, durable_seq: u64, covered: impl Fn(&str) -> u64) -> usize {
        let closed = self.segments.len().saturating_sub(1);
        self.segments
            .iter()
            .take(closed)
            .take_while(|segment| {
                segment.last_seq.is_none_or(|last| last <= durable_seq)
                    && segment
                        .databases
                        .iter()
                        .all(|(database, &last)| covered(database) >= last)
            })
            .count()
    }

    /// Forgets the first `count` segments and returns them.
    pub(crate) fn remove_front(&mut self, count: usize) -> Vec<SegmentInfo> {
        self.segments
            .drain(..count.min(self.segments.len()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(index: u64, first_seq: u64) -> SegmentHeader {
        SegmentHeader {
            version: WAL_FORMAT_VERSION,
            index,
            first_seq,
            previous_seq: first_seq - 1,
            size: 4096,
        }
    }

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let original = header(3, 100);
        let bytes = original.encode();
        assert_eq!(&bytes[..8], b"HEARTHWL");
        assert_eq!(SegmentHeader::parse(&bytes), Ok(original));
        for offset in 0..SEGMENT_HEADER_BYTES {
            let mut damaged = bytes;
            damaged[offset] ^= 4;
            assert!(SegmentHeader::parse(&damaged).is_err(), "offset {offset}");
        }
        let mut newer = bytes;
        newer[8] = 6;
        assert_eq!(SegmentHeader::parse(&newer), Err(HeaderError::Version(6)));
        let first_format = SegmentHeader {
            version: WAL_FORMAT_VERSION_NO_EPOCH,
            ..original
        };
        let bytes = first_format.encode();
        assert_eq!(bytes[8], 1);
        assert_eq!(SegmentHeader::parse(&bytes), Ok(first_format));
        assert_eq!(
            SegmentHeader::parse(&bytes[..63]),
            Err(HeaderError::Corrupt(Corruption::ShortHeader))
        );
        let backwards = SegmentHeader {
            previous_seq: 100,
            ..original
        };
        assert!(SegmentHeader::parse(&backwards.encode()).is_err());
    }

    #[test]
    fn records_roll_over_to_new_segments() {
        let mut table = SegmentTable::new(Vec::new(), 256, 1);
        let first = table.place(1, 0, 96);
        assert_eq!(
            first,
            Placement::Rollover {
                header: header(1, 1).with_size(256)
            }
        );
        table.add(1, "a", 96);
        assert_eq!(
            table.place(2, 1, 96),
            Placement::Append {
                index: 1,
                offset: 160
            }
        );
        table.add(2, "b", 96);
        // 64 + 96 + 96 = 256: full.
        assert!(
            matches!(table.place(3, 2, 8), Placement::Rollover { header } if header.index == 2)
        );
        table.add(3, "a", 8);
        // A record larger than a segment gets a segment of its own size.
        match table.place(4, 3, 1000) {
            Placement::Rollover { header } => assert_eq!(header.size, 1064),
            other => panic!("expected a rollover, got {other:?}"),
        }
        table.add(4, "a", 1000);
        // A jump in sequence numbers always starts a segment.
        assert!(
            matches!(table.place(9, 4, 8), Placement::Rollover { header }
            if header.first_seq == 9 && header.previous_seq == 4)
        );
        let sizes: Vec<u64> = table.segments().map(|s| s.used).collect();
        assert_eq!(sizes, vec![256, 72, 1064, 64]);
        assert_eq!(table.first_seq(), Some(1));
    }

    #[test]
    fn a_segment_of_the_first_format_is_never_appended_to() {
        let old = SegmentHeader {
            version: WAL_FORMAT_VERSION_NO_EPOCH,
            ..header(1, 1).with_size(4096)
        };
        let mut info = SegmentInfo::new(old);
        info.add(1, "a", 64);
        let mut table = SegmentTable::new(vec![info], 4096, 1);
        match table.place(2, 1, 64) {
            Placement::Rollover { header } => {
                assert_eq!((header.version, header.index), (WAL_FORMAT_VERSION, 2));
            }
            other => panic!("expected a rollover, got {other:?}"),
        }
        table.add(2, "a", 64);
        assert!(matches!(
            table.place(3, 2, 64),
            Placement::Append { index: 2, .. }
        ));
    }

    #[test]
    fn truncation_waits_for_every_database_and_durability() {
        let mut table = SegmentTable::new(Vec::new(), 128, 1);
        for (seq, database) in [(1, "a"), (2, "b"), (3, "a"), (4, "b")] {
            table.place(seq, seq - 1, 64);
            table.add(seq, database, 64);
        }
        assert_eq!(table.segments().len(), 4);
        let covered = |a: u64, b: u64| move |db: &str| if db == "a" { a } else { b };
        assert_eq!(table.removable(4, covered(0, 0)), 0);
        assert_eq!(table.removable(4, covered(1, 0)), 1);
        assert_eq!(table.removable(4, covered(3, 2)), 3);
        assert_eq!(
            table.removable(2, covered(3, 2)),
            2,
            "not beyond the durable point"
        );
        assert_eq!(
            table.removable(4, covered(9, 9)),
            3,
            "never the active segment"
        );
        let removed = table.remove_front(2);
        assert_eq!(removed.len(), 2);
        assert_eq!(table.first_seq(), Some(3));
    }

    impl SegmentHeader {
        fn with_size(mut self, size: u64) -> SegmentHeader {
            self.size = size;
            self
        }
    }
}
