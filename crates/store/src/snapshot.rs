//! Snapshots: one database's whole state in one file, written as a stream.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "HEARTHSN"
//!      8     4  format version (u32 LE), 1, 2 or 3
//!     12     4  crc32c of bytes 0..12 and 16..32
//!     16     8  covered sequence number: the state includes every record up to it
//!     24     8  version 1: zero; versions 2 and 3: the database's fencing epoch (u64 LE,
//!               zero in version 3 on a single node)
//!     32     …  frames:  length u32 | crc32c u32 | data   (length 1 ..= 256 KiB)
//!      …    16  end:     0 u32     | crc32c u32 | total data bytes u64
//! ```
//!
//! Each frame's checksum continues the previous one (the header's for the first), covering
//! its length and data, so frames cannot be lost, repeated or reordered unnoticed; the end
//! frame makes truncation visible. The frames' data, concatenated, is: the database name, the
//! rules (tag 0, or tag 1 and the text), in version 3 only the settings document (the same
//! way), and the root in the value encoding of `codec.rs`.
//!
//! The fencing epoch (the highest the log held for the database when the snapshot was taken,
//! see `writer.rs`) outlives the log records it came from: recovery takes it as the
//! database's epoch when the log has been truncated past them. A snapshot without one
//! (epoch 0: a single node) is written as version 1, which older builds read too. A database
//! with a settings document (`RecordBody::Settings`) is written as version 3, which builds
//! before it refuse as a newer format rather than misread.
//!
//! The writer encodes the tree depth first into a frame-sized buffer and writes each frame as
//! it fills, so memory stays at one frame however large the tree; the tree itself is a clone
//! of the root (O(1)), so the shard keeps writing while a snapshot is taken on another
//! thread. The file is written under a temporary name, synced, renamed, and the directory
//! synced: a snapshot is either complete under its final name or absent.

use std::io;
use std::sync::Arc;

use hearth_tree::Node;

use crate::codec::{put_node, put_str, read_node, read_str, read_u8, DecodeError, Sink, Source};
use crate::error::{Corruption, Operation, StoreError};
use crate::names::{
    snapshot_name, temporary_name, validate_database_name, MAX_DATABASE_NAME_BYTES,
};
use crate::record::{MAX_RULES_BYTES, MAX_SETTINGS_BYTES};
use crate::storage::{Storage, StorageFile};

/// The first bytes of every snapshot.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"HEARTHSN";

/// The newest version of the snapshot format, which this build writes for a snapshot with a
/// fencing epoch (one without is written as version 1) and reads with every older one.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 3;

/// The snapshot format without an epoch.
const VERSION_WITHOUT_EPOCH: u32 = 1;

/// The snapshot format with an epoch and without a settings document.
const VERSION_WITHOUT_SETTINGS: u32 = 2;

/// Bytes of the snapshot header.
pub const SNAPSHOT_HEADER_BYTES: usize = 32;

/// Data bytes per frame: the writer's memory, and the unit a reader verifies before using.
pub const SNAPSHOT_FRAME_BYTES: usize = 256 * 1024;

const FRAME_HEADER_BYTES: usize = 8;
/// The tags of an optional text (the rules, the settings document).
const RULES_ABSENT: u8 = 0;
const RULES_PRESENT: u8 = 1;

/// A snapshot on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub name: String,
    pub database: Arc<str>,
    pub covered_seq: u64,
    pub bytes: u64,
}

/// A database state read from a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub database: Arc<str>,
    pub covered_seq: u64,
    /// The database's fencing epoch when it was taken (0 outside a cluster).
    pub epoch: u64,
    pub rules: Option<Arc<str>>,
    /// Its settings document (version 3), if it has one.
    pub settings: Option<Arc<str>>,
    pub root: Node,
}

/// What a snapshot's header says, once its checksums were verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotHeader {
    pub covered_seq: u64,
    pub epoch: u64,
    /// The format version, which says whether a settings slot follows the rules.
    version: u32,
}

