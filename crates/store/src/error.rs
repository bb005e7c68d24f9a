//! The errors of the store: disk failures (typed so that a full disk can be told from a broken
//! one), corruption found while reading (always naming the file and offset), and misuse.

use std::fmt;
use std::io;

use crate::codec::DecodeError;

/// The storage operation that failed, for error messages and for callers that react to some
/// failures differently (a failed `Sync` means data may be lost; a failed `Create` does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    Create,
    Open,
    Read,
    Write,
    SetLen,
    Sync,
    Rename,
    Remove,
    List,
    SyncDir,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Create => "creating",
            Operation::Open => "opening",
            Operation::Read => "reading",
            Operation::Write => "writing",
            Operation::SetLen => "resizing",
            Operation::Sync => "syncing",
            Operation::Rename => "renaming",
            Operation::Remove => "removing",
            Operation::List => "listing",
            Operation::SyncDir => "syncing the directory of",
        })
    }
}

/// Why bytes read from disk were refused. Every variant describes the bytes, not the file: the
/// file and offset travel beside it in [`StoreError::Corrupt`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    #[error("the file does not start with the expected magic bytes")]
    Magic,
    #[error("the header checksum does not match")]
    HeaderChecksum,
    #[error("the header disagrees with the file: {0}")]
    Header(&'static str),
    #[error("the file ends inside its header")]
    ShortHeader,
    #[error("a record length of {0} bytes does not fit in the segment")]
    Length(u64),
    #[error("the record checksum does not match")]
    Checksum,
    #[error("reserved header bytes are not zero")]
    Reserved,
    #[error("expected sequence number {expected}, found {found}")]
    Sequence { expected: u64, found: u64 },
    #[error("the log ends before sequence number {expected}, which a later segment follows")]
    MissingRecords { expected: u64 },
    #[error("bytes after the last record are not zero")]
    Garbage,
    #[error("unknown record kind {0}")]
    UnknownKind(u8),
    #[error("the payload is invalid: {0}")]
    Payload(DecodeError),
    #[error("a snapshot frame length of {0} bytes is beyond the limit")]
    FrameLength(u64),
    #[error("the snapshot ends before its end frame")]
    MissingEnd,
    #[error("the snapshot holds {found} bytes of data, its end frame says {expected}")]
    TotalLength { expected: u64, found: u64 },
}

/// An error of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The device is full (ENOSPC). Nothing from the failed operation on is durable.
    #[error("no space left on the device while {operation} {file}")]
    NoSpace {
        file: String,
        operation: Operation,
        #[source]
        source: io::Error,
    },
    /// Any other IO failure (EIO among them). Nothing from the failed operation on is durable.
    #[error("{operation} {file} failed: {source}")]
    Io {
        file: String,
        operation: Operation,
        #[source]
        source: io::Error,
    },
    /// A write or sync of the log failed earlier; the writer refuses everything until the log
    /// is reopened, because the kernel may have dropped the pages it could not write while
    /// reporting later syncs as successful (see FORMAT.md, "Disk errors").
    #[error("the write-ahead log stopped after {operation} {file} failed; reopen it to go on")]
    Failed { file: String, operation: Operation },
    /// Bytes on disk that no writer of this format produces, where losing them could lose
    /// acknowledged data.
    #[error("corrupt data in {file} at offset {offset}: {reason}")]
    Corrupt {
        file: String,
        offset: u64,
        reason: Corruption,
    },
    /// A file of a format version this build does not read (written by a newer build).
    #[error("{file} has format version {found}; this build reads versions up to {supported}")]
    UnsupportedVersion {
        file: String,
        found: u32,
        supported: u32,
    },
    /// Segment files are numbered consecutively; one in the middle is absent.
    #[error("write-ahead log segment {missing} is missing; {after} exists before it")]
    MissingSegment { missing: String, after: String },
    /// Every snapshot of a database is unreadable, and the log no longer holds what would
    /// rebuild the database without one.
    #[error("database {database}: no usable snapshot ({reason}) and the log starts at sequence number {log_start}")]
    SnapshotUnrecoverable {
        database: String,
        reason: String,
        log_start: u64,
    },
    /// A record larger than [`crate::MAX_RECORD_BYTES`].
    #[error("a record of {bytes} bytes is larger than the limit of {limit} bytes")]
    RecordTooLarge { bytes: u64, limit: u64 },
    /// A fencing epoch above [`crate::MAX_EPOCH`], which a record cannot carry.
    #[error("fencing epoch {epoch} is larger than a log record can carry")]
    EpochTooLarge { epoch: u64 },
    /// A record for `database` under fencing epoch `epoch`, when the log already holds one
    /// under the later epoch `logged`: another node claimed the database since, so this node
    /// must not write to it. Nothing was appended; the writer goes on.
    #[error("database {database}: epoch {epoch} is older than epoch {logged} already in the log; another node claimed it since")]
    StaleEpoch {
        database: String,
        epoch: u64,
        logged: u64,
    },
    /// A database name that cannot name files (see [`crate::validate_database_name`]).
    #[error("invalid database name {0:?}: use 1 to 128 of a-z, A-Z, 0-9, '-' and '_'")]
    InvalidDatabaseName(String),
    /// The caller broke the documented call order.
    #[error("misuse of the store: {0}")]
    Misuse(&'static str),
}

