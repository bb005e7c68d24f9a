//! A shard: one thread, one single-threaded runtime, the state of its two roles ([`Owner`]: the
//! databases whose names hash to it and their sessions; [`Edge`]: the connections it accepted
//! for other shards' databases), what both share (settings, counters, the shutdown signal) and
//! the inboxes of every shard (`inbox`). Nothing in a shard is shared with another thread: what
//! crosses is plain data (`inbox`, `link`). The methods here are those that need more than one
//! role: a database's lifecycle (loaded from disk, created, logged) and the messages to other
//! shards.

use std::cell::Cell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use hearth_store::RecordRef;
use hearth_sync::{Access, ConnId, Database, Effects, Write};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{debug, info, warn};

use crate::config::ServeConfig;
use crate::edge::Edge;
use crate::loaded::Loaded;
use crate::owner::Owner;
use crate::rules_file::default_access;
use crate::scrape::Observer;
use hearth_ground::close::{CloseReason, SHUTDOWN_CLOSE};
use hearth_ground::cross_core::{Outgoing, ToEdge, ToOwner};
use hearth_ground::inbox::ShardCut;
use hearth_ground::inbox::{ask_every_shard, DatabaseInfo, Forwarded, Precheck, ShardMessage};
use hearth_ground::metrics::snapshot::{top, DatabaseLoad};
use hearth_ground::metrics::{ShardCounters, ShardSnapshot};
use hearth_ground::rest::precheck::WriteCheck;
use hearth_ground::rest::{RestCall, RestResponse};
use hearth_net::budget::ShardBudget;
use hearth_net::time::now_ms;
use hearth_persist::{Gate, ShardStore, Tagger};

/// What clients are told while writes are refused.
pub fn read_only_reason(failure: &str) -> String {
    format!("writes are refused: the server's write-ahead log failed ({failure}); reads go on")
}

