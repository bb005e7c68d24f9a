//! What crosses between cores. A WebSocket connection stays on the core that accepted it (its
//! *edge*); its database lives on the core its name hashes to (its *owner*). When the two
//! differ, the edge sends the connection's messages to the owner ([`ToOwner`]) and the owner
//! sends back what the connection must be sent ([`ToEdge`]): one batch per edge per turn of
//! the owner's loop, holding every connection's frames in the order the owner released them.
//! A push to many listeners on one edge is one batch entry per listener that shares one
//! reference-counted copy of the frames.
//!
//! The messages are plain data (ids, text, frame bytes), so that they can cross a process
//! boundary later; only the backpressure tokens ([`OwnedSemaphorePermit`], [`Credit`]) and the
//! completion signal of a large message are local plumbing.
//!
//! Both directions are bounded in bytes ([`MAX_LINK_BYTES`]): an edge waits for room before it
//! hands a connection's messages to the owner (that connection stops being read, so TCP slows
//! the client), and an owner whose batches an edge has not written yet stops taking new
//! requests until the edge catches up. The owner never buffers without bound for a slow core.

use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use hearth_sync::{AuthState, ConnId};
use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::close::{CloseReason, OWNER_MOVED_CLOSE, OWNER_NODE_LOST_CLOSE, SHUTDOWN_CLOSE};
use crate::rest::{DataRequest, RestResponse};

/// The most bytes in flight from one core to another in each direction: messages an edge has
/// handed to an owner and the owner has not handled yet, and batches an owner has sent to an
/// edge that the edge has not written to its sockets yet.
pub const MAX_LINK_BYTES: usize = 32 * 1024 * 1024;

/// The bytes a batch may gather before it leaves without waiting for the end of the turn.
const MAX_BATCH_BYTES: usize = MAX_LINK_BYTES / 8;

/// A batch of one connection's messages from an edge on another core (`ToOwner::Messages`),
/// with what the edge waits on: its room, let go once the batch is handled, and, after a
/// large message, its signal to read on.
pub struct MessageBatch {
    pub texts: Vec<String>,
    pub done: Option<oneshot::Sender<()>>,
    pub room: OwnedSemaphorePermit,
}

/// The transport that carries a realtime session, as its audit entries name it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RealtimeTransport {
    #[default]
    WebSocket,
    LongPolling,
    WebTransport,
}

impl RealtimeTransport {
    /// Its name in the audit trail (docs/audit.md).
    pub fn as_str(self) -> &'static str {
        match self {
            RealtimeTransport::WebSocket => "websocket",
            RealtimeTransport::LongPolling => "longpoll",
            RealtimeTransport::WebTransport => "webtransport",
        }
    }

    /// Its byte on the node link.
    pub fn code(self) -> u8 {
        match self {
            RealtimeTransport::WebSocket => 0,
            RealtimeTransport::LongPolling => 1,
            RealtimeTransport::WebTransport => 2,
        }
    }

    pub fn from_code(code: u8) -> Option<RealtimeTransport> {
        match code {
            0 => Some(RealtimeTransport::WebSocket),
            1 => Some(RealtimeTransport::LongPolling),
            2 => Some(RealtimeTransport::WebTransport),
            _ => None,
        }
    }
}

/// A connection's session opening on the owner of its database: the same message over the
/// cross-core queues ([`ToOwner::Open`]) and the node link (`peer`'s `LinkMessage::Open`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    pub conn: ConnId,
    pub namespace: String,
    /// The id the session reports to its client (`s` in the handshake).
    pub session_id: String,
    /// The session id the client named to replace (`ls`), whose session ends first.
    pub previous: Option<String>,
    /// The App Check token the connection came with (`ac=` of its URL, or the
    /// `X-Firebase-AppCheck` header), or the last one it sent, when it moves; the owner
    /// verifies it (docs/app-check.md).
    pub app_check: Option<String>,
    /// The client's address as the edge saw it (its socket's peer), for limits keyed by
    /// address; `None` where unknown.
    pub address: Option<IpAddr>,
    /// What carries it.
    pub transport: RealtimeTransport,
}

