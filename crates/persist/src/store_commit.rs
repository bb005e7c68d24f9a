//! The commit task's side of a shard's store: waking the task, the batches it hands to the
//! disk, the log segment it makes ahead of time, the commit on the shard's thread at
//! shutdown, and the failure it handles once.

use hearth_store::{Batch, BatchDone, SpareDone, SpareJob, StoreError};
use tokio::sync::futures::Notified;

use super::{BatchResult, Release, ShardStorage, ShardStore};

impl ShardStore {
    /// Resolves when the commit task has something to do: records were appended
    /// ([`ShardStore::append`]) or a failure waits to be handled
    /// ([`ShardStore::notify_commit_task`]). A wake-up while nobody waits is kept for the
    /// next wait, so none is lost between two turns of the task.
    pub fn commit_task_notified(&self) -> Notified<'_> {
        self.appended.notified()
    }

    /// Wakes the commit task, so that a failure just reported is handled on its next turn
    /// even when no record is appended any more.
    pub fn notify_commit_task(&self) {
        self.appended.notify_one();
    }

    /// The next batch to hand to the disk, when the pipeline wants one: records wait and
    /// none is in flight. An error when the log has failed.
    pub fn prepare_batch(&self) -> Result<Option<Batch<ShardStorage>>, StoreError> {
        if !self.pipeline.borrow().wants_batch() {
            return Ok(None);
        }
        let batch = self.wal.borrow_mut().prepare_batch()?;
        if let Some(batch) = &batch {
            self.pipeline.borrow_mut().batch_started(batch.last_seq());
        }
        Ok(batch)
    }

    /// Takes back an executed batch and lets the pipeline decide what follows; the reason
    /// when the log failed.
    pub fn complete_batch(&self, done: BatchDone<ShardStorage>) -> Result<Release, String> {
        let completed = self.wal.borrow_mut().complete(done);
        let result = match &completed {
            Ok(durable) => BatchResult::Synced(*durable),
            Err(_) => BatchResult::Failed,
        };
        let release = self.pipeline.borrow_mut().batch_done(result);
        match (release, completed) {
            (Some(release), _) => Ok(release),
            (None, Err(error)) => Err(error.to_string()),
            (None, Ok(_)) => Err("the log failed while a batch was in flight".to_owned()),
        }
    }

    /// Writes and syncs everything appended, on the caller's thread (at shutdown, when no
    /// batch may be in flight any more), and returns the durable position the pipeline moved
    /// to (it stays where it was after a failure). `StoreError::Misuse` while a batch is
    /// still in flight: the caller waits for it and tries again.
    pub fn commit_inline(&self) -> Result<u64, StoreError> {
        let durable = self.wal.borrow_mut().commit()?;
        Ok(self.pipeline.borrow_mut().synced_inline(durable))
    }

    /// The job that makes the next log segment ahead of time, to run on a blocking thread so
    /// that a rollover renames a ready file; `None` when a spare is ready or on its way, or
    /// a batch is in flight.
    pub fn prepare_spare(&self) -> Option<SpareJob<ShardStorage>> {
        self.wal.borrow_mut().prepare_spare()
    }

    /// Takes back the segment a [`ShardStore::prepare_spare`] job made, for the next
    /// rollover; an error when making it failed (the rollover then makes one itself).
    pub fn add_spare(&self, done: SpareDone<ShardStorage>) -> Result<(), StoreError> {
        self.wal.borrow_mut().add_spare(done)
    }

    /// Whether the log failed, as the pipeline knows it: a failed batch says so at once,
    /// before the failure is reported with its reason ([`ShardStore::fail`]). Nothing more
    /// goes to the disk then; the commit task only handles the failure.
    pub fn is_failed(&self) -> bool {
        self.pipeline.borrow().is_failed()
    }

    /// Whether the failure still has to be handled (read-only databases, roll-backs): true
    /// once per failure, so that a single turn of the commit task handles it.
    pub fn take_failure_handling(&self) -> bool {
        self.pipeline.borrow_mut().take_failure_handling()
    }

    /// Whether the failure was handled: every database is read-only from then on.
    pub fn failure_handled(&self) -> bool {
        self.pipeline.borrow().failure_handled()
    }

    /// Among `databases` (each with the sequence number of its last record), those with
    /// writes after the durable position ([`ShardStore::synced_seq`]), which a failure means
    /// will never reach the disk: they go back to their durable state and their clients are
    /// disconnected.
    pub fn databases_to_roll_back<'a>(
        &self,
        databases: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Vec<&'a str> {
        self.pipeline.borrow().roll_back(databases)
    }
}
