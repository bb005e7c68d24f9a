//! A seeded random simulation of the durability pipeline.
//!
//! It runs the shard's real pieces without threads, sockets or clocks: the engine
//! (`Database`), the log writer and snapshot catalog of a [`ShardStore`] on the store's
//! fault-injecting storage, the gate and the held queues, and the [`hearth_persist::Pipeline`] that
//! decides. Where the runtime awaits a blocking thread, the simulation holds the job and
//! finishes it at a random later step, so writes, batches, snapshots, ticks, sessions and
//! injected disk failures interleave in every order the runtime allows. After every step it
//! checks the promises of decisions 19-25 of ARCHITECTURE.md, and at the end it builds the
//! disk a power loss would leave and recovers it.
//!
//! `cargo test -p hearth-server sim` runs [`FIXED_SEEDS`] seeds; `SIM_SEEDS=<count>` runs
//! that many; `SEED=<n>` replays one. A failure names its seed.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use hearth_store::{
    open, open_lazily, read_snapshot, remove_files, snapshot_name, write_database_snapshot, Batch,
    Fault, FaultPoint, FaultRule, FaultStorage, RecordRef, SnapshotPolicy, SplitMix64, WalOptions,
};
use hearth_sync::{ConnId, Database, Effect, Effects, WriteTarget};
use hearth_tree::{Leaf, Node, Path};
use serde_json::json;

use super::commit::release_durable;
use super::failure::roll_back_databases;
use crate::loaded::Loaded;
use hearth_persist::{
    Chore, Durability, DurableState, Gate, HeldQueue, Opened, PersistConfig, Release, ShardStorage,
    ShardStore, Tagger,
};

#[path = "sim_checks.rs"]
mod checks;

/// Seeds that `cargo test` runs.
const FIXED_SEEDS: u64 = 48;

/// Steps of one run.
const STEPS: usize = 600;

/// Databases of the simulated shard.
const DATABASES: [&str; 4] = ["alpha", "beta", "gamma", "delta"];

/// Small segments, so that rollovers and truncation happen within a run.
const SEGMENT_BYTES: u64 = 4096;

/// Snapshot triggers scaled to the simulated clock (milliseconds advance by up to two seconds
/// a tick: several snapshots of each database per run).
const POLICY: SnapshotPolicy = SnapshotPolicy {
    wal_bytes_max: 1024,
    age_ms_max: 10_000,
    interval_ms_min: 1_000,
};

const EVICT_IDLE_MS: u64 = 5_000;

/// The store's seeded generator, with the draws the simulation makes.
struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        items.get(self.below(items.len() as u64) as usize)
    }
}

/// A client of one database: its held queue, as a WebSocket connection has.
struct Client {
    database: String,
    queue: HeldQueue<Bytes>,
}

/// What the simulation remembers of one database, across evictions.
#[derive(Default)]
struct History {
    /// The log sequence number of write `k` (the write that set the counter to `k + 1`).
    seqs: Vec<u64>,
    /// The highest counter any client was sent (an acknowledgement or a push).
    released: u64,
    /// The counter when the database left memory.
    evicted_at: Option<u64>,
}

impl History {
    /// The counter after every write up to log position `seq`.
    fn counter_at(&self, seq: u64) -> u64 {
        self.seqs.iter().take_while(|&&s| s <= seq).count() as u64
    }
}

/// A snapshot handed to a "blocking thread".
struct SnapshotJob {
    name: String,
    covered: u64,
    state: DurableState,
}

/// What a run exercised, so that a change that makes the simulation stop reaching a path
/// (no failures, no evictions) fails the test instead of passing it emptily.
#[derive(Debug, Default, Clone, Copy)]
struct Reached {
    batches: u64,
    released: u64,
    failures: u64,
    rolled_back: u64,
    snapshots: u64,
    segments_removed: u64,
    evictions: u64,
    reloads: u64,
}

impl Reached {
    fn add(&mut self, other: Reached) {
        self.batches += other.batches;
        self.released += other.released;
        self.failures += other.failures;
        self.rolled_back += other.rolled_back;
        self.snapshots += other.snapshots;
        self.segments_removed += other.segments_removed;
        self.evictions += other.evictions;
        self.reloads += other.reloads;
    }
}

