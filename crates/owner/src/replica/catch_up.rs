//! Copies without a write: a follower that lacks a database it should hold gets a full copy
//! from the tick, not only with the database's next write. A follower lacks one when its link
//! came up (it started, restarted, or the connection was lost), or when placement made it the
//! follower (a node joined between the owner and the old follower, or the old follower left).
//! Databases evicted from the owner's memory are read from their snapshot for it, and dropped
//! again once copied: a node that became the follower of an idle database would otherwise
//! have nothing of it when asked to take it over.
//!
//! Copies hold no acknowledgement. Each tick copies at most [`COPY_BYTES_PER_TICK`] and loads
//! at most [`LOADS_PER_TICK`] evicted databases, and none toward a follower with
//! [`MAX_COPY_IN_FLIGHT_BYTES`] unacknowledged, so that a join does not stall the shard or
//! push the follower past its limit; the rest goes on the next tick.

use crate::durability::load_evicted;
use crate::loaded::Loaded;
use crate::replication::shipper::MAX_IN_FLIGHT_BYTES;
use crate::replication::Replication;
use crate::state::Owner;
use hearth_net::time::now_ms;

/// The most bytes of copies one shard ships in one tick (100 ms).
pub const COPY_BYTES_PER_TICK: u64 = 16 * 1024 * 1024;

/// The most evicted databases one shard loads from their snapshots in one tick.
pub const LOADS_PER_TICK: usize = 64;

/// Copies wait while more than this is unacknowledged toward the follower: half the limit
/// past which it is left behind, the rest for the writes that go on meanwhile.
pub const MAX_COPY_IN_FLIGHT_BYTES: u64 = MAX_IN_FLIGHT_BYTES / 2;

/// Copies what this shard's followers lack, within one tick's budget; whether all of it was
/// (otherwise the caller comes back on the next tick).
pub fn run(owner: &Owner, replication: &Replication) -> bool {
    let mut candidates: Vec<String> = owner
        .databases()
        .iter()
        .filter(|(name, loaded)| loaded.is_on_disk() && replication.lacks_copy(name).is_some())
        .map(|(name, _)| name.clone())
        .collect();
    let in_memory = candidates.len();
    if let Some(store) = owner.store() {
        let databases = owner.databases();
        candidates.extend(
            store
                .newest_snapshots()
                .into_iter()
                .map(|(name, _)| name)
                .filter(|name| !databases.contains_key(name))
                .filter(|name| replication.lacks_copy(name).is_some()),
        );
    }
    let mut bytes = 0;
    let mut loads = 0;
    for (index, name) in candidates.iter().enumerate() {
        let Some(follower) = replication.lacks_copy(name) else {
            continue;
        };
        let evicted = index >= in_memory;
        if bytes >= COPY_BYTES_PER_TICK
            || (evicted && loads >= LOADS_PER_TICK)
            || replication.in_flight_bytes(follower) > MAX_COPY_IN_FLIGHT_BYTES
        {
            return false;
        }
        if evicted {
            // Read for the copy and dropped after it: loading every idle database a
            // follower lacks into memory for the eviction delay could hold more than fits.
            loads += 1;
            let Some(mut loaded) = load_evicted(owner, name, now_ms()) else {
                continue;
            };
            owner.fence(&mut loaded);
            bytes += copy(owner, replication, &loaded);
        } else if let Some(loaded) = owner.databases().get(name) {
            bytes += copy(owner, replication, loaded);
        }
    }
    true
}

/// Copies `loaded` to its follower if this node may write it: a database fenced (its claim
/// not confirmed) or locked (it could not be loaded) is no copy to overwrite the follower's
/// with. The bytes shipped.
fn copy(owner: &Owner, replication: &Replication, loaded: &Loaded) -> u64 {
    if loaded.read_only_reason().is_some() {
        return 0;
    }
    let epoch = loaded.epoch().unwrap_or_else(|| {
        owner
            .store()
            .map_or(0, |store| store.logged_epoch(loaded.name()))
    });
    let events = |database: &str, room: u64| owner.copy_events(database, room);
    replication.copy(loaded, epoch, &events)
}
