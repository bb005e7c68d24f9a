//! Cluster membership and database placement on etcd (issue #21, ARCHITECTURE.md decision 47).
//!
//! A node holds an etcd lease and registers under `/hearth/nodes/<id>` attached to it. The
//! live nodes are the keys under that prefix; a database's owner is chosen among them by
//! rendezvous hashing (`rendezvous`) and becomes its owner by claiming
//! `/hearth/owners/<namespace>` under its lease in a transaction that also advances the
//! database's fencing epoch (`/hearth/epochs/<namespace>`, a key without a lease, so the
//! history outlives every node). The etcd client runs on a thread of its own (`agent`);
//! the shards read an immutable [`View`] swapped whole on every change ([`Placement`]), so
//! the hot path takes no lock.

mod agent;
pub mod etcd;
pub mod keys;
pub mod moves;
mod placement;
pub mod rendezvous;
pub mod status;
mod view;

pub use placement::{ClusterConfig, MemberChange, Placement, StartError};
pub use view::{Claim, NodeInfo, View};
