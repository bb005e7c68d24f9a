//! Log records: the encoder and decoder of one record, pure functions over bytes.
//!
//! ```text
//! offset  size  field
//!      0     4  crc32c of bytes 4 .. 32 + length (the rest of the header and the payload)
//!      4     4  length of the payload in bytes (u32 LE)
//!      8     8  sequence number (u64 LE), ≥ 1
//!     16     8  synced sequence number (u64 LE): the highest one durable when this was written
//!     24     1  kind: 1 = write, 2 = rules, 3 = settings, 4 = audit
//!     25     7  fencing epoch (u56 LE) its database was owned under; 0 outside a cluster.
//!               Log format 1 (segment header version 1) has 7 zero bytes here.
//!     32     …  payload: database name (varint length + bytes), then the body of the kind
//!      …     …  zero padding to a multiple of 8 bytes
//! ```
//!
//! A header of 32 zero bytes is where the written part of a segment ends: a real record always
//! has a sequence number of at least 1. The synced sequence number lets recovery tell a tail
//! torn by a crash (records nobody was promised) from damage to records that were already
//! durable (see `scan.rs`). The epoch lets recovery and a follower refuse the late records
//! of an owner that lost its claim (see `recovery.rs`). Full description in FORMAT.md.

use std::sync::Arc;

use hearth_sync::Write;

use crate::codec::{self, infallible, put_str, put_write, read_str, DecodeError, SliceSource};
use crate::error::{Corruption, StoreError};
use crate::names::{validate_database_name, MAX_DATABASE_NAME_BYTES};
use crate::segment::{
    WAL_FORMAT_VERSION, WAL_FORMAT_VERSION_NO_AUDIT, WAL_FORMAT_VERSION_NO_EPOCH,
    WAL_FORMAT_VERSION_NO_TRIGGERED,
};

/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 32;

/// Records start at multiples of this, so that a search for records after damage only has to
/// look at one offset in eight.
pub const RECORD_ALIGN_BYTES: usize = 8;

/// Largest payload. Client messages are limited to 24 MiB of JSON, which the binary encoding
/// can grow by a few times at worst (arrays of one-digit numbers); the bound is far above that
/// and exists so that a damaged length never asks for gigabytes.
pub const MAX_RECORD_BYTES: u64 = 512 * 1024 * 1024;

/// Longest rules text a record carries (rules are JSON documents of a few kilobytes).
pub const MAX_RULES_BYTES: u64 = 16 * 1024 * 1024;

/// Largest fencing epoch a record carries: the 7 header bytes after the kind. etcd grants
/// one epoch per claim of a database, so this is never reached in practice.
pub const MAX_EPOCH: u64 = (1 << 56) - 1;

/// Longest settings document a record carries: the database's settings, its ruleset history
/// and labels (`hearth_ground::settings` keeps the history within 16 MiB of rules).
pub const MAX_SETTINGS_BYTES: u64 = 32 * 1024 * 1024;

const KIND_WRITE: u8 = 1;
const KIND_RULES: u8 = 2;
const KIND_SETTINGS: u8 = 3;
const KIND_AUDIT: u8 = 4;
const KIND_TRIGGERED: u8 = 5;

/// Longest audit entry a record carries: one JSON object naming a write's time, path, writer,
/// transport, address and granting rules (a few hundred bytes; the paths and rules it names
/// are bounded by the data and rules limits, so this bound only stops damage).
pub const MAX_AUDIT_BYTES: u64 = 1024 * 1024;

/// Longest trigger event a record carries: one change for one production trigger, its value
/// before and what changed (each bounded by the one event Firebase allows, 1 MB, under
/// `strictTriggerValidation`; JSON escaping may double it).
pub const MAX_TRIGGERED_BYTES: u64 = 4 * 1024 * 1024;

/// What a record says happened to its database.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RecordBody {
    /// An applied write, in resolved form.
    Write(Arc<Write>),
    /// The database's security rules were replaced by this text.
    Rules(Arc<str>),
    /// The database's settings document (its `/.settings` other than the rules in effect)
    /// was replaced by this JSON text. Builds before it refuse the record's kind.
    Settings(Arc<str>),
    /// The audit entry of the write record just before it (a database whose writes are
    /// audited, docs/audit.md): a JSON object the store does not read. Builds before it
    /// refuse the record's kind.
    Audit(Arc<str>),
    /// A change a write just before it made for one of the server's declared triggers
    /// (docs/triggers.md): a JSON object the store does not read, kept so that its delivery
    /// survives a crash and a failover. Builds before it refuse the record's kind.
    Triggered(Arc<str>),
}

