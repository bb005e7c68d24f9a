//! One peer's link, for as long as the node runs: connected (the node with the smaller index
//! dials, the other accepts), lost, connected again. While it is down, a connection whose
//! database that peer owns is closed at once, so that its client retries; when it is lost,
//! the sessions it carried end on both sides (`NodeLink::lost`).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hearth_sync::ConnId;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{info, warn};

use crate::close::{CloseReason, OWNER_NODE_LOST_CLOSE};
use crate::inbox::ShardMessage;
use crate::link::{Credit, EdgeItem, ToEdge, ToOwner, MAX_LINK_BYTES};
use crate::peer::context::{unreachable_owner, Context};
use crate::peer::handshake::{self, HANDSHAKE_TIMEOUT};
use crate::peer::placement::Placement;
use crate::peer::remote_conn;
use crate::peer::session::{self, Ended};
use crate::replica_messages::{LinkState, ReplicaOut};

/// The first pause before dialing a peer again, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Connections this process closed because the link to their owner node was down or lost.
pub static OWNER_LOST_CLOSES: AtomicU64 = AtomicU64::new(0);

pub struct NodeLink {
    placement: Rc<Placement>,
    secret: Arc<[u8]>,
    ctx: Rc<Context>,
    /// The link's generation and whether it is up, as the shards read it (`replica`).
    state: Arc<LinkState>,
}

/// What the local shards send toward the peer, and the connections it dials to us.
pub struct Receivers {
    pub to_owner: mpsc::UnboundedReceiver<ToOwner>,
    pub to_edge: mpsc::UnboundedReceiver<ToEdge>,
    pub to_replica: mpsc::UnboundedReceiver<ReplicaOut>,
    pub accepted: mpsc::Receiver<TcpStream>,
}

impl NodeLink {
    pub fn new(
        node: usize,
        placement: Rc<Placement>,
        secret: Arc<[u8]>,
        owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
        edges: Vec<mpsc::UnboundedSender<ToEdge>>,
        state: Arc<LinkState>,
    ) -> NodeLink {
        let credits = edges.iter().map(|_| Arc::new(Credit::default())).collect();
        NodeLink {
            placement,
            secret,
            ctx: Rc::new(Context {
                node,
                owners,
                edges,
                credits,
                owner_room: Arc::new(Semaphore::new(MAX_LINK_BYTES)),
                state: RefCell::default(),
            }),
            state,
        }
    }

    /// Serves the link until the local shards are gone.
    pub async fn run(self, receivers: Receivers) {
        let Receivers {
            mut to_owner,
            mut to_edge,
            mut to_replica,
            mut accepted,
        } = receivers;
        let node = self.ctx.node;
        let peer = self.placement.nodes[node].id.clone();
        let mut next = None;
        loop {
            let stream = match next.take() {
                Some(stream) => stream,
                None => {
                    let connect = self.connect(&mut accepted);
                    tokio::pin!(connect);
                    loop {
                        tokio::select! {
                            stream = &mut connect => break stream,
                            message = to_owner.recv() => match message {
                                Some(message) => self.refuse(message),
                                None => return,
                            },
                            batch = to_edge.recv() => match batch {
                                // The peer's sessions ended when the link was lost.
                                Some(batch) => batch.written(),
                                None => return,
                            },
                            // Shipped under a generation that is gone: the shards start
                            // over with copies on the next one.
                            replica = to_replica.recv() => if replica.is_none() {
                                return;
                            },
                        }
                    }
                }
            };
            keep_alive(&stream);
            let generation = self.state.connected();
            info!(peer, generation, "node link up");
            let queues = session::Queues {
                to_owner: &mut to_owner,
                to_edge: &mut to_edge,
                to_replica: &mut to_replica,
                accepted: &mut accepted,
            };
            let ended = session::run(&self.ctx, stream, queues, generation).await;
            self.state.lost();
            let why = match ended {
                Ended::Replaced(stream) => {
                    next = Some(stream);
                    "the peer connected again".to_owned()
                }
                Ended::Lost(why) => why,
                Ended::Closed => {
                    self.lost(&peer, "this node is stopping");
                    return;
                }
            };
            self.lost(&peer, &why);
        }
    }

