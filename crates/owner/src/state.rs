//! The owner role's state: the databases whose names hash to this core, their log and gate,
//! their sessions (WebSocket connections and event streams, wherever their sockets are), the
//! batches for other cores' edges and what waits for the volatile tick. Only this thread
//! touches it, through the methods below; the code that acts on it is the rest of `owner/`
//! (and `durability/`, over `hearth-persist`, for the log).

use std::cell::{Cell, Ref, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use hearth_sync::ConnId;
use hearth_wire::{PushIdGenerator, PUSH_ID_RANDOM_CHARS};
use rustc_hash::FxHashMap;
use tokio::sync::watch;

use crate::loaded::Loaded;
use crate::outbound::ConnHandle;
use crate::replication::Replication;
use crate::trigger_queue::OwnerTriggers;
use crate::volatile_ticks::VolatileTicks;
use hearth_config::ServeConfig;
use hearth_edge::event_stream::StreamHandle;
use hearth_edge::uring::{SendBatch, SendRing};
use hearth_ground::close::CloseReason;
use hearth_ground::conn_ids::ConnIds;
use hearth_ground::cross_core::Outgoing;
use hearth_ground::metrics::{Health, ShardCounters};
use hearth_ground::rest::cache::RestCache;
use hearth_persist::{Gate, ShardStore};

/// One session of a database: a WebSocket connection (on this core or another) or an event
/// stream.
pub enum Session<'a> {
    Socket(&'a Rc<ConnHandle>),
    Stream(&'a Rc<StreamHandle>),
}

/// The sessions of an owner's databases, borrowed (see [`Owner::sessions`]).
pub struct Sessions<'a> {
    conns: Ref<'a, FxHashMap<ConnId, Rc<ConnHandle>>>,
    streams: Ref<'a, FxHashMap<ConnId, Rc<StreamHandle>>>,
}

impl Sessions<'_> {
    pub fn get(&self, id: ConnId) -> Option<Session<'_>> {
        match self.conns.get(&id) {
            Some(conn) => Some(Session::Socket(conn)),
            None => self.streams.get(&id).map(Session::Stream),
        }
    }

    pub fn all(&self) -> impl Iterator<Item = Session<'_>> {
        let conns = self.conns.values().map(Session::Socket);
        conns.chain(self.streams.values().map(Session::Stream))
    }
}

/// What an owner is made of, given by the shard that assembles it.
pub struct OwnerParts {
    /// The shard's index, which its log's sequence numbers belong to.
    pub index: usize,
    /// How many shards this process runs (the local owners, before other nodes').
    pub shard_count: usize,
    pub config: Rc<ServeConfig>,
    pub store: Option<ShardStore>,
    pub gate: Gate,
    pub outgoing: Outgoing,
    /// Seeds the randomness of push ids.
    pub seed: u64,
    pub counters: Rc<ShardCounters>,
    /// The core's connection ids, shared with its edge.
    pub ids: Rc<ConnIds>,
    /// The server's health, which a failed log marks.
    pub health: Arc<Health>,
    pub shutdown: watch::Receiver<bool>,
    /// The core's batched socket sends (`--io-uring-sends`), shared with its edge.
    pub sends: Option<Rc<SendRing>>,
    /// Log shipping to followers and from owners, in a cluster (`replica`).
    pub replication: Option<Replication>,
    /// The server's database triggers and where their changes go.
    pub triggers: OwnerTriggers,
}

pub struct Owner {
    index: usize,
    shard_count: usize,
    config: Rc<ServeConfig>,
    databases: RefCell<HashMap<String, Loaded>>,
    /// The shard's log and snapshots; `None` with `--durability none`.
    store: Option<ShardStore>,
    /// Holds back messages until the writes they depend on are durable.
    gate: Rc<Gate>,
    /// The sessions of this core's databases held by WebSocket connections, on this core or
    /// another.
    conns: RefCell<FxHashMap<ConnId, Rc<ConnHandle>>>,
    /// Open REST event streams. They are sessions of their database like WebSocket
    /// connections, with ids from the same sequence.
    streams: RefCell<FxHashMap<ConnId, Rc<StreamHandle>>>,
    /// The WebSocket sessions by their secret id, for a reconnection that resumes one.
    by_secret: RefCell<HashMap<String, ConnId>>,
    /// What this core's databases send to connections held by other cores, batched per turn.
    outgoing: Rc<Outgoing>,
    push_ids: RefCell<PushIdGenerator>,
    /// State of the generator of push-id randomness (SplitMix64).
    random: Cell<u64>,
    /// Volatile changes and the replies they hold, until the owner's next tick.
    volatile: VolatileTicks,
    counters: Rc<ShardCounters>,
    ids: Rc<ConnIds>,
    /// Serialized answers of large REST reads, served while their data is unchanged.
    rest_cache: RestCache,
    health: Arc<Health>,
    shutdown: watch::Receiver<bool>,
    sends: Option<Rc<SendRing>>,
    replication: Option<Replication>,
    triggers: OwnerTriggers,
}

