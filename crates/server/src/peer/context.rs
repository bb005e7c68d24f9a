//! What one node-to-node link shares between its reader (`session.rs`) and its writer
//! (`node_link.rs`), below both so that neither imports the other.

use std::cell::RefCell;
use std::sync::Arc;

use hearth_sync::ConnId;
use rustc_hash::{FxHashMap, FxHashSet};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::close::OWNER_NODE_LOST_CLOSE;
use crate::inbox::ShardMessage;
use crate::link::{Credit, ToEdge};
use crate::rest::RestResponse;

/// What one link shares between its reader and writer, on the link thread only.
pub struct Context {
    /// The peer's index in the placement.
    pub node: usize,
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
    /// Edge side: this node's connections whose session is on the peer.
    pub opened: FxHashSet<ConnId>,
    /// Edge side: connections that wait for the peer to handle a large message.
    pub waiting: FxHashMap<ConnId, oneshot::Sender<()>>,
}

/// The answer to what needs a remote owner while its link is down.
pub fn unreachable_owner() -> RestResponse {
    RestResponse::error(503, OWNER_NODE_LOST_CLOSE)
}
