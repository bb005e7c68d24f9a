//! Which snapshots exist, which to keep, and how far they let the log be truncated.
//!
//! Two snapshots of each database are kept, and the log keeps every record after the older of
//! the two. If the newest snapshot is ever unreadable, recovery falls back to the older one
//! and replays the log from there, so damage to one snapshot file never loses data. A
//! database with a single snapshot keeps all its records in the log until the second one.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Operation, StoreError};
use crate::names::{parse_snapshot_name, snapshot_name};
use crate::snapshot::SnapshotInfo;
use crate::storage::Storage;

/// Snapshots kept per database.
pub const SNAPSHOTS_KEPT: usize = 2;

/// The readable snapshots of a shard, by database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotCatalog {
    /// Covered sequence numbers, ascending.
    databases: BTreeMap<Arc<str>, Vec<u64>>,
}

impl SnapshotCatalog {
    pub fn new() -> SnapshotCatalog {
        SnapshotCatalog::default()
    }

    /// The snapshot files among `names`, by database, newest first.
    pub(crate) fn candidates(names: &[String]) -> BTreeMap<&str, Vec<(u64, &str)>> {
        let mut candidates: BTreeMap<&str, Vec<(u64, &str)>> = BTreeMap::new();
        for name in names {
            if let Some((database, covered_seq)) = parse_snapshot_name(name) {
                candidates
                    .entry(database)
                    .or_default()
                    .push((covered_seq, name.as_str()));
            }
        }
        for list in candidates.values_mut() {
            list.sort_unstable_by(|a, b| b.cmp(a));
        }
        candidates
    }

    /// Records a snapshot that was written (or found readable).
    pub fn add(&mut self, info: &SnapshotInfo) {
        let list = self.databases.entry(info.database.clone()).or_default();
        if let Err(at) = list.binary_search(&info.covered_seq) {
            list.insert(at, info.covered_seq);
        }
    }

    pub(crate) fn add_seq(&mut self, database: &str, covered_seq: u64) {
        let list = self.databases.entry(Arc::from(database)).or_default();
        if let Err(at) = list.binary_search(&covered_seq) {
            list.insert(at, covered_seq);
        }
    }

    /// The sequence number the newest snapshot of `database` covers.
    pub fn newest(&self, database: &str) -> Option<u64> {
        self.databases.get(database)?.last().copied()
    }

    /// How far the log may be truncated for `database`: the older of the two newest snapshots
    /// (0 while there is only one), so that recovery can always fall back to it.
    pub fn covered_for_truncation(&self, database: &str) -> u64 {
        match self.databases.get(database) {
            Some(list) if list.len() >= SNAPSHOTS_KEPT => list[list.len() - SNAPSHOTS_KEPT],
            _ => 0,
        }
    }

    /// Forgets the snapshots of `database` beyond the newest [`SNAPSHOTS_KEPT`] and returns
    /// their file names, to remove with [`remove_files`] once the log no longer needs them
    /// (truncate the log first, using [`SnapshotCatalog::covered_for_truncation`]).
    pub fn prune(&mut self, database: &str) -> Vec<String> {
        let Some(list) = self.databases.get_mut(database) else {
            return Vec::new();
        };
        let excess = list.len().saturating_sub(SNAPSHOTS_KEPT);
        list.drain(..excess)
            .map(|covered_seq| snapshot_name(database, covered_seq))
            .collect()
    }

    pub fn databases(&self) -> impl Iterator<Item = &str> {
        self.databases.keys().map(|name| &**name)
    }
}

/// Removes files (old snapshots) and syncs the directory.
pub fn remove_files<S: Storage>(storage: &S, names: &[String]) -> Result<(), StoreError> {
    for name in names {
        storage
            .remove(name)
            .map_err(|error| StoreError::io(name, Operation::Remove, error))?;
    }
    if !names.is_empty() {
        storage
            .sync_dir()
            .map_err(|error| StoreError::io("snapshots", Operation::SyncDir, error))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_two_and_truncates_to_the_older() {
        let mut catalog = SnapshotCatalog::new();
        assert_eq!(catalog.covered_for_truncation("db"), 0);
        catalog.add_seq("db", 10);
        assert_eq!(catalog.newest("db"), Some(10));
        assert_eq!(catalog.covered_for_truncation("db"), 0, "one is not enough");
        catalog.add_seq("db", 30);
        catalog.add_seq("db", 20);
        assert_eq!(catalog.covered_for_truncation("db"), 20);
        assert_eq!(catalog.prune("db"), vec![snapshot_name("db", 10)]);
        assert_eq!(catalog.prune("db"), Vec::<String>::new());
        assert_eq!(catalog.newest("db"), Some(30));
        assert_eq!(catalog.databases().collect::<Vec<_>>(), vec!["db"]);
    }

    #[test]
    fn candidates_are_newest_first() {
        let names: Vec<String> = [
            snapshot_name("a", 5),
            snapshot_name("a", 50),
            snapshot_name("b", 7),
            "wal-00000000000000000001".to_owned(),
        ]
        .into();
        let candidates = SnapshotCatalog::candidates(&names);
        let a: Vec<u64> = candidates["a"].iter().map(|(seq, _)| *seq).collect();
        assert_eq!(a, vec![50, 5]);
        assert_eq!(candidates.len(), 2);
    }
}
