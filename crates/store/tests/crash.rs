//! The durability property: random writes go through the real sync engine into the log,
//! with snapshots, truncation, disk errors, restarts and crashes at random points. After every
//! restart or crash, each recovered database must equal the engine's state after some prefix
//! of its writes that includes every write that was durable (acknowledgeable) before.

mod common;

use std::sync::Arc;

use hearth_store::{
    open, remove_files, write_snapshot, Fault, FaultPoint, FaultRule, FaultStorage, Recovered,
    SnapshotCatalog, StoreError, WalOptions, WalWriter,
};
use hearth_sync::{Database, Effect, Request, WriteTarget};
use hearth_tree::{Node, Path};
use proptest::prelude::*;
use serde_json::{json, Value};

const DATABASES: [&str; 3] = ["alpha", "beta", "gamma"];
const PATHS: [&str; 6] = ["/", "/a", "/a/b", "/c", "/c/d/e", "/list"];
const CONN: u64 = 1;

fn options() -> WalOptions {
    WalOptions {
        segment_bytes: 2048,
    }
}

#[derive(Debug, Clone)]
enum Step {
    Put {
        database: usize,
        path: usize,
        value: Value,
    },
    Merge {
        database: usize,
        path: usize,
        entries: Vec<(String, Value)>,
    },
    Priority {
        database: usize,
        path: usize,
        priority: Value,
    },
    Rules {
        database: usize,
        text: String,
    },
    Commit,
    /// A batch fails with ENOSPC or EIO at its write or sync; the server then reopens, after a
    /// process restart (`crash: None`) or a power loss.
    FailBatch {
        fault: Fault,
        point: FaultPoint,
        crash: Option<u64>,
    },
    /// Power is lost while a batch is being written and synced.
    CrashMidBatch {
        seed: u64,
    },
    Snapshot {
        database: usize,
    },
    Truncate,
    Crash {
        seed: u64,
    },
    Restart,
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-z ]{0,24}".prop_map(Value::from),
        Just(json!({".sv": "timestamp"})),
        Just(json!({".sv": {"increment": 2}})),
        Just(json!({".value": "p", ".priority": 5})),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop::collection::btree_map("[a-d]", inner, 1..4)
            .prop_map(|map| Value::Object(map.into_iter().collect()))
    })
}

fn step() -> impl Strategy<Value = Step> {
    let database = 0..DATABASES.len();
    let path = 0..PATHS.len();
    prop_oneof![
        12 => (database.clone(), path.clone(), value())
            .prop_map(|(database, path, value)| Step::Put { database, path, value }),
        4 => (
            database.clone(),
            path.clone(),
            prop::collection::btree_map("[a-d](/[x-z])?", value(), 1..3),
        )
            .prop_map(|(database, path, entries)| Step::Merge {
                database,
                path,
                entries: entries.into_iter().collect(),
            }),
        2 => (database.clone(), path.clone(), prop_oneof![Just(json!(null)), Just(json!(3)), Just(json!("s"))])
            .prop_map(|(database, path, priority)| Step::Priority { database, path, priority }),
        1 => (database.clone(), "[a-z]{0,8}")
            .prop_map(|(database, text)| Step::Rules { database, text }),
        6 => Just(Step::Commit),
        1 => (
            prop_oneof![Just(Fault::NoSpace), Just(Fault::Io)],
            prop_oneof![Just(FaultPoint::Write), Just(FaultPoint::Sync)],
            prop::option::of(any::<u64>()),
        )
            .prop_map(|(fault, point, crash)| Step::FailBatch { fault, point, crash }),
        1 => any::<u64>().prop_map(|seed| Step::CrashMidBatch { seed }),
        2 => database.prop_map(|database| Step::Snapshot { database }),
        1 => Just(Step::Truncate),
        1 => any::<u64>().prop_map(|seed| Step::Crash { seed }),
        1 => Just(Step::Restart),
    ]
}

/// One database as the engine sees it, and its history: the state after each logged record.
struct Model {
    database: Database,
    rules: Option<String>,
    history: Vec<(u64, Node, Option<String>)>,
}

impl Model {
    fn new(root: Node, rules: Option<String>) -> Model {
        let mut database = Database::with_root(root);
        database.connect(CONN);
        Model {
            database,
            rules,
            history: Vec::new(),
        }
    }

    /// The state after the last record numbered `seq` or lower.
    fn state_at(&self, seq: u64) -> (Node, Option<String>) {
        self.history
            .iter()
            .rev()
            .find(|(at, _, _)| *at <= seq)
            .map(|(_, root, rules)| (root.clone(), rules.clone()))
            .unwrap_or_default()
    }

    /// The last record numbered `seq` or lower.
    fn last_at_or_before(&self, seq: u64) -> u64 {
        self.history
            .iter()
            .rev()
            .map(|(at, _, _)| *at)
            .find(|at| *at <= seq)
            .unwrap_or(0)
    }
}

