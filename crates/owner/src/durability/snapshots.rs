//! Taking snapshots and truncating the log.
//!
//! A snapshot writes a database's durable state (its tree as of the log's durable position,
//! kept by the shard as writes complete) on a blocking thread: the tree is a copy-on-write
//! clone, so the shard goes on writing meanwhile. Once the snapshot is on disk, the catalog
//! learns of it, snapshots beyond the two newest are dropped, and log segments that every
//! database has covered are removed.

use std::rc::Rc;
use std::sync::Arc;

use hearth_store::{remove_files, write_database_snapshot, SnapshotInfo, StoreError};
use tracing::{debug, info, warn};

use crate::state::Owner;
use hearth_net::time::now_ms;
use hearth_persist::{Chore, DatabaseFacts, DurableState, ShardStorage};

/// Runs the chores of a maintenance tick: snapshots the policy asks for, evictions of idle
/// databases, and the snapshots eviction needs first (the pipeline decides which).
pub fn maintain(owner: &Rc<Owner>, now: u64) {
    let Some(store) = owner.store() else {
        return;
    };
    let chores = {
        let databases = owner.databases();
        let facts: Vec<DatabaseFacts<'_>> = databases
            .iter()
            .map(|(name, loaded)| loaded.facts(name, store.newest_snapshot(name)))
            .collect();
        store.maintenance_chores(now, &facts)
    };
    let mut evicted = Vec::new();
    for chore in chores {
        match chore {
            Chore::Snapshot(name) => start(owner, &name, now),
            Chore::Evict(name) => {
                owner.remove_database(&name);
                // Its cached answers would hold its old tree in memory.
                owner.rest_cache().forget(&name);
                owner
                    .counters()
                    .rest_cache_held(owner.rest_cache().stats().bytes);
                evicted.push(name);
            }
        }
    }
    if !evicted.is_empty() {
        info!(shard = owner.index(), databases = ?evicted, "idle databases evicted from memory");
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

fn job(owner: &Owner, name: &str, now: u64) -> Option<Job> {
    let store = owner.store()?;
    let covered = store.snapshot_covers();
    let epoch = store.logged_epoch(name);
    let state = owner.with_loaded(name, |loaded| loaded.begin_snapshot(now))?;
    Some(Job {
        name: Arc::from(name),
        covered,
        epoch,
        state,
    })
}

pub fn start(owner: &Rc<Owner>, name: &str, now: u64) {
    let Some(job) = job(owner, name, now) else {
        return;
    };
    let owner = owner.clone();
    tokio::task::spawn_local(async move {
        let Some(store) = owner.store() else {
            return;
        };
        let storage = store.storage().clone();
        let name = job.name.clone();
        let written = tokio::task::spawn_blocking(move || write(&storage, &job)).await;
        owner.with_loaded(&name, |loaded| loaded.end_snapshot());
        match written {
            Ok(Ok(info)) => after_snapshot(&owner, &info).await,
            Ok(Err(error)) => {
                warn!(database = %name, %error, "snapshot failed; the log keeps the data")
            }
            Err(error) => warn!(database = %name, %error, "snapshot thread failed"),
        }
    });
}

fn write(storage: &ShardStorage, job: &Job) -> Result<SnapshotInfo, StoreError> {
    write_database_snapshot(
        storage,
        &job.name,
        job.covered,
        job.epoch,
        job.state.rules.as_deref(),
        job.state.settings.as_deref(),
        &job.state.root,
    )
}

/// Records a new snapshot, then truncates the log and removes snapshots no longer needed,
/// in that order, so that a crash in between never leaves a log without a snapshot to start
/// from.
async fn after_snapshot(owner: &Owner, info: &SnapshotInfo) {
    let Some(store) = owner.store() else {
        return;
    };
    debug!(
        database = %info.database,
        covered = info.covered_seq,
        bytes = info.bytes,
        "snapshot written"
    );
    owner.counters().snapshot_taken();
    let old = store.record_snapshot(info);
    let removal = store.take_truncation();
    let storage = store.storage().clone();
    let keepers = crate::side::before_truncation(owner);
    let removed = tokio::task::spawn_blocking(move || {
        // The audit entries and trigger events the segments carry must be in their keepers'
        // files first; if a keeper lost some, the log keeps them for the next start (the
        // segments stay on disk and are read again then).
        if keepers.is_some_and(|sync| !sync()) {
            return Ok(Vec::new());
        }
        let segments = removal.execute()?;
        remove_files(&*storage, &old)?;
        Ok::<_, StoreError>(segments)
    })
    .await;
    match removed {
        Ok(Ok(segments)) if !segments.is_empty() => {
            info!(shard = owner.index(), segments = ?segments, "log truncated")
        }
        Ok(Ok(_)) => {}
        Ok(Err(error)) => warn!(%error, "removing old log segments or snapshots failed"),
        Err(error) => warn!(%error, "the truncation thread failed"),
    }
}

/// At shutdown, after the final flush: snapshots every database with records since its last
/// snapshot, on this thread, so that the next start reads snapshots instead of replaying.
pub fn snapshot_all(owner: &Owner) {
    let Some(store) = owner.store() else {
        return;
    };
    if store.failure().is_some() {
        return;
    }
    let now = now_ms();
    let names: Vec<String> = owner
        .databases()
        .iter()
        .filter(|(_, loaded)| loaded.has_log_to_snapshot())
        .map(|(name, _)| name.clone())
        .collect();
    let mut old = Vec::new();
    for name in names {
        let Some(job) = job(owner, &name, now) else {
            continue;
        };
        match write(store.storage(), &job) {
            Ok(info) => {
                owner.counters().snapshot_taken();
                old.extend(store.record_snapshot(&info));
            }
            Err(error) => {
                warn!(database = %name, %error, "snapshot at shutdown failed; the log keeps the data")
            }
        }
    }
    let removal = store.take_truncation();
    if crate::side::before_truncation(owner).is_some_and(|sync| !sync()) {
        warn!("the audit trail or the trigger outbox lost entries; the log keeps its segments for the next start");
        return;
    }
    if let Err(error) = removal
        .execute()
        .and_then(|_| remove_files(&**store.storage(), &old))
    {
        warn!(%error, "removing old log segments or snapshots at shutdown failed");
    }
}
