//! The storage a shard's store runs on: its directory on disk, or, for tests of the failure
//! paths, an in-memory storage that injects disk errors (`hearth_store::FaultStorage`). One
//! enum rather than a generic parameter keeps the shard's types plain; the match per call
//! costs nothing next to the IO.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hearth_store::{FaultFile, FaultStorage, FileStorage, RealFile, Storage, StorageFile};

/// The environment variable of the slow-disk fault (test only, `scripts/chaos`): it names a
/// file holding a number of milliseconds that every sync of a data file waits first.
pub const SYNC_DELAY_FILE_VAR: &str = "HEARTH_TEST_SYNC_DELAY_FILE";

/// The longest injected wait, whatever the file says.
const MAX_SYNC_DELAY: Duration = Duration::from_secs(30);

/// The wait the slow-disk fault asks of a sync now: the file named by
/// [`SYNC_DELAY_FILE_VAR`] is read at each sync while the variable is set (the fault is
/// turned on and off by writing it), and nothing is looked at when it is not.
fn injected_sync_delay() -> Option<Duration> {
    static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let file = FILE
        .get_or_init(|| std::env::var_os(SYNC_DELAY_FILE_VAR).map(PathBuf::from))
        .as_ref()?;
    let millis: u64 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
    (millis > 0).then(|| Duration::from_millis(millis).min(MAX_SYNC_DELAY))
}

/// A shard's storage.
pub enum ShardStorage {
    Files(FileStorage),
    /// Test only: in memory, with injected faults.
    Faults(Arc<FaultStorage>),
}

/// A file of a [`ShardStorage`].
pub enum ShardFile {
    Files(RealFile),
    Faults(FaultFile),
}

impl Storage for ShardStorage {
    type File = ShardFile;

    fn create(&self, name: &str) -> io::Result<ShardFile> {
        match self {
            ShardStorage::Files(storage) => storage.create(name).map(ShardFile::Files),
            ShardStorage::Faults(storage) => storage.create(name).map(ShardFile::Faults),
        }
    }

    fn open(&self, name: &str) -> io::Result<ShardFile> {
        match self {
            ShardStorage::Files(storage) => storage.open(name).map(ShardFile::Files),
            ShardStorage::Faults(storage) => storage.open(name).map(ShardFile::Faults),
        }
    }

    fn list(&self) -> io::Result<Vec<String>> {
        match self {
            ShardStorage::Files(storage) => storage.list(),
            ShardStorage::Faults(storage) => storage.list(),
        }
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        match self {
            ShardStorage::Files(storage) => storage.rename(from, to),
            ShardStorage::Faults(storage) => storage.rename(from, to),
        }
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match self {
            ShardStorage::Files(storage) => storage.remove(name),
            ShardStorage::Faults(storage) => storage.remove(name),
        }
    }

    fn sync_dir(&self) -> io::Result<()> {
        match self {
            ShardStorage::Files(storage) => storage.sync_dir(),
            ShardStorage::Faults(storage) => storage.sync_dir(),
        }
    }
}

impl StorageFile for ShardFile {
    fn size(&self) -> io::Result<u64> {
        match self {
            ShardFile::Files(file) => file.size(),
            ShardFile::Faults(file) => file.size(),
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match self {
            ShardFile::Files(file) => file.read_at(offset, buf),
            ShardFile::Faults(file) => file.read_at(offset, buf),
        }
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        match self {
            ShardFile::Files(file) => file.write_at(offset, data),
            ShardFile::Faults(file) => file.write_at(offset, data),
        }
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        match self {
            ShardFile::Files(file) => file.set_len(len),
            ShardFile::Faults(file) => file.set_len(len),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        match self {
            ShardFile::Files(file) => {
                if let Some(delay) = injected_sync_delay() {
                    std::thread::sleep(delay);
                }
                file.sync_data()
            }
            ShardFile::Faults(file) => file.sync_data(),
        }
    }
}