struct Sim {
    seed: u64,
    reached: Reached,
    rng: Rng,
    now: u64,
    storage: Arc<FaultStorage>,
    store: ShardStore,
    gate: Rc<Gate>,
    databases: HashMap<String, Loaded>,
    clients: HashMap<ConnId, Client>,
    next_conn: ConnId,
    history: HashMap<String, History>,
    batch: Option<Batch<ShardStorage>>,
    snapshots: Vec<SnapshotJob>,
    /// The durable position when the log failed.
    failed_at: Option<u64>,
    last_durable: u64,
}

fn counter(root: &Node) -> u64 {
    let path = Path::parse("/n").unwrap_or_else(|_| Path::root());
    match root.get(&path).leaf_value() {
        Some(Leaf::Number(n)) => *n as u64,
        _ => 0,
    }
}

fn message(database: &str, k: u64) -> Bytes {
    Bytes::from(format!("{database} {k}"))
}

fn parse_message(bytes: &[u8]) -> (String, u64) {
    let text = String::from_utf8_lossy(bytes);
    let (database, k) = text.split_once(' ').unwrap_or(("", "0"));
    (database.to_owned(), k.parse().unwrap_or(0))
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let storage = Arc::new(FaultStorage::new());
        let shard_storage = Arc::new(ShardStorage::Faults(storage.clone()));
        let recovered = open(
            shard_storage.clone(),
            WalOptions {
                segment_bytes: SEGMENT_BYTES,
            },
        )
        .expect("an empty storage opens");
        let config = PersistConfig {
            durability: Durability::Strict,
            snapshots: POLICY,
            evict_idle: Some(std::time::Duration::from_millis(EVICT_IDLE_MS)),
            ..PersistConfig::default()
        };
        let (store, _) = ShardStore::new(
            Opened {
                storage: shard_storage,
                recovered,
            },
            config,
        );
        let gate = Rc::new(Gate::new(true, store.durable_seq()));
        Sim {
            seed,
            reached: Reached::default(),
            rng: Rng(SplitMix64(seed)),
            now: 1_000_000,
            storage,
            store,
            gate,
            databases: HashMap::new(),
            clients: HashMap::new(),
            next_conn: 1,
            history: HashMap::new(),
            batch: None,
            snapshots: Vec::new(),
            failed_at: None,
            last_durable: 0,
        }
    }

    fn run(&mut self) -> Reached {
        // Half of the seeds run into a disk failure at some point.
        let fault_step = self
            .rng
            .chance(50)
            .then(|| self.rng.below(STEPS as u64) as usize);
        for step in 0..STEPS {
            if Some(step) == fault_step {
                self.inject_fault();
            }
            match self.rng.below(100) {
                0..=29 => self.write(),
                30..=36 => self.connect(),
                37..=46 => self.disconnect(),
                47..=59 => self.commit_turn(),
                60..=74 => self.finish_batch(),
                75..=84 => self.drain(),
                85..=92 => self.tick(),
                93..=97 => self.finish_snapshot(),
                _ => {
                    let crash_seed = self.rng.0.next();
                    self.check_crash(crash_seed);
                }
            }
            self.check_gate();
        }
        self.settle();
        self.check_crash(self.seed);
        self.reached
    }

    fn database_name(&mut self) -> String {
        let index = self.rng.below(DATABASES.len() as u64) as usize;
        DATABASES[index].to_owned()
    }

    /// The database `name`, loaded from its snapshot if it was evicted (as
    /// `Owner::with_database` does).
    fn database(&mut self, name: &str) -> &mut Loaded {
        if !self.databases.contains_key(name) {
            let loaded = self.load(name);
            self.databases.insert(name.to_owned(), loaded);
        }
        let now = self.now;
        let loaded = self.databases.get_mut(name).expect("just loaded");
        loaded.touched(now);
        loaded
    }

    fn load(&mut self, name: &str) -> Loaded {
        let newest = self.store.newest_snapshot(name);
        let mut loaded = match newest {
            Some(covered) => {
                let snapshot =
                    read_snapshot(&**self.store.storage(), &snapshot_name(name, covered))
                        .unwrap_or_else(|error| panic!("the snapshot of {name} reads: {error}"));
                let mut loaded = Loaded::new(
                    Rc::from(name),
                    Database::with_root(snapshot.root),
                    covered,
                    self.now,
                );
                loaded.loaded_from_disk();
                loaded
            }
            None => Loaded::new(
                Rc::from(name),
                Database::new(),
                self.gate.durable(),
                self.now,
            ),
        };
        let history = self.history.entry(name.to_owned()).or_default();
        if let Some(before) = history.evicted_at.take() {
            self.reached.reloads += 1;
            assert_eq!(
                counter(loaded.root()),
                before,
                "{name} comes back from eviction with the data it left with"
            );
        }
        if let Some(reason) = self.store.failure() {
            loaded.set_read_only(Some(Arc::from(reason)));
        }
        loaded
    }

    fn connect(&mut self) {
        let name = self.database_name();
        let id = self.next_conn;
        self.next_conn += 1;
        let gate = self.gate.clone();
        let loaded = self.database(&name);
        loaded.connect(id);
        let tagger = Tagger {
            gate,
            database_seq: loaded.shared_seq(),
        };
        self.clients.insert(
            id,
            Client {
                database: name,
                queue: HeldQueue::new(id, tagger),
            },
        );
    }

    fn disconnect(&mut self) {
        let ids: Vec<ConnId> = self.clients.keys().copied().collect();
        let Some(&id) = self.rng.pick(&ids) else {
            return;
        };
        if let Some(client) = self.clients.remove(&id) {
            let mut effects = Effects::new();
            if let Some(loaded) = self.databases.get_mut(&client.database) {
                loaded.disconnect(id, self.now, &mut effects);
            }
        }
    }

    /// An admin write of the next counter value, as a REST request or a connection makes it:
    /// the engine applies it, the log record is appended, then the acknowledgement and the
    /// pushes are queued, tagged with the record.
    fn write(&mut self) {
        let name = self.database_name();
        let k = self.history.get(&name).map_or(0, |h| h.seqs.len() as u64) + 1;
        let now = self.now;
        let target = WriteTarget::parse("/n").expect("a valid path");
        let mut effects = Effects::new();
        self.database(&name);
        let Some(loaded) = self.databases.get_mut(&name) else {
            return;
        };
        let refused = loaded
            .put(&target, &json!(k), None, now, &mut effects)
            .is_err();
        let handled = self.store.failure_handled();
        if refused {
            // A database loaded after the failure is read-only at once (`apply_rules`).
            assert!(
                self.store.failure().is_some(),
                "a write is refused only after a failure"
            );
            return;
        }
        assert!(!handled, "no write is accepted once a failure is handled");
        let body = effects.iter().find_map(|effect| match effect {
            Effect::Log(write) => Some(write.clone()),
            _ => None,
        });
        let Some(body) = body else {
            panic!("an applied write leaves a log record");
        };
        // As `Owner::log`: a refused append (the log failed) leaves the write in memory
        // with an unreachable tag, and reports the failure.
        let seq = match loaded.log_to(&self.store, RecordRef::Write(&body)) {
            Ok(()) => loaded.seq(),
            Err(_) => {
                self.report_failure();
                u64::MAX
            }
        };
        self.history.entry(name.clone()).or_default().seqs.push(seq);
        let bytes = message(&name, k);
        for client in self.clients.values() {
            if client.database == name {
                client.queue.push(std::slice::from_ref(&bytes));
            }
        }
    }

    fn start_batch(&mut self) {
        if self.batch.is_some() {
            return;
        }
        match self.store.prepare_batch() {
            Ok(batch) => self.batch = batch,
            Err(_) => assert!(
                self.store.failure().is_some(),
                "only a failed log refuses a batch"
            ),
        }
    }

    fn finish_batch(&mut self) {
        let Some(batch) = self.batch.take() else {
            return;
        };
        self.reached.batches += 1;
        let done = batch.execute();
        match self.store.complete_batch(done) {
            Ok(Release {
                durable,
                start_next,
            }) => {
                if start_next {
                    self.start_batch();
                }
                let woken = release_durable(
                    &self.store,
                    &mut self.databases,
                    &self.gate,
                    durable,
                    durable,
                );
                for id in woken {
                    if let Some(client) = self.clients.get(&id) {
                        client.queue.woken();
                    }
                }
            }
            Err(_) => self.report_failure(),
        }
    }

    /// What `report_failure` does: the store fails at once, holding every message that
    /// waits for a write not yet durable; the commit task handles the failure later.
    fn report_failure(&mut self) {
        if self.store.failure().is_none() {
            self.store.fail("injected".to_owned());
            self.failed_at = Some(self.store.synced_seq());
        }
    }

    /// A turn of the commit task: it handles a failure once, or hands a batch to the disk.
    fn commit_turn(&mut self) {
        if self.store.is_failed() {
            if self.store.take_failure_handling() {
                self.handle_failure();
            }
        } else {
            self.start_batch();
        }
    }

    /// What `handle_failure` does.
    fn handle_failure(&mut self) {
        let durable = self.store.synced_seq();
        assert_eq!(
            self.failed_at,
            Some(durable),
            "the position stopped at the failure"
        );
        self.reached.failures += 1;
        let read_only: Arc<str> = Arc::from("read-only");
        let rolled_back =
            roll_back_databases(&self.store, &mut self.databases, &read_only, |_, _| {});
        self.reached.rolled_back += rolled_back.len() as u64;
        for (name, loaded) in &self.databases {
            let history = &self.history.get(name.as_str());
            let on_disk = history.map_or(0, |h| h.counter_at(durable));
            let released = history.map_or(0, |h| h.released);
            assert!(
                released <= on_disk,
                "{name}: counter {released} was released but only {on_disk} is on disk"
            );
            // Whether rolled back or untouched, every database now holds exactly what is
            // on disk: no client can read a write that a crash would take away.
            assert_eq!(
                counter(loaded.root()),
                on_disk,
                "{name} holds what is on disk after the failure (rolled back: {})",
                rolled_back.contains(name)
            );
            assert!(
                loaded.seq() <= durable,
                "{name} has no write in flight after the failure"
            );
        }
        self.clients.retain(|_, client| {
            if rolled_back.contains(&client.database) {
                client.queue.discard_held();
                false
            } else {
                true
            }
        });
    }

    fn inject_fault(&mut self) {
        let point = if self.rng.chance(50) {
            FaultPoint::Write
        } else {
            FaultPoint::Sync
        };
        let fault = if self.rng.chance(50) {
            Fault::Io
        } else {
            Fault::NoSpace
        };
        self.storage.inject(FaultRule::once(point, fault));
    }

    /// A client reads what its queue lets through.
    fn drain(&mut self) {
        let durable = self.store.synced_seq();
        for client in self.clients.values() {
            while let Some(bytes) = client.queue.pop_ready() {
                let (name, k) = parse_message(&bytes);
                let history = self.history.entry(name.clone()).or_default();
                let seq = history.seqs[k as usize - 1];
                assert!(
                    seq <= durable,
                    "{name}: write {k} (record {seq}) was released with the log durable only to {durable}"
                );
                if let Some(failed) = self.failed_at {
                    assert!(
                        seq <= failed,
                        "{name}: write {k} was released after the failure"
                    );
                }
                history.released = history.released.max(k);
                self.reached.released += 1;
            }
        }
    }
}

fn run_seed(seed: u64) -> Reached {
    match catch_unwind(AssertUnwindSafe(|| Sim::new(seed).run())) {
        Ok(reached) => reached,
        Err(_) => panic!(
            "durability simulation failed with seed {seed}; replay it with \
             SEED={seed} cargo test -p hearth-server sim"
        ),
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[test]
fn sim_durability_pipeline_keeps_its_promises() {
    if let Some(seed) = env_number("SEED") {
        run_seed(seed);
        return;
    }
    let count = env_number("SIM_SEEDS").unwrap_or(FIXED_SEEDS);
    let mut reached = Reached::default();
    for seed in 0..count {
        reached.add(run_seed(seed));
    }
    println!("{count} seeds reached {reached:?}");
    if count >= FIXED_SEEDS {
        let all = [
            reached.batches,
            reached.released,
            reached.failures,
            reached.rolled_back,
            reached.snapshots,
            reached.segments_removed,
            reached.evictions,
            reached.reloads,
        ];
        assert!(
            all.iter().all(|&n| n > 0),
            "every path was reached: {reached:?}"
        );
    }
}
