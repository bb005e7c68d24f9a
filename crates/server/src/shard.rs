//! A shard: one thread, one single-threaded runtime, and every database whose name hashes to
//! it. Nothing in a shard is shared with another thread; connections arrive on any shard's
//! listener and are handed to the owner once their request names the database.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use hearth_sync::{ConnId, Database, Effects};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info};

use crate::config::ServeConfig;
use crate::dispatch::route_effects;
use crate::http_head::Head;
use crate::namespace::NamespaceError;
use crate::outbound::{CloseReason, ConnHandle};
use crate::time::now_ms;

/// A connection on its way to the shard that owns its database.
pub struct Handoff {
    pub stream: std::net::TcpStream,
    pub head: Head,
    pub leftover: Vec<u8>,
    pub namespace: Result<String, NamespaceError>,
}

/// Plain per-shard counters, summed across shards when read.
#[derive(Debug, Default, Clone, Copy)]
pub struct ShardStats {
    pub connections_opened: u64,
    pub connections_handed_off: u64,
    pub messages_in: u64,
    pub log_records: u64,
}

pub struct Shard {
    pub index: usize,
    pub shard_count: usize,
    pub config: Rc<ServeConfig>,
    pub databases: RefCell<HashMap<String, Database>>,
    /// Rules documents set through `/.settings/rules.json`, by namespace (stored, not yet
    /// enforced).
    pub rules: RefCell<HashMap<String, String>>,
    pub conns: RefCell<HashMap<ConnId, Rc<ConnHandle>>>,
    sessions: RefCell<HashMap<String, ConnId>>,
    next_conn: Cell<u64>,
    pub stats: RefCell<ShardStats>,
    pub shutdown: watch::Receiver<bool>,
    pub handoffs: Vec<mpsc::UnboundedSender<Handoff>>,
    nonce: u64,
}

impl Shard {
    pub fn new(
        index: usize,
        config: Rc<ServeConfig>,
        shutdown: watch::Receiver<bool>,
        handoffs: Vec<mpsc::UnboundedSender<Handoff>>,
    ) -> Shard {
        Shard {
            index,
            shard_count: handoffs.len(),
            config,
            databases: RefCell::new(HashMap::new()),
            rules: RefCell::new(HashMap::new()),
            conns: RefCell::new(HashMap::new()),
            sessions: RefCell::new(HashMap::new()),
            next_conn: Cell::new(1),
            stats: RefCell::new(ShardStats::default()),
            shutdown,
            handoffs,
            nonce: now_ms(),
        }
    }

    /// Registers a new connection on `namespace`, creating the database on first use.
    pub fn open_connection(&self, namespace: &str) -> Rc<ConnHandle> {
        let id = self.next_conn.get();
        self.next_conn.set(id + 1);
        // Unique per process start, shard and connection, and URL-safe.
        let session_id = format!("h{:x}s{}c{}", self.nonce, self.index, id);
        let handle = Rc::new(ConnHandle::new(
            id,
            namespace.to_owned(),
            session_id.clone(),
        ));
        let mut databases = self.databases.borrow_mut();
        let database = databases.entry(namespace.to_owned()).or_insert_with(|| {
            info!(namespace, shard = self.index, "database created");
            Database::new()
        });
        database.connect(id);
        self.conns.borrow_mut().insert(id, handle.clone());
        self.sessions.borrow_mut().insert(session_id, id);
        self.stats.borrow_mut().connections_opened += 1;
        handle
    }

    /// Ends a connection's session: its listens go, and its onDisconnect queue runs now.
    /// Calling it twice is harmless.
    pub fn close_connection(&self, handle: &ConnHandle) {
        if self.conns.borrow_mut().remove(&handle.id).is_none() {
            return;
        }
        self.sessions.borrow_mut().remove(&handle.session_id);
        let mut effects = Effects::new();
        if let Some(database) = self.databases.borrow_mut().get_mut(&handle.namespace) {
            database.disconnect(handle.id, now_ms(), &mut effects);
        }
        route_effects(self, effects);
    }

    /// A client reconnected naming its previous session: if that socket still looks open
    /// (half-open TCP), end it now so that its onDisconnect queue runs before the new
    /// connection's requests.
    pub fn end_previous_session(&self, previous: &str) {
        let Some(conn) = self.sessions.borrow().get(previous).copied() else {
            return;
        };
        let Some(handle) = self.conns.borrow().get(&conn).cloned() else {
            return;
        };
        debug!(
            session = previous,
            "previous session replaced by a reconnect"
        );
        self.close_connection(&handle);
        handle.close(CloseReason::new(
            tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode::Away,
            "replaced by a newer connection of the same client",
        ));
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Sends a connection whose database lives elsewhere to its owner.
    pub fn hand_off(
        &self,
        owner: usize,
        stream: TcpStream,
        head: Head,
        leftover: Vec<u8>,
        namespace: Result<String, NamespaceError>,
    ) {
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => {
                debug!(%error, "could not detach a connection for hand-off");
                return;
            }
        };
        self.stats.borrow_mut().connections_handed_off += 1;
        if let Some(sender) = self.handoffs.get(owner) {
            let _ = sender.send(Handoff {
                stream,
                head,
                leftover,
                namespace,
            });
        }
    }

    /// Waits, boundedly, for the connections of this shard to finish closing.
    pub async fn drain(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.conns.borrow().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
