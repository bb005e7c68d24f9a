//! The outbox of the declared triggers (docs/triggers.md): the events their writes made,
//! taken from the log once durable (and on the follower, in a cluster), kept in files until
//! their receiver confirms each, delivered at least once and in order per database.
//!
//! One thread writes the files (`writer`): it takes the events the shards release, skipping
//! those it already has (the log hands every event it holds over again at a start), syncs
//! them before the log drops the segments that carried them (`sync`), writes how far each
//! receiver confirmed, and drops confirmed heads. One thread per trigger delivers (`deliver`):
//! the oldest unconfirmed event of each database in turn, retried with backoff, into the
//! dead letters after `maxAttempts`. A slow or absent receiver never holds a write back: its
//! files grow, up to [`MAX_OUTBOX_BYTES`] per trigger, past which new events are dropped and
//! counted.

pub mod dead;
mod deliver;
pub mod files;
mod status;
mod writer;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use tracing::error;

use crate::declared::Declared;
pub use dead::{DeadLetter, DeadLetters};
use files::EventsFile;

/// The most bytes of unconfirmed events one trigger keeps: past this, new events are dropped,
/// counted and logged (the receiver has been away for long).
pub const MAX_OUTBOX_BYTES: u64 = 1024 * 1024 * 1024;

/// How often the writer writes confirmed positions and drops confirmed heads.
const TICK: Duration = Duration::from_millis(200);

/// One event a shard hands over: the text of its log record (`TRIGGER\nID\nEVENT`).
#[derive(Debug, Clone)]
pub struct Handed {
    pub database: Arc<str>,
    pub seq: u64,
    pub text: Arc<str>,
}

/// The record text of one event.
pub fn record_text(trigger: &str, id: &str, event: &str) -> String {
    format!("{trigger}\n{id}\n{event}")
}

/// The id a confirmation record carries in place of an event's (`TRIGGER\n-\nID`: the
/// owner's receiver confirmed the database's events through ID).
const CONFIRMED: &str = "-";

/// The record text saying that `trigger`'s receiver confirmed its database's events through
/// `id`: the owner logs it for its followers, whose outboxes drop those events.
pub fn confirmation_text(trigger: &str, id: &str) -> String {
    format!("{trigger}\n{CONFIRMED}\n{id}")
}

/// The id of the record that opens a trigger's events in a full copy of a database
/// (`TRIGGER\n=\n`): a follower's outbox drops what it kept of the database for that
/// trigger, and keeps the events of the copy that follow, the owner's unconfirmed ones
/// ([`Outbox::unconfirmed`]). A follower caught up by a copy then holds what a failover must
/// deliver, not only the events of the writes after it.
const COPY_RESET: &str = "=";

/// How long a shard waits for the writer to read the unconfirmed events of a database it
/// copies to a follower; past it the copy goes without them (the follower keeps its own),
/// and so do the copies of the next [`UNCONFIRMED_PAUSE`] (a writer that slow is stuck on
/// its disk: a shard copying many databases must not wait for each).
const UNCONFIRMED_WAIT: Duration = Duration::from_secs(2);

/// See [`UNCONFIRMED_WAIT`].
const UNCONFIRMED_PAUSE: Duration = Duration::from_secs(60);

/// What a log record takes beside its text (its header, the database's name, padding),
/// counted against a copy's room.
pub const RECORD_OVERHEAD: u64 = 64 + 256;

/// What each trigger counts.
#[derive(Debug, Default)]
pub struct TriggerCounters {
    pub taken: AtomicU64,
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    /// Events moved to the dead letters since the start.
    pub dead: AtomicU64,
    /// Dead letters held now (sent again or dropped ones leave).
    pub dead_held: AtomicU64,
    pub dropped: AtomicU64,
}

