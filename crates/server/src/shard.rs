//! A shard: one thread, one single-threaded runtime, the state of its two roles (the databases
//! whose names hash to it and their sessions, as an owner; the connections it accepted for
//! other shards' databases, as an edge) and the channels to the other shards. Nothing in a
//! shard is shared with another thread: what crosses is plain data (`link`).

use std::cell::{Cell, Ref, RefCell};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use hearth_store::RecordRef;
use hearth_sync::{Access, ConnId, Database, Effects, Write};
use hearth_wire::{PushIdGenerator, PUSH_ID_RANDOM_CHARS};
use rustc_hash::FxHashMap;
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info, warn};

use crate::admin::DatabaseInfo;
use crate::budget::ShardBudget;
use crate::config::ServeConfig;
use crate::edge::EdgeTarget;
use crate::link::{Outgoing, ToEdge, ToOwner, MAX_LINK_BYTES};
use crate::loaded::Loaded;
use crate::metrics::snapshot::{top, DatabaseLoad};
use crate::metrics::{Observer, ShardCounters, ShardSnapshot};
use crate::owner::outbound::ConnHandle;
use crate::persist::{Gate, ShardStore, Tagger};
use crate::rest::precheck::WriteCheck;
use crate::rest::{RestCall, RestResponse};
use crate::rules_file::default_access;
use crate::sse::stream::StreamHandle;
use crate::time::now_ms;

/// What clients are told while writes are refused.
pub fn read_only_reason(failure: &str) -> String {
    format!("writes are refused: the server's write-ahead log failed ({failure}); reads go on")
}

/// A REST request whose database lives on another shard, with the channel for its answer.
pub struct Forwarded {
    pub call: RestCall,
    pub reply: oneshot::Sender<RestResponse>,
}

/// A REST write's check before its body is read, asked of the shard that owns its database,
/// with the channel for the refusal (`None`: go on).
pub struct Precheck {
    pub check: WriteCheck,
    pub reply: oneshot::Sender<Option<RestResponse>>,
}

/// What one shard sends another's owner role (`link::ToEdge` batches go on a channel of
/// their own, so that an owner that waits for an edge never stops that edge's writes).
pub enum ShardMessage {
    Rest(Box<Forwarded>),
    /// A backup asks for this shard's cut (`backup::cut`).
    BackupCut(oneshot::Sender<Result<crate::backup::cut::ShardCut, String>>),
    /// A backup's cut of this shard was dropped: snapshot files may be removed again.
    BackupDone,
    Precheck(Box<Precheck>),
    Owner(ToOwner),
    /// A scrape asks for the shard's numbers.
    Metrics(oneshot::Sender<ShardSnapshot>),
    /// The owner's databases, for `GET /.admin/databases`.
    Databases(oneshot::Sender<Vec<DatabaseInfo>>),
    /// A long poll for a session whose home is this shard (`longpoll`).
    LongPoll(Box<crate::longpoll::request::Forwarded>),
}

/// Sends `ask` to every shard's owner role and waits for the answers, until `timeout` when
/// given: `None` for a shard that is gone or did not answer in time. Each shard answers from
/// its own thread, so no shard's state is read by another.
pub async fn ask_every_shard<T>(
    shards: &[mpsc::UnboundedSender<ShardMessage>],
    ask: impl Fn(oneshot::Sender<T>) -> ShardMessage,
    timeout: Option<Duration>,
) -> Vec<Option<T>> {
    let asked: Vec<_> = shards
        .iter()
        .map(|inbox| {
            let (reply, answer) = oneshot::channel();
            let _ = inbox.send(ask(reply));
            answer
        })
        .collect();
    let deadline = timeout.map(|timeout| tokio::time::Instant::now() + timeout);
    let mut answers = Vec::with_capacity(asked.len());
    for answer in asked {
        let answer = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, answer).await.ok(),
            None => Some(answer.await),
        };
        answers.push(answer.and_then(Result::ok));
    }
    answers
}

