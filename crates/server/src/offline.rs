//! The one entry point the offline tools (`hearth export`/`import --data-dir`, crate
//! `hearth-tools`) need: a stopped server's data directory, locked, with the shard that holds
//! one database recovered in full. Kept here so that the tools do not assemble the data
//! directory, the shard hash and recovery themselves.

use std::path::{Path, PathBuf};

use hearth_store::StoreError;

use hearth_ground::namespace::NamespaceError;
use hearth_persist::data_dir::{DataDir, DataDirError};
use hearth_persist::{open_shard_dir, Loading, Opened};

/// Why [`open_database`] failed. The first two read exactly as the underlying errors do.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    #[error(transparent)]
    Name(#[from] NamespaceError),
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error("recovering shard {shard} of {}", dir.display())]
    Recovery {
        shard: usize,
        dir: PathBuf,
        #[source]
        source: StoreError,
    },
}

/// Opens and locks the data directory `dir` and recovers the shard that holds `db`, with every
/// database of that shard loaded. The directory stays locked until the returned [`DataDir`] is
/// dropped. With `create`, a directory that is not a data directory yet becomes one, with
/// `threads` shards (defaults to the number of cores, as `hearth serve` does); without it,
/// only an existing data directory is opened and nothing is created.
pub fn open_database(
    dir: &Path,
    db: &str,
    threads: Option<usize>,
    create: bool,
) -> Result<(DataDir, Opened), OfflineError> {
    hearth_ground::namespace::validate_name(db)?;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let data_dir = if create {
        DataDir::open(dir, threads, cores)?
    } else {
        let data_dir = DataDir::open_existing(dir)?;
        if threads.is_some_and(|requested| requested != data_dir.shards()) {
            return Err(DataDirError::ShardCount {
                path: dir.to_owned(),
                found: data_dir.shards(),
            }
            .into());
        }
        data_dir
    };
    let shard = hearth_ground::namespace::owner_shard(db, data_dir.shards());
    let opened = open_shard_dir(&data_dir.shard_dir(shard), Loading::All).map_err(|source| {
        OfflineError::Recovery {
            shard,
            dir: dir.to_owned(),
            source,
        }
    })?;
    Ok((data_dir, opened))
}