impl StoreError {
    /// Wraps an IO error of `operation` on `file`, telling a full disk from other failures.
    pub fn io(file: &str, operation: Operation, source: io::Error) -> StoreError {
        let file = file.to_owned();
        if is_no_space(&source) {
            StoreError::NoSpace {
                file,
                operation,
                source,
            }
        } else {
            StoreError::Io {
                file,
                operation,
                source,
            }
        }
    }

    /// Corruption at `offset` of `file`.
    pub fn corrupt(file: &str, offset: u64, reason: Corruption) -> StoreError {
        StoreError::Corrupt {
            file: file.to_owned(),
            offset,
            reason,
        }
    }

    /// Whether this is a full disk.
    pub fn is_no_space(&self) -> bool {
        matches!(self, StoreError::NoSpace { .. })
    }

    /// The file and operation of a disk failure, which a failed writer keeps to explain itself.
    pub(crate) fn disk_failure(&self) -> Option<(String, Operation)> {
        match self {
            StoreError::NoSpace {
                file, operation, ..
            }
            | StoreError::Io {
                file, operation, ..
            }
            | StoreError::Failed { file, operation } => Some((file.clone(), *operation)),
            _ => None,
        }
    }
}

/// ENOSPC, by kind where the platform maps it and by number on Unix where it does not.
fn is_no_space(error: &io::Error) -> bool {
    /// ENOSPC on Linux, the BSDs and macOS.
    #[cfg(unix)]
    const ENOSPC: i32 = 28;
    if error.kind() == io::ErrorKind::StorageFull {
        return true;
    }
    #[cfg(unix)]
    if error.raw_os_error() == Some(ENOSPC) {
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_told_apart() {
        let full = StoreError::io(
            "wal",
            Operation::Write,
            io::Error::new(io::ErrorKind::StorageFull, "full"),
        );
        assert!(full.is_no_space());
        let broken = StoreError::io("wal", Operation::Sync, io::Error::other("EIO"));
        assert!(!broken.is_no_space());
        assert_eq!(broken.to_string(), "syncing wal failed: EIO");
        #[cfg(unix)]
        assert!(
            StoreError::io("wal", Operation::Write, io::Error::from_raw_os_error(28)).is_no_space()
        );
    }

    #[test]
    fn corruption_names_file_and_offset() {
        let error = StoreError::corrupt("wal-1", 4096, Corruption::Checksum);
        assert_eq!(
            error.to_string(),
            "corrupt data in wal-1 at offset 4096: the record checksum does not match"
        );
    }
}
