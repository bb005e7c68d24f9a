//! The node-to-node link: several `hearth serve` processes as one service. A client may reach
//! any node; a database is owned by one node ([`placement`]), and the other nodes are edges
//! of its sessions exactly as a core is for another core's database (`link`): an edge node
//! sends a connection's `ToOwner` messages over the link, and the owner node treats the edge
//! node as one more edge of its shards, beyond their local edges, whose `ToEdge` batches
//! cross the link once per turn (a push to many listeners on that node: its frame once, one
//! small item per listener), to be fanned out by the edge node's own shards.
//!
//! - `placement`: the static placement of `--cluster-peers` (the etcd one replaces it);
//! - `codec`: the link's frames and messages; `handshake`: the shared-secret proof;
//! - `node_link`: one peer's link: dialing or accepting, reconnecting, and what is lost with
//!   it; `session`: one live connection of it, reader and writer.
//!
//! Connection ids: an edge node sends its own ids (below [`codec::MAX_WIRE_CONN`]); the owner
//! node keys their sessions by [`remote_conn`], which sets the top bit and the edge node's
//! index above them, so that they never meet its own connections' ids (top bit clear).

pub mod codec;
mod context;
pub mod handshake;
mod node_link;
pub mod placement;
mod session;

use std::net::TcpListener;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::local_thread::spawn_local_thread;
use hearth_sync::ConnId;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::inbox::ShardMessage;
use crate::link::{ToEdge, ToOwner};
use crate::replica_messages::{FollowerLag, LinkState, ReplicaOut, ReplicationMode};
pub use placement::{NodeRoute, Placement};

/// The cluster settings of `hearth serve` (`--cluster-peers`, `--node-id`,
/// `--cluster-secret-file`).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub placement: Placement,
    /// Every node's shared secret: only a peer that proves it may use the link.
    pub secret: Vec<u8>,
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
    placement: Placement,
    /// By node index; this node's own slot is a closed channel.
    to_owner: Vec<mpsc::UnboundedSender<ToOwner>>,
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
        self.placement.owner_node(namespace)
    }

    /// How many nodes there are (this one included): the edge slots of remote nodes.
    pub fn count(&self) -> usize {
        self.placement.nodes.len()
    }

    /// Sends `message` over the link to node `node`; a link that is down closes the
    /// connection (`node_link`).
    pub fn send(&self, node: usize, message: ToOwner) {
        if let Some(sender) = self.to_owner.get(node) {
            let _ = sender.send(message);
        }
    }

    /// Whether this node owns `namespace`.
    pub fn owns(&self, namespace: &str) -> bool {
        self.owner_node(namespace) == NodeRoute::Local
    }

    /// The node that follows `namespace` (`Placement::follower_node`).
    pub fn follower_node(&self, namespace: &str) -> Option<usize> {
        self.placement.follower_node(namespace)
    }

    /// This node's index.
    pub fn me(&self) -> usize {
        self.placement.me
    }

    pub fn replication(&self) -> ReplicationMode {
        self.replication
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

    /// Every other node's id and its lag as a follower of this node's databases
    /// (`/metrics`).
    pub fn lags(&self) -> Vec<(String, Arc<FollowerLag>)> {
        let me = self.placement.me;
        let nodes = self.placement.nodes.iter().zip(&self.lag).enumerate();
        nodes
            .filter(|(index, _)| *index != me)
            .map(|(_, (node, lag))| (node.id.clone(), lag.clone()))
            .collect()
    }

    /// A node's id, for logs.
    pub fn id(&self, node: usize) -> &str {
        self.placement
            .nodes
            .get(node)
            .map_or("?", |node| node.id.as_str())
    }
}

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

/// Binds the link's listener at this node's address and starts the links to every other
/// node on a thread of their own. `owners` and `edges` are the local shards' inboxes and
/// batch queues, where what arrives from other nodes goes.
pub fn start(
    config: &ClusterConfig,
    owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
    edges: Vec<mpsc::UnboundedSender<ToEdge>>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<Started> {
    let placement = config.placement.clone();
    let address = placement.nodes[placement.me].address;
    let listener = TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    let mut to_owner = Vec::new();
    let mut to_edge = Vec::new();
    let mut to_replica = Vec::new();
    let mut states = Vec::new();
    let mut links = Vec::new();
    for node in 0..placement.nodes.len() {
        let (owner_tx, owner_rx) = mpsc::unbounded_channel();
        let (edge_tx, edge_rx) = mpsc::unbounded_channel();
        let (replica_tx, replica_rx) = mpsc::unbounded_channel();
        let (accepted_tx, accepted_rx) = mpsc::channel(1);
        let state = Arc::new(LinkState::default());
        to_owner.push(owner_tx);
        to_edge.push(edge_tx);
        to_replica.push(replica_tx);
        states.push(state.clone());
        if node == placement.me {
            // Nothing is routed to itself: the receivers drop, and a send fails at once.
            continue;
        }
        let receivers = node_link::Receivers {
            to_owner: owner_rx,
            to_edge: edge_rx,
            to_replica: replica_rx,
            accepted: accepted_rx,
        };
        links.push((node, receivers, accepted_tx, state));
    }
    let nodes = Arc::new(Nodes {
        placement: placement.clone(),
        lag: (0..placement.nodes.len())
            .map(|_| Arc::new(FollowerLag::default()))
            .collect(),
        to_owner,
        to_replica,
        links: states,
        replication: config.replication,
    });
    let secret: Arc<[u8]> = config.secret.clone().into();
    spawn_local_thread("hearth-peers", "node link", move || async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(error) => {
                warn!(%error, "cannot register the node link listener");
                return;
            }
        };
        info!(%address, node = placement.my_id(), "node link listening");
        let placement = Rc::new(placement);
        let mut accepted = Vec::new();
        for (node, receivers, accepted_tx, state) in links {
            accepted.push((node, accepted_tx));
            let link = node_link::NodeLink::new(
                node,
                placement.clone(),
                secret.clone(),
                owners.clone(),
                edges.clone(),
                state,
            );
            tokio::task::spawn_local(link.run(receivers));
        }
        accept_loop(listener, placement, secret, accepted, shutdown).await;
    })?;
    Ok(Started {
        nodes,
        edges: to_edge,
    })
}

/// Takes the links other nodes dial, each once it passed the handshake, to their node's
/// link. A refused peer is logged and dropped.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    placement: Rc<Placement>,
    secret: Arc<[u8]>,
    links: Vec<(usize, mpsc::Sender<tokio::net::TcpStream>)>,
    mut shutdown: watch::Receiver<bool>,
) {
    let links = Rc::new(links);
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => {
                // The links live on until the shards are gone, so that the sessions this
                // node holds end on their owners; the process ends with them.
                std::future::pending::<()>().await;
                return;
            }
            accepted = listener.accept() => accepted,
        };
        let (mut stream, from) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "node link accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let placement = placement.clone();
        let secret = secret.clone();
        let links = links.clone();
        tokio::task::spawn_local(async move {
            let shaken = tokio::time::timeout(
                handshake::HANDSHAKE_TIMEOUT,
                handshake::accept(&mut stream, &placement, &secret),
            )
            .await
            .unwrap_or(Err(handshake::HandshakeError::Timeout));
            match shaken {
                Ok(node) => {
                    if let Some((_, link)) = links.iter().find(|(index, _)| *index == node) {
                        let _ = link.send(stream).await;
                    }
                }
                Err(error) => warn!(%from, %error, "node link refused"),
            }
        });
    }
}
