//! A shard: one thread, one single-threaded runtime, and what it is assembled from. Its
//! [`Front`] (`hearth-transport`) holds the state of its two roles ([`Owner`]: the databases
//! whose names hash to it and their sessions; [`Edge`]: the connections it accepted for other
//! shards' databases), what both share (settings, counters, the shutdown signal) and the
//! inboxes of every shard; the transports take the front, never the shard. What only the
//! shard does is here: making the roles, the numbers for a scrape, and the drain at shutdown.
//! Nothing in a shard is shared with another thread: what crosses is plain data (`inbox`,
//! `cross_core`).

use std::hash::{BuildHasher, Hasher};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use futures_util::future::LocalBoxFuture;
use hyper::http::request::Parts;
use hyper::Response;

use crate::scrape::{answer_on_main_port, is_served_here, Observer};
use hearth_config::ServeConfig;
use hearth_edge::http_body::HearthBody;
use hearth_edge::Edge;
use hearth_ground::close::{CloseReason, SHUTDOWN_CLOSE};
use hearth_ground::conn_ids::ConnIds;
use hearth_ground::cross_core::{Outgoing, ToEdge};
use hearth_ground::inbox::ShardMessage;
use hearth_ground::metrics::snapshot::{top, DatabaseLoad};
use hearth_ground::metrics::{ShardCounters, ShardSnapshot};
use hearth_ground::rest::RestResponse;
use hearth_net::budget::ShardBudget;
use hearth_net::time::now_ms;
use hearth_owner::loaded::Loaded;
use hearth_owner::replication::Replication;
use hearth_owner::trigger_queue::OwnerTriggers;
use hearth_owner::{Owner, OwnerParts};
use hearth_peer::Nodes;
use hearth_persist::{Gate, ShardStore};
use hearth_transport::inboxes::Inboxes;
use hearth_transport::{Front, FrontParts, ServerEndpoints};

/// Every shard's queues: their inboxes (this one's too) and their edges' batches, by index.
pub struct Queues {
    pub peers: Vec<mpsc::UnboundedSender<ShardMessage>>,
    pub edges: Vec<mpsc::UnboundedSender<ToEdge>>,
}

pub struct Shard {
    /// What the core's transports take: its owner, its edge, ids, counters and queues.
    front: Rc<Front>,
    /// Health and the scrapes' way to every shard, shared by the whole server.
    observer: Arc<Observer>,
}

/// The server's own endpoints on the realtime port, as one core reaches them.
struct CoreEndpoints {
    config: Rc<ServeConfig>,
    observer: Arc<Observer>,
    inboxes: Rc<Inboxes>,
    owner: Rc<Owner>,
}

impl ServerEndpoints for CoreEndpoints {
    fn observes(&self, path: &str) -> bool {
        is_served_here(path)
    }

    fn observe<'a>(&'a self, parts: &'a Parts) -> LocalBoxFuture<'a, Option<RestResponse>> {
        Box::pin(answer_on_main_port(&self.config, &self.observer, parts))
    }

    fn backup(&self) -> LocalBoxFuture<'_, Response<HearthBody>> {
        Box::pin(crate::backup::respond(&self.inboxes, &self.owner))
    }
}

impl Shard {
    /// A shard that keeps its databases in memory only.
    #[cfg(test)]
    pub fn new(
        index: usize,
        config: Rc<ServeConfig>,
        shutdown: watch::Receiver<bool>,
        peers: Vec<mpsc::UnboundedSender<ShardMessage>>,
        edges: Vec<mpsc::UnboundedSender<ToEdge>>,
    ) -> Shard {
        let observer = Observer::new(config.http.clone());
        let queues = Queues { peers, edges };
        Shard::with_store(index, config, shutdown, queues, None, observer, None)
    }

    /// A shard with a store (its recovered databases are added with
    /// [`Owner::add_recovered`]) and, in a cluster, the other nodes.
    pub fn with_store(
        index: usize,
        config: Rc<ServeConfig>,
        shutdown: watch::Receiver<bool>,
        queues: Queues,
        store: Option<ShardStore>,
        observer: Arc<Observer>,
        nodes: Option<Arc<Nodes>>,
    ) -> Shard {
        let Queues { peers, edges } = queues;
        let strict = config.persist.durability == hearth_persist::Durability::Strict;
        let gate = match &store {
            Some(store) => Gate::new(strict, store.durable_seq()),
            None => Gate::open(),
        };
        // The standard library seeds every `RandomState` from the operating system's
        // randomness: enough to make push ids unpredictable without another dependency.
        let mut seed = std::collections::hash_map::RandomState::new().build_hasher();
        seed.write_u64(now_ms());
        seed.write_usize(index);
        let counters = Rc::new(ShardCounters::default());
        let ids = Rc::new(ConnIds::new(index, peers.len()));
        // An edge needs room toward every owner: the local shards, then the other nodes.
        let owners = peers.len().max(edges.len());
        let edge = Edge::new(
            owners,
            ShardBudget::new(config.http.clone()),
            counters.clone(),
            config.io_uring_sends,
        );
        let owner = Rc::new(Owner::new(OwnerParts {
            index,
            shard_count: peers.len(),
            config: config.clone(),
            store,
            gate,
            outgoing: Outgoing::new(edges),
            seed: seed.finish(),
            counters: counters.clone(),
            ids: ids.clone(),
            health: observer.health.clone(),
            shutdown: shutdown.clone(),
            sends: edge.send_ring(),
            replication: nodes.as_ref().map(|nodes| Replication::new(nodes, index)),
            triggers: OwnerTriggers::new(
                config.triggers.registry.clone(),
                config.triggers.sink.clone(),
            ),
        }));
        let inboxes = Rc::new(Inboxes::new(index, peers, nodes));
        let endpoints = Rc::new(CoreEndpoints {
            config: config.clone(),
            observer: observer.clone(),
            inboxes: inboxes.clone(),
            owner: owner.clone(),
        });
        let front = Front::new(FrontParts {
            config,
            owner,
            edge,
            ids,
            counters,
            shutdown,
            inboxes,
            endpoints,
        });
        Shard {
            front: Rc::new(front),
            observer,
        }
    }