/// Writes a snapshot of `database` whose state includes every record up to `covered_seq`,
/// without a fencing epoch. Blocking; meant for a thread other than the shard's.
pub fn write_snapshot<S: Storage>(
    storage: &S,
    database: &str,
    covered_seq: u64,
    rules: Option<&str>,
    root: &Node,
) -> Result<SnapshotInfo, StoreError> {
    write_snapshot_with_epoch(storage, database, covered_seq, 0, rules, root)
}

/// Writes a snapshot of `database` whose state includes every record up to `covered_seq`,
/// carrying the database's fencing epoch `epoch`. Blocking; meant for a thread other than
/// the shard's.
pub fn write_snapshot_with_epoch<S: Storage>(
    storage: &S,
    database: &str,
    covered_seq: u64,
    epoch: u64,
    rules: Option<&str>,
    root: &Node,
) -> Result<SnapshotInfo, StoreError> {
    write_database_snapshot(storage, database, covered_seq, epoch, rules, None, root)
}

/// Writes a snapshot of `database` whose state includes every record up to `covered_seq`: its
/// fencing epoch `epoch` (0 on a single node), rules, settings document and tree. Blocking;
/// meant for a thread other than the shard's.
pub fn write_database_snapshot<S: Storage>(
    storage: &S,
    database: &str,
    covered_seq: u64,
    epoch: u64,
    rules: Option<&str>,
    settings: Option<&str>,
    root: &Node,
) -> Result<SnapshotInfo, StoreError> {
    validate_database_name(database)?;
    let name = snapshot_name(database, covered_seq);
    let temporary = temporary_name(&name);
    let io = |file: &str, operation| {
        let file = file.to_owned();
        move |error| StoreError::io(&file, operation, error)
    };
    // A leftover from a crash while writing the same snapshot.
    match storage.remove(&temporary) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            return Err(StoreError::io(&temporary, Operation::Remove, error));
        }
        _ => {}
    }
    let file = storage
        .create(&temporary)
        .map_err(io(&temporary, Operation::Create))?;
    let mut header = [0u8; SNAPSHOT_HEADER_BYTES];
    header[..8].copy_from_slice(&SNAPSHOT_MAGIC);
    let version = match (settings, epoch) {
        (Some(_), _) => SNAPSHOT_FORMAT_VERSION,
        (None, 0) => VERSION_WITHOUT_EPOCH,
        (None, _) => VERSION_WITHOUT_SETTINGS,
    };
    header[8..12].copy_from_slice(&version.to_le_bytes());
    header[16..24].copy_from_slice(&covered_seq.to_le_bytes());
    header[24..32].copy_from_slice(&epoch.to_le_bytes());
    let crc = header_crc(&header);
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    file.write_at(0, &header)
        .map_err(io(&temporary, Operation::Write))?;
    let mut frames = FrameWriter {
        file: &file,
        name: &temporary,
        offset: SNAPSHOT_HEADER_BYTES as u64,
        buffer: Vec::with_capacity(FRAME_HEADER_BYTES + SNAPSHOT_FRAME_BYTES),
        crc,
        total: 0,
    };
    frames.buffer.resize(FRAME_HEADER_BYTES, 0);
    put_str(&mut frames, database)?;
    put_text(&mut frames, rules)?;
    if settings.is_some() {
        // Version 3's slot.
        put_text(&mut frames, settings)?;
    }
    put_node(&mut frames, root)?;
    let bytes = frames.finish()?;
    file.sync_data().map_err(io(&temporary, Operation::Sync))?;
    drop(file);
    storage
        .rename(&temporary, &name)
        .map_err(io(&temporary, Operation::Rename))?;
    storage.sync_dir().map_err(io(&name, Operation::SyncDir))?;
    Ok(SnapshotInfo {
        name,
        database: Arc::from(database),
        covered_seq,
        bytes,
    })
}

/// An optional text: a tag, then the text if there is one.
fn put_text<F: StorageFile>(
    frames: &mut FrameWriter<'_, F>,
    text: Option<&str>,
) -> Result<(), StoreError> {
    match text {
        None => frames.put(&[RULES_ABSENT]),
        Some(text) => {
            frames.put(&[RULES_PRESENT])?;
            put_str(frames, text)
        }
    }
}

