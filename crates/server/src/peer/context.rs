//! What one node-to-node link shares between its reader (`session.rs`) and its writer
//! (`node_link.rs`), below both so that neither imports the other.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;

use hearth_sync::ConnId;
use rustc_hash::FxHashMap;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::close::{CloseReason, OWNER_NODE_LOST_CLOSE};
use crate::inbox::ShardMessage;
use crate::link::{Credit, EdgeItem, ToEdge};
use crate::rest::RestResponse;

/// What one link shares between its reader and writer, on the link thread only.
pub struct Context {
    /// The peer's index in the directory (`directory.rs`).
    pub node: usize,
    /// The peer's id.
    pub peer: Arc<str>,
    /// Where the peer's link listens; `None` while it is not a live node (its etcd lease
    /// ended). A change ends the live connection of the link (`session.rs`).
    pub address: watch::Sender<Option<SocketAddr>>,
    /// The local shards' inboxes (their owner roles).
    pub owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
    /// The local shards' batch queues (their edge roles).
    pub edges: Vec<mpsc::UnboundedSender<ToEdge>>,
    /// Per local shard: the bytes of the peer's batches it has not written yet. The reader
    /// stops reading while one is full, so a slow local edge slows the peer, not our memory.
    pub credits: Vec<Arc<Credit>>,
    /// The bytes of the peer's messages the local owners have not handled yet.
    pub owner_room: Arc<Semaphore>,
    pub state: RefCell<LinkState>,
}

/// The sessions a live connection of the link carries.
#[derive(Default)]
pub struct LinkState {
    /// Owner side: the peer's connections with a session here, by their id on the peer, and
    /// the local shard that owns their database.
    pub sessions: FxHashMap<ConnId, usize>,
    /// Edge side: this node's connections whose session is on the peer, and their database
    /// (to close those whose database moved to another node, `follow.rs`).
    pub opened: FxHashMap<ConnId, Box<str>>,
    /// Edge side: connections that wait for the peer to handle a large message.
    pub waiting: FxHashMap<ConnId, oneshot::Sender<()>>,
}

impl Context {
    /// Closes local connections with `reason` through their shards' edges; their clients
    /// reconnect.
    pub fn close_locally(&self, conns: impl IntoIterator<Item = ConnId>, reason: &'static str) {
        let shards = self.edges.len().max(1);
        let mut groups: Vec<Vec<EdgeItem>> = (0..shards).map(|_| Vec::new()).collect();
        for conn in conns {
            groups[(conn % shards as u64) as usize].push(EdgeItem::Close {
                conn,
                reason: CloseReason::new(CloseCode::Again, reason),
                shed: false,
            });
        }
        for (shard, items) in groups.into_iter().enumerate() {
            if items.is_empty() {
                continue;
            }
            let (Some(edge), Some(credit)) = (self.edges.get(shard), self.credits.get(shard))
            else {
                continue;
            };
            if let Err(unsent) = edge.send(ToEdge::new(items, credit)) {
                unsent.0.written();
            }
        }
    }
}

/// The answer to what needs a remote owner while its link is down.
pub fn unreachable_owner() -> RestResponse {
    RestResponse::error(503, OWNER_NODE_LOST_CLOSE)
}
