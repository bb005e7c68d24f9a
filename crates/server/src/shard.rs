//! A shard: one thread, one single-threaded runtime, the state of its two roles ([`Owner`]: the
//! databases whose names hash to it and their sessions; [`Edge`]: the connections it accepted
//! for other shards' databases), what both share (settings, counters, the shutdown signal) and
//! the inboxes of every shard (`inbox`). Nothing in a shard is shared with another thread: what
//! crosses is plain data (`inbox`, `cross_core`). The methods here are those that need more
//! than one role, such as the messages to other shards; a database's lifecycle is the owner's
//! (`owner/databases.rs`).

use std::hash::{BuildHasher, Hasher};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use hearth_sync::ConnId;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::inboxes::Inboxes;
use crate::scrape::Observer;
use hearth_config::ServeConfig;
use hearth_edge::Edge;
use hearth_ground::close::{CloseReason, SHUTDOWN_CLOSE};
use hearth_ground::conn_ids::ConnIds;
use hearth_ground::cross_core::{Outgoing, ToEdge, ToOwner};
use hearth_ground::inbox::ShardMessage;
use hearth_ground::metrics::snapshot::{top, DatabaseLoad};
use hearth_ground::metrics::{ShardCounters, ShardSnapshot};
use hearth_ground::rest::{RestCall, RestResponse};
use hearth_net::budget::ShardBudget;
use hearth_net::time::now_ms;
use hearth_owner::loaded::Loaded;
use hearth_owner::replication::Replication;
use hearth_owner::{Owner, OwnerParts};
use hearth_peer::Nodes;
use hearth_persist::{Gate, ShardStore};

/// Every shard's queues: their inboxes (this one's too) and their edges' batches, by index.
pub struct Queues {
    pub peers: Vec<mpsc::UnboundedSender<ShardMessage>>,
    pub edges: Vec<mpsc::UnboundedSender<ToEdge>>,
}

pub struct Shard {
    index: usize,
    shard_count: usize,
    config: Rc<ServeConfig>,
    /// The owner role: this core's databases, their log and their sessions.
    owner: Rc<Owner>,
    /// The edge role: the connections this core holds for other cores' databases.
    edge: Edge,
    /// The core's connection ids, shared by its two roles.
    ids: Rc<ConnIds>,
    /// What the shard counts for `/metrics`; written only by this thread.
    counters: Rc<ShardCounters>,
    /// Health and the scrapes' way to every shard, shared by the whole server.
    observer: Arc<Observer>,
    shutdown: watch::Receiver<bool>,
    /// Every shard's inbox (this one's too) and the other nodes.
    inboxes: Rc<Inboxes>,
    /// The long-polling sessions this core holds (their edge).
    long_polls: crate::longpoll_session::Registry,
}