pub struct Shard {
    pub index: usize,
    pub shard_count: usize,
    pub config: Rc<ServeConfig>,
    /// The owner role: this core's databases, their log and their sessions.
    pub owner: Owner,
    /// The edge role: the connections this core holds for other cores' databases.
    pub edge: Edge,
    next_conn: Cell<u64>,
    /// What the shard counts for `/metrics`; written only by this thread.
    pub counters: Rc<ShardCounters>,
    /// Health and the scrapes' way to every shard, shared by the whole server.
    pub observer: Arc<Observer>,
    pub shutdown: watch::Receiver<bool>,
    /// Every shard's inbox (this one's too), by index.
    peers: Vec<mpsc::UnboundedSender<ShardMessage>>,
    /// Serialized answers of large REST reads, served while their data is unchanged.
    pub rest_cache: hearth_ground::rest::cache::RestCache,
    /// The long-polling sessions this core holds (their edge).
    pub long_polls: crate::longpoll::session::Registry,
    /// The other nodes of a cluster (`--cluster-peers`), when there are any.
    pub nodes: Option<Arc<hearth_peer::Nodes>>,
    /// Log shipping to followers and from owners, in a cluster (`replica`).
    pub replication: Option<crate::replica::replication::Replication>,
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
        Shard::with_store(index, config, shutdown, peers, edges, None, observer)
    }

    /// A shard with a store; its recovered databases must be added with
    /// [`Shard::add_recovered`].
    pub fn with_store(
        index: usize,
        config: Rc<ServeConfig>,
        shutdown: watch::Receiver<bool>,
        peers: Vec<mpsc::UnboundedSender<ShardMessage>>,
        edges: Vec<mpsc::UnboundedSender<ToEdge>>,
        store: Option<ShardStore>,
        observer: Arc<Observer>,
    ) -> Shard {
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
        // An edge needs room toward every owner: the local shards, then the other nodes.
        let owners = peers.len().max(edges.len());
        let owner = Owner::new(
            store,
            gate,
            Outgoing::new(edges),
            seed.finish(),
            counters.clone(),
        );
        let edge = Edge::new(
            owners,
            ShardBudget::new(config.http.clone()),
            counters.clone(),
            config.io_uring_sends,
        );
        let rest_cache = hearth_ground::rest::cache::RestCache::new(config.rest_cache_bytes);
        Shard {
            index,
            shard_count: peers.len(),
            config,
            owner,
            edge,
            next_conn: Cell::new(1),
            counters,
            observer,
            shutdown,
            peers,
            rest_cache,
            long_polls: Default::default(),
            nodes: None,
            replication: None,
        }
    }

    /// A new session id, unique in the server: the shards' sequences interleave, so that an
    /// owner can key the sessions of connections held by every core by their id.
    pub fn next_conn_id(&self) -> ConnId {
        let id = self.next_conn.get();
        self.next_conn.set(id + 1);
        id * self.shard_count.max(1) as u64 + self.index as u64
    }

    /// Runs `f` on the database of `namespace`: loaded from its snapshot if it was evicted,
    /// created on first use. The owner's map is borrowed only while `f` runs
    /// ([`Owner::with_loaded`]).
    pub fn with_database<R>(&self, namespace: &str, f: impl FnOnce(&mut Loaded) -> R) -> R {
        self.owner
            .with_all(|databases| f(self.database_in(databases, namespace)))
    }

    /// Runs `f` on the database of `namespace` if it exists, in memory or on disk (then it
    /// is loaded): for reads, which must not make a database of a mistyped name.
    pub fn with_existing_database<R>(
        &self,
        namespace: &str,
        f: impl FnOnce(&mut Loaded) -> R,
    ) -> Option<R> {
        self.owner
            .with_all(|databases| self.existing_database_in(databases, namespace).map(f))
    }

    /// The database of `namespace` in `databases`: loaded from its snapshot if it was
    /// evicted, created on first use.
    pub fn database_in<'a>(
        &self,
        databases: &'a mut HashMap<String, Loaded>,
        namespace: &str,
    ) -> &'a mut Loaded {
        let now = now_ms();
        let loaded = match databases.entry(namespace.to_owned()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                let loaded = crate::owner::durability::load_evicted(self, namespace, now)
                    .unwrap_or_else(|| self.new_database(namespace, now));
                entry.insert(loaded)
            }
        };
        loaded.last_used_ms = now;
        self.fence(loaded);
        loaded
    }

    /// The database of `namespace` in `databases` if it exists, in memory or on disk (then
    /// it is loaded).
    fn existing_database_in<'a>(
        &self,
        databases: &'a mut HashMap<String, Loaded>,
        namespace: &str,
    ) -> Option<&'a mut Loaded> {
        let now = now_ms();
        let loaded = match databases.entry(namespace.to_owned()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => entry.insert(crate::owner::durability::load_evicted(
                self, namespace, now,
            )?),
        };
        loaded.last_used_ms = now;
        self.fence(loaded);
        Some(loaded)
    }

    /// In a cluster, lets the database take writes only while this node's claim on it is
    /// valid (`cluster::fence`); checked at every lookup, so a claim that lapses refuses the
    /// next write.
    pub fn fence(&self, loaded: &mut Loaded) {
        let Some(placement) = self.config.cluster.as_ref() else {
            return;
        };
        let store = self.owner.store();
        let disk_failed = store.is_some_and(|store| store.failure().is_some());
        let logged_epoch = store.map_or(0, |store| store.logged_epoch(&loaded.name));
        crate::cluster::fence::apply(placement, disk_failed, logged_epoch, loaded);
    }

    /// Adds the databases recovered from the store at start.
    pub fn add_recovered(
        &self,
        recovered: std::collections::BTreeMap<Arc<str>, hearth_store::RecoveredDatabase>,
    ) {
        let now = now_ms();
        self.owner.with_all(|databases| {
            for (name, state) in recovered {
                let mut loaded = Loaded::new(
                    Rc::from(&*name),
                    Database::with_root(state.root),
                    state.seq,
                    now,
                );
                self.apply_rules(&mut loaded, state.rules, now);
                // Volatile data that reached the log inside a durable write above its mark does
                // not survive a restart.
                loaded.engine.drop_volatile_data();
                loaded.durable = loaded.state();
                loaded.on_disk = true;
                databases.insert(name.to_string(), loaded);
            }
        });
    }

    /// A new, empty database with the server's default rules. It is announced in the log
    /// only with its first write (`log`): a listener alone leaves nothing behind.
    pub fn new_database(&self, namespace: &str, now: u64) -> Loaded {
        debug!(
            namespace,
            shard = self.index,
            "new database opened in memory"
        );
        let mut loaded = Loaded::new(Rc::from(namespace), Database::new(), 0, now);
        loaded.seq.set(self.owner.gate().durable());
        self.apply_rules(&mut loaded, None, now);
        loaded
    }

    /// Gives a database the rules `text` set through the API, or the server's default.
    pub fn apply_rules(&self, loaded: &mut Loaded, text: Option<Arc<str>>, now: u64) {
        let access = match text.as_deref().map(hearth_rules::Rules::parse) {
            Some(Ok(rules)) => Access::Rules(Arc::new(rules)),
            Some(Err(error)) => {
                warn!(namespace = %loaded.name, %error, "stored rules do not compile; using the default rules");
                default_access(self.config.default_rules.clone(), self.config.dev)
            }
            None => default_access(self.config.default_rules.clone(), self.config.dev),
        };
        // Called before the database has subscribers, or with the effects routed by the
        // caller: nothing to revoke here.
        let mut effects = Effects::new();
        loaded.engine.set_access(access, now, &mut effects);
        // In development the log says which rule refused a request, where in the rules, and
        // the emulator's rules coverage report is kept.
        if self.config.dev {
            loaded
                .engine
                .explain_refusals(Some(Arc::from(&*loaded.name)));
            loaded.engine.record_coverage();
        }
        loaded.rules = text;
        if let Some(reason) = self.owner.store().and_then(ShardStore::failure) {
            loaded
                .engine
                .set_read_only(Some(Arc::from(read_only_reason(&reason))));
        }
    }

    /// The tagger for the outbound queue of a client of `namespace`.
    pub fn tagger(&self, namespace: &str) -> Tagger {
        let database_seq = self.with_database(namespace, |loaded| loaded.seq.clone());
        Tagger {
            gate: self.owner.gate().clone(),
            database_seq,
        }
    }

    /// Sends an applied write to the log.
    pub fn log_write(&self, namespace: &str, write: &Write) {
        self.counters.write_applied();
        let logged = self.log(namespace, RecordRef::Write(write));
        if let Some(seq) = logged.filter(|_| self.owner.gate().is_strict()) {
            self.counters.awaiting_ack(seq);
        }
    }

    /// Sends a change of rules set through the API to the log.
    pub fn log_rules(&self, namespace: &str, text: &str) {
        self.log(namespace, RecordRef::Rules(text));
    }

    /// Appends a record for `namespace` and returns its position. If the log cannot take
    /// it, the database's clients are held (the change is in memory but will never be
    /// durable) until the failure is handled.
    fn log(&self, namespace: &str, body: RecordRef<'_>) -> Option<u64> {
        let logged = self
            .owner
            .with_loaded(namespace, |loaded| self.log_loaded(loaded, namespace, body))?;
        match logged {
            Ok(seq) => seq,
            Err(error) => {
                crate::owner::durability::report_failure(self, error.to_string());
                None
            }
        }
    }

    /// [`Shard::log`] for a loaded database: its record's position (`None` without a log),
    /// or the log's error, which the caller reports once the database is let go.
    fn log_loaded(
        &self,
        loaded: &mut Loaded,
        namespace: &str,
        body: RecordRef<'_>,
    ) -> Result<Option<u64>, hearth_store::StoreError> {
        if matches!(body, RecordRef::Write(_)) {
            loaded.writes += 1;
        }
        if !loaded.on_disk && !loaded.announced {
            loaded.announced = true;
            info!(
                namespace,
                shard = self.index,
                "database created by its first write"
            );
        }
        let Some(store) = self.owner.store() else {
            return Ok(None);
        };
        loaded.log_to(store, body)?;
        if let Some(replication) = &self.replication {
            // The epoch the record was just logged under, as `ShardStore::append` chose it:
            // the claim's, else the log's last for the database.
            let epoch = loaded
                .epoch
                .unwrap_or_else(|| store.logged_epoch(namespace));
            replication.ship(loaded, loaded.seq.get(), epoch, body);
        }
        Ok(Some(loaded.seq.get()))
    }

    /// A connection this core held for another core's database ended; its owner is told.
    pub fn release_connection(&self, id: ConnId, owner: usize) {
        self.edge.forget(id);
        self.send_to_owner(owner, ToOwner::Closed { conn: id });
    }

    /// Sends `message` to the owner role of shard `owner`. Nothing is lost but at shutdown,
    /// when that shard may be gone with its sessions.
    pub fn send_to_owner(&self, owner: usize, message: ToOwner) {
        if let Some(sender) = self.peers.get(owner) {
            let _ = sender.send(ShardMessage::Owner(message));
        } else if let Some(nodes) = &self.nodes {
            nodes.send(owner - self.peers.len(), message);
        }
    }

    /// Who owns `namespace`, as an owner index: a local shard's index, or past them, the
    /// local shard count plus the index of the node that owns it (`peer`).
    pub fn owner_of(&self, namespace: &str) -> usize {
        if let Some(nodes) = &self.nodes {
            if let hearth_peer::NodeRoute::Remote(node) = nodes.owner_node(namespace) {
                return self.peers.len() + node;
            }
        }
        hearth_ground::namespace::owner_shard(namespace, self.shard_count)
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Asks the shard that owns a REST write's database whether the write is refused before
    /// its body is read. `None` when it may go on, or when that shard is gone (shutdown: the
    /// write itself then fails).
    pub async fn precheck(&self, owner: usize, check: WriteCheck) -> Option<RestResponse> {
        let (reply, answer) = oneshot::channel();
        let sender = self.peers.get(owner)?;
        let _ = sender.send(ShardMessage::Precheck(Box::new(Precheck { check, reply })));
        answer.await.ok().flatten()
    }

    /// Asks every shard's owner role (this one's too, through its own queue) for its
    /// databases. A shard that is gone (shutdown) is left out.
    pub async fn all_databases(&self) -> Vec<DatabaseInfo> {
        let answers = ask_every_shard(&self.peers, ShardMessage::Databases, None).await;
        answers.into_iter().flatten().flatten().collect()
    }

    /// Sends a REST request to the shard that owns its database. The receiver yields the
    /// answer, or an error when that shard is gone (shutting down).
    pub fn forward(&self, owner: usize, call: RestCall) -> oneshot::Receiver<RestResponse> {
        let (reply, answer) = oneshot::channel();
        self.counters.rest_forwarded();
        if let Some(sender) = self.peers.get(owner) {
            // A failed send drops `reply`, which the receiver reports as an error.
            let _ = sender.send(ShardMessage::Rest(Box::new(Forwarded { call, reply })));
        }
        answer
    }

    /// Sends a long poll to the shard that holds its session. A failed send (that shard is
    /// gone) drops the reply, which the caller reports as an error.
    pub fn forward_long_poll(
        &self,
        home: usize,
        forwarded: hearth_ground::longpoll_request::Forwarded,
    ) {
        if let Some(sender) = self.peers.get(home) {
            let _ = sender.send(ShardMessage::LongPoll(Box::new(forwarded)));
        }
    }

    /// Sends a WebSocket that takes a long-polling session over to the shard that holds the
    /// session. A failed send (that shard is gone) drops the socket.
    pub fn forward_upgrade(
        &self,
        home: usize,
        moved: hearth_ground::longpoll_request::MovedUpgrade,
    ) {
        if let Some(sender) = self.peers.get(home) {
            let _ = sender.send(ShardMessage::Upgrade(Box::new(moved)));
        }
    }

    /// The shard's numbers for a scrape, taken now on its thread; `inbox` is the count of
    /// messages waiting in its inbox.
    pub fn metrics_snapshot(&self, inbox: usize) -> ShardSnapshot {
        let runtime = tokio::runtime::Handle::current().metrics();
        let databases = self.owner.databases();
        let (websocket_sessions, event_streams) = self.owner.session_counts();
        let load = |count: fn(&Loaded) -> u64| {
            let loads = databases.values().map(|loaded| DatabaseLoad {
                database: loaded.name.to_string(),
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
            top_writes: load(|loaded| loaded.writes),
        }
    }

    /// This shard's own queue, for what other threads tell it later.
    pub fn own_queue(&self) -> Option<mpsc::UnboundedSender<ShardMessage>> {
        self.peers.get(self.index).cloned()
    }

    /// Asks shard `index` (this one included) for its part of a backup, through its queue.
    pub fn ask_cut(&self, index: usize) -> oneshot::Receiver<Result<ShardCut, String>> {
        let (reply, answer) = oneshot::channel();
        if let Some(sender) = self.peers.get(index) {
            // A failed send drops `reply`, which the receiver reports as an error.
            let _ = sender.send(ShardMessage::BackupCut(reply));
        }
        answer
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

    /// Stops handling `sessions` whose sockets other nodes keep, to move them
    /// (`ConnHandle::stop_for_move`), and closes the others with `reason`; the stopped ones.
    pub fn stop_for_move(
        &self,
        sessions: impl IntoIterator<Item = Rc<crate::owner::outbound::ConnHandle>>,
        reason: CloseReason,
    ) -> Vec<Rc<crate::owner::outbound::ConnHandle>> {
        let mut moving = Vec::new();
        for session in sessions {
            if session.stop_for_move(self.shard_count) {
                moving.push(session);
            } else {
                session.close(reason.clone());
            }
        }
        moving
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
        let mut moving = self.stop_for_move(
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
