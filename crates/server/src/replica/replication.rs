//! What a shard holds of replication (`Shard::replication`): as an owner, the state toward its
//! databases' followers and the shipping of each record; as a follower, the records waiting
//! for its own log. Below the shard: it takes only the database a record is for.

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;
use hearth_store::{encode_record, RecordRef};
use hearth_sync::{Change, Write, WriteOp};
use hearth_tree::Path;
use tracing::warn;

use super::pending::Pending;
use super::shipper::{Ship, Shipper};
use crate::loaded::Loaded;
use crate::peer::Nodes;
use crate::replica_messages::{ReplicaOut, ReplicationMode, ToFollower};
use crate::time::now_ms;

/// The most bytes of records one message carries: a full copy larger than this is not
/// shipped (the follower keeps no copy of that database; logged).
pub const MAX_SHIPPED_BYTES: usize = crate::peer::codec::MAX_FRAME_BYTES - 64 * 1024;

/// A shard's replication: as an owner toward its databases' followers, and as a follower of
/// other nodes' databases.
pub struct Replication {
    pub(super) nodes: Arc<Nodes>,
    pub(super) shipper: RefCell<Shipper>,
    pub(super) pending: RefCell<Pending>,
    /// The lag last added to the node-wide counters, per node, to add only changes.
    pub(super) reported: RefCell<Vec<(u64, u64, bool)>>,
    /// The shard's index, which the owner's sequence numbers belong to.
    shard: u32,
}

impl Replication {
    pub fn new(nodes: &Arc<Nodes>, shard: usize) -> Replication {
        let count = nodes.count();
        Replication {
            nodes: nodes.clone(),
            shipper: RefCell::new(Shipper::new(
                nodes.replication() == ReplicationMode::Sync,
                count,
            )),
            pending: RefCell::new(Pending::default()),
            reported: RefCell::new(vec![(0, 0, false); count]),
            shard: shard as u32,
        }
    }

    /// Ships the record `seq` just appended for `loaded` (its engine already applied it) to
    /// the database's follower, when this node owns it and replication is on.
    pub fn ship(&self, loaded: &Loaded, seq: u64, body: RecordRef<'_>) {
        let nodes = &self.nodes;
        if nodes.replication() == ReplicationMode::Off || !nodes.owns(&loaded.name) {
            return;
        }
        let Some(node) = nodes.follower_node(&loaded.name) else {
            return;
        };
        let link = nodes.link_state(node);
        let decision = self.shipper.borrow_mut().prepare(node, link, &loaded.name);
        let (reset, records) = match decision {
            Ship::Skip => return,
            Ship::Record => (false, encode(seq, &loaded.name, body)),
            Ship::Copy => (true, encode_copy(seq, loaded)),
        };
        let Some(records) = records.filter(|records| records.len() <= MAX_SHIPPED_BYTES) else {
            warn!(
                namespace = %loaded.name,
                follower = nodes.id(node),
                "a record or copy is too large to ship; the follower keeps no copy of this database"
            );
            self.shipper.borrow_mut().forget(node, &loaded.name);
            return;
        };
        let bytes = records.len() as u64;
        nodes.send_replica(
            node,
            ReplicaOut::Records(ToFollower {
                shard: self.shard,
                seq,
                namespace: loaded.name.to_string(),
                reset,
                records,
                generation: link.0,
            }),
        );
        self.shipper
            .borrow_mut()
            .shipped(node, seq, bytes, now_ms(), true);
    }

    /// The log is durable up to `durable` on this node: the records followed for other
    /// nodes up to there are acknowledged to them. Returns the position the gate may release
    /// up to.
    pub fn on_durable(&self, durable: u64) -> u64 {
        for (node, ack) in self.pending.borrow_mut().synced(durable) {
            self.nodes.send_replica(node, ReplicaOut::Ack(ack));
        }
        self.shipper.borrow().position(durable)
    }
}

fn encode(seq: u64, namespace: &str, body: RecordRef<'_>) -> Option<Bytes> {
    let mut out = Vec::new();
    encode_record(&mut out, seq, 0, namespace, body).ok()?;
    Some(out.into())
}

/// A full copy: the rules set through the API (if any), then the whole tree as one write.
fn encode_copy(seq: u64, loaded: &Loaded) -> Option<Bytes> {
    let mut out = Vec::new();
    if let Some(rules) = &loaded.rules {
        encode_record(&mut out, seq, 0, &loaded.name, RecordRef::Rules(rules)).ok()?;
    }
    let tree = Write {
        base: Path::root(),
        ops: vec![WriteOp {
            path: Path::root(),
            change: Change::Set(loaded.engine.root().clone()),
        }],
    };
    encode_record(&mut out, seq, 0, &loaded.name, RecordRef::Write(&tree)).ok()?;
    Some(out.into())
}
