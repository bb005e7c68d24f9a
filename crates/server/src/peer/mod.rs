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
//!   it; `session`: one live connection of it, reader and writer;
//! - `forward`: REST requests and event streams for a database the peer owns.
//!
//! Connection ids: an edge node sends its own ids (below [`codec::MAX_WIRE_CONN`]); the owner
//! node keys their sessions by [`remote_conn`], which sets the top bit and the edge node's
//! index above them, so that they never meet its own connections' ids (top bit clear).

pub mod codec;
mod context;
mod forward;
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
pub use context::{Forward, RemoteAnswer, RestSettings};
pub use forward::{MAX_FORWARDED_BODY_BYTES, MAX_FORWARDED_REQUESTS};
pub use placement::{NodeRoute, Placement};

/// The cluster settings of `hearth serve` (`--cluster-peers`, `--node-id`,
/// `--cluster-secret-file`).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub placement: Placement,
    /// Every node's shared secret: only a peer that proves it may use the link.
    pub secret: Vec<u8>,
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
    /// By node index, the same: REST requests and event streams.
    forwards: Vec<mpsc::UnboundedSender<Forward>>,
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

    /// Sends a REST request or an event stream's opening or end to node `node`; a link that
    /// is down answers at once, and one lost meanwhile drops the answer's sender.
    pub fn forward(&self, node: usize, forward: Forward) {
        if let Some(sender) = self.forwards.get(node) {
            let _ = sender.send(forward);
        }
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
    rest: RestSettings,
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
    let mut forwards = Vec::new();
    let mut links = Vec::new();
    for node in 0..placement.nodes.len() {
        let (owner_tx, owner_rx) = mpsc::unbounded_channel();
        let (edge_tx, edge_rx) = mpsc::unbounded_channel();
        let (forward_tx, forward_rx) = mpsc::unbounded_channel();
        let (accepted_tx, accepted_rx) = mpsc::channel(1);
        to_owner.push(owner_tx);
        to_edge.push(edge_tx);
        forwards.push(forward_tx);
        if node == placement.me {
            // Nothing is routed to itself: the receivers drop, and a send fails at once.
            continue;
        }
        links.push((
            node,
            owner_rx,
            edge_rx,
            forward_rx,
            accepted_tx,
            accepted_rx,
        ));
    }
    let nodes = Arc::new(Nodes {
        placement: placement.clone(),
        to_owner,
        forwards,
    });
    let rest = Arc::new(rest);
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
        for (node, owner_rx, edge_rx, forward_rx, accepted_tx, accepted_rx) in links {
            accepted.push((node, accepted_tx));
            let link = node_link::NodeLink::new(
                node,
                placement.clone(),
                secret.clone(),
                owners.clone(),
                edges.clone(),
                rest.clone(),
            );
            tokio::task::spawn_local(link.run(owner_rx, edge_rx, forward_rx, accepted_rx));
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