impl Shard {
    /// A shard that keeps its databases in memory only.
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
        let owner = Owner::new(OwnerParts {
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
        });
        Shard {
            index,
            shard_count: peers.len(),
            config,
            owner: Rc::new(owner),
            edge,
            ids,
            counters,
            observer,
            shutdown,
            inboxes: Rc::new(Inboxes::new(index, peers, nodes)),
            long_polls: Default::default(),
        }
    }

    pub fn index(&self) -> usize {
        self.index
    }

    /// How many shards this process runs.
    pub fn shard_count(&self) -> usize {
        self.shard_count
    }

    pub fn config(&self) -> &Rc<ServeConfig> {
        &self.config
    }

    /// The owner role: this core's databases, their log and their sessions.
    pub fn owner(&self) -> &Rc<Owner> {
        &self.owner
    }

    /// The edge role: the connections this core holds for other cores' databases.
    pub fn edge(&self) -> &Edge {
        &self.edge
    }

    /// What the shard counts for `/metrics`.
    pub fn counters(&self) -> &Rc<ShardCounters> {
        &self.counters
    }

    /// Health and the scrapes' way to every shard.
    pub fn observer(&self) -> &Arc<Observer> {
        &self.observer
    }

    /// The shutdown signal, for a task of this shard to watch.
    pub fn shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }

    /// The long-polling sessions this core holds.
    pub fn long_polls(&self) -> &crate::longpoll_session::Registry {
        &self.long_polls
    }

    /// The other nodes of a cluster, when there are any.
    pub fn nodes(&self) -> Option<&Arc<Nodes>> {
        self.inboxes.nodes()
    }

    /// A new session id, unique in the server: the shards' sequences interleave, so that an
    /// owner can key the sessions of connections held by every core by their id.
    pub fn next_conn_id(&self) -> ConnId {
        self.ids.next()
    }

    /// A connection this core held for another core's database ended; its owner is told.
    pub fn release_connection(&self, id: ConnId, owner: usize) {
        self.edge.forget(id);
        self.send_to_owner(owner, ToOwner::Closed { conn: id });
    }

    /// Sends `message` to the owner role of shard `owner` ([`Inboxes::send_to_owner`]).
    pub fn send_to_owner(&self, owner: usize, message: ToOwner) {
        self.inboxes.send_to_owner(owner, message);
    }

    /// Who owns `namespace`, as an owner index ([`Inboxes::owner_of`]).
    pub fn owner_of(&self, namespace: &str) -> usize {
        self.inboxes.owner_of(namespace)
    }

    /// Every shard's inbox and the other nodes: the way to other shards' owners.
    pub fn inboxes(&self) -> &Rc<Inboxes> {
        &self.inboxes
    }

    /// Sends a REST request to the shard that owns its database, counted as forwarded.
    pub fn forward(&self, owner: usize, call: RestCall) -> oneshot::Receiver<RestResponse> {
        self.counters.rest_forwarded();
        self.inboxes.forward(owner, call)
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// The shard's numbers for a scrape, taken now on its thread; `inbox` is the count of
    /// messages waiting in its inbox.
    pub fn metrics_snapshot(&self, inbox: usize) -> ShardSnapshot {
        let runtime = tokio::runtime::Handle::current().metrics();
        let databases = self.owner.databases();
        let (websocket_sessions, event_streams) = self.owner.session_counts();
        let load = |count: fn(&Loaded) -> u64| {
            let loads = databases.values().map(|loaded| DatabaseLoad {
                database: loaded.name().to_string(),
                count: count(loaded),
            });
            top(loads.collect())
        };
        ShardSnapshot {
            shard: self.index,
            counters: self.counters.snapshot(),
            websocket_sessions,
            event_streams,
            databases_loaded: databases.len(),
            busy: (0..runtime.num_workers())
                .map(|worker| runtime.worker_total_busy_duration(worker))
                .sum(),
            inbox_messages: inbox,
            runtime_queue: runtime.global_queue_depth(),
            link_bytes_to_owners: self.edge.bytes_to_owners(),
            link_bytes_to_edges: self.owner.outgoing().unwritten_bytes(),
            read_only: self
                .owner
                .store()
                .is_some_and(|store| store.failure().is_some()),
            top_clients: load(|loaded| loaded.session_count() as u64),
            top_writes: load(|loaded| loaded.writes()),
        }
    }

    /// Ends every event stream (at shutdown), so that their HTTP connections can finish:
    /// those of this core's databases, and those this core holds for other cores'.
    pub fn close_all_streams(&self) {
        let mut streams = self.owner.all_streams();
        streams.extend(self.edge.held_streams());
        for stream in streams {
            stream.close();
        }
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
        self.close_all_streams();
        let mut moving = self.owner.stop_for_move(
            self.owner.all_sessions(),
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
        while (self.owner.session_counts() != (0, 0) || !self.edge.held().is_empty())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
        let first = shard.owner.next_push_id(1_000);
        let second = shard.owner.next_push_id(1_000);
        let third = shard.owner.next_push_id(999);
        assert!(first < second && second < third);
        assert_eq!(first.len(), hearth_wire::PUSH_ID_LEN);
    }

    #[test]
    fn push_ids_of_two_shards_differ() {
        let a = shard().owner.next_push_id(5);
        let b = shard().owner.next_push_id(5);
        assert_eq!(a[..8], b[..8]);
        assert_ne!(a, b);
    }
}
