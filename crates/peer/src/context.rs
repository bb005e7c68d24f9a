//! What one node-to-node link shares between its reader (`reader.rs`) and its writer
//! (`node_link.rs`), below both so that neither imports the other.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use hearth_sync::ConnId;
use rustc_hash::FxHashMap;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};

use crate::codec::{AnswerHead, RequestHead};
use hearth_auth::AuthConfig;
use hearth_ground::close::OWNER_NODE_LOST_CLOSE;
use hearth_ground::cross_core::{Credit, EdgeItem, MoveCause, ToEdge};
use hearth_ground::inbox::ShardMessage;
use hearth_ground::rest::RestResponse;

/// What one link shares between its reader and writer, on the link thread only.
pub struct Context {
    /// The peer's index in the directory (`directory.rs`).
    pub node: usize,
    /// The peer's id.
    pub peer: Arc<str>,
    /// Where the peer's link listens; `None` while it is not a live node (its etcd lease
    /// ended). Its going to `None` or to another address ends the live connection of the
    /// link; its first address, learnt after the peer dialed here, does not (`connection.rs`).
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
    /// What parsing a forwarded REST request needs, as every local shard has it.
    pub rest: Arc<RestSettings>,
    pub state: RefCell<LinkState>,
}

/// The settings a node parses REST requests with; the owner node parses those forwarded to
/// it with its own, so that it checks their credentials and rules itself.
#[derive(Debug, Clone)]
pub struct RestSettings {
    pub auth: AuthConfig,
    pub default_namespace: String,
    /// This node's audit trail, which answers the audit endpoints of the databases it owns
    /// (`None` without a data directory).
    pub audit: Option<hearth_audit::AuditTrail>,
}

/// What a local shard asks of the link to another node besides a session's messages: the
/// REST requests and event streams of its HTTP connections (`edge::http_forward`).
#[derive(Debug)]
pub enum Forward {
    /// A REST request; `reply` gets the owner's answer, or is dropped when the link is lost.
    Rest {
        head: RequestHead,
        body: Bytes,
        reply: oneshot::Sender<RemoteAnswer>,
    },
    /// An event stream opened on connection `conn` for database `namespace`: `opened` gets
    /// the refusal, if any, or is dropped when the link is lost.
    Stream {
        conn: ConnId,
        namespace: Box<str>,
        head: RequestHead,
        opened: oneshot::Sender<Result<(), RemoteAnswer>>,
    },
    /// The stream of `conn` ended here (sent on the same queue as its opening, so that it
    /// never overtakes it).
    StreamClosed { conn: ConnId },
}

/// An answer made by the owner node: its status, headers and body as it would have sent them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteAnswer {
    pub head: AnswerHead,
    pub body: Bytes,
}

impl RemoteAnswer {
    /// The answer a refusal made on this node would be.
    pub fn from_rest(response: RestResponse) -> RemoteAnswer {
        let http = response.into_http::<Bytes>();
        let headers = http
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                let value = value.to_str().ok()?;
                Some((name.as_str().to_owned(), value.to_owned()))
            })
            .collect();
        let status = http.status().as_u16();
        RemoteAnswer {
            head: AnswerHead { status, headers },
            body: http.into_body(),
        }
    }
}

/// What the reader has the writer send back: answers to what the peer sent.
pub enum Reply {
    /// The large message of `conn` is handled.
    Handled(ConnId),
    /// The answer to the peer's request `id`.
    Answer { id: u64, answer: RemoteAnswer },
    /// The peer's stream `conn` is open, or refused.
    StreamOpened {
        conn: ConnId,
        refusal: Option<RemoteAnswer>,
    },
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
    /// Edge side: REST requests sent to the peer and not fully answered yet, by id.
    pub requests: FxHashMap<u64, Awaited>,
    /// Edge side: the id of the next REST request.
    pub next_request: u64,
    /// Edge side: streams whose opening the peer has not answered yet.
    pub streams: FxHashMap<ConnId, oneshot::Sender<Result<(), RemoteAnswer>>>,
    /// Owner side: the peer's REST requests whose body is still arriving.
    pub arriving: FxHashMap<u64, (RequestHead, BytesMut)>,
    /// Owner side: the peer's REST requests not fully answered yet (arriving, being served,
    /// or their answer leaving).
    pub serving: usize,
}

impl Context {
    /// Tells local connections through their shards' edges that their session must leave
    /// the peer, for `cause`: each moves to its database's next owner, or closes where it
    /// cannot (`edge::rehome`).
    pub fn move_locally(&self, conns: impl IntoIterator<Item = ConnId>, cause: MoveCause) {
        let shards = self.edges.len().max(1);
        let mut groups: Vec<Vec<EdgeItem>> = (0..shards).map(|_| Vec::new()).collect();
        for conn in conns {
            groups[(conn % shards as u64) as usize].push(EdgeItem::Moved { conn, cause });
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

/// A REST request sent to the peer: who waits for its answer, and what of it arrived.
pub struct Awaited {
    pub reply: oneshot::Sender<RemoteAnswer>,
    pub head: Option<AnswerHead>,
    pub body: BytesMut,
}

/// The answer to what needs a remote owner while its link is down, or lost.
pub fn unreachable_owner() -> RestResponse {
    RestResponse::error(503, OWNER_NODE_LOST_CLOSE)
}
