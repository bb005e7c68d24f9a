//! The keys Hearth keeps in etcd and the JSON of their values.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// `<NODES><id>` → [`NodeValue`], attached to the node's lease: the live nodes.
pub const NODES: &str = "/hearth/nodes/";
/// `<OWNERS><namespace>` → [`ClaimValue`], attached to the owner's lease: who owns a database.
pub const OWNERS: &str = "/hearth/owners/";
/// `<EPOCHS><namespace>` → the last epoch granted, in decimal, without a lease: it outlives
/// every claim, so an epoch is never given twice.
pub const EPOCHS: &str = "/hearth/epochs/";
/// `<MOVES><namespace>` → [`MoveValue`], under a short lease of its own: an operator's request
/// (`hearth cluster move`) that the owner hands the database to its follower.
pub const MOVES: &str = "/hearth/moves/";
/// `<SYNC><namespace>` → [`SyncValue`], without a lease (it must outlive every node): under
/// `--replication sync`, the nodes that hold every write of the database acknowledged so far,
/// its owner and normally its follower. Only a member may claim the database next (decision
/// 59); an owner removes a follower from it before it acknowledges a write without that
/// follower.
pub const SYNC: &str = "/hearth/sync/";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeValue {
    /// Where other nodes reach this one (the node-to-node link).
    pub advertise: SocketAddr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimValue {
    pub node: String,
    pub advertise: SocketAddr,
    pub epoch: u64,
}

/// A request to move a database: valid while its claim is still at `epoch`, to `to`, the
/// follower the requester saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveValue {
    pub epoch: u64,
    pub to: String,
}

/// The sync set of a database: who may take it over (`SYNC`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncValue {
    /// The epoch of the claim under which the owner last set it.
    pub epoch: u64,
    /// Node ids, the owner's first.
    pub members: Vec<String>,
}

impl SyncValue {
    pub fn has(&self, node: &str) -> bool {
        self.members.iter().any(|member| member == node)
    }
}

pub fn sync(namespace: &str) -> String {
    format!("{SYNC}{namespace}")
}

pub fn moves(namespace: &str) -> String {
    format!("{MOVES}{namespace}")
}

pub fn node(id: &str) -> String {
    format!("{NODES}{id}")
}

pub fn owner(namespace: &str) -> String {
    format!("{OWNERS}{namespace}")
}

pub fn epoch(namespace: &str) -> String {
    format!("{EPOCHS}{namespace}")
}