    /// A connection to the peer that passed the handshake: dialed, with backoff, when this
    /// node's index is the smaller; else the next one the peer dials.
    async fn connect(&self, accepted: &mut mpsc::Receiver<TcpStream>) -> TcpStream {
        let node = self.ctx.node;
        if self.placement.me > node {
            return match accepted.recv().await {
                Some(stream) => stream,
                None => std::future::pending().await,
            };
        }
        let address = self.placement.nodes[node].address;
        let mut backoff = FIRST_BACKOFF;
        let mut failures = 0u64;
        loop {
            let attempt = async {
                let mut stream = TcpStream::connect(address).await?;
                handshake::dial(&mut stream, &self.placement, node, &self.secret).await?;
                Ok::<_, handshake::HandshakeError>(stream)
            };
            let outcome = tokio::time::timeout(HANDSHAKE_TIMEOUT, attempt)
                .await
                .unwrap_or(Err(handshake::HandshakeError::Timeout));
            match outcome {
                Ok(stream) => return stream,
                Err(error) => {
                    // The first failure and then one in 30: a peer that is down for long
                    // does not flood the log.
                    if failures.is_multiple_of(30) {
                        let peer = &self.placement.nodes[node].id;
                        warn!(peer, %address, %error, failures, "cannot reach node; retrying");
                    }
                    failures += 1;
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// A message for the peer while the link is down: a connection that opens is closed at
    /// once (its client retries); the rest concerns sessions that ended with the link.
    fn refuse(&self, message: ToOwner) {
        match message {
            ToOwner::Open { conn, .. } => {
                OWNER_LOST_CLOSES.fetch_add(1, Ordering::Relaxed);
                self.close_locally([conn]);
            }
            ToOwner::OpenStream { opened, .. } => {
                let _ = opened.send(Err(unreachable_owner()));
            }
            ToOwner::Messages { .. } | ToOwner::AuthExpired { .. } | ToOwner::Closed { .. } => {}
        }
    }

    /// The link is lost: every session of the peer's connections here ends (their
    /// onDisconnect queues run), and every connection here whose session was there is closed
    /// so that its client reconnects.
    fn lost(&self, peer: &str, why: &str) {
        let state = std::mem::take(&mut *self.ctx.state.borrow_mut());
        let ended = state.sessions.len();
        for (conn, shard) in state.sessions {
            if let Some(owner) = self.ctx.owners.get(shard) {
                let conn = remote_conn(self.ctx.node, conn);
                let _ = owner.send(ShardMessage::Owner(ToOwner::Closed { conn }));
            }
        }
        let closed = state.opened.len();
        OWNER_LOST_CLOSES.fetch_add(closed as u64, Ordering::Relaxed);
        self.close_locally(state.opened);
        // Dropping the waiting senders lets those connections read again, to see the close.
        drop(state.waiting);
        warn!(
            peer,
            reason = why,
            sessions_ended = ended,
            connections_closed = closed,
            closed_in_all = OWNER_LOST_CLOSES.load(Ordering::Relaxed),
            "node link lost"
        );
    }

    /// Closes local connections through their shards' edges.
    fn close_locally(&self, conns: impl IntoIterator<Item = ConnId>) {
        let shards = self.ctx.edges.len().max(1);
        let mut groups: Vec<Vec<EdgeItem>> = (0..shards).map(|_| Vec::new()).collect();
        for conn in conns {
            groups[(conn % shards as u64) as usize].push(EdgeItem::Close {
                conn,
                reason: CloseReason::new(CloseCode::Again, OWNER_NODE_LOST_CLOSE),
                shed: false,
            });
        }
        for (shard, items) in groups.into_iter().enumerate() {
            if items.is_empty() {
                continue;
            }
            let (Some(edge), Some(credit)) =
                (self.ctx.edges.get(shard), self.ctx.credits.get(shard))
            else {
                continue;
            };
            if let Err(unsent) = edge.send(ToEdge::new(items, credit)) {
                unsent.0.written();
            }
        }
    }
}

/// A peer that vanished without a word (a machine lost, a cable cut) is noticed within about
/// 8 s by TCP keepalive, rather than never while nothing is sent.
fn keep_alive(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(1))
        .with_retries(3);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive);
}
