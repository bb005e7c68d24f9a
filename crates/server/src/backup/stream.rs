//! Writing the archive of a backup on a thread of its own, into a bounded queue that the HTTP
//! answer drains: memory stays at the queue's size however large the data, and a client that
//! stops reading stops the writer (the send fails once the answer is dropped).

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hearth_store::{write_database_snapshot, Storage, StorageFile};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::archive::{ArchiveWriter, MAX_CHUNK_BYTES};
use hearth_ground::inbox::ShardCut;
use hearth_persist::ShardStorage;

/// Chunks of [`MAX_CHUNK_BYTES`] (plus framing) queued between the writer and the socket.
pub const QUEUE_CHUNKS: usize = 8;

/// The name of the backup's description in the archive.
pub const DESCRIPTION: &str = "backup.json";

/// Sends what is written to the queue in pieces of about [`MAX_CHUNK_BYTES`].
struct QueueWriter {
    queue: mpsc::Sender<Bytes>,
    buffer: Vec<u8>,
}

impl QueueWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let bytes = Bytes::from(std::mem::take(&mut self.buffer));
        self.queue
            .blocking_send(bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client is gone"))
    }
}

impl Write for QueueWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= MAX_CHUNK_BYTES {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

type Archive = Arc<Mutex<ArchiveWriter<QueueWriter>>>;

/// Starts the writer thread; the answer's body reads the returned queue. The queue ends
/// without the archive's end record if anything fails, which the reader reports.
pub fn start(shards: usize, cuts: Vec<ShardCut>) -> io::Result<mpsc::Receiver<Bytes>> {
    let (queue, receiver) = mpsc::channel(QUEUE_CHUNKS);
    std::thread::Builder::new()
        .name("hearth-backup".to_owned())
        .spawn(move || match write(shards, &cuts, queue) {
            Ok(files) => info!(files, "backup written"),
            Err(error) => {
                warn!(%error, "backup failed; the client gets an archive without its end record")
            }
        })?;
    Ok(receiver)
}

fn write(shards: usize, cuts: &[ShardCut], queue: mpsc::Sender<Bytes>) -> io::Result<usize> {
    let out = QueueWriter {
        queue,
        buffer: Vec::with_capacity(MAX_CHUNK_BYTES),
    };
    let archive: Archive = Arc::new(Mutex::new(ArchiveWriter::new(out)?));
    let description = json!({
        "format": 1,
        "shards": shards,
        "created_ms": hearth_net::time::now_ms(),
        "hearth": env!("CARGO_PKG_VERSION"),
        "cuts": cuts.iter().map(|cut| json!({
            "shard": cut.shard,
            "covered_seq": cut.covered,
            "databases": cut.states.iter().map(|(name, _)| name.to_string())
                .chain(cut.files.iter().map(|(name, _)| name.to_string()))
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    lock(&archive)?.file(DESCRIPTION, description.to_string().as_bytes())?;
    let mut files = 1;
    // Files first: the shards keep old snapshot files back until the cuts are dropped
    // ([`Pin`]), so copy the files the cuts name while few are waiting.
    for cut in cuts {
        let directory = format!("shard-{}", cut.shard);
        for (_, file) in &cut.files {
            copy(&archive, &cut.storage, &directory, file)?;
            files += 1;
        }
    }
    for cut in cuts {
        let directory = format!("shard-{}", cut.shard);
        for (name, state) in &cut.states {
            let sink = SnapshotSink {
                archive: archive.clone(),
                directory: directory.clone(),
            };
            write_database_snapshot(
                &sink,
                name,
                cut.covered,
                0,
                state.rules.as_deref(),
                state.settings.as_deref(),
                &state.root,
            )
            .map_err(io::Error::other)?;
            files += 1;
        }
    }
    let archive = Arc::try_unwrap(archive)
        .map_err(|_| io::Error::other("the archive is still shared"))?
        .into_inner()
        .map_err(|_| io::Error::other("the archive's lock is poisoned"))?;
    archive.finish()?.flush()?;
    Ok(files)
}

fn lock(archive: &Archive) -> io::Result<std::sync::MutexGuard<'_, ArchiveWriter<QueueWriter>>> {
    archive
        .lock()
        .map_err(|_| io::Error::other("the archive's lock is poisoned"))
}

/// Copies a snapshot file of the shard's directory into the archive.
fn copy(archive: &Archive, storage: &ShardStorage, directory: &str, file: &str) -> io::Result<()> {
    let source = storage.open(file).map_err(|error| {
        io::Error::new(
            error.kind(),
            format!("{directory}/{file}: {error} (removed by newer snapshots while the backup ran; run it again)"),
        )
    })?;
    let size = source.size()?;
    let mut archive = lock(archive)?;
    archive.begin_file(&format!("{directory}/{file}"))?;
    let mut buffer = vec![0u8; MAX_CHUNK_BYTES];
    let mut offset = 0u64;
    while offset < size {
        let length = (size - offset).min(MAX_CHUNK_BYTES as u64) as usize;
        source.read_at(offset, &mut buffer[..length])?;
        archive.write_chunk(&buffer[..length])?;
        offset += length as u64;
    }
    archive.end_file()
}

/// A [`Storage`] that `write_snapshot` writes through into the archive: the snapshot's bytes
/// arrive in order (header, then frames), so they become the chunks of one archive file, named
/// by the snapshot's final name.
struct SnapshotSink {
    archive: Archive,
    directory: String,
}

struct SinkFile {
    archive: Archive,
    written: Mutex<u64>,
}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("a backup stream cannot {what}"),
    )
}

impl Storage for SnapshotSink {
    type File = SinkFile;

    fn create(&self, name: &str) -> io::Result<SinkFile> {
        // `write_snapshot` writes `<name>.tmp` and renames it: the archive holds the final name.
        let name = name.strip_suffix(".tmp").unwrap_or(name);
        lock(&self.archive)?.begin_file(&format!("{}/{name}", self.directory))?;
        Ok(SinkFile {
            archive: self.archive.clone(),
            written: Mutex::new(0),
        })
    }

    fn open(&self, _: &str) -> io::Result<SinkFile> {
        Err(unsupported("open a file"))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(Vec::new())
    }

    fn rename(&self, _: &str, _: &str) -> io::Result<()> {
        lock(&self.archive)?.end_file()
    }

    fn remove(&self, _: &str) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::NotFound))
    }

    fn sync_dir(&self) -> io::Result<()> {
        Ok(())
    }
}

impl StorageFile for SinkFile {
    fn size(&self) -> io::Result<u64> {
        self.written
            .lock()
            .map(|written| *written)
            .map_err(|_| io::Error::other("poisoned"))
    }

    fn read_at(&self, _: u64, _: &mut [u8]) -> io::Result<()> {
        Err(unsupported("read"))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut written = self
            .written
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?;
        if offset != *written {
            return Err(unsupported("write out of order"));
        }
        lock(&self.archive)?.write_chunk(data)?;
        *written += data.len() as u64;
        Ok(())
    }

    fn set_len(&self, _: u64) -> io::Result<()> {
        Err(unsupported("resize a file"))
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}