/// One session of a database: a WebSocket connection (on this core or another) or an event
/// stream.
pub enum Session<'a> {
    Socket(&'a Rc<ConnHandle>),
    Stream(&'a Rc<StreamHandle>),
}

/// The sessions of a shard's databases, borrowed (see [`Shard::sessions`]).
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

pub struct Shard {
    pub index: usize,
    pub shard_count: usize,
    pub config: Rc<ServeConfig>,
    pub databases: RefCell<HashMap<String, Loaded>>,
    /// The shard's log and snapshots; `None` with `--durability none`.
    pub store: Option<ShardStore>,
    /// Holds back messages until the writes they depend on are durable.
    pub gate: Rc<Gate>,
    /// The shard's share of the answer budget, which its connections' queued pushes count in.
    pub ws_budget: Rc<ShardBudget>,
    /// The sessions of this core's databases held by WebSocket connections, on this core or
    /// another.
    conns: RefCell<FxHashMap<ConnId, Rc<ConnHandle>>>,
    /// The connections and event streams this core holds whose database another core owns.
    edge_conns: RefCell<FxHashMap<ConnId, EdgeTarget>>,
    /// What this core's databases send to connections held by other cores, batched per turn.
    pub outgoing: Rc<Outgoing>,
    /// Per owner: the bytes of messages this core may have in flight to it.
    owner_room: Vec<Arc<Semaphore>>,
    /// Open REST event streams. They are sessions of their database like WebSocket
    /// connections, with ids from the same sequence.
    streams: RefCell<FxHashMap<ConnId, Rc<StreamHandle>>>,
    sessions: RefCell<HashMap<String, ConnId>>,
    next_conn: Cell<u64>,
    /// What the shard counts for `/metrics`; written only by this thread.
    pub counters: Rc<ShardCounters>,
    /// Health and the scrapes' way to every shard, shared by the whole server.
    pub observer: Arc<Observer>,
    pub shutdown: watch::Receiver<bool>,
    peers: Vec<mpsc::UnboundedSender<ShardMessage>>,
    push_ids: RefCell<PushIdGenerator>,
    /// State of the generator of push-id randomness (SplitMix64).
    random: Cell<u64>,
    /// Volatile changes and the replies they hold, until the owner's next tick.
    pub volatile: crate::owner::volatile::VolatileTicks,
    /// The long-polling sessions this core holds (their edge).
    pub long_polls: crate::longpoll::session::Registry,
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
        let strict = config.persist.durability == crate::persist::Durability::Strict;
        let gate = match &store {
            Some(store) => Gate::new(strict, store.durable_seq()),
            None => Gate::open(),
        };
        // The standard library seeds every `RandomState` from the operating system's
        // randomness: enough to make push ids unpredictable without another dependency.
        let mut seed = std::collections::hash_map::RandomState::new().build_hasher();
        seed.write_u64(now_ms());
        seed.write_usize(index);
        let ws_budget = ShardBudget::new(config.http.clone());
        Shard {
            index,
            shard_count: peers.len(),
            config,
            databases: RefCell::new(HashMap::new()),
            store,
            gate: Rc::new(gate),
            ws_budget,
            conns: RefCell::new(FxHashMap::default()),
            edge_conns: RefCell::new(FxHashMap::default()),
            outgoing: Rc::new(Outgoing::new(edges)),
            owner_room: (0..peers.len())
                .map(|_| Arc::new(Semaphore::new(MAX_LINK_BYTES)))
                .collect(),
            streams: RefCell::new(FxHashMap::default()),
            sessions: RefCell::new(HashMap::new()),
            next_conn: Cell::new(1),
            counters: Rc::new(ShardCounters::default()),
            observer,
            shutdown,
            peers,
            push_ids: RefCell::new(PushIdGenerator::new()),
            random: Cell::new(seed.finish()),
            volatile: Default::default(),
            long_polls: Default::default(),
        }
    }

    /// A new session id, unique in the server: the shards' sequences interleave, so that an
    /// owner can key the sessions of connections held by every core by their id.
    pub fn next_conn_id(&self) -> ConnId {
        let id = self.next_conn.get();
        self.next_conn.set(id + 1);
        id * self.shard_count.max(1) as u64 + self.index as u64
    }

    /// The database of `namespace`: loaded from its snapshot if it was evicted, created on
    /// first use.
    pub fn database<'a>(
        &self,
        databases: &'a mut HashMap<String, Loaded>,
        namespace: &str,
    ) -> &'a mut Loaded {
        let now = now_ms();
        let loaded = match databases.entry(namespace.to_owned()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                let loaded = crate::persist::load_evicted(self, namespace, now)
                    .unwrap_or_else(|| self.new_database(namespace, now));
                entry.insert(loaded)
            }
        };
        loaded.last_used_ms = now;
        loaded
    }

    /// The database of `namespace` if it exists, in memory or on disk (then it is loaded):
    /// for reads, which must not make a database of a mistyped name.
    pub fn existing_database<'a>(
        &self,
        databases: &'a mut HashMap<String, Loaded>,
        namespace: &str,
    ) -> Option<&'a mut Loaded> {
        let now = now_ms();
        let loaded = match databases.entry(namespace.to_owned()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                entry.insert(crate::persist::load_evicted(self, namespace, now)?)
            }
        };
        loaded.last_used_ms = now;
        Some(loaded)
    }

    /// Adds the databases recovered from the store at start.
    pub fn add_recovered(
        &self,
        recovered: std::collections::BTreeMap<Arc<str>, hearth_store::RecoveredDatabase>,
    ) {
        let now = now_ms();
        let mut databases = self.databases.borrow_mut();
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
        loaded.seq.set(self.gate.durable());
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
        // In development the log says which rule refused a request, where in the rules.
        if self.config.dev {
            loaded
                .engine
                .explain_refusals(Some(Arc::from(&*loaded.name)));
        }
        loaded.rules = text;
        if let Some(reason) = self.store.as_ref().and_then(ShardStore::failure) {
            loaded
                .engine
                .set_read_only(Some(Arc::from(read_only_reason(&reason))));
        }
    }

    /// The tagger for the outbound queue of a client of `namespace`.
    pub fn tagger(&self, namespace: &str) -> Tagger {
        let mut databases = self.databases.borrow_mut();
        let loaded = self.database(&mut databases, namespace);
        Tagger {
            gate: self.gate.clone(),
            database_seq: loaded.seq.clone(),
        }
    }

    /// Sends an applied write to the log.
    pub fn log_write(&self, namespace: &str, write: &Write) {
        self.counters.write_applied();
        let logged = self.log(namespace, RecordRef::Write(write));
        if let Some(seq) = logged.filter(|_| self.gate.is_strict()) {
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
        let mut databases = self.databases.borrow_mut();
        let loaded = databases.get_mut(namespace)?;
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
        let store = self.store.as_ref()?;
        match store.log(loaded, body) {
            Ok(()) => Some(loaded.seq.get()),
            Err(error) => {
                drop(databases);
                crate::persist::report_failure(self, error.to_string());
                None
            }
        }
    }

    /// The sequence number a REST answer about `namespace` must wait for.
    pub fn required_seq(&self, namespace: &str) -> u64 {
        let databases = self.databases.borrow();
        databases
            .get(namespace)
            .map_or(0, |loaded| self.gate.tag(loaded.seq.get()))
    }

    /// Registers `handle`, a new session of one of this core's databases.
    pub fn add_session(&self, handle: Rc<ConnHandle>) {
        self.sessions
            .borrow_mut()
            .insert(handle.session_id.clone(), handle.id);
        self.conns.borrow_mut().insert(handle.id, handle);
    }

    /// Forgets the session `handle`; `false` when it was already gone.
    pub fn remove_session(&self, handle: &ConnHandle) -> bool {
        if self.conns.borrow_mut().remove(&handle.id).is_none() {
            return false;
        }
        self.sessions.borrow_mut().remove(&handle.session_id);
        true
    }

    /// The session whose secret id is `session_id`, if it is open.
    pub fn session_by_secret(&self, session_id: &str) -> Option<Rc<ConnHandle>> {
        let conn = self.sessions.borrow().get(session_id).copied()?;
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

    /// The session `id` of one of this core's databases.
    pub fn session(&self, id: ConnId) -> Option<Rc<ConnHandle>> {
        self.conns.borrow().get(&id).cloned()
    }

    /// Registers a connection or event stream `id` this core holds for a database another
    /// core owns.
    pub fn hold(&self, id: ConnId, target: EdgeTarget) {
        self.counters.held_for_other();
        self.edge_conns.borrow_mut().insert(id, target);
    }

    /// The connections and streams this core holds for other cores' databases, by id.
    pub fn edge_conns(&self) -> Ref<'_, FxHashMap<ConnId, EdgeTarget>> {
        self.edge_conns.borrow()
    }

    /// A connection this core held for another core's database ended; its owner is told.
    pub fn release_connection(&self, id: ConnId, owner: usize) {
        self.edge_conns.borrow_mut().remove(&id);
        self.send_to_owner(owner, ToOwner::Closed { conn: id });
    }

    /// Sends `message` to the owner role of shard `owner`. Nothing is lost but at shutdown,
    /// when that shard may be gone with its sessions.
    pub fn send_to_owner(&self, owner: usize, message: ToOwner) {
        if let Some(sender) = self.peers.get(owner) {
            let _ = sender.send(ShardMessage::Owner(message));
        }
    }

    /// Room for `bytes` of messages in flight to `owner`: waits while the owner is behind by
    /// [`MAX_LINK_BYTES`]. `None` when the owner is gone (shutdown).
    pub async fn owner_room(&self, owner: usize, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let room = self.owner_room.get(owner)?.clone();
        // Never more than the whole room, so that a message larger than it still passes alone.
        let bytes = bytes.clamp(1, MAX_LINK_BYTES) as u32;
        room.acquire_many_owned(bytes).await.ok()
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
    pub fn forward_long_poll(&self, home: usize, forwarded: crate::longpoll::request::Forwarded) {
        if let Some(sender) = self.peers.get(home) {
            let _ = sender.send(ShardMessage::LongPoll(Box::new(forwarded)));
        }
    }

    /// The shard's numbers for a scrape, taken now on its thread; `inbox` is the count of
    /// messages waiting in its inbox.
    pub fn metrics_snapshot(&self, inbox: usize) -> ShardSnapshot {
        let runtime = tokio::runtime::Handle::current().metrics();
        let databases = self.databases.borrow();
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
            websocket_sessions: self.conns.borrow().len(),
            event_streams: self.streams.borrow().len(),
            databases_loaded: databases.len(),
            busy: (0..runtime.num_workers())
                .map(|worker| runtime.worker_total_busy_duration(worker))
                .sum(),
            inbox_messages: inbox,
            runtime_queue: runtime.global_queue_depth(),
            link_bytes_to_owners: self
                .owner_room
                .iter()
                .map(|room| MAX_LINK_BYTES.saturating_sub(room.available_permits()))
                .sum(),
            link_bytes_to_edges: self.outgoing.unwritten_bytes(),
            read_only: self
                .store
                .as_ref()
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
    pub fn ask_cut(
        &self,
        index: usize,
    ) -> oneshot::Receiver<Result<crate::backup::cut::ShardCut, String>> {
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
        let mut streams: Vec<Rc<StreamHandle>> = self.streams.borrow().values().cloned().collect();
        streams.extend(
            self.edge_conns
                .borrow()
                .values()
                .filter_map(|target| match target {
                    EdgeTarget::Stream(stream) => Some(stream.clone()),
                    EdgeTarget::Socket(_) => None,
                }),
        );
        for stream in streams {
            stream.close();
        }
    }

    /// Waits, boundedly, for the connections of this shard to finish closing.
    pub async fn drain(&self, limit: Duration) {
        self.close_all_streams();
        let deadline = tokio::time::Instant::now() + limit;
        while (!self.conns.borrow().is_empty()
            || !self.streams.borrow().is_empty()
            || !self.edge_conns.borrow().is_empty())
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
        let first = shard.next_push_id(1_000);
        let second = shard.next_push_id(1_000);
        let third = shard.next_push_id(999);
        assert!(first < second && second < third);
        assert_eq!(first.len(), hearth_wire::PUSH_ID_LEN);
    }

    #[test]
    fn push_ids_of_two_shards_differ() {
        let a = shard().next_push_id(5);
        let b = shard().next_push_id(5);
        assert_eq!(a[..8], b[..8]);
        assert_ne!(a, b);
    }
}
