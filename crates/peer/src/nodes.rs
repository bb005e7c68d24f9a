//! What every shard holds of the cluster ([`Nodes`]: where a database is served, the way to
//! each node's link, the links' states and the followers' lag) and the ids of other nodes'
//! connections on this one.

use std::sync::Arc;

use hearth_sync::ConnId;
use tokio::sync::mpsc;

use crate::context::Forward;
use crate::directory::Directory;
use crate::placement::NodeRoute;
use crate::route::Membership;
use hearth_ground::cross_core::ToOwner;
use hearth_ground::replica_messages::{FollowerLag, LinkState, ReplicaOut, ReplicationMode};

/// What every shard holds of the cluster: where a database is served, and the way to each
/// node's link.
pub struct Nodes {
    pub(crate) membership: Membership,
    pub(crate) directory: Arc<Directory>,
    /// By node index, every index a node may get; this node's own slot is a closed channel.
    pub(crate) to_owner: Vec<mpsc::UnboundedSender<ToOwner>>,
    /// By node index, the same: REST requests and event streams.
    pub(crate) forwards: Vec<mpsc::UnboundedSender<Forward>>,
    /// By node index: replication's messages toward that node (`replica`).
    pub(crate) to_replica: Vec<mpsc::UnboundedSender<ReplicaOut>>,
    /// By node index: the link's generation and whether it is up.
    pub(crate) links: Vec<Arc<LinkState>>,
    /// By node index: the replication lag toward it as a follower, for `/metrics`.
    pub(crate) lag: Vec<Arc<FollowerLag>>,
    pub(crate) replication: ReplicationMode,
}

impl Nodes {
    /// Where `namespace`'s requests are handled: the only question the placement answers.
    pub fn owner_node(&self, namespace: &str) -> NodeRoute {
        self.membership.route(&self.directory, namespace)
    }

    /// How many node indexes there may be (this node's included): the edge slots of remote
    /// nodes.
    pub fn count(&self) -> usize {
        self.to_owner.len()
    }

    /// How many nodes have an index so far (this node's included): the others are unknown
    /// and have no link.
    pub fn known(&self) -> usize {
        self.directory.len()
    }

    /// Sends `message` over the link to node `node`; a link that is down closes the
    /// connection (`node_link`).
    pub fn send(&self, node: usize, message: ToOwner) {
        if let Some(sender) = self.to_owner.get(node) {
            let _ = sender.send(message);
        }
    }

    /// Each node's index.
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// Sends a REST request or an event stream's opening or end to node `node`; a link that
    /// is down answers at once, and one lost meanwhile drops the answer's sender.
    pub fn forward(&self, node: usize, forward: Forward) {
        if let Some(sender) = self.forwards.get(node) {
            let _ = sender.send(forward);
        }
    }

    /// Whether this node owns `namespace`.
    pub fn owns(&self, namespace: &str) -> bool {
        self.owner_node(namespace) == NodeRoute::Local
    }

    /// Whether this node owns `namespace` by a claim of its own (with etcd) or by the static
    /// list: what a copy made without a write needs (`replica::catch_up`).
    pub fn claimed_here(&self, namespace: &str) -> bool {
        self.membership.claimed_here(namespace)
    }

    /// Changes whenever the live nodes or the claims may have (`Membership::version`).
    pub fn placement_version(&self) -> u64 {
        self.membership.version()
    }

    /// The node that follows `namespace` (`Placement::follower_node`).
    pub fn follower_node(&self, namespace: &str) -> Option<usize> {
        self.membership.follower(&self.directory, namespace)
    }

    /// This node's index.
    pub fn me(&self) -> usize {
        self.directory.me()
    }

    pub fn replication(&self) -> ReplicationMode {
        self.replication
    }

    /// The etcd placement, when its databases have sync sets (`--replication sync` with
    /// etcd, decision 58).
    pub fn sync_placement(&self) -> Option<&hearth_cluster::Placement> {
        match &self.membership {
            Membership::Etcd(placement)
                if self.replication == ReplicationMode::Sync && placement.sync_set() =>
            {
                Some(placement)
            }
            _ => None,
        }
    }