/// Whole messages of one connection, in the order it sent them: the same over the cross-core
/// queues ([`ToOwner::Messages`]) and the node link (`peer`'s `LinkMessage::Messages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnMessages {
    pub conn: ConnId,
    pub texts: Vec<String>,
}

/// From an edge to the owner of a connection's database.
#[derive(Debug)]
pub enum ToOwner {
    /// A connection opened on edge `edge` (an index among the owner's edges: the local shards,
    /// then the other nodes).
    Open { edge: usize, opening: Opening },
    /// Whole messages of a connection. `done`, when present, is dropped once the last of them
    /// is handled: the edge reads nothing more of the connection before that (a large
    /// message is decoded off the owner's thread, and the connection's next message must wait
    /// for it). `room` is the edge's, let go once they are handled.
    Messages {
        messages: ConnMessages,
        done: Option<oneshot::Sender<()>>,
        room: OwnedSemaphorePermit,
    },
    /// An event stream opened on the edge: the owner opens its session and says whether the
    /// listen was allowed (the refusal is the stream's answer).
    OpenStream {
        conn: ConnId,
        edge: usize,
        namespace: String,
        auth: AuthState,
        request: Box<DataRequest>,
        opened: oneshot::Sender<Result<(), RestResponse>>,
    },
    /// The credential of a connection expired, by the edge's clock.
    AuthExpired { conn: ConnId },
    /// The connection is gone: its session ends and its onDisconnect queue runs.
    Closed { conn: ConnId },
    /// The connection stays, but its session moves to another owner (`edge::rehome`): it ends
    /// here without running its onDisconnect queue, which the edge replays on the new owner.
    Moved { conn: ConnId },
}

/// Why a connection's session must leave the owner it is on (`EdgeItem::Moved`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveCause {
    /// Another node serves the database now (etcd's view changed, `peer::follow`).
    Moved,
    /// The link to the owner node was lost: that node may be dead, or alive and ending the
    /// session as it ends any lost client's (its onDisconnect queue runs there).
    OwnerLost,
    /// The session never reached its owner: the link to that node was down when it opened.
    OwnerUnreachable,
    /// The owner node is stopping (SIGTERM) and hands its databases over. It sends this only
    /// once every request of the session it handled has its reply sent before, and handles
    /// none after: what is still unanswered was never applied, and may be sent again.
    OwnerStopping,
}

impl MoveCause {
    /// How a connection that cannot move is closed instead: as before sessions could move.
    pub fn close_reason(self) -> CloseReason {
        match self {
            MoveCause::Moved => CloseReason::new(CloseCode::Again, OWNER_MOVED_CLOSE),
            MoveCause::OwnerLost | MoveCause::OwnerUnreachable => {
                CloseReason::new(CloseCode::Again, OWNER_NODE_LOST_CLOSE)
            }
            MoveCause::OwnerStopping => CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE),
        }
    }
}

/// One thing an edge must do for one of its connections. `F` is how a run of frames is held:
/// its bytes between cores, and on the node link (`peer`'s `LinkMessage::Batch`) the index of
/// those bytes in the batch, which sends a push to many connections of a node once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeItem<F = Bytes> {
    /// Frames to write, already encoded (and durable, when the durability mode asks for it).
    Frames { conn: ConnId, frames: F },
    /// Close the connection with this reason; `shed` drops what waits for the socket (the
    /// client read too slowly).
    Close {
        conn: ConnId,
        reason: CloseReason,
        shed: bool,
    },
    /// When the connection's credential expires (seconds since the epoch).
    AuthExpiry {
        conn: ConnId,
        expires_at: Option<u64>,
    },
    /// The connection's session must move to another owner (or, where it cannot, the
    /// connection closes as `cause` says).
    Moved { conn: ConnId, cause: MoveCause },
}

impl<F> EdgeItem<F> {
    /// The connection the item is for.
    pub fn conn(&self) -> ConnId {
        match self {
            EdgeItem::Frames { conn, .. }
            | EdgeItem::Close { conn, .. }
            | EdgeItem::AuthExpiry { conn, .. }
            | EdgeItem::Moved { conn, .. } => *conn,
        }
    }