/// The files and counters of one trigger.
pub(crate) struct TriggerState {
    declared: Mutex<Arc<Declared>>,
    pub(crate) dir: PathBuf,
    pub(crate) dead: Mutex<DeadLetters>,
    /// Held through an operator's retry or drop of the dead letters, so that one never
    /// removes by position what the other changed (delivery threads only append, under
    /// `dead`).
    operating: Mutex<()>,
    pub(crate) counters: TriggerCounters,
    /// Woken when events arrive or a database is owned here again.
    pub(crate) wake: Condvar,
    /// No longer declared: its files stay, nothing is taken or delivered.
    pub(crate) retired: AtomicBool,
    /// Moves on when its delivery thread is replaced (a new declaration): the old one ends.
    pub(crate) thread: AtomicU64,
}

impl TriggerState {
    fn new(declared: Arc<Declared>, dir: PathBuf) -> TriggerState {
        let dead = DeadLetters::new(&dir);
        let counters = TriggerCounters::default();
        counters.dead_held.store(dead.count(), Ordering::Relaxed);
        TriggerState {
            declared: Mutex::new(declared),
            dir,
            dead: Mutex::new(dead),
            operating: Mutex::new(()),
            counters,
            wake: Condvar::new(),
            retired: AtomicBool::new(false),
            thread: AtomicU64::new(0),
        }
    }

    /// Its declaration now.
    pub(crate) fn declared(&self) -> Arc<Declared> {
        self.declared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    pub(crate) fn is_live(&self) -> bool {
        !self.retired.load(Ordering::Relaxed)
    }
}

pub(crate) struct Shared {
    /// `DATA_DIR/triggers`: a directory per trigger.
    dir: PathBuf,
    /// Every trigger declared since the start, by index (a retired one keeps its place, so
    /// that the files' keys stay valid).
    triggers: RwLock<Vec<Arc<TriggerState>>>,
    /// Every events file, by trigger (its index) and database.
    pub(crate) files: Mutex<BTreeMap<(usize, Arc<str>), EventsFile>>,
    pub(crate) stopping: std::sync::atomic::AtomicBool,
    /// An append failed since the start: syncs answer `false` until the next.
    pub(crate) broken: std::sync::atomic::AtomicBool,
    /// The databases this node follows (their owner is another node), as last told.
    followed: Mutex<std::collections::HashMap<Arc<str>, bool>>,
    /// In a cluster a database is followed until this node is told it owns it (at a start,
    /// the log hands over events this node may no longer own).
    clustered: bool,
    /// Until when (ms) full copies carry no events: a read of them timed out.
    unconfirmed_paused_until: AtomicU64,
}

/// A new trigger's directory, and the events files an earlier declaration of it left there.
type Prepared = (PathBuf, Vec<(Arc<str>, EventsFile)>);

/// Every events file, by trigger (its index) and database.
pub(crate) type FilesMap = BTreeMap<(usize, Arc<str>), EventsFile>;

impl Shared {
    /// The trigger at `index`.
    pub(crate) fn trigger(&self, index: usize) -> Arc<TriggerState> {
        self.all()[index].clone()
    }

