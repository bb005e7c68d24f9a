//! One peer's link, for as long as the node runs: connected (the node whose id sorts first
//! dials, the other accepts), lost, connected again; with etcd, dropped while the peer is not
//! a live node and dialed at its new address when it is one again. While it is down, a connection whose
//! database that peer owns waits for another owner or closes (`edge::rehome`); when it is
//! lost, the sessions it carried end on both sides (`NodeLink::lost`).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};
use tracing::{info, warn};

use crate::connection::{self, Ended};
use crate::context::{unreachable_owner, Context, Forward, RestSettings};
use crate::forward;
use crate::handshake::{self, HANDSHAKE_TIMEOUT};
use crate::link_tls::{self, LinkSecurity, LinkStream};
use crate::nodes::remote_conn;
use hearth_ground::cross_core::{Credit, MoveCause, ToEdge, ToOwner, MAX_LINK_BYTES};
use hearth_ground::inbox::ShardMessage;
use hearth_ground::replica_messages::{LinkState, ReplicaOut};

/// The first pause before dialing a peer again, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How long a peer that was never reached may stay unreachable before it is worth a warning:
/// the nodes of a cluster start at about the same time, each dialing the others.
const START_GRACE: Duration = Duration::from_secs(15);

/// Connections of this process whose owner node's link was down or lost (moved to another
/// owner, or closed where they could not move).
pub static OWNER_LOST_CLOSES: AtomicU64 = AtomicU64::new(0);

pub struct NodeLink {
    /// This node's id.
    me: Arc<str>,
    secret: Arc<[u8]>,
    security: LinkSecurity,
    ctx: Rc<Context>,
    /// The link's generation and whether it is up, as the shards read it (`replica`).
    state: Arc<LinkState>,
}

/// What the local shards send toward the peer, and the connections it dials to us.
pub struct Receivers {
    pub to_owner: mpsc::UnboundedReceiver<ToOwner>,
    pub to_edge: mpsc::UnboundedReceiver<ToEdge>,
    pub to_replica: mpsc::UnboundedReceiver<ReplicaOut>,
    /// REST requests and event streams (`forward.rs`).
    pub forwards: mpsc::UnboundedReceiver<Forward>,
    pub accepted: mpsc::Receiver<LinkStream>,
}

/// The node at the other end of a link.
pub struct Peer {
    pub index: usize,
    pub id: Arc<str>,
    /// Where its link listens while it is live.
    pub address: Option<SocketAddr>,
    /// The link's generation and whether it is up, as the shards read it (`replica`).
    pub state: Arc<LinkState>,
}

impl NodeLink {
    /// The link to `peer`.
    pub fn new(
        me: Arc<str>,
        peer: Peer,
        secret: Arc<[u8]>,
        security: LinkSecurity,
        owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
        edges: Vec<mpsc::UnboundedSender<ToEdge>>,
        rest: Arc<RestSettings>,
    ) -> NodeLink {
        let Peer {
            index: node,
            id: peer,
            address,
            state,
        } = peer;
        let credits = edges.iter().map(|_| Arc::new(Credit::default())).collect();
        NodeLink {
            me,
            secret,
            security,
            ctx: Rc::new(Context {
                node,
                peer,
                address: watch::Sender::new(address),
                owners,
                edges,
                credits,
                owner_room: Arc::new(Semaphore::new(MAX_LINK_BYTES)),
                rest,
                state: RefCell::default(),
            }),
            state,
        }
    }

    /// What the link shares with its table (`links.rs`): the peer's address, the sessions.
    pub fn context(&self) -> Rc<Context> {
        self.ctx.clone()
    }

    /// Serves the link until the local shards are gone.
    pub async fn run(self, receivers: Receivers) {
        let Receivers {
            mut to_owner,
            mut to_edge,
            mut to_replica,
            mut forwards,
            mut accepted,
        } = receivers;
        let peer = self.ctx.peer.clone();
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
                            forward = forwards.recv() => match forward {
                                Some(forward) => forward::refuse(forward),
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
            keep_alive(stream.tcp());
            let generation = self.state.connected();
            info!(peer = &*peer, generation, "node link up");
            let queues = connection::Queues {
                to_owner: &mut to_owner,
                to_edge: &mut to_edge,
                to_replica: &mut to_replica,
                forwards: &mut forwards,
                accepted: &mut accepted,
            };
            let ended = connection::run(&self.ctx, stream, queues, generation).await;
            let why = match ended {
                // The link stays up for the shards: the next connection is already here and
                // is its next generation, which starts replication over as a lost one would,
                // without a moment down that reads as a follower gone (a restarted peer, or
                // a dial both ends finished while the cluster starts).
                Ended::Replaced(stream) => {
                    next = Some(stream);
                    self.lost(&peer, "the peer connected again", true);
                    continue;
                }
                Ended::Lost(why) => why,
                Ended::Departed => match *self.ctx.address.borrow() {
                    None => "its etcd lease ended".to_owned(),
                    Some(address) => format!("it moved to {address}"),
                },
                Ended::Closed => {
                    self.state.lost();
                    self.lost(&peer, "this node is stopping", false);
                    return;
                }
            };
            self.state.lost();
            self.lost(&peer, &why, false);
        }
    }

