//! Batches: the IO half of group commit. A [`Batch`] holds the encoded records of one loop
//! turn as a few `(file, offset, bytes)` pieces and does the writes and syncs when executed,
//! on whatever thread the caller chooses; [`BatchDone`] carries the outcome back to the
//! writer. Also the creation of segments, which batches do when records roll over, and the
//! removal of truncated segments.

use std::sync::Arc;

use crate::error::{Operation, StoreError};
use crate::names::{temporary_name, SPARE_SEGMENT_NAME};
use crate::segment::SegmentHeader;
use crate::storage::{Storage, StorageFile};

/// Bytes written at a time while a segment is filled with zeros.
const ZERO_FILL_CHUNK_BYTES: u64 = 1024 * 1024;

/// The bytes of one file in a batch.
pub(crate) struct BatchPiece<F> {
    pub(crate) name: String,
    /// `None` when the segment is created by this batch.
    pub(crate) file: Option<Arc<F>>,
    pub(crate) create: Option<SegmentHeader>,
    /// A zero-filled file made ahead of time, to become the created segment.
    pub(crate) spare: Option<Arc<F>>,
    pub(crate) offset: u64,
    pub(crate) bytes: Vec<u8>,
}

/// Records ready to be written and synced. `Send`, so it can move to a blocking thread.
pub struct Batch<S: Storage> {
    pub(crate) storage: Arc<S>,
    pub(crate) pieces: Vec<BatchPiece<S::File>>,
    pub(crate) first_seq: u64,
    pub(crate) last_seq: u64,
}

/// The outcome of [`Batch::execute`], to hand back to [`crate::WalWriter::complete`].
pub struct BatchDone<S: Storage> {
    pub(crate) last_seq: u64,
    pub(crate) created: Vec<(u64, Arc<S::File>)>,
    pub(crate) buffers: Vec<Vec<u8>>,
    pub(crate) result: Result<(), StoreError>,
}

impl<S: Storage> BatchDone<S> {
    pub fn result(&self) -> Result<(), &StoreError> {
        self.result.as_ref().map(|_| ())
    }
}

impl<S: Storage> Batch<S> {
    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Bytes of records in the batch.
    pub fn byte_len(&self) -> u64 {
        self.pieces
            .iter()
            .map(|piece| piece.bytes.len() as u64)
            .sum()
    }

    /// The writes of the batch as `(file name, offset, bytes)`, for inspection and metrics.
    /// [`Batch::execute`] is the executor; one for io_uring would live here too and take the
    /// same pieces.
    pub fn writes(&self) -> impl Iterator<Item = (&str, u64, &[u8])> {
        self.pieces
            .iter()
            .map(|piece| (piece.name.as_str(), piece.offset, piece.bytes.as_slice()))
    }

    /// The headers of the segments this batch creates before writing into them.
    pub fn segments_created(&self) -> impl Iterator<Item = &SegmentHeader> {
        self.pieces.iter().filter_map(|piece| piece.create.as_ref())
    }

    /// Writes and syncs the batch: creates new segments, writes each piece with one positional
    /// write, then syncs each file once. Blocking; run it wherever blocking is fine.
    pub fn execute(self) -> BatchDone<S> {
        let mut created = Vec::new();
        let result = write_pieces(&*self.storage, &self.pieces, &mut created);
        BatchDone {
            last_seq: self.last_seq,
            created,
            buffers: self.pieces.into_iter().map(|piece| piece.bytes).collect(),
            result,
        }
    }
}

fn write_pieces<S: Storage>(
    storage: &S,
    pieces: &[BatchPiece<S::File>],
    created: &mut Vec<(u64, Arc<S::File>)>,
) -> Result<(), StoreError> {
    let mut written = Vec::with_capacity(pieces.len());
    for piece in pieces {
        let file = match (&piece.file, &piece.create) {
            (Some(file), _) => file.clone(),
            (None, Some(header)) => {
                let file = match &piece.spare {
                    Some(spare) => {
                        adopt_spare(storage, spare, &piece.name, header)?;
                        spare.clone()
                    }
                    None => Arc::new(create_segment(storage, &piece.name, header)?),
                };
                created.push((header.index, file.clone()));
                file
            }
            (None, None) => return Err(StoreError::Misuse("a batch names a segment not open")),
        };
        file.write_at(piece.offset, &piece.bytes)
            .map_err(|error| StoreError::io(&piece.name, Operation::Write, error))?;
        written.push((piece.name.as_str(), file));
    }
    for (name, file) in written {
        file.sync_data()
            .map_err(|error| StoreError::io(name, Operation::Sync, error))?;
    }
    Ok(())
}

/// Creates a segment at its full size: a zero-filled file made and synced under a temporary
/// name, then adopted (header written and synced, renamed, directory synced). Writing the zeros
/// (rather than `set_len`, which leaves a hole) allocates every block now, so that later appends
/// and their fdatasync change no metadata. Making the file under another name first means a
/// segment's own name only ever appears on a complete segment, so recovery never has to redo a
/// creation that a crash might have cut short.
pub(crate) fn create_segment<S: Storage>(
    storage: &S,
    name: &str,
    header: &SegmentHeader,
) -> Result<S::File, StoreError> {
    // Not the spare's own name: a spare may be in the making on another thread meanwhile.
    let temporary = temporary_name(name);
    let file = zero_file(storage, &temporary, header.size, std::time::Duration::ZERO)?;
    adopt(storage, &file, &temporary, name, header)?;
    Ok(file)
}