impl Owner {
    /// An owner of no database yet.
    pub fn new(parts: OwnerParts) -> Owner {
        Owner {
            index: parts.index,
            shard_count: parts.shard_count,
            rest_cache: RestCache::new(parts.config.rest_cache_bytes),
            config: parts.config,
            databases: RefCell::new(HashMap::new()),
            store: parts.store,
            gate: Rc::new(parts.gate),
            conns: RefCell::new(FxHashMap::default()),
            streams: RefCell::new(FxHashMap::default()),
            by_secret: RefCell::new(HashMap::new()),
            outgoing: Rc::new(parts.outgoing),
            push_ids: RefCell::new(PushIdGenerator::new()),
            random: Cell::new(parts.seed),
            volatile: VolatileTicks::default(),
            counters: parts.counters,
            ids: parts.ids,
            health: parts.health,
            shutdown: parts.shutdown,
            sends: parts.sends,
            replication: parts.replication,
            triggers: parts.triggers,
        }
    }

    /// The shard's index, which the log's sequence numbers and connection ids belong to.
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many shards this process runs.
    pub fn shard_count(&self) -> usize {
        self.shard_count
    }

    /// Whether `namespace` is this owner's: this node serves it (or is alone) and its name
    /// hashes to this shard.
    pub fn owns(&self, namespace: &str) -> bool {
        let nodes = self
            .replication
            .as_ref()
            .map(|replication| &*replication.nodes);
        hearth_peer::owner_index(nodes, namespace, self.shard_count) == self.index
    }

    pub fn config(&self) -> &Rc<ServeConfig> {
        &self.config
    }

    /// The server's audit trail; `None` without a data directory.
    pub fn audit_trail(&self) -> Option<&hearth_audit::AuditTrail> {
        self.config.audit.trail.as_ref()
    }

    /// What the shard counts for `/metrics`.
    pub fn counters(&self) -> &Rc<ShardCounters> {
        &self.counters
    }

    /// A new connection or event-stream id, unique in the server.
    pub fn next_conn_id(&self) -> ConnId {
        self.ids.next()
    }

    /// Serialized answers of large REST reads, served while their data is unchanged.
    pub fn rest_cache(&self) -> &RestCache {
        &self.rest_cache
    }