    /// Every trigger, retired ones included.
    pub(crate) fn all(&self) -> Vec<Arc<TriggerState>> {
        self.triggers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The declared triggers, with their indexes.
    pub(crate) fn live(&self) -> Vec<(usize, Arc<TriggerState>)> {
        self.all()
            .into_iter()
            .enumerate()
            .filter(|(_, t)| t.is_live())
            .collect()
    }

    pub(crate) fn files(&self) -> MutexGuard<'_, BTreeMap<(usize, Arc<str>), EventsFile>> {
        self.files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether this node follows `database`: as last told, else in a cluster until told.
    pub(crate) fn follows(&self, database: &str) -> bool {
        self.followed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(database)
            .copied()
            .unwrap_or(self.clustered)
    }

    pub(crate) fn note_following(&self, database: &Arc<str>, following: bool) {
        self.followed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(database.clone(), following);
    }
}

enum Job {
    Take(Vec<Handed>),
    Sync(Sender<bool>),
    Ownership {
        database: Arc<str>,
        following: bool,
    },
    Again {
        trigger: usize,
        letters: Vec<DeadLetter>,
        done: Sender<std::io::Result<()>>,
    },
    Unconfirmed {
        database: Arc<str>,
        budget: u64,
        done: Sender<Option<Vec<String>>>,
    },
}

/// The outbox: cloned into every shard.
#[derive(Clone)]
pub struct Outbox {
    shared: Arc<Shared>,
    jobs: Sender<Job>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("triggers", &self.shared.live().len())
            .finish()
    }
}

impl Outbox {
    /// Opens the outbox in `dir` (`DATA_DIR/triggers`) for `declared`, and starts its
    /// threads. Files of a trigger no longer declared are left alone.
    /// In a cluster (`clustered`), no database's events are delivered until its owner here
    /// says it owns it (`set_following`).
    pub fn open(
        dir: &Path,
        declared: &[Arc<Declared>],
        clustered: bool,
    ) -> std::io::Result<Outbox> {
        std::fs::create_dir_all(dir)?;
        let shared = Arc::new(Shared {
            dir: dir.to_owned(),
            triggers: RwLock::new(Vec::new()),
            files: Mutex::new(BTreeMap::new()),
            stopping: false.into(),
            broken: false.into(),
            followed: Mutex::default(),
            clustered,
            unconfirmed_paused_until: AtomicU64::new(0),
        });
        let (jobs, receiver) = mpsc::channel();
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("hearth-outbox".into())
            .spawn(move || writer::write_all(&writer, &receiver))?;
        let outbox = Outbox { shared, jobs };
        outbox.declare(declared)?;
        Ok(outbox)
    }

    /// Makes `declared` the triggers delivered from now on: a trigger of a new name starts
    /// (with the files an earlier declaration of it left), one declared again with changes
    /// goes on from its files with a new delivery thread, and one left out stops (its files
    /// stay for a later declaration of the same name).
    pub fn declare(&self, declared: &[Arc<Declared>]) -> std::io::Result<()> {
        let shared = &self.shared;
        // First what may fail, with nothing changed yet: the directory of each new name and
        // the files an earlier declaration of it left.
        let known: Vec<Arc<str>> = shared
            .all()
            .iter()
            .map(|t| t.declared().trigger.name.clone())
            .collect();
        let mut prepared: HashMap<Arc<str>, Prepared> = HashMap::new();
        for declared in declared {
            let name = &declared.trigger.name;
            if known.contains(name) {
                continue;
            }
            let dir = shared.dir.join(&**name);
            std::fs::create_dir_all(&dir)?;
            let mut opened = Vec::new();
            for entry in std::fs::read_dir(&dir)? {
                let file = entry?.file_name();
                let Some(database) = file.to_str().and_then(|n| n.strip_suffix(".events")) else {
                    continue;
                };
                let mut events = EventsFile::open(&dir, database)?;
                events.following = shared.follows(database);
                opened.push((Arc::from(database), events));
            }
            prepared.insert(name.clone(), (dir, opened));
        }
        // Then the change, which cannot fail.
        let mut triggers = shared
            .triggers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut start = Vec::new();
        let mut opened = Vec::new();
        for declared in declared {
            let name = &declared.trigger.name;
            let index = match triggers
                .iter()
                .position(|t| &t.declared().trigger.name == name)
            {
                Some(index) => {
                    let state = &triggers[index];
                    let same = state.is_live() && *state.declared() == **declared;
                    if same {
                        continue;
                    }
                    *state.declared.lock().unwrap_or_else(|p| p.into_inner()) = declared.clone();
                    state.retired.store(false, Ordering::Relaxed);
                    index
                }
                None => {
                    let Some((dir, files)) = prepared.remove(name) else {
                        continue;
                    };
                    let index = triggers.len();
                    // Put in the map once the list's lock is let go (the writer takes the
                    // map's lock first).
                    opened.extend(files.into_iter().map(|(db, f)| ((index, db), f)));
                    triggers.push(Arc::new(TriggerState::new(declared.clone(), dir)));
                    index
                }
            };
            start.push(index);
        }
        for (index, state) in triggers.iter().enumerate() {
            let kept = declared
                .iter()
                .any(|d| d.trigger.name == state.declared().trigger.name);
            if !kept && state.is_live() {
                tracing::info!(trigger = %state.declared().trigger.name, index, "trigger no longer declared");
                state.retired.store(true, Ordering::Relaxed);
                state.thread.fetch_add(1, Ordering::Relaxed);
                state.wake.notify_all();
            }
        }
        drop(triggers);
        {
            let mut files = shared.files();
            for (key, events) in opened {
                files.entry(key).or_insert(events);
            }
        }
        for index in start {
            let state = shared.trigger(index);
            let generation = state.thread.fetch_add(1, Ordering::Relaxed) + 1;
            state.wake.notify_all();
            let delivering = shared.clone();
            std::thread::Builder::new()
                .name(format!("hearth-trigger-{index}"))
                .spawn(move || deliver::run(&delivering, index, generation))?;
        }
        Ok(())
    }

