//! The commit task of a shard: group commit, one batch in flight at a time.
//!
//! Records are appended on the shard thread as writes are applied. This task wakes when there
//! are records, hands everything appended so far to a blocking thread for the write and the
//! fdatasync, and meanwhile the shard keeps serving: the records appended during the sync
//! form the next batch, so batches grow by themselves when the disk is slow. When a batch
//! completes, the gate advances and the messages that waited for it are sent.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use hearth_sync::ConnId;
use tokio::time::Instant;
use tracing::warn;

use super::failure::{handle_failure, report_failure};
use super::snapshots::maintain;
use crate::loaded::Loaded;
use crate::state::Owner;
use crate::state::Session;
use hearth_net::time::now_ms;
use hearth_persist::{Durability, Gate, Release, ShardStore};

/// The pause after each synced mebibyte of a spare segment: 64 MiB take about a second and
/// never hold a log sync up by more than one small flush.
const SPARE_FILL_PAUSE: Duration = Duration::from_millis(10);

/// A batch whose write and sync take this long is logged: acknowledgements waited for it.
const SLOW_SYNC: Duration = Duration::from_millis(100);

/// How often snapshot triggers are checked.
const MAINTENANCE_PERIOD: Duration = Duration::from_secs(1);

/// Runs until the shard's runtime stops.
pub async fn commit_loop(owner: Rc<Owner>) {
    let Some(store) = owner.store() else {
        return;
    };
    let batch_interval = match store.config().durability {
        Durability::Batch => Some(store.config().sync_interval),
        Durability::Strict | Durability::None => None,
    };
    let mut maintenance = tokio::time::interval(MAINTENANCE_PERIOD);
    let mut last_sync = Instant::now();
    // Paced even the first time: until the spare is ready, a rollover makes a small segment
    // on the commit path (milliseconds), which is better than every sync of the first second
    // queueing behind 64 MiB of zeros.
    make_spare(&owner, SPARE_FILL_PAUSE);
    loop {
        tokio::select! {
            _ = store.commit_task_notified() => {}
            _ = maintenance.tick() => {
                maintain(&owner, now_ms());
                continue;
            }
        }
        if store.is_failed() {
            if store.take_failure_handling() {
                handle_failure(&owner);
            }
            continue;
        }
        if let Some(interval) = batch_interval {
            tokio::time::sleep_until(last_sync + interval).await;
            last_sync = Instant::now();
        }
        commit_pending(&owner).await;
        make_spare(&owner, SPARE_FILL_PAUSE);
    }
}

/// Makes the next log segment ahead of time on a blocking thread, so that a rollover renames
/// a zero-filled file instead of writing 64 MiB of zeros on the commit path.
fn make_spare(owner: &Rc<Owner>, pause: Duration) {
    let Some(store) = owner.store() else {
        return;
    };
    let Some(job) = store.prepare_spare() else {
        return;
    };
    let owner = owner.clone();
    tokio::task::spawn_local(async move {
        let Some(store) = owner.store() else {
            return;
        };
        match tokio::task::spawn_blocking(move || job.execute_paced(pause)).await {
            Ok(done) => {
                if let Err(error) = store.add_spare(done) {
                    warn!(%error, "cannot make the next log segment ahead of time; a rollover will make it");
                }
            }
            Err(error) => warn!(%error, "the thread making the next log segment failed"),
        }
    });
}

/// Writes and syncs batches until nothing is pending.
pub async fn commit_pending(owner: &Owner) {
    let Some(store) = owner.store() else {
        return;
    };
    let mut in_flight = start_batch(owner);
    while let Some((job, bytes, started)) = in_flight.take() {
        let done = match job.await {
            Ok(done) => done,
            Err(error) => {
                warn!(%error, "the log's sync thread failed");
                report_failure(owner, format!("the sync thread failed: {error}"));
                return;
            }
        };
        let elapsed = started.elapsed();
        owner.counters().log_synced(bytes, elapsed);
        if elapsed >= SLOW_SYNC {
            warn!(
                shard = owner.index(),
                elapsed_ms = elapsed.as_millis() as u64,
                bytes,
                "slow log sync: acknowledgements waited for the disk"
            );
        }
        match store.complete_batch(done) {
            Ok(Release {
                durable,
                start_next,
            }) => {
                // The next sync starts before the released messages are written to their
                // sockets, so that those writes overlap the disk instead of delaying it.
                if start_next {
                    in_flight = start_batch(owner);
                }
                on_durable(owner, durable);
            }
            Err(reason) => {
                report_failure(owner, reason);
                return;
            }
        }
    }
}

/// A batch being written and synced on a blocking thread, with its size and start.
type InFlight = (
    tokio::task::JoinHandle<hearth_store::BatchDone<hearth_persist::ShardStorage>>,
    u64,
    Instant,
);

/// Hands everything appended so far to a blocking thread; `None` when nothing is pending or
/// the log has failed.
fn start_batch(owner: &Owner) -> Option<InFlight> {
    let store = owner.store()?;
    match store.prepare_batch() {
        Ok(Some(batch)) => {
            let bytes = batch.byte_len();
            Some((
                tokio::task::spawn_blocking(move || batch.execute()),
                bytes,
                Instant::now(),
            ))
        }
        Ok(None) => None,
        Err(error) => {
            report_failure(owner, error.to_string());
            None
        }
    }
}

/// The log is durable up to `durable`: databases remember their durable state, and every
/// client holding messages up to there is woken.
pub fn on_durable(owner: &Owner, durable: u64) {
    let Some(store) = owner.store() else {
        return;
    };
    // The gate may pass only what the followers have too (`replica`).
    let released = owner
        .replication()
        .map_or(durable, |replication| replication.on_durable(durable));
    let waiting = owner
        .with_all(|databases| release_durable(store, databases, owner.gate(), durable, released));
    owner.counters().durable(durable);
    owner.triggers().release(released.min(durable));
    crate::side::release(owner, released.min(durable));
    if waiting.is_empty() {
        return;
    }
    // The released messages to this core's sockets leave together (`--io-uring-sends`).
    let _sends = owner.send_batch();
    let sessions = owner.sessions();
    for id in waiting {
        match sessions.get(id) {
            Some(Session::Socket(handle)) => handle.wake_after_disk(),
            Some(Session::Stream(stream)) => stream.wake_after_disk(),
            None => {}
        }
    }
}

/// Moves the durable position to `durable`: each database with writes up to there remembers
/// its state after the last of them, and the gate advances to `released` (at most `durable`:
/// what followers have too). Returns the connections and streams to wake.
pub fn release_durable(
    store: &ShardStore,
    databases: &mut HashMap<String, Loaded>,
    gate: &Gate,
    durable: u64,
    released: u64,
) -> Vec<ConnId> {
    for (name, state) in store.release(durable, released) {
        if let Some(loaded) = databases.get_mut(&*name) {
            loaded.made_durable(state);
        }
    }
    gate.advance(released.min(durable))
}

/// At shutdown: waits for the batch in flight, then writes and syncs what is left on this
/// thread.
pub async fn flush_at_shutdown(owner: &Owner) {
    let Some(store) = owner.store() else {
        return;
    };
    // A bounded wait: a sync that never returns must not keep the process alive forever.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if store.failure().is_some() {
            return;
        }
        match store.commit_inline() {
            Ok(durable) => {
                on_durable(owner, durable);
                return;
            }
            Err(hearth_store::StoreError::Misuse(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Err(error) => {
                report_failure(owner, error.to_string());
                return;
            }
        }
    }
}
