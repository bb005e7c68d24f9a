//! A shard's handle on its store directory: the log writer, the snapshot catalog, the writes
//! not yet on disk, and the durable position that REST answers wait for.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use hearth_store::{
    Appended, RecordRef, Recovered, RecoveredDatabase, Removal, SideKind, SideRecord,
    SnapshotCatalog, SnapshotInfo, StoreError, WalOptions, WalWriter,
};
use hearth_sync::feed::ChangeLog;
use hearth_tree::Node;
use tokio::sync::{watch, Notify};

use super::config::PersistConfig;
use super::pipeline::{BatchResult, Chore, DatabaseFacts, Pipeline, Release};
use super::storage::ShardStorage;

#[path = "store_commit.rs"]
mod commit;

/// What a database looks like at some position of the log: its tree, the rules set through
/// the API (`None`: the server's default rules apply) and its settings document (`None`:
/// never set).
#[derive(Debug, Clone, Default)]
pub struct DurableState {
    pub root: Node,
    pub rules: Option<Arc<str>>,
    pub settings: Option<Arc<str>>,
}

/// The durable position as REST answers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub durable: u64,
    pub failed: bool,
}

/// A write the disk has not confirmed yet, with its database's state after it.
struct Undurable {
    seq: u64,
    database: Rc<str>,
    state: DurableState,
}

/// The store of one shard.
///
/// Each piece of its state has this one writer: the owner's code asks it for what it needs
/// through the methods below (the commit task's side is in `store_commit.rs`), and never
/// holds a borrow of the log writer, the catalog or the pipeline across its own steps.
pub struct ShardStore {
    config: PersistConfig,
    storage: Arc<ShardStorage>,
    wal: RefCell<WalWriter<ShardStorage>>,
    catalog: RefCell<SnapshotCatalog>,
    /// The decisions: batches, the durable position, failure, snapshots and eviction.
    pipeline: RefCell<Pipeline>,
    /// Woken when records are appended, so that the commit task starts a batch.
    appended: Notify,
    undurable: RefCell<VecDeque<Undurable>>,
    failure: RefCell<Option<String>>,
    progress: watch::Sender<Progress>,
    /// Backups whose cut names snapshot files of this shard and which are still running:
    /// while there are any, no snapshot file is removed (`backup::cut`).
    backup_pins: Cell<usize>,
    /// Old snapshot files whose removal waits for the running backups.
    deferred_removals: RefCell<Vec<String>>,
    /// The write records the log held at start of databases left on disk, until each is
    /// loaded (`take_on_disk_changes`), for its change feeds.
    on_disk_changes: RefCell<BTreeMap<Arc<str>, ChangeLog>>,
    /// Audit entries and trigger events appended and not yet released (durable, and on the
    /// followers), in log order; then taken for the audit trail and the triggers' outbox
    /// (`take_released_side`).
    side_waiting: RefCell<VecDeque<SideRecord>>,
    /// Every such entry the log held at start, once, for their copiers to copy those they
    /// lack.
    recovered_side: RefCell<Vec<SideRecord>>,
}

/// A recovered shard directory, on its way to the shard's thread.
pub struct Opened {
    pub storage: Arc<ShardStorage>,
    pub recovered: Recovered<ShardStorage>,
}

/// Which databases recovery loads into memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loading {
    /// Every database (the offline tools).
    All,
    /// Only those with log records after their newest snapshot; the others stay on disk until
    /// first use (the server).
    OnFirstUse,
}

/// Recovers the shard directory `dir` and opens its log for appending. Runs on any thread.
pub fn open_shard_dir(dir: &Path, loading: Loading) -> Result<Opened, StoreError> {
    let storage = hearth_store::FileStorage::open(dir).map_err(|error| {
        StoreError::io(
            &dir.display().to_string(),
            hearth_store::Operation::List,
            error,
        )
    })?;
    open_storage(ShardStorage::Files(storage), loading)
}

/// Recovers a shard's storage and opens its log for appending.
pub fn open_storage(storage: ShardStorage, loading: Loading) -> Result<Opened, StoreError> {
    let storage = Arc::new(storage);
    let recovered = match loading {
        Loading::All => hearth_store::open(storage.clone(), WalOptions::default())?,
        Loading::OnFirstUse => hearth_store::open_lazily(storage.clone(), WalOptions::default())?,
    };
    Ok(Opened { storage, recovered })
}