    /// The other members of `namespace`'s sync set as etcd last said, as node indexes
    /// ([`UNKNOWN_MEMBER`] for an id that has none); `None` without sync sets or without a
    /// set for the database.
    pub fn sync_members(&self, namespace: &str) -> Option<Vec<usize>> {
        let placement = self.sync_placement()?;
        let view = placement.view();
        let set = view.sync.get(namespace)?;
        Some(
            set.members
                .iter()
                .filter(|id| **id != *placement.node_id())
                .map(|id| self.directory.index_of(id).unwrap_or(UNKNOWN_MEMBER))
                .collect(),
        )
    }

    /// The link toward `node`: its generation and whether it is up.
    pub fn link_state(&self, node: usize) -> (u64, bool) {
        self.links.get(node).map_or((0, false), |state| state.get())
    }

    /// Sends replication's `message` toward `node`; dropped while the link is down (the
    /// shards learn that from [`Nodes::link_state`]).
    pub fn send_replica(&self, node: usize, message: ReplicaOut) {
        if let Some(sender) = self.to_replica.get(node) {
            let _ = sender.send(message);
        }
    }

    /// The replication lag toward follower `node`.
    pub fn lag(&self, node: usize) -> &FollowerLag {
        static NONE: FollowerLag = FollowerLag::new();
        self.lag.get(node).map_or(&NONE, |lag| lag)
    }

    /// Every other node numbered so far and its lag as a follower of this node's databases
    /// (`/metrics`).
    pub fn lags(&self) -> Vec<(String, Arc<FollowerLag>)> {
        let me = self.directory.me();
        (0..self.directory.len())
            .filter(|index| *index != me)
            .filter_map(|index| {
                Some((
                    self.directory.id(index)?.to_string(),
                    self.lag.get(index)?.clone(),
                ))
            })
            .collect()
    }

    /// What this node still waits for before it takes clients (`/readyz`), `None` once it
    /// has: with etcd, its own key among the live nodes and a link up to every other live
    /// node. A static list has no such wait: a node of it may stay down for good.
    pub fn joining(&self) -> Option<String> {
        let Membership::Etcd(placement) = &self.membership else {
            return None;
        };
        let view = placement.view();
        if !view.nodes.contains_key(placement.node_id()) {
            return Some("this node is not among etcd's live nodes yet".to_owned());
        }
        view.nodes
            .keys()
            .filter(|id| ***id != *placement.node_id())
            .find(|id| {
                !self
                    .directory
                    .index_of(id)
                    .is_some_and(|index| self.link_state(index).1)
            })
            .map(|id| format!("the link to node {id} is not up yet"))
    }

    /// A node's id, for logs.
    pub fn id(&self, node: usize) -> Arc<str> {
        self.directory.id(node).unwrap_or_else(|| Arc::from("?"))
    }
}

/// The index standing for a member of a sync set that has no index here: nothing is ever
/// sent to it, so the records of its database wait until it leaves the set.
pub const UNKNOWN_MEMBER: usize = usize::MAX;

/// The owner-side id of connection `conn` of edge node `node`.
pub fn remote_conn(node: usize, conn: ConnId) -> ConnId {
    (1 << 63) | ((node as u64) << 48) | conn
}

/// The edge node's own id of an owner-side id made by [`remote_conn`].
pub fn wire_conn(conn: ConnId) -> ConnId {
    conn & (crate::codec::MAX_WIRE_CONN - 1)
}

/// Who owns `namespace`, as an owner index: a local shard's index (of `shards`), or past them,
/// `shards` plus the index of the node that owns it. Without `nodes` every database is this
/// node's.
pub fn owner_index(nodes: Option<&Nodes>, namespace: &str, shards: usize) -> usize {
    if let Some(NodeRoute::Remote(node)) = nodes.map(|nodes| nodes.owner_node(namespace)) {
        return shards + node;
    }
    hearth_ground::namespace::owner_shard(namespace, shards)
}
