//! When to take a snapshot of a database: a pure decision from the log bytes written since the
//! last one and the time, so that the runtime only has to ask.

/// The triggers. Defaults suit a server with many small databases on one disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// Snapshot once this many log bytes of the database accumulated: bounds both replay time
    /// at recovery and the log space the database pins.
    pub wal_bytes_max: u64,
    /// Snapshot a database with any new records at least this often. A quiet database would
    /// otherwise pin old segments forever, since a segment is removed only when every database
    /// in it is covered.
    pub age_ms_max: u64,
    /// Never snapshot the same database more often than this, however fast it writes: a
    /// snapshot costs a full serialization of the tree.
    pub interval_ms_min: u64,
}

impl Default for SnapshotPolicy {
    fn default() -> SnapshotPolicy {
        SnapshotPolicy {
            wal_bytes_max: 64 * 1024 * 1024,
            age_ms_max: 10 * 60 * 1000,
            interval_ms_min: 10 * 1000,
        }
    }
}

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotDecision {
    Wait,
    Take(SnapshotReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotReason {
    /// [`SnapshotPolicy::wal_bytes_max`] reached.
    WalBytes,
    /// [`SnapshotPolicy::age_ms_max`] passed with records to cover.
    Age,
}

impl SnapshotPolicy {
    /// Decides for one database. `last_snapshot_ms` is when its last snapshot was taken (or
    /// when it was loaded, if it has none). A clock that went backwards counts as no time.
    pub fn decide(
        &self,
        wal_bytes_since_snapshot: u64,
        last_snapshot_ms: u64,
        now_ms: u64,
    ) -> SnapshotDecision {
        if wal_bytes_since_snapshot == 0 {
            return SnapshotDecision::Wait;
        }
        let elapsed_ms = now_ms.saturating_sub(last_snapshot_ms);
        if elapsed_ms < self.interval_ms_min {
            SnapshotDecision::Wait
        } else if wal_bytes_since_snapshot >= self.wal_bytes_max {
            SnapshotDecision::Take(SnapshotReason::WalBytes)
        } else if elapsed_ms >= self.age_ms_max {
            SnapshotDecision::Take(SnapshotReason::Age)
        } else {
            SnapshotDecision::Wait
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: SnapshotPolicy = SnapshotPolicy {
        wal_bytes_max: 1000,
        age_ms_max: 60_000,
        interval_ms_min: 5_000,
    };

    #[test]
    fn size_triggers_after_the_minimum_interval() {
        assert_eq!(POLICY.decide(999, 0, 10_000), SnapshotDecision::Wait);
        assert_eq!(
            POLICY.decide(1000, 0, 10_000),
            SnapshotDecision::Take(SnapshotReason::WalBytes)
        );
        assert_eq!(
            POLICY.decide(1_000_000, 8_000, 10_000),
            SnapshotDecision::Wait
        );
    }

    #[test]
    fn age_triggers_only_with_something_to_cover() {
        assert_eq!(POLICY.decide(0, 0, 1_000_000), SnapshotDecision::Wait);
        assert_eq!(POLICY.decide(1, 0, 59_999), SnapshotDecision::Wait);
        assert_eq!(
            POLICY.decide(1, 0, 60_000),
            SnapshotDecision::Take(SnapshotReason::Age)
        );
    }

    #[test]
    fn a_clock_going_backwards_waits() {
        assert_eq!(POLICY.decide(5000, 100_000, 50_000), SnapshotDecision::Wait);
    }

    #[test]
    fn defaults_are_sane() {
        let policy = SnapshotPolicy::default();
        assert!(policy.interval_ms_min < policy.age_ms_max);
        assert!(policy.wal_bytes_max >= 1024 * 1024);
    }
}
