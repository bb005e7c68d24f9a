//! A shard's part of a backup: its databases as of one position of its log, taken on the
//! shard's thread in one step.
//!
//! The position is the durable one, after waiting until every record appended before the
//! request is durable (so a `--durability batch` write acknowledged before the backup began is
//! in it too). Each loaded database contributes its durable state (a copy-on-write clone: the
//! shard goes on at once); each database only on disk contributes its newest snapshot file,
//! which covers all of its records (a database stays unloaded only while it has no records
//! after its newest snapshot). The log itself is not needed: the durable states already hold
//! every record up to the position. Until the cut is dropped (the backup written or failed),
//! the shard removes no snapshot file, so that the files it names stay readable.

use std::collections::HashSet;
use std::sync::Arc;

use hearth_store::{remove_files, snapshot_name};
use tracing::warn;

use hearth_ground::inbox::ShardMessage;
use hearth_ground::inbox::{Pin, ShardCut};
use hearth_owner::Owner;
use hearth_transport::inboxes::Inboxes;

/// A backup's cut of this shard was dropped: removes the snapshot files kept back for it,
/// once no other backup holds the shard.
pub fn release(owner: &Owner) {
    let Some(store) = owner.store() else {
        return;
    };
    let old = store.unpin_after_backup();
    if old.is_empty() {
        return;
    }
    let storage = store.storage().clone();
    tokio::task::spawn_blocking(move || {
        if let Err(error) = remove_files(&*storage, &old) {
            warn!(%error, "removing snapshot files kept for a backup failed");
        }
    });
}

/// Takes this shard's cut; the reason when it cannot (no data directory).
pub async fn take(inboxes: &Inboxes, owner: &Owner) -> Result<ShardCut, String> {
    let Some(store) = owner.store() else {
        return Err("this server keeps no data on disk (--durability none)".to_owned());
    };
    let appended = store.last_seq();
    // After a disk failure the durable states are exactly what is on disk: back those up.
    if store.failure().is_none() {
        if let Err(reason) = store.wait_durable(appended).await {
            if store.failure().is_none() {
                return Err(reason);
            }
        }
    }
    // From here to the end, one synchronous step of the shard's thread.
    let covered = store.durable_seq();
    let databases = owner.databases();
    let mut states = Vec::new();
    let mut from_memory = HashSet::new();
    for (name, loaded) in databases.iter() {
        // A database that failed to load from disk holds nothing of its own: its files are
        // what there is to back up.
        let unloadable = loaded.read_only_reason().is_some() && store.failure().is_none();
        if !loaded.is_on_disk() || unloadable {
            continue;
        }
        states.push((Arc::from(name.as_str()), loaded.durable().clone()));
        from_memory.insert(name.as_str());
    }
    let files = store
        .newest_snapshots()
        .into_iter()
        .filter(|(name, _)| !from_memory.contains(name.as_str()))
        .map(|(name, covered)| (Arc::from(name.as_str()), snapshot_name(&name, covered)))
        .collect();
    store.pin_for_backup();
    Ok(ShardCut {
        shard: owner.index(),
        covered,
        states,
        files,
        storage: store.storage().clone(),
        _pin: Pin::new(inboxes.own_queue().map(|queue| {
            move || {
                // A shard that is gone has nothing left to remove.
                let _ = queue.send(ShardMessage::BackupDone);
            }
        })),
    })
}
