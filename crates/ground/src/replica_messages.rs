//! What replication carries between a shard and the node link (`replica`, `peer`): plain data
//! in both directions, the mode, and the lag counters `/metrics` reads. Below both, so that
//! neither imports the other.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

/// `--replication`: how an owner's writes reach its follower node (a cluster of
/// `--cluster-peers` only; a single node has no follower and ignores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplicationMode {
    /// Shipped, and (with `--durability strict`) acknowledged only once the follower has
    /// them on its disk too; a follower that is lost or too slow is dropped to `async` until
    /// it has caught up (logged, `hearth_replication_degraded`).
    #[default]
    Sync,
    /// Shipped, acknowledged at the owner's own durability: the follower may lag.
    Async,
    /// Nothing is shipped.
    Off,
}

/// Log records of one database shipped from its owner to its follower: the same from the
/// owner's shard to its link ([`ToFollower`]), across the node link (`peer`'s
/// `LinkMessage::Replicate`) and from the follower's link to its shard ([`ReplicaIn::Records`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shipped {
    /// The owner shard, whose sequence numbers `seq` is one of.
    pub shard: u32,
    pub seq: u64,
    pub namespace: String,
    /// A full copy that replaces the follower's database.
    pub reset: bool,
    /// Log records as the log encodes them.
    pub records: Bytes,
}

/// From a shard to the link to its follower node: records of one of its databases.
#[derive(Debug)]
pub struct ToFollower {
    pub shipped: Shipped,
    /// The link's generation the shard shipped under: the link drops what was meant for an
    /// earlier connection, so that a follower never gets records without the copy before.
    pub generation: u64,
}

/// From a shard to the link to an owner node: records it has on disk. The same across the
/// node link (`peer`'s `LinkMessage::ReplicaAck`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToOwnerNode {
    pub shard: u32,
    pub seqs: Vec<u64>,
}

/// What a shard sends toward another node for replication.
#[derive(Debug)]
pub enum ReplicaOut {
    Records(ToFollower),
    Ack(ToOwnerNode),
}

/// What the link hands a local shard for replication.
#[derive(Debug)]
pub enum ReplicaIn {
    /// Records of a database this node follows, from owner node `from`.
    Records { from: usize, shipped: Shipped },
    /// Follower node `from` has these records of this shard on its disk.
    Ack { from: usize, seqs: Vec<u64> },
}

/// The link's state toward one node as the shards see it: a generation that grows with every
/// new connection, and whether it is up now. One word, so that a shard reads both at once.
#[derive(Debug, Default)]
pub struct LinkState(AtomicU64);

impl LinkState {
    /// `(generation, up)`.
    pub fn get(&self) -> (u64, bool) {
        let word = self.0.load(Ordering::Acquire);
        (word >> 1, word & 1 == 1)
    }

    /// A new connection is up: the next generation.
    pub fn connected(&self) -> u64 {
        let (generation, _) = self.get();
        self.0.store(((generation + 1) << 1) | 1, Ordering::Release);
        generation + 1
    }

    pub fn lost(&self) {
        self.0.fetch_and(!1, Ordering::AcqRel);
    }
}

/// Replication lag toward one follower node, summed over the shards (each adds its changes).
#[derive(Debug, Default)]
pub struct FollowerLag {
    /// Records shipped and not yet acknowledged.
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    /// Shards whose writes are acknowledged without this follower now.
    pub degraded: AtomicU64,
    /// Times a shard stopped waiting for this follower.
    pub degradations: AtomicU64,
    /// Full copies of a database shipped to it (its first record over a connection, or a
    /// catch-up without a write).
    pub copies: AtomicU64,
}

impl FollowerLag {
    pub const fn new() -> FollowerLag {
        FollowerLag {
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            degraded: AtomicU64::new(0),
            degradations: AtomicU64::new(0),
            copies: AtomicU64::new(0),
        }
    }
}

/// Writes whose held acknowledgements were given up, server-wide (`replica::sync_set`,
/// `/metrics`).
pub static WRITES_GIVEN_UP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Copies of a database replaced while they differed, server-wide (`replica::divergent`).
pub static DIVERGENT_COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
