//! The link thread's table of links, one per node index (`directory.rs`), and the loop that
//! accepts the links other nodes dial. A static list starts every link at once; with etcd a
//! link starts the first time its node is seen alive (`follow.rs`) or dials this one, and then
//! lives as long as the process, dialing only while its node is alive.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::context::{Context, Forward, RestSettings};
use crate::handshake;
use crate::link_tls::{self, LinkSecurity, LinkStream};
use crate::node_link::{NodeLink, Peer, Receivers};
use hearth_ground::cross_core::{ToEdge, ToOwner};
use hearth_ground::inbox::ShardMessage;
use hearth_ground::replica_messages::{LinkState, ReplicaOut};

/// The receiving ends of one index's queues, until its link starts.
pub struct Slot {
    pub to_owner: mpsc::UnboundedReceiver<ToOwner>,
    pub to_edge: mpsc::UnboundedReceiver<ToEdge>,
    /// REST requests and event streams (`forward.rs`).
    pub forwards: mpsc::UnboundedReceiver<Forward>,
    /// Replication's messages toward the node (`replica`).
    pub to_replica: mpsc::UnboundedReceiver<ReplicaOut>,
    /// The link's generation and whether it is up, as the shards read it.
    pub state: Arc<LinkState>,
}

/// A started link: what the table keeps of it.
struct Running {
    ctx: Rc<Context>,
    /// Where the accept loop hands the connections its peer dialed.
    accepted: mpsc::Sender<LinkStream>,
}

pub struct Links {
    me: Arc<str>,
    secret: Arc<[u8]>,
    security: LinkSecurity,
    owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
    edges: Vec<mpsc::UnboundedSender<ToEdge>>,
    rest: Arc<RestSettings>,
    /// By index: the queues of links not started yet (`None` for this node's own index).
    idle: Vec<Option<Slot>>,
    /// By index: the started links.
    running: Vec<Option<Running>>,
}

impl Links {
    pub fn new(
        me: Arc<str>,
        secret: Arc<[u8]>,
        security: LinkSecurity,
        owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
        edges: Vec<mpsc::UnboundedSender<ToEdge>>,
        rest: Arc<RestSettings>,
        idle: Vec<Option<Slot>>,
    ) -> Links {
        let running = idle.iter().map(|_| None).collect();
        Links {
            me,
            secret,
            security,
            owners,
            edges,
            rest,
            idle,
            running,
        }
    }

    /// Starts the link to node `index` (`peer`, at `address`) unless it runs already.
    pub fn ensure(&mut self, index: usize, peer: &Arc<str>, address: Option<SocketAddr>) {
        if self.running.get(index).is_none_or(Option::is_some) {
            return;
        }
        let Some(slot) = self.idle.get_mut(index).and_then(Option::take) else {
            return;
        };
        let (accepted, accepted_rx) = mpsc::channel(1);
        let link = NodeLink::new(
            self.me.clone(),
            Peer {
                index,
                id: peer.clone(),
                address,
                state: slot.state,
            },
            self.secret.clone(),
            self.security.clone(),
            self.owners.clone(),
            self.edges.clone(),
            self.rest.clone(),
        );
        let ctx = link.context();
        let receivers = Receivers {
            to_owner: slot.to_owner,
            to_edge: slot.to_edge,
            to_replica: slot.to_replica,
            forwards: slot.forwards,
            accepted: accepted_rx,
        };
        tokio::task::spawn_local(link.run(receivers));
        self.running[index] = Some(Running { ctx, accepted });
    }

    /// Node `index`'s link now listens at `address` (`None`: the node is not alive): a link
    /// that is up to another address, or to a node that left, is dropped.
    pub fn set_address(&self, index: usize, address: Option<SocketAddr>) {
        if let Some(Some(running)) = self.running.get(index) {
            running.ctx.address.send_if_modified(|current| {
                let changed = *current != address;
                *current = address;
                changed
            });
        }
    }

    /// The started links' shared state.
    pub fn contexts(&self) -> impl Iterator<Item = &Rc<Context>> {
        self.running.iter().flatten().map(|running| &running.ctx)
    }

    fn accepted(&self, index: usize) -> Option<mpsc::Sender<LinkStream>> {
        let running = self.running.get(index)?.as_ref()?;
        Some(running.accepted.clone())
    }
}

/// Whether a node that dialed may link to this one: its index and address, for the ids of
/// the listed (or live) nodes.
pub type Admit = Box<dyn Fn(&str) -> Option<(usize, Option<SocketAddr>)>>;

/// Takes the links other nodes dial, each once it passed the handshakes (TLS, then the
/// shared secret, within `HANDSHAKE_TIMEOUT` together), to their node's link (started now if
/// it was not). A refused peer is logged and dropped.
pub async fn accept_loop(
    listener: tokio::net::TcpListener,
    links: Rc<RefCell<Links>>,
    admit: Admit,
    mut shutdown: watch::Receiver<bool>,
) {
    let admit = Rc::new(admit);
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
        let (stream, from) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "node link accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (me, secret, security) = {
            let links = links.borrow();
            (
                links.me.clone(),
                links.secret.clone(),
                links.security.clone(),
            )
        };
        let links = links.clone();
        let admit = admit.clone();
        tokio::task::spawn_local(async move {
            let mut address = None;
            let mut peer = None;
            let index_of = |id: &str| {
                let (index, at) = admit(id)?;
                address = at;
                peer = Some(Arc::<str>::from(id));
                Some(index)
            };
            let shaken = tokio::time::timeout(
                handshake::HANDSHAKE_TIMEOUT,
                link_tls::accept(&security, stream, &me, &secret, index_of),
            )
            .await
            .unwrap_or(Err(handshake::HandshakeError::Timeout));
            match (shaken, peer) {
                (Ok((stream, index)), Some(peer)) => {
                    let link = {
                        let mut links = links.borrow_mut();
                        links.ensure(index, &peer, address);
                        links.accepted(index)
                    };
                    if let Some(link) = link {
                        let _ = link.send(stream).await;
                    }
                }
                // A node this one does not know yet is most often one that etcd's view here
                // has not caught up with (the nodes start together, or it just joined): it
                // dials again, and warns itself if it stays refused.
                (Err(error @ handshake::HandshakeError::Unknown(_)), _) => {
                    info!(%from, %error, "node link refused for now")
                }
                (Err(error), _) => warn!(%from, %error, "node link refused"),
                (Ok(_), None) => {}
            }
        });
    }
}