struct Shard {
    storage: FaultStorage,
    wal: WalWriter<FaultStorage>,
    catalog: SnapshotCatalog,
    models: Vec<Model>,
    now_ms: u64,
    logged: u64,
    recoveries: u64,
}

impl Shard {
    fn new() -> Result<Shard, StoreError> {
        let storage = FaultStorage::new();
        let recovered = open(Arc::new(storage.clone()), options())?;
        Ok(Shard {
            storage,
            wal: recovered.wal,
            catalog: recovered.snapshots,
            models: DATABASES
                .iter()
                .map(|_| Model::new(Node::empty(), None))
                .collect(),
            now_ms: 1_700_000_000_000,
            logged: 0,
            recoveries: 0,
        })
    }

    fn request(&mut self, database: usize, request: Request) -> Result<(), StoreError> {
        self.now_ms += 17;
        let model = &mut self.models[database];
        let mut effects = Vec::new();
        model
            .database
            .handle(CONN, request, self.now_ms, &mut effects);
        for effect in effects {
            if let Effect::Log(write) = effect {
                let seq = self.wal.append_write(DATABASES[database], &write)?.seq;
                let root = model.database.root().clone();
                model.history.push((seq, root, model.rules.clone()));
                self.logged += 1;
            }
        }
        Ok(())
    }

    /// Makes a spare segment, as the server does after each batch, so that rollovers in the
    /// schedule adopt it (and crashes hit the adoption).
    fn make_spare(&mut self) {
        if let Some(job) = self.wal.prepare_spare() {
            let _ = self.wal.add_spare(job.execute());
        }
    }

    /// Plays one step as the server would; every restart or crash recovers and checks.
    fn run(&mut self, step: Step) -> Result<(), StoreError> {
        match step {
            Step::Put {
                database,
                path,
                value,
            } => self.request(database, put_request(path, value)),
            Step::Merge {
                database,
                path,
                entries,
            } => self.request(database, merge_request(path, entries)),
            Step::Priority {
                database,
                path,
                priority,
            } => self.request(database, priority_request(path, priority)),
            Step::Rules { database, text } => self.set_rules(database, text),
            Step::Commit => {
                self.make_spare();
                self.wal.commit()?;
                Ok(())
            }
            Step::FailBatch {
                fault,
                point,
                crash,
            } => self.fail_batch(fault, point, crash),
            Step::CrashMidBatch { seed } => self.crash_mid_batch(seed),
            Step::Snapshot { database } => self.snapshot(database),
            Step::Truncate => self.truncate(),
            Step::Crash { seed } => {
                let crashed = self.storage.crash(seed);
                self.recover(crashed)
            }
            Step::Restart => self.recover(self.storage.clone()),
        }
    }

    /// Logs new rules for `database` and keeps them in its history, since recovery must bring
    /// back the rules with the tree.
    fn set_rules(&mut self, database: usize, text: String) -> Result<(), StoreError> {
        let seq = self.wal.append_rules(DATABASES[database], &text)?.seq;
        let model = &mut self.models[database];
        // An empty text is the server's default rules (FORMAT.md): none set.
        model.rules = (!text.is_empty()).then_some(text);
        let root = model.database.root().clone();
        model.history.push((seq, root, model.rules.clone()));
        Ok(())
    }

    /// Commits with one disk error injected, then reopens after a restart or, given a seed, a
    /// power loss; a failed commit must leave the log refusing further writes.
    fn fail_batch(
        &mut self,
        fault: Fault,
        point: FaultPoint,
        crash: Option<u64>,
    ) -> Result<(), StoreError> {
        self.make_spare();
        self.storage.inject(FaultRule::once(point, fault));
        let outcome = self.wal.commit();
        self.storage.clear_faults();
        if let Err(error) = outcome {
            assert!(self.wal.is_failed(), "{error}");
        }
        let storage = match crash {
            None => self.storage.clone(),
            Some(seed) => self.storage.crash(seed),
        };
        self.recover(storage)
    }

    /// Loses power during a commit: every sync halts, so the batch is partly on disk at most.
    fn crash_mid_batch(&mut self, seed: u64) -> Result<(), StoreError> {
        self.make_spare();
        self.storage
            .inject(FaultRule::always(FaultPoint::Sync, Fault::Halt));
        let _ = self.wal.commit();
        let crashed = self.storage.crash(seed);
        self.recover(crashed)
    }

    /// Snapshots `database` as the engine holds it, at the last appended record.
    fn snapshot(&mut self, database: usize) -> Result<(), StoreError> {
        let model = &self.models[database];
        let info = write_snapshot(
            &self.storage,
            DATABASES[database],
            self.wal.last_seq(),
            model.rules.as_deref(),
            model.database.root(),
        )?;
        self.catalog.add(&info);
        Ok(())
    }