    /// The server's health, which a failed log marks.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The shutdown signal, for the owner's tasks.
    pub fn shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }

    /// Opens a batch of socket sends: what is written to this core's sockets until it is
    /// dropped leaves together (`edge::uring`); `None` without `--io-uring-sends`.
    pub fn send_batch(&self) -> Option<SendBatch> {
        self.sends.as_ref().map(SendRing::batch)
    }

    /// Log shipping to followers and from owners, in a cluster.
    pub fn replication(&self) -> Option<&Replication> {
        self.replication.as_ref()
    }

    /// The database triggers and the changes that wait for their write to be durable.
    pub fn triggers(&self) -> &OwnerTriggers {
        &self.triggers
    }

    /// The loaded databases, borrowed for reading.
    pub fn databases(&self) -> Ref<'_, HashMap<String, Loaded>> {
        self.databases.borrow()
    }

    /// Runs `f` on the database `namespace` if it is loaded. The map is borrowed only while
    /// `f` runs, which cannot await, so no borrow outlives a step of the database; `f` must
    /// not reach the map again (through [`Owner::with_database`] and the like).
    pub fn with_loaded<R>(&self, namespace: &str, f: impl FnOnce(&mut Loaded) -> R) -> Option<R> {
        self.databases.borrow_mut().get_mut(namespace).map(f)
    }

    /// Runs `f` on the whole map of loaded databases (recovery, loading, eviction, a failed
    /// log): borrowed as in [`Owner::with_loaded`].
    pub fn with_all<R>(&self, f: impl FnOnce(&mut HashMap<String, Loaded>) -> R) -> R {
        f(&mut self.databases.borrow_mut())
    }

    /// Drops a loaded database from memory (evicted, or moved to another node).
    pub fn remove_database(&self, namespace: &str) -> Option<Loaded> {
        self.databases.borrow_mut().remove(namespace)
    }

    /// The shard's log and snapshots; `None` with `--durability none`.
    pub fn store(&self) -> Option<&ShardStore> {
        self.store.as_ref()
    }

    pub fn gate(&self) -> &Rc<Gate> {
        &self.gate
    }

    pub fn outgoing(&self) -> &Rc<Outgoing> {
        &self.outgoing
    }

    pub fn volatile(&self) -> &VolatileTicks {
        &self.volatile
    }

    /// The sequence number a REST answer about `namespace` must wait for.
    pub fn required_seq(&self, namespace: &str) -> u64 {
        let databases = self.databases.borrow();
        databases
            .get(namespace)
            .map_or(0, |loaded| self.gate.tag(loaded.seq()))
    }

    /// Registers `handle`, a new session of one of this core's databases.
    pub fn add_session(&self, handle: Rc<ConnHandle>) {
        self.by_secret
            .borrow_mut()
            .insert(handle.session_id.clone(), handle.id);
        self.conns.borrow_mut().insert(handle.id, handle);
    }

    /// Forgets the session `handle`; `false` when it was already gone.
    pub fn remove_session(&self, handle: &ConnHandle) -> bool {
        if self.conns.borrow_mut().remove(&handle.id).is_none() {
            return false;
        }
        self.by_secret.borrow_mut().remove(&handle.session_id);
        true
    }

    /// The session whose secret id is `session_id`, if it is open.
    pub fn session_by_secret(&self, session_id: &str) -> Option<Rc<ConnHandle>> {
        let conn = self.by_secret.borrow().get(session_id).copied()?;
        self.session(conn)
    }

    /// The sessions of this core's databases, borrowed for one delivery: nothing may open or
    /// end a session meanwhile.
    pub fn sessions(&self) -> Sessions<'_> {
        Sessions {
            conns: self.conns.borrow(),
            streams: self.streams.borrow(),
        }
    }

    /// The WebSocket session `id` of one of this core's databases.
    pub fn session(&self, id: ConnId) -> Option<Rc<ConnHandle>> {
        self.conns.borrow().get(&id).cloned()
    }

    /// Registers `handle`, a new event stream of one of this core's databases.
    pub fn add_stream(&self, handle: Rc<StreamHandle>) {
        self.streams.borrow_mut().insert(handle.id, handle);
        self.counters.stream_opened();
    }

    /// The event stream `id` of one of this core's databases.
    pub fn stream(&self, id: ConnId) -> Option<Rc<StreamHandle>> {
        self.streams.borrow().get(&id).cloned()
    }

    /// Forgets the event stream `id`; `false` when it was already gone.
    pub fn remove_stream(&self, id: ConnId) -> bool {
        self.streams.borrow_mut().remove(&id).is_some()
    }

    /// The WebSocket sessions of this core's databases, this node's and other nodes'.
    pub fn all_sessions(&self) -> Vec<Rc<ConnHandle>> {
        self.conns.borrow().values().cloned().collect()
    }

    /// The event streams of this core's databases.
    pub fn all_streams(&self) -> Vec<Rc<StreamHandle>> {
        self.streams.borrow().values().cloned().collect()
    }

    /// Stops handling `sessions` whose sockets other nodes keep, to move them
    /// (`ConnHandle::stop_for_move`), and closes the others with `reason`; the stopped ones.
    pub fn stop_for_move(
        &self,
        sessions: impl IntoIterator<Item = Rc<ConnHandle>>,
        reason: CloseReason,
    ) -> Vec<Rc<ConnHandle>> {
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

    /// How many WebSocket sessions and event streams this core's databases have.
    pub fn session_counts(&self) -> (usize, usize) {
        (self.conns.borrow().len(), self.streams.borrow().len())
    }

    /// A new push id for a `POST`, from the server clock. Ids made by one shard are strictly
    /// increasing, so children pushed to one database sort in the order they were created.
    pub fn next_push_id(&self, now_ms: u64) -> String {
        let mut random = [0u8; PUSH_ID_RANDOM_CHARS];
        for chunk in random.chunks_mut(8) {
            let bytes = self.next_random().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        self.push_ids.borrow_mut().next_id(now_ms, random)
    }

    /// SplitMix64: a small, well-mixed sequence from the random seed.
    fn next_random(&self) -> u64 {
        let state = self.random.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        self.random.set(state);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Owner {
    /// The owner of shard 0 of 1, in memory, for tests here and in the crates above (tests
    /// cannot see another crate's test code): its batches for other cores go nowhere and its
    /// shutdown never comes.
    pub fn for_tests(config: ServeConfig) -> Rc<Owner> {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let (_stop, shutdown) = watch::channel(false);
        let triggers = OwnerTriggers::new(
            config.triggers.registry.clone(),
            config.triggers.sink.clone(),
        );
        Rc::new(Owner::new(OwnerParts {
            index: 0,
            shard_count: 1,
            config: Rc::new(config),
            store: None,
            gate: Gate::open(),
            outgoing: Outgoing::new(vec![tokio::sync::mpsc::unbounded_channel().0]),
            seed,
            counters: Rc::default(),
            ids: Rc::new(ConnIds::new(0, 1)),
            health: Arc::default(),
            shutdown,
            sends: None,
            replication: None,
            triggers,
        }))
    }
}