    /// Takes events released by a shard (durable, and on the followers).
    pub fn take(&self, events: Vec<Handed>) {
        if !events.is_empty() && self.jobs.send(Job::Take(events)).is_err() {
            error!("the trigger outbox is gone: events not kept");
        }
    }

    /// Syncs every event taken so far to disk; `false` if it could not (the log must then
    /// keep the segments that hold them).
    pub fn sync(&self) -> bool {
        let (done, wait) = mpsc::channel();
        if self.jobs.send(Job::Sync(done)).is_err() {
            return false;
        }
        wait.recv().unwrap_or(false)
    }

    /// What a full copy of `database` carries to its follower for the declared triggers:
    /// for each, a record text that tells the follower to drop what it kept, then those
    /// (`TRIGGER\nID\nEVENT`) of its events its receiver has not confirmed, in order, up to
    /// every event handed over before the call. `None` when they are more than `budget`
    /// bytes, or could not be read: the follower then keeps what it has.
    pub fn unconfirmed(&self, database: &str, budget: u64) -> Option<Vec<String>> {
        let now = now_ms();
        if now < self.shared.unconfirmed_paused_until.load(Ordering::Relaxed) {
            return None;
        }
        let (done, wait) = mpsc::channel();
        let job = Job::Unconfirmed {
            database: Arc::from(database),
            budget,
            done,
        };
        self.jobs.send(job).ok()?;
        match wait.recv_timeout(UNCONFIRMED_WAIT) {
            Ok(texts) => texts,
            Err(_) => {
                tracing::warn!(
                    database,
                    "the trigger outbox did not read the unconfirmed events in time: full copies carry none for a minute, their followers keep their own"
                );
                let until = now + UNCONFIRMED_PAUSE.as_millis() as u64;
                self.shared
                    .unconfirmed_paused_until
                    .store(until, Ordering::Relaxed);
                None
            }
        }
    }

    /// This node owns `database` (delivers its events) or only follows it (keeps them for a
    /// failover).
    pub fn set_following(&self, database: &str, following: bool) {
        let _ = self.jobs.send(Job::Ownership {
            database: Arc::from(database),
            following,
        });
    }

    /// The confirmations not yet told to the followers, of the databases `owned` admits
    /// (those this shard owns): `(trigger, database, id)`, each marked told.
    pub fn confirmations(&self, owned: impl Fn(&str) -> bool) -> Vec<(Arc<str>, Arc<str>, String)> {
        // A shard never waits for the outbox's threads (a sync or a compaction may hold the
        // files for long): busy now, the confirmations go at a later call.
        let mut files = match self.shared.files.try_lock() {
            Ok(files) => files,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Vec::new(),
        };
        let mut out = Vec::new();
        for ((trigger, database), file) in files.iter_mut() {
            if file.following || file.confirmed_id == file.reported_id || !owned(database) {
                continue;
            }
            if let Some(id) = &file.confirmed_id {
                let name = self
                    .shared
                    .trigger(*trigger)
                    .declared()
                    .trigger
                    .name
                    .clone();
                out.push((name, database.clone(), id.clone()));
            }
            file.reported_id.clone_from(&file.confirmed_id);
        }
        out
    }

