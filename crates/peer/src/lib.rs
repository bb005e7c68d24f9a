//! The node-to-node link: several `hearth serve` processes as one service. A client may reach
//! any node; a database is owned by one node ([`placement`]), and the other nodes are edges
//! of its sessions exactly as a core is for another core's database (`link`): an edge node
//! sends a connection's `ToOwner` messages over the link, and the owner node treats the edge
//! node as one more edge of its shards, beyond their local edges, whose `ToEdge` batches
//! cross the link once per turn (a push to many listeners on that node: its frame once, one
//! small item per listener), to be fanned out by the edge node's own shards.
//!
//! - `route`: which node serves a database, by the static placement of `--cluster-peers`
//!   (`placement`) or by etcd's (`--cluster-etcd`); `directory`: each node's index;
//! - `codec`: the link's frames and messages; `handshake`: the shared-secret proof;
//!   `link_tls`: mutual TLS with the cluster's CA around it (or `--cluster-plaintext`);
//! - `links`: the link thread's links and the accept loop; `follow`: the links follow etcd's
//!   live nodes, and connections whose database moved are closed;
//! - `node_link`: one peer's link: dialing or accepting, reconnecting, and what is lost with
//!   it; `session`: one live connection of it, its writer, and `reader` its reader;
//! - `forward`: REST requests and event streams for a database the peer owns.
//!
//! Connection ids: an edge node sends its own ids (below [`codec::MAX_WIRE_CONN`]); the owner
//! node keys their sessions by [`remote_conn`], which sets the top bit and the edge node's
//! index above them, so that they never meet its own connections' ids (top bit clear).

pub mod codec;
mod connection;
mod context;
pub mod directory;
mod follow;
mod forward;
pub mod handshake;
pub mod link_tls;
mod links;
mod node_link;
pub mod placement;
mod reader;
pub mod route;

use std::cell::RefCell;
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::Arc;

use hearth_net::local_thread::spawn_local_thread;
use hearth_sync::ConnId;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

pub use context::{Forward, RemoteAnswer, RestSettings};
use directory::Directory;
pub use forward::{MAX_FORWARDED_BODY_BYTES, MAX_FORWARDED_REQUESTS};
use hearth_ground::cross_core::{ToEdge, ToOwner};
use hearth_ground::inbox::ShardMessage;
use hearth_ground::replica_messages::{FollowerLag, LinkState, ReplicaOut, ReplicationMode};
pub use link_tls::{LinkSecurity, LinkTls, LinkTlsError};
use links::{Admit, Links, Slot};
pub use placement::{NodeRoute, Placement};
pub use route::Membership;

/// The cluster settings of `hearth serve` that start the node-to-node link: `--cluster-peers`
/// or `--cluster-etcd`, with `--node-id` and `--cluster-secret-file`.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub membership: Membership,
    /// Every node's shared secret: only a peer that proves it may use the link.
    pub secret: Vec<u8>,
    /// Mutual TLS, or plain text for tests.
    pub security: LinkSecurity,
    /// How owners ship their logs to followers (`--replication`).
    pub replication: ReplicationMode,
}

/// The most bytes of a secret file read.
pub const MAX_SECRET_BYTES: usize = 4096;

/// The fewest bytes of a secret: a short one could be guessed from a recorded handshake.
pub const MIN_SECRET_BYTES: usize = 16;

/// What every shard holds of the cluster: where a database is served, and the way to each
/// node's link.
pub struct Nodes {
    membership: Membership,
    directory: Arc<Directory>,
    /// By node index, every index a node may get; this node's own slot is a closed channel.
    to_owner: Vec<mpsc::UnboundedSender<ToOwner>>,
    /// By node index, the same: REST requests and event streams.
    forwards: Vec<mpsc::UnboundedSender<Forward>>,
    /// By node index: replication's messages toward that node (`replica`).
    to_replica: Vec<mpsc::UnboundedSender<ReplicaOut>>,
    /// By node index: the link's generation and whether it is up.
    links: Vec<Arc<LinkState>>,
    /// By node index: the replication lag toward it as a follower, for `/metrics`.
    lag: Vec<Arc<FollowerLag>>,
    replication: ReplicationMode,
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
    conn & (codec::MAX_WIRE_CONN - 1)
}

