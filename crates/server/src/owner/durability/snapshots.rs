//! Taking snapshots and truncating the log.
//!
//! A snapshot writes a database's durable state (its tree as of the log's durable position,
//! kept by the shard as writes complete) on a blocking thread: the tree is a copy-on-write
//! clone, so the shard goes on writing meanwhile. Once the snapshot is on disk, the catalog
//! learns of it, snapshots beyond the two newest are dropped, and log segments that every
//! database has covered are removed.

use std::rc::Rc;
use std::sync::Arc;

use hearth_store::{remove_files, write_snapshot_with_epoch, SnapshotInfo, StoreError};
use tracing::{debug, info, warn};

use crate::shard::Shard;
use hearth_net::time::now_ms;
use hearth_persist::{Chore, DatabaseFacts, DurableState, ShardStorage};

/// Runs the chores of a maintenance tick: snapshots the policy asks for, evictions of idle
/// databases, and the snapshots eviction needs first (the pipeline decides which).
pub fn maintain(shard: &Rc<Shard>, now: u64) {
    let Some(store) = shard.owner.store() else {
        return;
    };
    let chores = {
        let databases = shard.owner.databases();
        let catalog = store.catalog.borrow();
        let facts: Vec<DatabaseFacts<'_>> = databases
            .iter()
            .map(|(name, loaded)| loaded.facts(name, catalog.newest(name)))
            .collect();
        store.pipeline.borrow().tick(now, &facts)
    };
    let mut evicted = Vec::new();
    for chore in chores {
        match chore {
            Chore::Snapshot(name) => start(shard, &name, now),
            Chore::Evict(name) => {
                shard.owner.remove_database(&name);
                // Its cached answers would hold its old tree in memory.
                shard.rest_cache.forget(&name);
                shard
                    .counters
                    .rest_cache_held(shard.rest_cache.stats().bytes);
                evicted.push(name);
            }
        }
    }
    if !evicted.is_empty() {
        info!(shard = shard.index, databases = ?evicted, "idle databases evicted from memory");
    }
}

/// What a snapshot of one database needs, taken on the shard thread.
struct Job {
    name: Arc<str>,
    covered: u64,
    /// The highest fencing epoch the log holds for the database, which the snapshot keeps
    /// once the log is truncated (a record of it may not be durable yet: an epoch this node
    /// was granted all the same, so the fence is only stricter for it).
    epoch: u64,
    state: DurableState,
}

fn job(shard: &Shard, name: &str, now: u64) -> Option<Job> {
    let store = shard.owner.store()?;
    let covered = store.pipeline.borrow().snapshot_covers();
    let epoch = store.logged_epoch(name);
    let state = shard
        .owner
        .with_loaded(name, |loaded| loaded.begin_snapshot(now))?;
    Some(Job {
        name: Arc::from(name),
        covered,
        epoch,
        state,
    })
}

pub fn start(shard: &Rc<Shard>, name: &str, now: u64) {
    let Some(job) = job(shard, name, now) else {
        return;
    };
    let shard = shard.clone();
    tokio::task::spawn_local(async move {
        let Some(store) = shard.owner.store() else {
            return;
        };
        let storage = store.storage.clone();
        let name = job.name.clone();
        let written = tokio::task::spawn_blocking(move || write(&storage, &job)).await;
        shard
            .owner
            .with_loaded(&name, |loaded| loaded.snapshot_running = false);
        match written {
            Ok(Ok(info)) => after_snapshot(&shard, &info).await,
            Ok(Err(error)) => {
                warn!(database = %name, %error, "snapshot failed; the log keeps the data")
            }
            Err(error) => warn!(database = %name, %error, "snapshot thread failed"),
        }
    });
}

fn write(storage: &ShardStorage, job: &Job) -> Result<SnapshotInfo, StoreError> {
    write_snapshot_with_epoch(
        storage,
        &job.name,
        job.covered,
        job.epoch,
        job.state.rules.as_deref(),
        &job.state.root,
    )
}

/// Records a new snapshot, then truncates the log and removes snapshots no longer needed,
/// in that order, so that a crash in between never leaves a log without a snapshot to start
/// from.
async fn after_snapshot(shard: &Shard, info: &SnapshotInfo) {
    let Some(store) = shard.owner.store() else {
        return;
    };
    debug!(
        database = %info.database,
        covered = info.covered_seq,
        bytes = info.bytes,
        "snapshot written"
    );
    shard.counters.snapshot_taken();
    let old = store.record_snapshot(info);
    let removal = store.take_truncation();
    let storage = store.storage.clone();
    let removed = tokio::task::spawn_blocking(move || {
        let segments = removal.execute()?;
        remove_files(&*storage, &old)?;
        Ok::<_, StoreError>(segments)
    })
    .await;
    match removed {
        Ok(Ok(segments)) if !segments.is_empty() => {
            info!(shard = shard.index, segments = ?segments, "log truncated")
        }
        Ok(Ok(_)) => {}
        Ok(Err(error)) => warn!(%error, "removing old log segments or snapshots failed"),
        Err(error) => warn!(%error, "the truncation thread failed"),
    }
}

/// At shutdown, after the final flush: snapshots every database with records since its last
/// snapshot, on this thread, so that the next start reads snapshots instead of replaying.
pub fn snapshot_all(shard: &Shard) {
    let Some(store) = shard.owner.store() else {
        return;
    };
    if store.failure().is_some() {
        return;
    }
    let now = now_ms();
    let names: Vec<String> = shard
        .owner
        .databases()
        .iter()
        .filter(|(_, loaded)| loaded.wal_bytes > 0 && !loaded.snapshot_running)
        .map(|(name, _)| name.clone())
        .collect();
    let mut old = Vec::new();
    for name in names {
        let Some(job) = job(shard, &name, now) else {
            continue;
        };
        match write(&store.storage, &job) {
            Ok(info) => {
                shard.counters.snapshot_taken();
                old.extend(store.record_snapshot(&info));
            }
            Err(error) => {
                warn!(database = %name, %error, "snapshot at shutdown failed; the log keeps the data")
            }
        }
    }
    let removal = store.take_truncation();
    if let Err(error) = removal
        .execute()
        .and_then(|_| remove_files(&*store.storage, &old))
    {
        warn!(%error, "removing old log segments or snapshots at shutdown failed");
    }
}
