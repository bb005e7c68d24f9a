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