impl ShardStore {
    /// The store of a shard, from its recovered directory; also returns the recovered
    /// databases.
    pub fn new(
        opened: Opened,
        config: PersistConfig,
    ) -> (ShardStore, BTreeMap<Arc<str>, RecoveredDatabase>) {
        let recovered = opened.recovered;
        let durable = recovered.wal.durable_seq();
        let (progress, _) = watch::channel(Progress {
            durable,
            failed: false,
        });
        let pipeline = Pipeline::new(
            durable,
            config.snapshots,
            config.evict_idle.map(|idle| idle.as_millis() as u64),
        );
        let store = ShardStore {
            config,
            pipeline: RefCell::new(pipeline),
            storage: opened.storage,
            wal: RefCell::new(recovered.wal),
            catalog: RefCell::new(recovered.snapshots),
            appended: Notify::new(),
            undurable: RefCell::new(VecDeque::new()),
            failure: RefCell::new(None),
            progress,
            backup_pins: Cell::new(0),
            deferred_removals: RefCell::new(Vec::new()),
            on_disk_changes: RefCell::new(recovered.on_disk_changes),
            side_waiting: RefCell::new(VecDeque::new()),
            recovered_side: RefCell::new(recovered.side),
        };
        (store, recovered.databases)
    }

    /// The durability settings the store was opened with (how often the commit task syncs,
    /// snapshot triggers, idle eviction).
    pub fn config(&self) -> &PersistConfig {
        &self.config
    }

    /// The shard's storage, for the files the store does not write itself: snapshots are
    /// written and read, and old files removed, on blocking threads that hold a clone.
    pub fn storage(&self) -> &Arc<ShardStorage> {
        &self.storage
    }

    /// Appends a record for `database`, whose state after it is `state`, under fencing
    /// `epoch` (`None` outside a cluster: the epoch the log last had for it).
    pub fn append(
        &self,
        database: &Rc<str>,
        epoch: Option<u64>,
        body: RecordRef<'_>,
        state: DurableState,
    ) -> Result<Appended, StoreError> {
        let appended = {
            let mut wal = self.wal.borrow_mut();
            let epoch = epoch.unwrap_or_else(|| wal.epoch_of(database));
            wal.append(database, epoch, body)?
        };
        self.pipeline.borrow_mut().appended(appended.seq);
        let side = match body {
            RecordRef::Audit(entry) => Some((SideKind::Audit, entry)),
            RecordRef::Triggered(event) => Some((SideKind::Triggered, event)),
            _ => None,
        };
        if let Some((kind, entry)) = side {
            self.side_waiting.borrow_mut().push_back(SideRecord {
                seq: appended.seq,
                database: Arc::from(&**database),
                kind,
                entry: Arc::from(entry),
            });
        }
        self.undurable.borrow_mut().push_back(Undurable {
            seq: appended.seq,
            database: database.clone(),
            state,
        });
        self.appended.notify_one();
        Ok(appended)
    }

    /// The highest fencing epoch the log holds for `database` (0 if none): the fence refuses
    /// writes under an older claim.
    pub fn logged_epoch(&self, database: &str) -> u64 {
        self.wal.borrow().epoch_of(database)
    }

    /// The write records of `database`, left on disk at start, that the log held then: once,
    /// for the database's change feeds when it is first loaded.
    pub fn take_on_disk_changes(&self, database: &str) -> Option<ChangeLog> {
        self.on_disk_changes.borrow_mut().remove(database)
    }

    /// The log position the newest snapshot of `database` covers; `None` when it has none.
    pub fn newest_snapshot(&self, database: &str) -> Option<u64> {
        self.catalog.borrow().newest(database)
    }

    /// Every database with a snapshot on disk, loaded or not, with the log position its
    /// newest snapshot covers, by name: what lists, backs up or copies the databases that
    /// are only on disk starts from here.
    pub fn newest_snapshots(&self) -> Vec<(String, u64)> {
        let catalog = self.catalog.borrow();
        catalog
            .databases()
            .filter_map(|name| Some((name.to_owned(), catalog.newest(name)?)))
            .collect()
    }

    /// The log position a snapshot started now covers: the durable one, since a snapshot
    /// writes each database's durable state.
    pub fn snapshot_covers(&self) -> u64 {
        self.pipeline.borrow().snapshot_covers()
    }

