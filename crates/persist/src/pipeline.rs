//! The decisions of the durability pipeline, as a pure state machine.
//!
//! The runtime (the commit task, the shard, the maintenance tick) owns sockets, threads and
//! clocks; this machine owns what they decide from: when a batch may start, how far the
//! durable position moves and what that releases, what a failure rolls back, and which
//! databases a tick snapshots or evicts. It reads no clock (time is an argument) and touches
//! no file, so the seeded simulation (`owner/durability/sim.rs`) drives exactly the logic the server
//! runs, against the store's fault-injecting storage.
//!
//! Inputs: [`Pipeline::appended`], [`Pipeline::batch_started`], [`Pipeline::batch_done`],
//! [`Pipeline::synced_inline`], [`Pipeline::fail`], and [`Pipeline::tick`] with the facts of
//! each loaded database (sessions, writes in flight, idle time, snapshot coverage). Outputs:
//! whether to start a batch, the position to release messages up to, the databases to roll
//! back, and the snapshots and evictions to run.

use hearth_store::{SnapshotDecision, SnapshotPolicy};

/// What the machine needs to know of one loaded database to decide on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseFacts<'a> {
    pub name: &'a str,
    /// The sequence number of its last log record (`u64::MAX` after a refused append).
    pub seq: u64,
    /// Log bytes written for it since its last snapshot.
    pub wal_bytes: u64,
    pub last_snapshot_ms: u64,
    pub snapshot_running: bool,
    pub last_used_ms: u64,
    /// Its WebSocket connections and event streams.
    pub sessions: usize,
    /// Whether anything of it is on disk (recovered, or a record appended).
    pub on_disk: bool,
    /// The log position its newest snapshot covers.
    pub newest_snapshot: Option<u64>,
}

/// What a tick asks the runtime to do with one database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chore {
    /// Snapshot its durable state, covering the log up to the durable position.
    Snapshot(String),
    /// Drop it from memory: a snapshot covers all of its records (or it never reached disk).
    Evict(String),
}

/// The result of a batch the runtime handed to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchResult {
    /// Written and synced: the log is durable up to this sequence number.
    Synced(u64),
    /// The write or the sync failed; nothing of the batch may be trusted.
    Failed,
}

/// What the runtime does after a batch synced: release the messages tagged up to `durable`;
/// when `start_next`, hand the next batch to the disk first, so that the socket writes
/// overlap it (decision 21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub durable: u64,
    pub start_next: bool,
}

/// The state of one shard's durability pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// Every record up to here is on disk. Only ever moves forward.
    durable: u64,
    /// The last record appended to the log (in memory).
    appended: u64,
    /// The last record of the batch on its way to disk; one at a time.
    in_flight: Option<u64>,
    failed: bool,
    failure_handled: bool,
    policy: SnapshotPolicy,
    /// Idle time after which a database leaves memory; `None` keeps every database.
    evict_idle_ms: Option<u64>,
}

impl Pipeline {
    /// A pipeline whose log is durable up to `durable` (what recovery found).
    pub fn new(durable: u64, policy: SnapshotPolicy, evict_idle_ms: Option<u64>) -> Pipeline {
        Pipeline {
            durable,
            appended: durable,
            in_flight: None,
            failed: false,
            failure_handled: false,
            policy,
            evict_idle_ms,
        }
    }

    pub fn durable(&self) -> u64 {
        self.durable
    }

    pub fn is_failed(&self) -> bool {
        self.failed
    }

    pub fn in_flight(&self) -> Option<u64> {
        self.in_flight
    }

    /// A record was appended to the log in memory.
    pub fn appended(&mut self, seq: u64) {
        self.appended = self.appended.max(seq);
    }

    /// Whether a batch should be handed to the disk now: records wait, none is in flight and
    /// the log has not failed.
    pub fn wants_batch(&self) -> bool {
        !self.failed && self.in_flight.is_none() && self.appended > self.durable
    }

    /// A batch with records up to `last_seq` was handed to the disk.
    pub fn batch_started(&mut self, last_seq: u64) {
        self.in_flight = Some(last_seq);
    }

    /// The batch in flight completed. `None`: the log failed (the runtime reports it, and
    /// the next commit-task turn rolls back); a batch that synced after another failure
    /// releases nothing either, since nothing more may be acknowledged then.
    pub fn batch_done(&mut self, result: BatchResult) -> Option<Release> {
        self.in_flight = None;
        match result {
            BatchResult::Synced(durable) if !self.failed => {
                self.advance(durable);
                Some(Release {
                    durable: self.durable,
                    start_next: self.wants_batch(),
                })
            }
            BatchResult::Synced(_) | BatchResult::Failed => {
                self.failed = true;
                None
            }
        }
    }

    /// The log was written and synced on the caller's thread (shutdown) up to `durable`.
    pub fn synced_inline(&mut self, durable: u64) -> u64 {
        if !self.failed {
            self.advance(durable);
        }
        self.durable
    }

    /// The log failed (a batch, an append, a sync thread). Returns whether this is the first
    /// failure, which the runtime reports.
    pub fn fail(&mut self) -> bool {
        !std::mem::replace(&mut self.failed, true)
    }

    /// Whether the failure still has to be handled (read-only databases, roll-backs); true
    /// once per failure.
    pub fn take_failure_handling(&mut self) -> bool {
        if self.failed && !self.failure_handled {
            self.failure_handled = true;
            true
        } else {
            false
        }
    }

    /// Whether the failure was handled: databases are read-only from then on.
    pub fn failure_handled(&self) -> bool {
        self.failure_handled
    }