    /// Counts an event of trigger `name` dropped before it reached the outbox.
    pub fn count_dropped(&self, name: &str) {
        if let Some(index) = self.index_of(name) {
            let trigger = self.shared.trigger(index);
            trigger.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The index of the declared trigger named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.shared
            .live()
            .into_iter()
            .find(|(_, t)| &*t.declared().trigger.name == name)
            .map(|(index, _)| index)
    }

    /// The dead letters of trigger `name`.
    pub fn dead_letters(&self, name: &str) -> Option<std::io::Result<Vec<DeadLetter>>> {
        let trigger = self.shared.trigger(self.index_of(name)?);
        let dead = trigger.dead.lock().unwrap_or_else(|p| p.into_inner());
        Some(dead.all())
    }

    /// Drops the dead letters of trigger `name`; how many.
    pub fn drop_dead_letters(&self, name: &str) -> Option<std::io::Result<u64>> {
        let trigger = self.shared.trigger(self.index_of(name)?);
        let _operating = trigger.operating.lock().unwrap_or_else(|p| p.into_inner());
        let dead = trigger.dead.lock().unwrap_or_else(|p| p.into_inner());
        let count = dead.count();
        Some(dead.clear().map(|()| {
            trigger.counters.dead_held.store(0, Ordering::Relaxed);
            count
        }))
    }

    /// Sends trigger `name`'s dead letters again: each goes back to the end of its database's
    /// events, on disk before it leaves the dead letters. Those of a database another node
    /// owns now stay (sent again here they would only be dropped by the owner's next
    /// confirmation): `(sent again, kept)`.
    pub fn retry_dead_letters(&self, name: &str) -> Option<std::io::Result<(u64, u64)>> {
        let index = self.index_of(name)?;
        let trigger = self.shared.trigger(index);
        let _operating = trigger.operating.lock().unwrap_or_else(|p| p.into_inner());
        // Read, and let go: the writer appends them, and `dead` is not held while it does (a
        // delivery thread may be adding a letter meanwhile, after these).
        let letters = {
            let dead = trigger.dead.lock().unwrap_or_else(|p| p.into_inner());
            match dead.all() {
                Ok(letters) => letters,
                Err(error) => return Some(Err(error)),
            }
        };
        let count = letters.len();
        let (kept, again): (Vec<DeadLetter>, Vec<DeadLetter>) = letters
            .into_iter()
            .partition(|letter| self.shared.follows(&letter.database));
        let sent = again.len() as u64;
        let (done, wait) = mpsc::channel();
        let job = Job::Again {
            trigger: index,
            letters: again,
            done,
        };
        if self.jobs.send(job).is_err() {
            return Some(Err(std::io::Error::other("the trigger outbox is gone")));
        }
        let result = wait
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the trigger outbox is gone")))
            .and_then(|()| {
                // The first `count`, in the order they were read, leave but those kept.
                let dead = trigger.dead.lock().unwrap_or_else(|p| p.into_inner());
                dead.replace_first(count, &kept)
            });
        if result.is_ok() {
            trigger.counters.dead_held.store(
                trigger
                    .dead
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .count(),
                Ordering::Relaxed,
            );
        }
        Some(result.map(|()| (sent, kept.len() as u64)))
    }

    /// Every trigger's state, for `/.admin/triggers` and `hearth triggers status`.
    pub fn status(&self, now_ms: u64) -> serde_json::Value {
        status::status(&self.shared, now_ms)
    }

    /// What `/metrics` shows of each trigger.
    pub fn metrics(&self, now_ms: u64) -> Vec<status::TriggerMetrics> {
        status::metrics(&self.shared, now_ms)
    }
}

pub use status::TriggerMetrics;

impl Drop for Shared {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "copy_tests.rs"]
mod copy_tests;