    /// Removes the log segments the snapshots cover, then the snapshots beyond the newest kept:
    /// in that order, as the catalog requires, so that the log never needs a removed snapshot.
    fn truncate(&mut self) -> Result<(), StoreError> {
        let catalog = &self.catalog;
        let removal = self
            .wal
            .take_removable(|database| catalog.covered_for_truncation(database));
        removal.execute()?;
        for database in DATABASES {
            let old = self.catalog.prune(database);
            remove_files(&self.storage, &old)?;
        }
        Ok(())
    }

    /// Reopens on `storage` and checks every database against its history.
    fn recover(&mut self, storage: FaultStorage) -> Result<(), StoreError> {
        let durable = self.wal.durable_seq();
        let appended = self.wal.last_seq();
        let recovered: Recovered<FaultStorage> = open(Arc::new(storage.clone()), options())?;
        self.recoveries += 1;
        for (index, name) in DATABASES.iter().enumerate() {
            let model = &mut self.models[index];
            let (root, rules, seq) = match recovered.databases.get(*name) {
                Some(state) => (state.root.clone(), state.rules.clone(), state.seq),
                None => (Node::empty(), None, 0),
            };
            assert!(
                seq <= appended,
                "{name}: recovered {seq}, only {appended} appended"
            );
            let needed = model.last_at_or_before(durable);
            assert!(
                seq >= needed,
                "{name}: record {needed} was durable, recovery reached {seq}"
            );
            let (expected_root, expected_rules) = model.state_at(seq);
            assert_eq!(root, expected_root, "{name} at {seq}");
            assert_eq!(rules.as_deref(), expected_rules.as_deref(), "{name} rules");
            model.history.retain(|(at, _, _)| *at <= seq);
            *model = Model {
                history: std::mem::take(&mut model.history),
                ..Model::new(root, rules.map(|rules| rules.to_string()))
            };
        }
        self.storage = storage;
        self.wal = recovered.wal;
        self.catalog = recovered.snapshots;
        Ok(())
    }
}

/// The path numbered `index` in [`PATHS`]: steps name paths by index.
fn test_path(index: usize) -> Path {
    Path::parse(PATHS[index]).expect("valid test path")
}

/// A put of `value` at path number `path`.
fn put_request(path: usize, value: Value) -> Request {
    Request::Put {
        target: WriteTarget::whole(test_path(path)),
        data: value,
        hash: None,
    }
}

/// An update at path number `path`, its keys parsed as the server parses them.
fn merge_request(path: usize, entries: Vec<(String, Value)>) -> Request {
    let entries = entries
        .into_iter()
        .map(|(key, value)| (WriteTarget::parse(&key).expect("valid key"), value))
        .collect();
    Request::Merge {
        path: test_path(path),
        entries,
    }
}

/// A put of the priority alone at path number `path`.
fn priority_request(path: usize, priority: Value) -> Request {
    Request::Put {
        target: WriteTarget {
            path: test_path(path),
            priority_only: true,
        },
        data: priority,
        hash: None,
    }
}

fn run_steps(steps: Vec<Step>) -> Result<Shard, StoreError> {
    let mut shard = Shard::new()?;
    for step in steps {
        shard.run(step)?;
    }
    // Whatever happened, a final commit and crash keep everything.
    shard.wal.commit()?;
    let crashed = shard.storage.crash(7);
    shard.recover(crashed)?;
    Ok(shard)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn everything_durable_survives_any_crash(steps in prop::collection::vec(step(), 1..60)) {
        if let Err(error) = run_steps(steps) {
            return Err(TestCaseError::fail(format!("{error}")));
        }
    }
}

/// The property test only proves something if its runs write, crash and recover; a fixed
/// schedule checks that they do.
#[test]
fn the_schedule_exercises_crashes_and_recovery() -> Result<(), StoreError> {
    let mut steps = Vec::new();
    for round in 0..30u64 {
        for n in 0..5 {
            steps.push(Step::Put {
                database: (round as usize + n) % DATABASES.len(),
                path: n % PATHS.len(),
                value: json!({ "round": round, "n": n, "at": {".sv": "timestamp"} }),
            });
        }
        steps.push(match round % 6 {
            0 => Step::Commit,
            1 => Step::CrashMidBatch { seed: round },
            2 => Step::Snapshot {
                database: round as usize % DATABASES.len(),
            },
            3 => Step::Truncate,
            4 => Step::FailBatch {
                fault: Fault::Io,
                point: FaultPoint::Sync,
                crash: Some(round),
            },
            _ => Step::Commit,
        });
    }
    let shard = run_steps(steps)?;
    assert!(shard.logged >= 100, "{} records logged", shard.logged);
    assert!(shard.recoveries >= 10);
    let total: usize = shard.models.iter().map(|model| model.history.len()).sum();
    assert!(total > 0, "some writes survived");
    Ok(())
}