    /// The same item for the connection `conn` names, its frames held as `hold` says (`None`
    /// when `hold` has none for them).
    pub fn map_frames<G>(
        self,
        conn: impl FnOnce(ConnId) -> ConnId,
        hold: impl FnOnce(F) -> Option<G>,
    ) -> Option<EdgeItem<G>> {
        Some(match self {
            EdgeItem::Frames { conn: id, frames } => EdgeItem::Frames {
                conn: conn(id),
                frames: hold(frames)?,
            },
            EdgeItem::Close {
                conn: id,
                reason,
                shed,
            } => EdgeItem::Close {
                conn: conn(id),
                reason,
                shed,
            },
            EdgeItem::AuthExpiry {
                conn: id,
                expires_at,
            } => EdgeItem::AuthExpiry {
                conn: conn(id),
                expires_at,
            },
            EdgeItem::Moved { conn: id, cause } => EdgeItem::Moved {
                conn: conn(id),
                cause,
            },
        })
    }
}

impl EdgeItem {
    fn byte_len(&self) -> usize {
        match self {
            EdgeItem::Frames { frames, .. } => frames.len(),
            EdgeItem::Close { reason, .. } => reason.text.len(),
            EdgeItem::AuthExpiry { .. } | EdgeItem::Moved { .. } => 0,
        }
    }
}

/// A batch from an owner to an edge.
#[derive(Debug)]
pub struct ToEdge {
    pub items: Vec<EdgeItem>,
    /// Counted in the owner's credit with this edge until the edge has written it.
    pub credit: Arc<Credit>,
    pub bytes: usize,
}

impl ToEdge {
    /// A batch of `items` counted in `credit` until it is written: the node link (`peer`)
    /// builds these from what an owner node sent, with a credit per local edge.
    pub fn new(items: Vec<EdgeItem>, credit: &Arc<Credit>) -> ToEdge {
        let bytes = items.iter().map(EdgeItem::byte_len).sum();
        credit.take(bytes);
        ToEdge {
            items,
            credit: credit.clone(),
            bytes,
        }
    }

    /// The edge has written the batch: the owner may send more.
    pub fn written(self) {
        self.credit.release(self.bytes);
    }
}

/// The bytes an owner has sent one edge that the edge has not written yet.
#[derive(Debug, Default)]
pub struct Credit {
    queued: AtomicUsize,
    room: Notify,
}

impl Credit {
    fn take(&self, bytes: usize) {
        self.queued.fetch_add(bytes, Ordering::AcqRel);
    }

    fn release(&self, bytes: usize) {
        let before = self.queued.fetch_sub(bytes, Ordering::AcqRel);
        if before > MAX_LINK_BYTES && before - bytes <= MAX_LINK_BYTES {
            self.room.notify_waiters();
        }
    }

    fn is_full(&self) -> bool {
        self.queued.load(Ordering::Acquire) > MAX_LINK_BYTES
    }

    /// Completes once the edge has room again.
    pub async fn has_room(&self) {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.is_full() {
                return;
            }
            notified.await;
        }
    }
}

/// An owner's batches for every edge, filled while it handles requests and releases durable
/// messages, and sent once per turn of its loop by [`Outgoing::run`].
pub struct Outgoing {
    senders: Vec<mpsc::UnboundedSender<ToEdge>>,
    credits: Vec<Arc<Credit>>,
    batches: RefCell<Vec<(Vec<EdgeItem>, usize)>>,
    /// Whether a flush is due.
    pending: Cell<bool>,
    wake: Notify,
}

impl Outgoing {
    pub fn new(senders: Vec<mpsc::UnboundedSender<ToEdge>>) -> Outgoing {
        let edges = senders.len();
        Outgoing {
            senders,
            credits: (0..edges).map(|_| Arc::new(Credit::default())).collect(),
            batches: RefCell::new((0..edges).map(|_| (Vec::new(), 0)).collect()),
            pending: Cell::new(false),
            wake: Notify::new(),
        }
    }