    /// A connection to the peer that passed the handshake: dialed, with backoff, when this
    /// node's id sorts first (and only while the peer is live); else the next one the peer
    /// dials.
    async fn connect(&self, accepted: &mut mpsc::Receiver<LinkStream>) -> LinkStream {
        if *self.me > *self.ctx.peer {
            return match accepted.recv().await {
                Some(stream) => stream,
                None => std::future::pending().await,
            };
        }
        let peer = &self.ctx.peer;
        let mut addresses = self.ctx.address.subscribe();
        let mut backoff = FIRST_BACKOFF;
        let mut failures = 0u64;
        let started = tokio::time::Instant::now();
        let mut warned = false;
        loop {
            let current = *addresses.borrow_and_update();
            let Some(address) = current else {
                // Not a live node: nothing to dial until it is one again.
                if addresses.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                backoff = FIRST_BACKOFF;
                continue;
            };
            let attempt = async {
                // TLS and the shared secret, within `HANDSHAKE_TIMEOUT` with the connect.
                let stream = TcpStream::connect(address).await?;
                link_tls::dial(&self.security, stream, &self.me, peer, &self.secret).await
            };
            let outcome = tokio::time::timeout(HANDSHAKE_TIMEOUT, attempt)
                .await
                .unwrap_or(Err(handshake::HandshakeError::Timeout));
            match outcome {
                // The peer may have left while it was dialed: its link is not wanted then.
                Ok(stream) if *addresses.borrow() == current => return stream,
                Ok(_) => continue,
                Err(error) => {
                    // A peer never reached is expected to be down while the cluster starts:
                    // said once at INFO. Past the grace, or for a link that was up, a warning,
                    // then one in 30 failures, so that a peer down for long does not flood
                    // the log.
                    let starting = self.state.get().0 == 0 && started.elapsed() < START_GRACE;
                    if starting {
                        if failures == 0 {
                            info!(%peer, %address, %error, "node not reachable yet; retrying");
                        }
                    } else if !warned || failures.is_multiple_of(30) {
                        warn!(%peer, %address, %error, failures, "cannot reach node; retrying");
                        warned = true;
                    }
                    failures += 1;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                // A new address is dialed at once.
                _ = addresses.changed() => backoff = FIRST_BACKOFF,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// A message for the peer while the link is down: a connection that opens waits for an
    /// owner it can reach, or closes (its client retries); the rest concerns sessions that
    /// ended with the link.
    fn refuse(&self, message: ToOwner) {
        match message {
            ToOwner::Open { opening, .. } => {
                OWNER_LOST_CLOSES.fetch_add(1, Ordering::Relaxed);
                self.ctx
                    .move_locally([opening.conn], MoveCause::OwnerUnreachable);
            }
            ToOwner::OpenStream { opened, .. } => {
                let _ = opened.send(Err(unreachable_owner()));
            }
            ToOwner::Messages { .. }
            | ToOwner::AuthExpired { .. }
            | ToOwner::Closed { .. }
            | ToOwner::Moved { .. } => {}
        }
    }

    /// The link is lost: every session of the peer's connections here ends (their
    /// onDisconnect queues run), and every connection here whose session was there moves to
    /// its database's next owner, or is closed so that its client reconnects. A connection
    /// `replaced` by the peer's next one that ended nothing is said at INFO: the link never
    /// stopped serving.
    fn lost(&self, peer: &str, why: &str, replaced: bool) {
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
        self.ctx
            .move_locally(state.opened.into_keys(), MoveCause::OwnerLost);
        // Dropping the waiting senders lets those connections read again, to see the close;
        // the REST requests and stream openings still waiting for the peer are answered
        // `503` (`edge::http_forward`).
        drop(state.waiting);
        drop((state.requests, state.streams));
        if replaced && ended == 0 && closed == 0 {
            info!(peer, reason = why, "node link replaced by a new connection");
            return;
        }
        warn!(
            peer,
            reason = why,
            sessions_ended = ended,
            connections_moving = closed,
            closed_in_all = OWNER_LOST_CLOSES.load(Ordering::Relaxed),
            "node link lost"
        );
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