    /// What the core's transports take.
    pub fn front(&self) -> &Rc<Front> {
        &self.front
    }

    /// The owner role: this core's databases, their log and their sessions.
    pub fn owner(&self) -> &Rc<Owner> {
        self.front.owner()
    }

    /// Health and the scrapes' way to every shard.
    pub fn observer(&self) -> &Arc<Observer> {
        &self.observer
    }

    /// Waits, boundedly, for the connections of this shard to finish closing. The sessions
    /// other nodes hold for this core's databases are ended from here: their sockets are
    /// on those nodes, which are not stopping, and would otherwise keep them open for the
    /// whole grace period, delaying the hand-over of this node's databases (its lease is
    /// revoked only once the shards have stopped). Those nodes are asked to move them to
    /// the databases' next owners (`edge::rehome`), keeping their clients' sockets; they end
    /// them here at once, without their onDisconnect queues if they move.
    ///
    /// A session that moves is stopped first (nothing more of it is handled), and told to
    /// move once the replies to what it handled have left, so that its edge may send again
    /// what is still unanswered (`MoveCause::OwnerStopping`). One whose replies do not leave
    /// within half of `limit` (the disk or the follower does not answer) is closed instead:
    /// its SDK reconnects and sends its writes again itself, as after any lost connection.
    pub async fn drain(&self, limit: Duration) {
        self.front.close_all_streams();
        let owner = self.front.owner();
        let mut moving = owner.stop_for_move(
            owner.all_sessions(),
            CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE),
        );
        let start = tokio::time::Instant::now();
        let deadline = start + limit;
        while !moving.is_empty() {
            moving.retain(|session| {
                let sent = session.replies_sent();
                if sent {
                    session.move_away();
                }
                !sent
            });
            if tokio::time::Instant::now() >= start + limit / 2 {
                for session in moving.drain(..) {
                    session.close(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        while (owner.session_counts() != (0, 0) || !self.front.edge().held().is_empty())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A shard's numbers for a scrape, taken now on its thread; `inbox` is the count of
/// messages waiting in its inbox.
pub fn metrics_snapshot(front: &Front, inbox: usize) -> ShardSnapshot {
    let runtime = tokio::runtime::Handle::current().metrics();
    let owner = front.owner();
    let edge = front.edge();
    let databases = owner.databases();
    let (websocket_sessions, event_streams) = owner.session_counts();
    let load = |count: fn(&Loaded) -> u64| {
        let loads = databases.values().map(|loaded| DatabaseLoad {
            database: loaded.name().to_string(),
            count: count(loaded),
        });
        top(loads.collect())
    };
    ShardSnapshot {
        shard: front.index(),
        counters: front.counters().snapshot(),
        websocket_sessions,
        event_streams,
        databases_loaded: databases.len(),
        busy: (0..runtime.num_workers())
            .map(|worker| runtime.worker_total_busy_duration(worker))
            .sum(),
        inbox_messages: inbox,
        runtime_queue: runtime.global_queue_depth(),
        link_bytes_to_owners: edge.bytes_to_owners(),
        link_bytes_to_edges: owner.outgoing().unwritten_bytes(),
        read_only: owner.store().is_some_and(|store| store.failure().is_some()),
        top_clients: load(|loaded| loaded.session_count() as u64),
        top_writes: load(|loaded| loaded.writes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard() -> Shard {
        let (_shutdown, receiver) = watch::channel(false);
        let config = ServeConfig::for_tests(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let (sender, _receiver) = mpsc::unbounded_channel();
        let (edge, _edge_receiver) = mpsc::unbounded_channel();
        Shard::new(0, Rc::new(config), receiver, vec![sender], vec![edge])
    }

    #[test]
    fn push_ids_increase_within_a_millisecond() {
        let shard = shard();
        let first = shard.owner().next_push_id(1_000);
        let second = shard.owner().next_push_id(1_000);
        let third = shard.owner().next_push_id(999);
        assert!(first < second && second < third);
        assert_eq!(first.len(), hearth_wire::PUSH_ID_LEN);
    }

    #[test]
    fn push_ids_of_two_shards_differ() {
        let a = shard().owner().next_push_id(5);
        let b = shard().owner().next_push_id(5);
        assert_eq!(a[..8], b[..8]);
        assert_ne!(a, b);
    }
}