/// Turns the spare segment into the segment `name`: its header written and synced, then the
/// rename made durable. The zeros were written and synced when the spare was made, so the
/// result is what [`create_segment`] leaves, without its cost on the commit path.
fn adopt_spare<S: Storage>(
    storage: &S,
    spare: &S::File,
    name: &str,
    header: &SegmentHeader,
) -> Result<(), StoreError> {
    adopt(storage, spare, SPARE_SEGMENT_NAME, name, header)
}

/// Writes `header` into the zero-filled `file` (now named `from`), syncs it, and renames it to
/// `name` durably.
fn adopt<S: Storage>(
    storage: &S,
    file: &S::File,
    from: &str,
    name: &str,
    header: &SegmentHeader,
) -> Result<(), StoreError> {
    let io = |operation| move |error| StoreError::io(name, operation, error);
    file.write_at(0, &header.encode())
        .map_err(io(Operation::Write))?;
    file.sync_data().map_err(io(Operation::Sync))?;
    storage.rename(from, name).map_err(io(Operation::Rename))?;
    storage.sync_dir().map_err(io(Operation::SyncDir))?;
    Ok(())
}

/// Making the spare segment: a file of `size` zero bytes, synced. Runs on any thread.
pub struct SpareJob<S: Storage> {
    pub(crate) storage: Arc<S>,
    pub(crate) size: u64,
}

/// The outcome of [`SpareJob::execute`], for [`crate::WalWriter::add_spare`].
pub struct SpareDone<S: Storage> {
    pub(crate) size: u64,
    pub(crate) result: Result<S::File, StoreError>,
}

/// Zero bytes written and synced at a time while a spare segment is made gently.
pub const SPARE_FILL_CHUNK_BYTES: u64 = 1024 * 1024;

impl<S: Storage> SpareJob<S> {
    /// Makes the spare at full speed (tests, tools).
    pub fn execute(self) -> SpareDone<S> {
        self.execute_paced(std::time::Duration::ZERO)
    }

    /// Makes the spare a chunk at a time, each chunk synced and followed by `pause`, so that
    /// the log's own syncs on the same disk never queue behind a 64 MiB flush.
    pub fn execute_paced(self, pause: std::time::Duration) -> SpareDone<S> {
        SpareDone {
            size: self.size,
            result: zero_file(&*self.storage, SPARE_SEGMENT_NAME, self.size, pause),
        }
    }
}

/// Makes the file `name` of `size` zero bytes, synced (a chunk at a time with `pause` after
/// each chunk, if `pause` is not zero). An earlier file of that name (say, one a crash left
/// half made) is replaced.
fn zero_file<S: Storage>(
    storage: &S,
    name: &str,
    size: u64,
    pause: std::time::Duration,
) -> Result<S::File, StoreError> {
    match storage.remove(name) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(StoreError::io(name, Operation::Remove, error));
        }
        _ => {}
    }
    let file = storage
        .create(name)
        .map_err(|error| StoreError::io(name, Operation::Create, error))?;
    let mut offset = 0;
    while offset < size {
        let end = (offset + SPARE_FILL_CHUNK_BYTES).min(size);
        zero_fill(&file, name, offset, end)?;
        offset = end;
        // Paced: each chunk synced on its own, so that no sync of the log waits behind a long
        // flush. At full speed one sync at the end does.
        if !pause.is_zero() || offset == size {
            file.sync_data()
                .map_err(|error| StoreError::io(name, Operation::Sync, error))?;
        }
        if !pause.is_zero() && offset < size {
            std::thread::sleep(pause);
        }
    }
    Ok(file)
}

/// Writes zeros over `from..to` of `file`, a chunk at a time.
pub(crate) fn zero_fill<F: StorageFile>(
    file: &F,
    name: &str,
    from: u64,
    to: u64,
) -> Result<(), StoreError> {
    let zeros = vec![0u8; ZERO_FILL_CHUNK_BYTES.min(to.saturating_sub(from)) as usize];
    let mut offset = from;
    while offset < to {
        let len = ZERO_FILL_CHUNK_BYTES.min(to - offset) as usize;
        file.write_at(offset, &zeros[..len])
            .map_err(|error| StoreError::io(name, Operation::Write, error))?;
        offset += len as u64;
    }
    Ok(())
}

/// Segment files to remove after truncation.
pub struct Removal<S: Storage> {
    pub(crate) storage: Arc<S>,
    pub(crate) names: Vec<String>,
}

impl<S: Storage> Removal<S> {
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Removes the files oldest first and syncs the directory. Oldest first, so that a crash
    /// part way leaves a log that still starts at a segment boundary with no gap.
    pub fn execute(self) -> Result<Vec<String>, StoreError> {
        for name in &self.names {
            self.storage
                .remove(name)
                .map_err(|error| StoreError::io(name, Operation::Remove, error))?;
        }
        if !self.names.is_empty() {
            self.storage
                .sync_dir()
                .map_err(|error| StoreError::io("the log", Operation::SyncDir, error))?;
        }
        Ok(self.names)
    }
}
