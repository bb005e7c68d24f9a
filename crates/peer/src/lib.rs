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
mod nodes;
pub mod placement;
mod reader;
pub mod route;

use std::cell::RefCell;
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::Arc;

use hearth_net::local_thread::spawn_local_thread;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

pub use context::{Forward, RemoteAnswer, RestSettings};
pub use forward::{MAX_FORWARDED_BODY_BYTES, MAX_FORWARDED_REQUESTS};
use hearth_ground::cross_core::ToEdge;
use hearth_ground::inbox::ShardMessage;
use hearth_ground::replica_messages::{FollowerLag, LinkState, ReplicationMode};
pub use link_tls::{LinkSecurity, LinkTls, LinkTlsError};
use links::{Admit, Links, Slot};
pub use nodes::{owner_index, remote_conn, wire_conn, Nodes, UNKNOWN_MEMBER};
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
