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

pub fn node(id: &str) -> String {
    format!("{NODES}{id}")
}

pub fn owner(namespace: &str) -> String {
    format!("{OWNERS}{namespace}")
}

pub fn epoch(namespace: &str) -> String {
    format!("{EPOCHS}{namespace}")
}