/// A record body by reference, for encoding without cloning.
#[derive(Debug, Clone, Copy)]
pub enum RecordRef<'a> {
    Write(&'a Write),
    Rules(&'a str),
    Settings(&'a str),
    Audit(&'a str),
    Triggered(&'a str),
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub seq: u64,
    pub synced_seq: u64,
    /// The fencing epoch under which the database was owned when the record was written
    /// (0 outside a cluster, and in every record of log format 1).
    pub epoch: u64,
    pub database: Arc<str>,
    pub body: RecordBody,
}

/// The fixed fields of a record, read before the checksum is known to match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub(crate) seq: u64,
    pub(crate) synced_seq: u64,
    pub(crate) epoch: u64,
    pub(crate) kind: u8,
    /// Bytes of the payload.
    pub(crate) payload: usize,
    /// Bytes the record occupies, padding included.
    pub(crate) size: usize,
}

/// Space a record with `payload` bytes occupies.
pub(crate) fn padded_size(payload: usize) -> usize {
    (RECORD_HEADER_BYTES + payload).next_multiple_of(RECORD_ALIGN_BYTES)
}

/// Appends one record to `out`, in the current log format, and returns the bytes it
/// occupies. `epoch` is the fencing epoch its database is owned under (0 outside a cluster),
/// at most [`MAX_EPOCH`]. On error `out` is unchanged.
pub fn encode_record(
    out: &mut Vec<u8>,
    seq: u64,
    synced_seq: u64,
    epoch: u64,
    database: &str,
    body: RecordRef<'_>,
) -> Result<usize, StoreError> {
    validate_database_name(database)?;
    if epoch > MAX_EPOCH {
        return Err(StoreError::EpochTooLarge { epoch });
    }
    let start = out.len();
    out.resize(start + RECORD_HEADER_BYTES, 0);
    infallible(put_str(out, database));
    let kind = match body {
        RecordRef::Write(write) => {
            infallible(put_write(out, write));
            KIND_WRITE
        }
        RecordRef::Rules(rules) => {
            infallible(put_str(out, rules));
            KIND_RULES
        }
        RecordRef::Settings(settings) => {
            infallible(put_str(out, settings));
            KIND_SETTINGS
        }
        RecordRef::Audit(entry) => {
            infallible(put_str(out, entry));
            KIND_AUDIT
        }
        RecordRef::Triggered(event) => {
            infallible(put_str(out, event));
            KIND_TRIGGERED
        }
    };
    let payload = out.len() - start - RECORD_HEADER_BYTES;
    let too_large = match body {
        RecordRef::Rules(rules) => rules.len() as u64 > MAX_RULES_BYTES,
        RecordRef::Settings(settings) => settings.len() as u64 > MAX_SETTINGS_BYTES,
        RecordRef::Audit(entry) => entry.len() as u64 > MAX_AUDIT_BYTES,
        RecordRef::Triggered(event) => event.len() as u64 > MAX_TRIGGERED_BYTES,
        RecordRef::Write(_) => false,
    } || payload as u64 > MAX_RECORD_BYTES;
    if too_large {
        out.truncate(start);
        return Err(StoreError::RecordTooLarge {
            bytes: payload as u64,
            limit: MAX_RECORD_BYTES,
        });
    }
    let header = &mut out[start..start + RECORD_HEADER_BYTES];
    // `payload` ≤ MAX_RECORD_BYTES < 4 GiB, so it fits the u32 field.
    header[4..8].copy_from_slice(&(payload as u32).to_le_bytes());
    header[8..16].copy_from_slice(&seq.to_le_bytes());
    header[16..24].copy_from_slice(&synced_seq.to_le_bytes());
    header[24] = kind;
    header[25..32].copy_from_slice(&epoch.to_le_bytes()[..7]);
    let crc = crc32c::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    let size = padded_size(payload);
    out.resize(start + size, 0);
    Ok(size)
}

/// Whether `bytes` begins with an all-zero header (the end of the written part of a segment).
pub(crate) fn is_end(bytes: &[u8]) -> bool {
    bytes
        .get(..RECORD_HEADER_BYTES)
        .is_some_and(|header| header.iter().all(|&byte| byte == 0))
}

/// Checks the record at the start of `bytes` (which run to the end of the segment, whose
/// header says log format `version`): length, reserved bytes and checksum, without decoding
/// the payload. In format 1 the epoch bytes are reserved and must be zero.
pub(crate) fn check_record(bytes: &[u8], version: u32) -> Result<RecordHeader, Corruption> {
    let Some(header) = bytes.get(..RECORD_HEADER_BYTES) else {
        return Err(Corruption::Length(0));
    };
    let field = |range: std::ops::Range<usize>| {
        let mut word = [0u8; 8];
        word[..range.len()].copy_from_slice(&header[range]);
        u64::from_le_bytes(word)
    };
    let payload = field(4..8);
    let end = RECORD_HEADER_BYTES as u64 + payload;
    if payload > MAX_RECORD_BYTES || end > bytes.len() as u64 {
        return Err(Corruption::Length(payload));
    }
    if version == WAL_FORMAT_VERSION_NO_EPOCH && header[25..].iter().any(|&byte| byte != 0) {
        return Err(Corruption::Reserved);
    }
    // `end` ≤ `bytes.len()`, so it fits in usize.
    let end = end as usize;
    let stored = field(0..4) as u32;
    if crc32c::crc32c(&bytes[4..end]) != stored {
        return Err(Corruption::Checksum);
    }
    Ok(RecordHeader {
        seq: field(8..16),
        synced_seq: field(16..24),
        epoch: field(25..32),
        kind: header[24],
        payload: payload as usize,
        // Padding past the end of a segment only happens in damaged files; clamp so the caller
        // lands on the end rather than beyond it.
        size: padded_size(payload as usize).min(bytes.len()),
    })
}

/// Decodes the record at the start of `bytes` (which run to the end of the segment), in the
/// current log format.
pub fn decode_record(bytes: &[u8]) -> Result<(Record, usize), Corruption> {
    decode_record_in(bytes, WAL_FORMAT_VERSION)
}

/// Decodes the record at the start of `bytes`, in a segment of log format `version`.
pub(crate) fn decode_record_in(bytes: &[u8], version: u32) -> Result<(Record, usize), Corruption> {
    let header = check_record(bytes, version)?;
    let payload_end = RECORD_HEADER_BYTES + header.payload;
    let mut source = SliceSource::new(&bytes[RECORD_HEADER_BYTES..payload_end]);
    let payload = |error: DecodeError| Corruption::Payload(error);
    let database = read_str(&mut source, MAX_DATABASE_NAME_BYTES as u64).map_err(payload)?;
    if validate_database_name(&database).is_err() {
        return Err(Corruption::Payload(DecodeError::DatabaseName));
    }
    let body = match header.kind {
        KIND_WRITE => RecordBody::Write(Arc::new(codec::read_write(&mut source).map_err(payload)?)),
        KIND_RULES => RecordBody::Rules(read_str(&mut source, MAX_RULES_BYTES).map_err(payload)?),
        KIND_SETTINGS if version >= WAL_FORMAT_VERSION_NO_AUDIT => {
            RecordBody::Settings(read_str(&mut source, MAX_SETTINGS_BYTES).map_err(payload)?)
        }
        KIND_AUDIT if version >= WAL_FORMAT_VERSION_NO_TRIGGERED => {
            RecordBody::Audit(read_str(&mut source, MAX_AUDIT_BYTES).map_err(payload)?)
        }
        KIND_TRIGGERED if version >= WAL_FORMAT_VERSION => {
            RecordBody::Triggered(read_str(&mut source, MAX_TRIGGERED_BYTES).map_err(payload)?)
        }
        other => return Err(Corruption::UnknownKind(other)),
    };
    source.finish().map_err(payload)?;
    let record = Record {
        seq: header.seq,
        synced_seq: header.synced_seq,
        epoch: header.epoch,
        database,
        body,
    };
    Ok((record, header.size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::WAL_FORMAT_VERSION_NO_SETTINGS;
    use hearth_sync::{Change, WriteOp};
    use hearth_tree::{Node, Path, Priority};
    use serde_json::json;

    fn sample_write() -> Write {
        Write {
            base: Path::parse("/rooms/r1").expect("valid path"),
            ops: vec![
                WriteOp {
                    path: Path::parse("/title").expect("valid path"),
                    change: Change::Set(
                        Node::from_json(&json!({"text": "hi", "at": 1700000000000u64}))
                            .expect("valid value"),
                    ),
                },
                WriteOp {
                    path: Path::root(),
                    change: Change::Priority(Priority::Number(2.5)),
                },
            ],
        }
    }

    fn encode(seq: u64, synced: u64, database: &str, body: RecordRef<'_>) -> Vec<u8> {
        encode_in_epoch(seq, synced, 0, database, body)
    }

    fn encode_in_epoch(
        seq: u64,
        synced: u64,
        epoch: u64,
        database: &str,
        body: RecordRef<'_>,
    ) -> Vec<u8> {
        let mut bytes = Vec::new();
        let size = encode_record(&mut bytes, seq, synced, epoch, database, body).expect("encodes");
        assert_eq!(size, bytes.len());
        assert_eq!(size % RECORD_ALIGN_BYTES, 0);
        bytes
    }

    #[test]
    fn every_field_round_trips() {
        let write = sample_write();
        let bytes = encode_in_epoch(42, 40, 7, "chat-app", RecordRef::Write(&write));
        let (record, size) = decode_record(&bytes).expect("decodes");
        assert_eq!(size, bytes.len());
        assert_eq!(
            record,
            Record {
                seq: 42,
                synced_seq: 40,
                epoch: 7,
                database: "chat-app".into(),
                body: RecordBody::Write(Arc::new(write)),
            }
        );
        let rules = r#"{"rules": {".read": true}}"#;
        let bytes = encode_in_epoch(u64::MAX, 0, MAX_EPOCH, "d", RecordRef::Rules(rules));
        let (record, _) = decode_record(&bytes).expect("decodes");
        assert_eq!(record.seq, u64::MAX);
        assert_eq!(record.epoch, MAX_EPOCH);
        assert_eq!(record.body, RecordBody::Rules(rules.into()));
        let settings = r#"{"defaultWriteSizeLimit":"small"}"#;
        let bytes = encode_in_epoch(9, 9, 0, "d", RecordRef::Settings(settings));
        let (record, _) = decode_record(&bytes).expect("decodes");
        assert_eq!(record.body, RecordBody::Settings(settings.into()));
        assert_eq!(bytes[24], 3, "the settings kind");
        // A segment of the format before it holds no such record.
        assert_eq!(
            decode_record_in(&bytes, WAL_FORMAT_VERSION_NO_SETTINGS).map(|_| ()),
            Err(Corruption::UnknownKind(3))
        );
        let entry = r#"{"path":"/a","uid":"ada"}"#;
        let bytes = encode_in_epoch(10, 9, 0, "d", RecordRef::Audit(entry));
        let (record, _) = decode_record(&bytes).expect("decodes");
        assert_eq!(record.body, RecordBody::Audit(entry.into()));
        assert_eq!(bytes[24], 4, "the audit kind");
        // Nor does a segment of the format before audit records hold one; it holds settings.
        assert_eq!(
            decode_record_in(&bytes, WAL_FORMAT_VERSION_NO_AUDIT).map(|_| ()),
            Err(Corruption::UnknownKind(4))
        );
        let settings = encode_in_epoch(9, 9, 0, "d", RecordRef::Settings("{}"));
        assert!(decode_record_in(&settings, WAL_FORMAT_VERSION_NO_AUDIT).is_ok());
        let event = r#"{"trigger":"t","path":"/a","data":null,"delta":1}"#;
        let bytes = encode_in_epoch(11, 9, 0, "d", RecordRef::Triggered(event));
        let (record, _) = decode_record(&bytes).expect("decodes");
        assert_eq!(record.body, RecordBody::Triggered(event.into()));
        assert_eq!(bytes[24], 5, "the trigger event kind");
        // A segment of the format before trigger events holds none; it holds audit entries.
        assert_eq!(
            decode_record_in(&bytes, WAL_FORMAT_VERSION_NO_TRIGGERED).map(|_| ()),
            Err(Corruption::UnknownKind(5))
        );
        let audit = encode_in_epoch(10, 9, 0, "d", RecordRef::Audit(entry));
        assert!(decode_record_in(&audit, WAL_FORMAT_VERSION_NO_TRIGGERED).is_ok());
    }

    #[test]
    fn the_layout_is_as_documented() {
        let bytes = encode(7, 5, "db", RecordRef::Rules("r"));
        assert_eq!(
            &bytes[4..8],
            &5u32.to_le_bytes(),
            "payload: 1+2 name, 1+1 rules"
        );
        assert_eq!(&bytes[8..16], &7u64.to_le_bytes());
        assert_eq!(&bytes[16..24], &5u64.to_le_bytes());
        assert_eq!(bytes[24], KIND_RULES);
        assert_eq!(&bytes[25..32], &[0; 7], "epoch 0");
        assert_eq!(&bytes[32..37], b"\x02db\x01r");
        assert_eq!(bytes.len(), 40);
        let crc = crc32c::crc32c(&bytes[4..37]);
        assert_eq!(&bytes[..4], &crc.to_le_bytes());
        // The epoch is a 7-byte little-endian number after the kind.
        let bytes = encode_in_epoch(7, 5, 0x0102_0304_0506, "db", RecordRef::Rules("r"));
        assert_eq!(&bytes[25..32], &[6, 5, 4, 3, 2, 1, 0]);
        let crc = crc32c::crc32c(&bytes[4..37]);
        assert_eq!(&bytes[..4], &crc.to_le_bytes(), "the checksum covers it");
    }

    #[test]
    fn the_first_format_has_no_epoch() {
        // A record of log format 1 reads with epoch 0; epoch bytes there are damage.
        let old = encode(3, 2, "db", RecordRef::Rules("r"));
        let (record, _) = decode_record_in(&old, WAL_FORMAT_VERSION_NO_EPOCH).expect("decodes");
        assert_eq!((record.seq, record.epoch), (3, 0));
        let new = encode_in_epoch(3, 2, 9, "db", RecordRef::Rules("r"));
        assert_eq!(
            decode_record_in(&new, WAL_FORMAT_VERSION_NO_EPOCH),
            Err(Corruption::Reserved)
        );
        assert_eq!(decode_record(&new).expect("decodes").0.epoch, 9);
    }

    #[test]
    fn epochs_beyond_seven_bytes_are_refused() {
        let mut out = Vec::new();
        assert!(matches!(
            encode_record(&mut out, 1, 0, MAX_EPOCH + 1, "db", RecordRef::Rules("")),
            Err(StoreError::EpochTooLarge { epoch }) if epoch == MAX_EPOCH + 1
        ));
        assert!(out.is_empty());
    }

    #[test]
    fn damage_is_detected() {
        let bytes = encode(9, 8, "db", RecordRef::Write(&sample_write()));
        // Every single-bit flip in the covered bytes is caught by the checksum or the length.
        for offset in 0..bytes.len() - 1 {
            let mut damaged = bytes.clone();
            damaged[offset] ^= 0x10;
            match decode_record(&damaged) {
                Err(_) => {}
                Ok(_) => assert!(offset >= 32 && bytes[offset..].iter().all(|&b| b == 0)),
            }
        }
        let mut length = bytes.clone();
        length[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode_record(&length), Err(Corruption::Length(_))));
        let mut sequence = bytes.clone();
        sequence[8] ^= 1;
        assert_eq!(decode_record(&sequence), Err(Corruption::Checksum));
        let mut epoch = bytes.clone();
        epoch[30] = 1;
        assert_eq!(decode_record(&epoch), Err(Corruption::Checksum));
        assert!(decode_record(&bytes[..bytes.len() - 9]).is_err(), "torn");
    }

    #[test]
    fn unknown_kinds_with_good_checksums_are_reported() {
        let mut bytes = encode(1, 0, "db", RecordRef::Rules("r"));
        bytes[24] = 9;
        let crc = crc32c::crc32c(&bytes[4..37]);
        bytes[..4].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_record(&bytes), Err(Corruption::UnknownKind(9)));
    }

    #[test]
    fn zero_headers_end_the_log() {
        assert!(is_end(&[0; 40]));
        assert!(!is_end(&[0; 31]));
        assert!(!is_end(&encode(1, 0, "db", RecordRef::Rules(""))));
    }

    #[test]
    fn invalid_names_and_huge_rules_are_refused() {
        let mut out = vec![1, 2, 3];
        assert!(matches!(
            encode_record(&mut out, 1, 0, 0, "a/b", RecordRef::Rules("")),
            Err(StoreError::InvalidDatabaseName(_))
        ));
        let huge = "x".repeat(MAX_RULES_BYTES as usize + 1);
        assert!(matches!(
            encode_record(&mut out, 1, 0, 0, "db", RecordRef::Rules(&huge)),
            Err(StoreError::RecordTooLarge { .. })
        ));
        assert_eq!(out, vec![1, 2, 3]);
    }
}
