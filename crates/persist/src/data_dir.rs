//! The data directory: a manifest that pins the shard count, a lock that keeps a second
//! server away, and one store directory per shard.
//!
//! ```text
//! <data-dir>/hearth.json     {"format":1,"shards":2}
//! <data-dir>/LOCK            locked (flock) while a server or tool uses the directory
//! <data-dir>/shard-0/        write-ahead log and snapshots of the databases of shard 0
//! <data-dir>/shard-1/        ...
//! ```
//!
//! The shard count is part of the layout because a database lives in the directory of the
//! shard its name hashes to: opening the directory with another count would look for every
//! database in the wrong place.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The layout version this build reads and writes.
pub const DATA_DIR_FORMAT: u32 = 1;

const MANIFEST: &str = "hearth.json";
const LOCK: &str = "LOCK";

/// The most shards a data directory may have; more is a typo, not a machine.
pub const MAX_SHARDS: usize = 1024;

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    shards: usize,
}

/// Why a data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("cannot use data directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("data directory {0} is in use by another process (its LOCK file is locked)")]
    Locked(PathBuf),
    #[error("{path} is not a Hearth manifest: {reason}")]
    BadManifest { path: PathBuf, reason: String },
    #[error("{path} has layout format {found}; this build reads format {DATA_DIR_FORMAT}")]
    Format { path: PathBuf, found: u32 },
    #[error(
        "data directory {path} was created with {found} shards; start with --threads {found} \
         (or leave --threads out): each database lives in the directory of its shard"
    )]
    ShardCount { path: PathBuf, found: usize },
    #[error("the shard count must be between 1 and {MAX_SHARDS}; got {0}")]
    BadShardCount(usize),
    #[error("{0} does not exist")]
    Missing(PathBuf),
    #[error("{0} is not a Hearth data directory (it has no {MANIFEST})")]
    NotADataDir(PathBuf),
}

/// An open, locked data directory. The lock is held until this value is dropped.
#[derive(Debug)]
pub struct DataDir {
    root: PathBuf,
    shards: usize,
    _lock: File,
}

impl DataDir {
    /// Opens (creating it if needed) and locks `root`. `requested` is the shard count asked
    /// for on the command line; `default` is used for a new directory when none was asked for.
    pub fn open(
        root: &Path,
        requested: Option<usize>,
        default: usize,
    ) -> Result<DataDir, DataDirError> {
        let io = |source| DataDirError::Io {
            path: root.to_owned(),
            source,
        };
        std::fs::create_dir_all(root).map_err(io)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(root.join(LOCK))
            .map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(DataDirError::Locked(root.to_owned()))
            }
            Err(std::fs::TryLockError::Error(error)) => return Err(io(error)),
        }
        let shards = match read_manifest(root)? {
            Some(found) if requested.is_some_and(|requested| requested != found) => {
                return Err(DataDirError::ShardCount {
                    path: root.to_owned(),
                    found,
                })
            }
            Some(found) => found,
            None => {
                let shards = requested.unwrap_or(default);
                if shards == 0 || shards > MAX_SHARDS {
                    return Err(DataDirError::BadShardCount(shards));
                }
                write_manifest(root, shards)?;
                shards
            }
        };
        for index in 0..shards {
            std::fs::create_dir_all(shard_dir(root, index)).map_err(io)?;
        }
        Ok(DataDir {
            root: root.to_owned(),
            shards,
            _lock: lock,
        })
    }

    /// Opens and locks `root` only if it is a data directory already: nothing is created
    /// anywhere else, so that a mistyped path is refused instead of becoming a new, empty
    /// data directory.
    pub fn open_existing(root: &Path) -> Result<DataDir, DataDirError> {
        if !root.is_dir() {
            return Err(DataDirError::Missing(root.to_owned()));
        }
        if !root.join(MANIFEST).is_file() {
            return Err(DataDirError::NotADataDir(root.to_owned()));
        }
        // The manifest pins the count; the default is never used.
        DataDir::open(root, None, 1)
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The store directory of shard `index`.
    pub fn shard_dir(&self, index: usize) -> PathBuf {
        shard_dir(&self.root, index)
    }
}

fn shard_dir(root: &Path, index: usize) -> PathBuf {
    root.join(format!("shard-{index}"))
}

fn read_manifest(root: &Path) -> Result<Option<usize>, DataDirError> {
    let path = root.join(MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(DataDirError::Io { path, source }),
    };
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|error| DataDirError::BadManifest {
            path: path.clone(),
            reason: error.to_string(),
        })?;
    if manifest.format != DATA_DIR_FORMAT {
        return Err(DataDirError::Format {
            path,
            found: manifest.format,
        });
    }
    if manifest.shards == 0 || manifest.shards > MAX_SHARDS {
        return Err(DataDirError::BadManifest {
            path,
            reason: format!("shard count {} out of range", manifest.shards),
        });
    }
    Ok(Some(manifest.shards))
}

/// Writes the manifest durably: a temporary file, synced, renamed, and the directory synced.
fn write_manifest(root: &Path, shards: usize) -> Result<(), DataDirError> {
    let path = root.join(MANIFEST);
    let temporary = root.join(format!("{MANIFEST}.tmp"));
    let io = |source| DataDirError::Io {
        path: path.clone(),
        source,
    };
    let manifest = Manifest {
        format: DATA_DIR_FORMAT,
        shards,
    };
    let text = serde_json::to_string(&manifest).map_err(|error| io(error.into()))?;
    let mut file = File::create(&temporary).map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&temporary, &path).map_err(io)?;
    File::open(root)
        .and_then(|dir| dir.sync_all())
        .map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "hearth-data-dir-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos())
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_new_directory_pins_its_shard_count() -> Result<(), DataDirError> {
        let root = temp_dir("pin");
        let first = DataDir::open(&root, None, 3)?;
        assert_eq!(first.shards(), 3);
        assert!(first.shard_dir(2).is_dir());
        drop(first);
        assert_eq!(DataDir::open(&root, None, 8)?.shards(), 3);
        assert!(matches!(
            DataDir::open(&root, Some(2), 8),
            Err(DataDirError::ShardCount { found: 3, .. })
        ));
        let _ = std::fs::remove_dir_all(&root);
        Ok(())
    }

    #[test]
    fn only_an_existing_data_directory_is_opened_as_one() -> Result<(), DataDirError> {
        let root = temp_dir("existing");
        assert!(matches!(
            DataDir::open_existing(&root),
            Err(DataDirError::Missing(_))
        ));
        assert!(!root.exists(), "nothing was created");
        std::fs::create_dir_all(&root).map_err(|source| DataDirError::Io {
            path: root.clone(),
            source,
        })?;
        assert!(matches!(
            DataDir::open_existing(&root),
            Err(DataDirError::NotADataDir(_))
        ));
        assert_eq!(root.read_dir().map(Iterator::count).ok(), Some(0));
        drop(DataDir::open(&root, Some(2), 8)?);
        assert_eq!(DataDir::open_existing(&root)?.shards(), 2);
        let _ = std::fs::remove_dir_all(&root);
        Ok(())
    }

    #[test]
    fn a_second_user_is_refused() -> Result<(), DataDirError> {
        let root = temp_dir("lock");
        let _held = DataDir::open(&root, Some(1), 1)?;
        assert!(matches!(
            DataDir::open(&root, Some(1), 1),
            Err(DataDirError::Locked(_))
        ));
        let _ = std::fs::remove_dir_all(&root);
        Ok(())
    }
}
