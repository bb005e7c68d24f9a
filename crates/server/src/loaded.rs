//! A database as its shard holds it: the engine, and the bookkeeping that durability and
//! eviction need around it.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

use hearth_sync::Database;

use hearth_persist::{DatabaseFacts, DurableState, ShardStore};

/// A loaded database.
pub struct Loaded {
    pub name: Rc<str>,
    pub engine: Database,
    /// The sequence number of the database's last log record, shared with the outbound
    /// queues of its clients, which tag their messages with it.
    pub seq: Rc<Cell<u64>>,
    /// The database as of the durable position of the log: what a snapshot writes and what
    /// the database falls back to if the log fails.
    pub durable: DurableState,
    /// The rules text set through the API, as it is now (`None`: the server's default).
    pub rules: Option<std::sync::Arc<str>>,
    /// Log bytes written for this database since its last snapshot.
    pub wal_bytes: u64,
    /// When its last snapshot was taken (or when it was loaded).
    pub last_snapshot_ms: u64,
    pub snapshot_running: bool,
    /// When a request last touched it, for eviction.
    pub last_used_ms: u64,
    /// Whether anything of it is on disk (recovered, or a record was appended): a database
    /// that never was can be dropped without a snapshot.
    pub on_disk: bool,
    /// Whether its creation was logged (at its first write, whatever the durability).
    pub announced: bool,
    /// Read-only because this node's cluster claim does not allow writes (`cluster::fence`),
    /// as opposed to another reason (a failed load, the log), which the fence never clears.
    pub fenced: bool,
    /// The fencing epoch of this node's claim on it, set by the fence whenever it allows
    /// writes; its log records carry it. `None` outside a cluster: records then carry the
    /// epoch the log last had for the database (0 unless the directory was a cluster node's).
    pub epoch: Option<u64>,
    /// While this node hands the database over to its follower (`replica::hand_over`), the
    /// epoch of the claim it hands over: the fence refuses writes for as long as this node's
    /// claim is still at that epoch.
    pub moving: Option<u64>,
    /// Writes applied since it was loaded (for the metrics' busiest databases).
    pub writes: u64,
}

impl Loaded {
    pub fn new(name: Rc<str>, engine: Database, seq: u64, now_ms: u64) -> Loaded {
        let durable = DurableState {
            root: engine.root().clone(),
            rules: None,
        };
        Loaded {
            name,
            engine,
            seq: Rc::new(Cell::new(seq)),
            durable,
            rules: None,
            wal_bytes: 0,
            last_snapshot_ms: now_ms,
            snapshot_running: false,
            last_used_ms: now_ms,
            on_disk: false,
            announced: false,
            fenced: false,
            epoch: None,
            moving: None,
            writes: 0,
        }
    }

    /// Appends a record for it to `store`'s log, after its engine applied the change. If the
    /// log cannot take it, its last record becomes unreachable (`u64::MAX`), so its clients
    /// are held (the change is in memory but will never be durable) until the failure is
    /// handled; the caller reports the error.
    pub fn log_to(
        &mut self,
        store: &ShardStore,
        body: hearth_store::RecordRef<'_>,
    ) -> Result<(), hearth_store::StoreError> {
        match store.append(&self.name, self.epoch, body, self.state()) {
            Ok(appended) => {
                self.seq.set(appended.seq);
                self.wal_bytes += appended.bytes;
                self.on_disk = true;
                Ok(())
            }
            Err(error) => {
                self.seq.set(u64::MAX);
                Err(error)
            }
        }
    }

    /// A snapshot of it starts at `now`: returns the durable state it writes.
    pub fn begin_snapshot(&mut self, now: u64) -> DurableState {
        self.snapshot_running = true;
        self.wal_bytes = 0;
        self.last_snapshot_ms = now;
        // Volatile data lives in memory only (docs/volatile.md).
        let mut state = self.durable.clone();
        if let hearth_sync::Access::Rules(rules) = self.engine.access() {
            if rules.has_volatile() {
                state.root = rules.without_volatile(&state.root);
            }
        }
        state
    }

    /// Goes back to the durable state, at log position `durable`, because the log failed
    /// before its later writes reached the disk. Returns the rules text of that state, for
    /// the shard to apply again.
    pub fn roll_back(&mut self, durable: u64) -> Option<std::sync::Arc<str>> {
        self.engine = Database::with_root(self.durable.root.clone());
        self.seq.set(durable);
        self.durable.rules.clone()
    }

    /// What the durability pipeline decides from (see `hearth_persist::Pipeline`).
    pub fn facts<'a>(&self, name: &'a str, newest_snapshot: Option<u64>) -> DatabaseFacts<'a> {
        DatabaseFacts {
            name,
            seq: self.seq.get(),
            wal_bytes: self.wal_bytes,
            last_snapshot_ms: self.last_snapshot_ms,
            snapshot_running: self.snapshot_running,
            last_used_ms: self.last_used_ms,
            sessions: self.session_count(),
            on_disk: self.on_disk,
            newest_snapshot,
        }
    }

    /// The state to remember with a log record appended now.
    pub fn state(&self) -> DurableState {
        DurableState {
            root: self.engine.root().clone(),
            rules: self.rules.clone(),
        }
    }
}

impl Deref for Loaded {
    type Target = Database;

    fn deref(&self) -> &Database {
        &self.engine
    }
}

impl DerefMut for Loaded {
    fn deref_mut(&mut self) -> &mut Database {
        &mut self.engine
    }
}