    /// The databases with writes that did not reach the disk: they go back to their durable
    /// state, and their clients are disconnected.
    pub fn roll_back<'a>(
        &self,
        databases: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Vec<&'a str> {
        databases
            .into_iter()
            .filter(|&(_, seq)| seq > self.durable)
            .map(|(name, _)| name)
            .collect()
    }

    /// The chores of a maintenance tick at `now`: snapshots the policy asks for, then
    /// evictions of idle databases, then the snapshots eviction needs first. Nothing after a
    /// failure (the log refuses everything, and snapshots would stop matching the log).
    pub fn tick(&self, now: u64, databases: &[DatabaseFacts<'_>]) -> Vec<Chore> {
        if self.failed {
            return Vec::new();
        }
        let due: Vec<&str> = databases
            .iter()
            .filter(|db| {
                !db.snapshot_running
                    && matches!(
                        self.policy.decide(db.wal_bytes, db.last_snapshot_ms, now),
                        SnapshotDecision::Take(_)
                    )
            })
            .map(|db| db.name)
            .collect();
        let mut chores: Vec<Chore> = due
            .iter()
            .map(|name| Chore::Snapshot(name.to_string()))
            .collect();
        let Some(idle_ms) = self.evict_idle_ms else {
            return chores;
        };
        let mut snapshot_first = Vec::new();
        for db in databases {
            // A snapshot started by this tick counts as running.
            let running = db.snapshot_running || due.contains(&db.name);
            let idle = db.sessions == 0
                && !running
                && db.seq <= self.durable
                && now.saturating_sub(db.last_used_ms) >= idle_ms;
            if !idle {
                continue;
            }
            let covered = db.newest_snapshot.is_some_and(|covered| covered >= db.seq);
            if covered || !db.on_disk {
                chores.push(Chore::Evict(db.name.to_string()));
            } else {
                snapshot_first.push(Chore::Snapshot(db.name.to_string()));
            }
        }
        chores.extend(snapshot_first);
        chores
    }

    /// The log position a snapshot started now covers: the durable one, since a snapshot
    /// writes each database's durable state (decision 22).
    pub fn snapshot_covers(&self) -> u64 {
        self.durable
    }

    fn advance(&mut self, durable: u64) {
        self.durable = self.durable.max(durable);
        self.appended = self.appended.max(self.durable);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: SnapshotPolicy = SnapshotPolicy {
        wal_bytes_max: 2_000,
        age_ms_max: 30_000,
        interval_ms_min: 4_000,
    };

    fn facts(name: &str) -> DatabaseFacts<'_> {
        DatabaseFacts {
            name,
            seq: 0,
            wal_bytes: 0,
            last_snapshot_ms: 0,
            snapshot_running: false,
            last_used_ms: 0,
            sessions: 0,
            on_disk: true,
            newest_snapshot: None,
        }
    }

    #[test]
    fn one_batch_at_a_time_and_the_next_starts_before_the_release() {
        let mut pipeline = Pipeline::new(0, POLICY, None);
        assert!(!pipeline.wants_batch());
        pipeline.appended(1);
        assert!(pipeline.wants_batch());
        pipeline.batch_started(1);
        pipeline.appended(2);
        assert!(!pipeline.wants_batch());
        assert_eq!(
            pipeline.batch_done(BatchResult::Synced(1)),
            Some(Release {
                durable: 1,
                start_next: true
            })
        );
    }

    #[test]
    fn a_failure_stops_batches_and_is_handled_once() {
        let mut pipeline = Pipeline::new(3, POLICY, None);
        pipeline.appended(4);
        pipeline.batch_started(4);
        assert_eq!(pipeline.batch_done(BatchResult::Failed), None);
        pipeline.appended(5);
        assert!(!pipeline.wants_batch());
        assert!(!pipeline.fail());
        assert!(pipeline.take_failure_handling());
        assert!(!pipeline.take_failure_handling());
        assert_eq!(pipeline.roll_back([("a", 3), ("b", 4)]), vec!["b"]);
        assert_eq!(pipeline.synced_inline(9), 3);
    }

    #[test]
    fn a_batch_that_syncs_after_a_failure_releases_nothing() {
        let mut pipeline = Pipeline::new(3, POLICY, None);
        pipeline.appended(4);
        pipeline.batch_started(4);
        assert!(pipeline.fail());
        assert_eq!(pipeline.batch_done(BatchResult::Synced(4)), None);
        assert_eq!(pipeline.durable(), 3);
    }

    #[test]
    fn eviction_waits_for_sessions_writes_and_a_covering_snapshot() {
        let pipeline = Pipeline::new(10, POLICY, Some(1_000));
        let mut busy = facts("busy");
        busy.sessions = 1;
        let mut writing = facts("writing");
        writing.seq = 11;
        let mut uncovered = facts("uncovered");
        uncovered.seq = 7;
        uncovered.newest_snapshot = Some(6);
        let mut covered = facts("covered");
        covered.seq = 7;
        covered.newest_snapshot = Some(7);
        let mut fresh = facts("fresh");
        fresh.on_disk = false;
        let chores = pipeline.tick(1_000, &[busy, writing, uncovered, covered, fresh]);
        assert_eq!(
            chores,
            vec![
                Chore::Evict("covered".into()),
                Chore::Evict("fresh".into()),
                Chore::Snapshot("uncovered".into()),
            ]
        );
    }

    #[test]
    fn a_snapshot_due_by_policy_is_not_also_an_eviction() {
        let pipeline = Pipeline::new(10, POLICY, Some(1_000));
        let mut db = facts("db");
        db.seq = 5;
        db.wal_bytes = 5_000;
        assert_eq!(
            pipeline.tick(10_000, &[db]),
            vec![Chore::Snapshot("db".into())]
        );
    }
}