fn header_crc(header: &[u8]) -> u32 {
    crc32c::crc32c_append(
        crc32c::crc32c(&header[..12]),
        &header[16..SNAPSHOT_HEADER_BYTES],
    )
}

/// Cuts the encoded stream into frames and writes each as it fills.
struct FrameWriter<'a, F> {
    file: &'a F,
    name: &'a str,
    offset: u64,
    /// A frame header's room, then data.
    buffer: Vec<u8>,
    crc: u32,
    total: u64,
}

impl<F: StorageFile> FrameWriter<'_, F> {
    fn flush(&mut self) -> Result<(), StoreError> {
        let len = self.buffer.len() - FRAME_HEADER_BYTES;
        if len == 0 {
            return Ok(());
        }
        // `len` ≤ SNAPSHOT_FRAME_BYTES.
        self.buffer[..4].copy_from_slice(&(len as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(self.crc, &self.buffer[..4]);
        self.crc = crc32c::crc32c_append(crc, &self.buffer[FRAME_HEADER_BYTES..]);
        self.buffer[4..8].copy_from_slice(&self.crc.to_le_bytes());
        self.file
            .write_at(self.offset, &self.buffer)
            .map_err(|error| StoreError::io(self.name, Operation::Write, error))?;
        self.offset += self.buffer.len() as u64;
        self.total += len as u64;
        self.buffer.truncate(FRAME_HEADER_BYTES);
        Ok(())
    }

    /// Writes the last frame and the end frame; returns the file's size.
    fn finish(mut self) -> Result<u64, StoreError> {
        self.flush()?;
        let mut end = [0u8; 16];
        end[8..].copy_from_slice(&self.total.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c_append(self.crc, &end[..4]), &end[8..]);
        end[4..8].copy_from_slice(&crc.to_le_bytes());
        self.file
            .write_at(self.offset, &end)
            .map_err(|error| StoreError::io(self.name, Operation::Write, error))?;
        Ok(self.offset + end.len() as u64)
    }
}

impl<F: StorageFile> Sink for FrameWriter<'_, F> {
    type Error = StoreError;

    fn put(&mut self, mut data: &[u8]) -> Result<(), StoreError> {
        while !data.is_empty() {
            let room = FRAME_HEADER_BYTES + SNAPSHOT_FRAME_BYTES - self.buffer.len();
            let (now, later) = data.split_at(room.min(data.len()));
            self.buffer.extend_from_slice(now);
            data = later;
            if self.buffer.len() == FRAME_HEADER_BYTES + SNAPSHOT_FRAME_BYTES {
                self.flush()?;
            }
        }
        Ok(())
    }
}

/// Reads a snapshot, verifying every frame before its bytes are decoded.
pub fn read_snapshot<S: Storage>(storage: &S, name: &str) -> Result<Snapshot, StoreError> {
    let file = storage
        .open(name)
        .map_err(|error| StoreError::io(name, Operation::Open, error))?;
    let (mut frames, header) = FrameReader::start(&file, name)?;
    let covered_seq = header.covered_seq;
    let decoded = (|| {
        let database = read_str(&mut frames, MAX_DATABASE_NAME_BYTES as u64)?;
        let rules = read_text(&mut frames, MAX_RULES_BYTES)?;
        let settings = if header.version >= SNAPSHOT_FORMAT_VERSION {
            read_text(&mut frames, MAX_SETTINGS_BYTES)?
        } else {
            None
        };
        let root = read_node(&mut frames)?;
        frames.finish()?;
        Ok((database, rules, settings, root))
    })();
    let (database, rules, settings, root) = decoded.map_err(|error| match error {
        ReadError::Store(error) => error,
        ReadError::Decode(error) => {
            StoreError::corrupt(name, frames.frame_offset, Corruption::Payload(error))
        }
    })?;
    if name != snapshot_name(&database, covered_seq) {
        let reason = Corruption::Header("the database or sequence number differs from the name");
        return Err(StoreError::corrupt(name, 0, reason));
    }
    Ok(Snapshot {
        database,
        covered_seq,
        epoch: header.epoch,
        rules,
        settings,
        root,
    })
}