/// The links of a started node: what the shards need of them.
pub struct Started {
    pub nodes: Arc<Nodes>,
    /// By node index: the queue of an owner's batches for that node's connections, one more
    /// edge of every local shard's `Outgoing` (this node's own slot is closed).
    pub edges: Vec<mpsc::UnboundedSender<ToEdge>>,
}

/// Binds the link's listener at this node's address and starts the links to the other
/// nodes on a thread of their own: all at once for a static list, as they are seen alive
/// with etcd. `owners` and `edges` are the local shards' inboxes and batch queues, where what
/// arrives from other nodes goes.
pub fn start(
    config: &ClusterConfig,
    rest: RestSettings,
    owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
    edges: Vec<mpsc::UnboundedSender<ToEdge>>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<Started> {
    let membership = config.membership.clone();
    let address = membership.link_address();
    let listener = TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    let directory = Arc::new(membership.directory());
    let mut to_owner = Vec::new();
    let mut to_edge = Vec::new();
    let mut forwards = Vec::new();
    let mut to_replica = Vec::new();
    let mut states = Vec::new();
    let mut idle = Vec::new();
    for node in 0..directory.capacity() {
        let (owner_tx, owner_rx) = mpsc::unbounded_channel();
        let (edge_tx, edge_rx) = mpsc::unbounded_channel();
        let (forward_tx, forward_rx) = mpsc::unbounded_channel();
        let (replica_tx, replica_rx) = mpsc::unbounded_channel();
        let state = Arc::new(LinkState::default());
        to_owner.push(owner_tx);
        to_replica.push(replica_tx);
        states.push(state.clone());
        to_edge.push(edge_tx);
        forwards.push(forward_tx);
        // Nothing is routed to itself: the receivers drop, and a send fails at once.
        idle.push((node != directory.me()).then_some(Slot {
            to_owner: owner_rx,
            to_edge: edge_rx,
            forwards: forward_rx,
            to_replica: replica_rx,
            state,
        }));
    }
    let nodes = Arc::new(Nodes {
        membership: membership.clone(),
        directory: directory.clone(),
        to_owner,
        forwards,
        lag: (0..directory.capacity())
            .map(|_| Arc::new(FollowerLag::default()))
            .collect(),
        to_replica,
        links: states,
        replication: config.replication,
    });
    let me: Arc<str> = Arc::from(membership.my_id());
    let rest = Arc::new(rest);
    let secret: Arc<[u8]> = config.secret.clone().into();
    let security = config.security.clone();
    let followed = nodes.clone();
    spawn_local_thread("hearth-peers", "node link", move || async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(error) => {
                warn!(%error, "cannot register the node link listener");
                return;
            }
        };
        info!(%address, node = &*me, "node link listening");
        let links = Rc::new(RefCell::new(Links::new(
            me, secret, security, owners, edges, rest, idle,
        )));
        let admit: Admit = match membership {
            Membership::Static(placement) => {
                for (index, node) in placement.nodes.iter().enumerate() {
                    let id: Arc<str> = Arc::from(node.id.as_str());
                    links.borrow_mut().ensure(index, &id, Some(node.address));
                }
                Box::new(move |id| {
                    let index = directory.index_of(id)?;
                    Some((index, Some(placement.nodes.get(index)?.address)))
                })
            }
            Membership::Etcd(placement) => {
                let follow = follow::follow(placement.clone(), followed, links.clone());
                tokio::task::spawn_local(follow);
                // A node that dials before this one's view has it waits for its next try.
                Box::new(move |id| {
                    let info = placement.view().nodes.get(id)?.advertise;
                    Some((directory.index_of(id)?, Some(info)))
                })
            }
        };
        links::accept_loop(listener, links, admit, shutdown).await;
    })?;
    Ok(Started {
        nodes,
        edges: to_edge,
    })
}