    /// Queues `item` for `edge`; it leaves with the batch of this turn.
    pub fn push(&self, edge: usize, item: EdgeItem) {
        let mut batches = self.batches.borrow_mut();
        let Some((items, bytes)) = batches.get_mut(edge) else {
            return;
        };
        *bytes += item.byte_len();
        items.push(item);
        let large = *bytes > MAX_BATCH_BYTES;
        drop(batches);
        if large {
            // Sent now rather than at the end of the turn, so that its credit counts at once:
            // an owner must not gather far more than an edge may have in flight.
            self.flush();
        } else if !self.pending.replace(true) {
            self.wake.notify_one();
        }
    }

    /// Sends every edge its batch.
    pub fn flush(&self) {
        self.pending.set(false);
        let mut batches = self.batches.borrow_mut();
        for (edge, (items, bytes)) in batches.iter_mut().enumerate() {
            if items.is_empty() {
                continue;
            }
            let (Some(sender), Some(credit)) = (self.senders.get(edge), self.credits.get(edge))
            else {
                continue;
            };
            credit.take(*bytes);
            let batch = ToEdge {
                items: std::mem::take(items),
                credit: credit.clone(),
                bytes: std::mem::take(bytes),
            };
            // A closed edge is shutting down: its connections are gone.
            if let Err(unsent) = sender.send(batch) {
                unsent.0.written();
            }
        }
    }

    /// Sends the batches whenever something was queued: after the task that queued it yields,
    /// so that everything one turn produces leaves together.
    pub async fn run(&self) {
        loop {
            self.wake.notified().await;
            self.flush();
        }
    }

    /// Completes when every edge has room for more: an owner waits for this before it takes
    /// new requests.
    pub async fn room(&self) {
        for credit in &self.credits {
            if credit.is_full() {
                credit.has_room().await;
            }
        }
    }

    /// The bytes of batches sent to edges that they have not written yet, all edges.
    pub fn unwritten_bytes(&self) -> usize {
        let queued = |credit: &Arc<Credit>| credit.queued.load(Ordering::Relaxed);
        self.credits.iter().map(queued).sum()
    }

    /// Whether some edge is behind by more than [`MAX_LINK_BYTES`].
    pub fn is_full(&self) -> bool {
        self.credits.iter().any(|credit| credit.is_full())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(conn: ConnId, text: &str) -> EdgeItem {
        EdgeItem::Frames {
            conn,
            frames: Bytes::copy_from_slice(text.as_bytes()),
        }
    }

    #[test]
    fn a_turn_leaves_as_one_batch_per_edge_in_order() {
        let (a, mut a_rx) = mpsc::unbounded_channel();
        let (b, mut b_rx) = mpsc::unbounded_channel();
        let outgoing = Outgoing::new(vec![a, b]);
        outgoing.push(0, frames(1, "x"));
        outgoing.push(1, frames(2, "y"));
        outgoing.push(0, frames(3, "zz"));
        outgoing.flush();
        let batch = a_rx.try_recv().expect("a batch for edge 0");
        let conns: Vec<ConnId> = batch
            .items
            .iter()
            .map(|item| match item {
                EdgeItem::Frames { conn, .. } => *conn,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(conns, vec![1, 3]);
        assert_eq!(batch.bytes, 3);
        assert!(a_rx.try_recv().is_err(), "one batch per turn");
        assert_eq!(b_rx.try_recv().expect("edge 1").items.len(), 1);
        outgoing.flush();
        assert!(a_rx.try_recv().is_err(), "nothing queued, nothing sent");
    }

    #[test]
    fn an_edge_behind_by_the_limit_stops_the_owner_until_it_writes() {
        let (a, mut a_rx) = mpsc::unbounded_channel();
        let outgoing = Outgoing::new(vec![a]);
        let big = "x".repeat(MAX_LINK_BYTES / 2 + 1);
        outgoing.push(0, frames(1, &big));
        outgoing.flush();
        assert!(!outgoing.is_full());
        outgoing.push(0, frames(1, &big));
        outgoing.flush();
        assert!(outgoing.is_full());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let blocked = runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(20), outgoing.room())
                .await
                .is_err()
        });
        assert!(blocked, "no room while the edge is behind");
        a_rx.try_recv().expect("first").written();
        runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(1), outgoing.room())
                .await
                .expect("room once the edge wrote a batch");
        });
        a_rx.try_recv().expect("second").written();
        assert!(!outgoing.is_full());
    }
}