/// An optional text of at most `limit` bytes: a tag, then the text if the tag says so.
fn read_text<F: StorageFile>(
    frames: &mut FrameReader<'_, F>,
    limit: u64,
) -> Result<Option<Arc<str>>, ReadError> {
    match read_u8(frames)? {
        RULES_ABSENT => Ok(None),
        RULES_PRESENT => Ok(Some(read_str(frames, limit)?)),
        tag => Err(DecodeError::Tag(tag).into()),
    }
}

/// Checks a snapshot's checksums from its header to its end frame without decoding it, and
/// returns its header: the sequence number it covers and its epoch. This costs a read of the file, not the memory and
/// time of building its tree: recovery uses it to leave a database on disk until first use
/// while still knowing, at start, that its snapshot can be read.
pub fn verify_snapshot<S: Storage>(storage: &S, name: &str) -> Result<SnapshotHeader, StoreError> {
    let file = storage
        .open(name)
        .map_err(|error| StoreError::io(name, Operation::Open, error))?;
    let (mut frames, header) = FrameReader::start(&file, name)?;
    let verified = (|| {
        while frames.next_frame()? {}
        if frames.offset != frames.size {
            return Err(frames.corrupt(Corruption::Garbage));
        }
        Ok(())
    })();
    verified.map_err(|error| match error {
        ReadError::Store(error) => error,
        ReadError::Decode(error) => {
            StoreError::corrupt(name, frames.frame_offset, Corruption::Payload(error))
        }
    })?;
    Ok(header)
}

enum ReadError {
    Decode(DecodeError),
    Store(StoreError),
}

impl From<DecodeError> for ReadError {
    fn from(error: DecodeError) -> ReadError {
        ReadError::Decode(error)
    }
}

impl From<StoreError> for ReadError {
    fn from(error: StoreError) -> ReadError {
        ReadError::Store(error)
    }
}

/// Pulls verified frames from a snapshot file.
struct FrameReader<'a, F> {
    file: &'a F,
    name: &'a str,
    size: u64,
    /// Where the next frame starts.
    offset: u64,
    /// Where the frame being consumed starts (for error messages).
    frame_offset: u64,
    data: Vec<u8>,
    position: usize,
    crc: u32,
    total: u64,
    ended: bool,
}

impl<'a, F: StorageFile> FrameReader<'a, F> {
    /// Checks the header of the snapshot `file` (named `name`) and returns a reader of its
    /// frames, with what the header says.
    fn start(
        file: &'a F,
        name: &'a str,
    ) -> Result<(FrameReader<'a, F>, SnapshotHeader), StoreError> {
        let io = |operation| move |error| StoreError::io(name, operation, error);
        let size = file.size().map_err(io(Operation::Read))?;
        let mut header = [0u8; SNAPSHOT_HEADER_BYTES];
        if size < SNAPSHOT_HEADER_BYTES as u64 {
            return Err(StoreError::corrupt(name, 0, Corruption::ShortHeader));
        }
        file.read_at(0, &mut header).map_err(io(Operation::Read))?;
        if header[..8] != SNAPSHOT_MAGIC {
            return Err(StoreError::corrupt(name, 0, Corruption::Magic));
        }
        let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        if !(VERSION_WITHOUT_EPOCH..=SNAPSHOT_FORMAT_VERSION).contains(&version) {
            return Err(StoreError::UnsupportedVersion {
                file: name.to_owned(),
                found: version,
                supported: SNAPSHOT_FORMAT_VERSION,
            });
        }
        let crc = header_crc(&header);
        let mut epoch = [0u8; 8];
        epoch.copy_from_slice(&header[24..32]);
        let epoch = u64::from_le_bytes(epoch);
        // Version 1 has zeros where the epoch is; version 2 is written only with one;
        // version 3 with or without.
        let epoch_fits = version == SNAPSHOT_FORMAT_VERSION
            || (version == VERSION_WITHOUT_EPOCH) == (epoch == 0);
        if crc.to_le_bytes() != header[12..16] || !epoch_fits {
            return Err(StoreError::corrupt(name, 0, Corruption::HeaderChecksum));
        }
        let mut covered = [0u8; 8];
        covered.copy_from_slice(&header[16..24]);
        let frames = FrameReader {
            file,
            name,
            size,
            offset: SNAPSHOT_HEADER_BYTES as u64,
            frame_offset: SNAPSHOT_HEADER_BYTES as u64,
            data: Vec::new(),
            position: 0,
            crc,
            total: 0,
            ended: false,
        };
        let header = SnapshotHeader {
            covered_seq: u64::from_le_bytes(covered),
            epoch,
            version,
        };
        Ok((frames, header))
    }