    /// The chores of a maintenance tick at `now`, from the facts of each loaded database
    /// (with its newest snapshot, [`ShardStore::newest_snapshot`]): snapshots the policy asks
    /// for, evictions of idle databases and the snapshots those need first; none after a
    /// failure.
    pub fn maintenance_chores(&self, now: u64, databases: &[DatabaseFacts<'_>]) -> Vec<Chore> {
        self.pipeline.borrow().tick(now, databases)
    }

    /// Records a written snapshot in the catalog and returns the names of the older snapshot
    /// files it makes unneeded, to remove after the log is truncated
    /// ([`ShardStore::take_truncation`]), so that a crash in between never leaves a log
    /// without a snapshot to start from.
    /// While a backup runs, the names are kept back instead (see [`ShardStore::pin_for_backup`]).
    pub fn record_snapshot(&self, info: &SnapshotInfo) -> Vec<String> {
        let mut catalog = self.catalog.borrow_mut();
        catalog.add(info);
        let old = catalog.prune(&info.database);
        if self.backup_pins.get() > 0 {
            self.deferred_removals.borrow_mut().extend(old);
            return Vec::new();
        }
        old
    }

    /// A backup's cut names this shard's snapshot files: none is removed until it ends.
    pub fn pin_for_backup(&self) {
        self.backup_pins.set(self.backup_pins.get() + 1);
    }

    /// A backup ended; returns the snapshot files to remove once no backup runs any more.
    /// (Files still kept back at a stop stay on disk; the catalog finds and prunes them after
    /// the next start.)
    pub fn unpin_after_backup(&self) -> Vec<String> {
        let pins = self.backup_pins.get().saturating_sub(1);
        self.backup_pins.set(pins);
        if pins > 0 {
            return Vec::new();
        }
        std::mem::take(&mut *self.deferred_removals.borrow_mut())
    }

    /// Takes the log segments that the snapshots now cover out of the log, for removal.
    pub fn take_truncation(&self) -> Removal<ShardStorage> {
        let catalog = self.catalog.borrow();
        self.wal
            .borrow_mut()
            .take_removable(|database| catalog.covered_for_truncation(database))
    }

    /// The log is durable up to `durable`: returns the new durable state of each database
    /// that had writes up to there (the last one of each, in order).
    ///
    /// `released`: how far acknowledgements may go (at most `durable`; with `--replication
    /// sync`, what the followers have too): the states handed back are those up to there, so
    /// that a database whose later writes are given up goes back to what its clients may
    /// have seen (`replica::sync_set`).
    pub fn release(&self, durable: u64, released: u64) -> Vec<(Rc<str>, DurableState)> {
        let released_to = released.min(durable);
        let mut released = Vec::new();
        let mut undurable = self.undurable.borrow_mut();
        while undurable
            .front()
            .is_some_and(|write| write.seq <= released_to)
        {
            if let Some(write) = undurable.pop_front() {
                released.push((write.database, write.state));
            }
        }
        drop(undurable);
        self.progress.send_modify(|progress| {
            progress.durable = progress.durable.max(durable);
        });
        released
    }

    /// Forgets the states after `namespace`'s writes from `first` on, which will never be
    /// acknowledged: the database goes back to the state before them, and their audit
    /// entries and trigger events are never passed on.
    pub fn forget_from(&self, namespace: &str, first: u64) {
        self.forget_range(namespace, first, u64::MAX);
    }

    /// [`ShardStore::forget_from`], for the writes from `first` up to (not including) `end`
    /// only: those after are a newer owner's full copy, which stands.
    pub fn forget_range(&self, namespace: &str, first: u64, end: u64) {
        let gone = |seq: u64, database: &str| (first..end).contains(&seq) && database == namespace;
        self.undurable
            .borrow_mut()
            .retain(|write| !gone(write.seq, &write.database));
        self.side_waiting
            .borrow_mut()
            .retain(|entry| !gone(entry.seq, &entry.database));
    }

    /// The audit entries and trigger events up to the log position `released` (durable, and
    /// on the followers), in log order, for the audit trail and the triggers' outbox.
    pub fn take_released_side(&self, released: u64) -> Vec<SideRecord> {
        let mut waiting = self.side_waiting.borrow_mut();
        let ready = waiting.partition_point(|entry| entry.seq <= released);
        waiting.drain(..ready).collect()
    }

    /// The trigger events (and confirmations) of `database` appended and not yet released,
    /// in log order: with those its outbox holds, what a full copy of the database carries.
    pub fn waiting_triggered(&self, database: &str) -> Vec<Arc<str>> {
        self.side_waiting
            .borrow()
            .iter()
            .filter(|entry| entry.kind == SideKind::Triggered && &*entry.database == database)
            .map(|entry| entry.entry.clone())
            .collect()
    }

    /// Every audit entry and trigger event the log held at start (once): their copiers copy
    /// those their files lack.
    pub fn take_recovered_side(&self) -> Vec<SideRecord> {
        std::mem::take(&mut *self.recovered_side.borrow_mut())
    }

    /// The log failed: nothing more will become durable.
    pub fn fail(&self, reason: String) {
        self.pipeline.borrow_mut().fail();
        self.undurable.borrow_mut().clear();
        *self.failure.borrow_mut() = Some(reason);
        self.progress.send_modify(|progress| progress.failed = true);
    }

    /// Why the log failed ([`ShardStore::fail`]); `None` while it works.
    pub fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    /// The durable position REST answers wait for: [`ShardStore::release`] moves it once the
    /// shard acted on a completed batch.
    pub fn durable_seq(&self) -> u64 {
        self.progress.borrow().durable
    }

    /// Every record up to here is on disk, as the shard acts on it: it moves as soon as a
    /// batch completes, before [`ShardStore::release`] hands it on to
    /// [`ShardStore::durable_seq`], and stops at a failure.
    pub fn synced_seq(&self) -> u64 {
        self.pipeline.borrow().durable()
    }

    /// How far the log writer itself has synced: [`ShardStore::synced_seq`] is never ahead
    /// of it (a check of the durability simulation).
    pub fn writer_synced_seq(&self) -> u64 {
        self.wal.borrow().durable_seq()
    }

    /// The last record appended to the log, durable or not: a backup waits until it is
    /// durable so that every write acknowledged before it is in it.
    pub fn last_seq(&self) -> u64 {
        self.wal.borrow().last_seq()
    }

    /// Waits until every record up to `seq` is durable; an error when the log failed first.
    pub async fn wait_durable(&self, seq: u64) -> Result<(), String> {
        let mut progress = self.progress.subscribe();
        let reached = progress
            .wait_for(|progress| progress.failed || progress.durable >= seq)
            .await
            .map(|progress| *progress);
        match reached {
            Ok(progress) if progress.durable >= seq => Ok(()),
            _ => Err(self
                .failure()
                .unwrap_or_else(|| "the server is shutting down".to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_keeps_old_snapshot_files_until_it_ends() {
        let storage = Arc::new(ShardStorage::Faults(Arc::new(
            hearth_store::FaultStorage::new(),
        )));
        let opened = open_storage_arc(storage);
        let (store, _) = ShardStore::new(opened, PersistConfig::default());
        let info = |covered| SnapshotInfo {
            name: hearth_store::snapshot_name("db", covered),
            database: Arc::from("db"),
            covered_seq: covered,
            bytes: 1,
        };
        // Two snapshots are kept; the third makes the first removable.
        assert!(store.record_snapshot(&info(1)).is_empty());
        assert!(store.record_snapshot(&info(2)).is_empty());
        store.pin_for_backup();
        store.pin_for_backup();
        assert!(store.record_snapshot(&info(3)).is_empty(), "pinned");
        assert!(
            store.unpin_after_backup().is_empty(),
            "another backup still runs"
        );
        assert!(store.record_snapshot(&info(4)).is_empty(), "still pinned");
        let released = store.unpin_after_backup();
        assert_eq!(
            released,
            vec![
                hearth_store::snapshot_name("db", 1),
                hearth_store::snapshot_name("db", 2)
            ]
        );
        assert_eq!(
            store.record_snapshot(&info(5)),
            vec![hearth_store::snapshot_name("db", 3)]
        );
    }

    #[test]
    fn forgetting_a_range_keeps_what_came_after_it() {
        let storage = Arc::new(ShardStorage::Faults(Arc::new(
            hearth_store::FaultStorage::new(),
        )));
        let (store, _) = ShardStore::new(open_storage_arc(storage), PersistConfig::default());
        let db: Rc<str> = Rc::from("db");
        let state = || DurableState {
            root: Node::empty(),
            rules: None,
            settings: None,
        };
        let mut seqs = Vec::new();
        for event in [
            "items\n1.1.0\n{}",
            "items\n1.2.0\n{}",
            "items\n=\n",
            "items\n2.3.0\n{}",
        ] {
            let appended = store
                .append(&db, Some(1), RecordRef::Triggered(event), state())
                .expect("appended");
            seqs.push(appended.seq);
        }
        // The writes given up are the first two; a newer owner's copy starts at the third.
        store.forget_range("db", seqs[0], seqs[2]);
        assert_eq!(
            store.waiting_triggered("db"),
            vec![
                Arc::<str>::from("items\n=\n"),
                Arc::from("items\n2.3.0\n{}")
            ]
        );
        store.forget_from("db", seqs[3]);
        assert_eq!(
            store.waiting_triggered("db"),
            vec![Arc::<str>::from("items\n=\n")]
        );
    }

    fn open_storage_arc(storage: Arc<ShardStorage>) -> Opened {
        let recovered = hearth_store::open(storage.clone(), WalOptions::default())
            .expect("an empty storage opens");
        Opened { storage, recovered }
    }
}
