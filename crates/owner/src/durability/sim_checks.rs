//! The simulation between its steps: the shard's tick (snapshots, eviction), a finished
//! snapshot, and the checks of the gate, of a settled shard and of the disk a crash leaves.

use super::*;

impl Sim {
    pub(super) fn tick(&mut self) {
        self.now += self.rng.below(2_000);
        let chores = {
            let facts: Vec<_> = self
                .databases
                .iter()
                .map(|(name, loaded)| loaded.facts(name, self.store.newest_snapshot(name)))
                .collect();
            self.store.maintenance_chores(self.now, &facts)
        };
        if !chores.is_empty() {
            assert!(self.failed_at.is_none(), "no chores after a failure");
        }
        for chore in chores {
            match chore {
                Chore::Snapshot(name) => {
                    let covered = self.store.snapshot_covers();
                    if let Some(loaded) = self.databases.get_mut(&name) {
                        let state = loaded.begin_snapshot(self.now);
                        self.snapshots.push(SnapshotJob {
                            name,
                            covered,
                            state,
                        });
                    }
                }
                Chore::Evict(name) => self.evict(&name),
            }
        }
    }

    pub(super) fn evict(&mut self, name: &str) {
        let durable = self.store.synced_seq();
        let newest = self.store.newest_snapshot(name);
        let Some(loaded) = self.databases.remove(name) else {
            return;
        };
        assert_eq!(
            loaded.session_count(),
            0,
            "{name} is evicted without clients"
        );
        assert!(
            !self.clients.values().any(|client| client.database == name),
            "{name} is evicted while a client holds it"
        );
        assert!(
            loaded.seq() <= durable,
            "{name} is evicted with writes in flight"
        );
        assert!(
            !loaded.snapshot_running(),
            "{name} is evicted while a snapshot of it runs"
        );
        let history = self.history.entry(name.to_owned()).or_default();
        let value = counter(loaded.root());
        assert!(
            newest.is_some_and(|covered| history.counter_at(covered) == value)
                || (!loaded.is_on_disk() && value == 0),
            "{name} is evicted with {value} but its newest snapshot ({newest:?}) does not hold it"
        );
        history.evicted_at = Some(value);
        self.reached.evictions += 1;
    }

    pub(super) fn finish_snapshot(&mut self) {
        if self.snapshots.is_empty() {
            return;
        }
        let index = self.rng.below(self.snapshots.len() as u64) as usize;
        let job = self.snapshots.swap_remove(index);
        if let Some(loaded) = self.databases.get_mut(&job.name) {
            loaded.end_snapshot();
        }
        let history = self.history.entry(job.name.clone()).or_default();
        assert_eq!(
            counter(&job.state.root),
            history.counter_at(job.covered),
            "a snapshot of {} covers exactly the records up to {}",
            job.name,
            job.covered
        );
        let written = write_database_snapshot(
            &**self.store.storage(),
            &job.name,
            job.covered,
            0,
            job.state.rules.as_deref(),
            job.state.settings.as_deref(),
            &job.state.root,
        );
        // A failed snapshot leaves the log to keep the data, as in the runtime.
        if let Ok(info) = written {
            let old = self.store.record_snapshot(&info);
            self.reached.snapshots += 1;
            let removal = self.store.take_truncation();
            if let Ok(segments) = removal.execute() {
                self.reached.segments_removed += segments.len() as u64;
                let _ = remove_files(&**self.store.storage(), &old);
            }
        }
    }

    pub(super) fn check_gate(&mut self) {
        let durable = self.store.synced_seq();
        assert!(
            durable >= self.last_durable,
            "the durable position moved back"
        );
        assert_eq!(
            self.gate.durable(),
            durable,
            "the gate is at the durable position"
        );
        assert!(
            durable <= self.store.writer_synced_seq(),
            "the pipeline is never ahead of the log"
        );
        self.last_durable = durable;
    }

    /// Finishes what is in flight and delivers everything that may go out.
    pub(super) fn settle(&mut self) {
        for _ in 0..4 {
            self.finish_batch();
            self.commit_turn();
        }
        self.finish_batch();
        self.commit_turn();
        while !self.snapshots.is_empty() {
            self.finish_snapshot();
        }
        self.drain();
        self.check_gate();
        if self.failed_at.is_none() {
            let last = self.store.last_seq();
            assert_eq!(
                self.store.synced_seq(),
                last,
                "without a failure, every record becomes durable"
            );
            for client in self.clients.values() {
                assert!(client.queue.is_empty(), "every held message went out");
            }
        }
    }

    /// A power loss now keeps every write up to the durable position, hence every one that
    /// was released, and invents none; recovery that loads databases on first use
    /// (decision 27) finds the same data as recovery that loads all of them.
    pub(super) fn check_crash(&self, crash_seed: u64) {
        let durable = self.store.synced_seq();
        let options = WalOptions {
            segment_bytes: SEGMENT_BYTES,
        };
        let crashed = Arc::new(self.storage.crash(crash_seed));
        let recovered = open(crashed, options)
            .unwrap_or_else(|error| panic!("the crashed disk recovers: {error}"));
        let crashed = Arc::new(self.storage.crash(crash_seed));
        let lazy = open_lazily(crashed.clone(), options)
            .unwrap_or_else(|error| panic!("the crashed disk recovers lazily: {error}"));
        for (name, history) in &self.history {
            let value = recovered
                .databases
                .get(name.as_str())
                .map_or(0, |database| counter(&database.root));
            let expected = history.counter_at(durable);
            assert!(
                value >= expected && value >= history.released,
                "{name}: the crashed disk holds {value}, but {expected} was durable and {} released",
                history.released
            );
            assert!(
                value <= history.seqs.len() as u64,
                "{name}: nothing invented"
            );
            let lazily = match (
                lazy.databases.get(name.as_str()),
                lazy.on_disk.get(name.as_str()),
            ) {
                (Some(database), _) => counter(&database.root),
                (None, Some(&covered)) => read_snapshot(&*crashed, &snapshot_name(name, covered))
                    .map_or(u64::MAX, |snapshot| counter(&snapshot.root)),
                (None, None) => 0,
            };
            assert_eq!(lazily, value, "{name}: lazy recovery finds the same data");
        }
    }
}