    fn corrupt(&self, reason: Corruption) -> ReadError {
        ReadError::Store(StoreError::corrupt(self.name, self.offset, reason))
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if offset + buf.len() as u64 > self.size {
            return Err(self.corrupt(Corruption::MissingEnd));
        }
        self.file
            .read_at(offset, buf)
            .map_err(|error| ReadError::Store(StoreError::io(self.name, Operation::Read, error)))
    }

    /// Loads the next frame; false at the end frame.
    fn next_frame(&mut self) -> Result<bool, ReadError> {
        if self.ended {
            return Ok(false);
        }
        let mut header = [0u8; FRAME_HEADER_BYTES];
        self.read(self.offset, &mut header)?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let stored = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let crc = crc32c::crc32c_append(self.crc, &header[..4]);
        if len == 0 {
            let mut total = [0u8; 8];
            self.read(self.offset + FRAME_HEADER_BYTES as u64, &mut total)?;
            if crc32c::crc32c_append(crc, &total) != stored {
                return Err(self.corrupt(Corruption::Checksum));
            }
            let expected = u64::from_le_bytes(total);
            if expected != self.total {
                let found = self.total;
                return Err(self.corrupt(Corruption::TotalLength { expected, found }));
            }
            self.offset += (FRAME_HEADER_BYTES + total.len()) as u64;
            self.ended = true;
            return Ok(false);
        }
        if len as usize > SNAPSHOT_FRAME_BYTES {
            return Err(self.corrupt(Corruption::FrameLength(u64::from(len))));
        }
        self.data.resize(len as usize, 0);
        let mut data = std::mem::take(&mut self.data);
        let read = self.read(self.offset + FRAME_HEADER_BYTES as u64, &mut data);
        self.data = data;
        read?;
        if crc32c::crc32c_append(crc, &self.data) != stored {
            return Err(self.corrupt(Corruption::Checksum));
        }
        self.crc = stored;
        self.frame_offset = self.offset;
        self.offset += (FRAME_HEADER_BYTES + self.data.len()) as u64;
        self.total += u64::from(len);
        self.position = 0;
        Ok(true)
    }

    /// Succeeds if the value ended exactly where the data does, at the end of the file.
    fn finish(&mut self) -> Result<(), ReadError> {
        let left = self.data.len() - self.position;
        if left > 0 || self.next_frame()? {
            return Err(ReadError::Decode(DecodeError::Trailing(left.max(1))));
        }
        if self.offset != self.size {
            return Err(self.corrupt(Corruption::Garbage));
        }
        Ok(())
    }
}

impl<F: StorageFile> Source for FrameReader<'_, F> {
    type Error = ReadError;

    fn read_into(&mut self, mut buf: &mut [u8]) -> Result<(), ReadError> {
        while !buf.is_empty() {
            if self.position == self.data.len() && !self.next_frame()? {
                return Err(ReadError::Decode(DecodeError::Truncated));
            }
            let available = &self.data[self.position..];
            let len = available.len().min(buf.len());
            buf[..len].copy_from_slice(&available[..len]);
            self.position += len;
            buf = &mut buf[len..];
        }
        Ok(())
    }

    /// Bytes that lie in the current frame (nearly all of them: frames are far larger than
    /// most strings) are handed over in place, without a copy.
    fn with_bytes<T>(&mut self, len: usize, f: impl FnOnce(&[u8]) -> T) -> Result<T, ReadError> {
        if let Some(bytes) = self.data.get(self.position..self.position + len) {
            self.position += len;
            return Ok(f(bytes));
        }
        let mut buf = vec![0; len];
        self.read_into(&mut buf)?;
        Ok(f(&buf))
    }
}
