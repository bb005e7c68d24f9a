//! Fencing: in a cluster, a database accepts writes only while this node holds its claim
//! under a lease etcd confirmed recently (`Placement::write_refusal`). The check is made each
//! time a shard looks a database up for a request, and it turns the database read-only with
//! the reason (`unavailable` on the wire, 503 over REST) or writable again; the engine then
//! refuses writes exactly as after a disk failure (decision 23), reads go on.

use std::sync::Arc;

use hearth_cluster::Placement;

use crate::loaded::Loaded;

/// Makes `loaded` writable or read-only as the claim on it allows. `disk_failed`: the
/// shard's log failed, whose read-only reason stays.
pub fn apply(placement: &Placement, disk_failed: bool, loaded: &mut Loaded) {
    if disk_failed {
        return;
    }
    let refusal = placement.write_refusal(&loaded.name);
    match (refusal, loaded.engine.read_only_reason()) {
        (None, None) => {}
        (None, Some(_)) => loaded.engine.set_read_only(None),
        (Some(reason), Some(current)) if current == reason => {}
        (Some(reason), _) => loaded.engine.set_read_only(Some(Arc::from(reason))),
    }
}
