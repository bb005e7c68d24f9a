//! Names: of databases (which appear in file names) and of the files in a shard's directory.
//!
//! ```text
//! wal-00000000000000000001            log segment 1 (numbered consecutively from 1)
//! snap-<database>-00000000000000004711  snapshot of <database> covering sequence number 4711
//! snap-<database>-00000000000000004711.tmp  a snapshot being written (removed by recovery)
//! wal-00000000000000000002.tmp        a segment being made (removed by recovery)
//! wal-spare                           a zero-filled segment made ahead of time, renamed to the
//!                                     next segment's name when the log rolls over (removed by
//!                                     recovery: it is never part of the log)
//! ```
//!
//! Numbers are zero-padded to 20 digits so that names sort as numbers do.

use crate::error::StoreError;

/// Longest database name, in bytes; the same as the server's namespace limit.
pub const MAX_DATABASE_NAME_BYTES: usize = 128;

const SEGMENT_PREFIX: &str = "wal-";
const SNAPSHOT_PREFIX: &str = "snap-";
const TEMPORARY_SUFFIX: &str = ".tmp";

/// Checks that `name` can name a database: 1 to [`MAX_DATABASE_NAME_BYTES`] of `a-z`, `A-Z`,
/// `0-9`, `-` and `_`, the server's namespace alphabet. The store needs the check of its own
/// because the name becomes part of snapshot file names.
pub fn validate_database_name(name: &str) -> Result<(), StoreError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_DATABASE_NAME_BYTES
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if valid {
        Ok(())
    } else {
        Err(StoreError::InvalidDatabaseName(name.to_owned()))
    }
}

pub(crate) fn segment_name(index: u64) -> String {
    format!("{SEGMENT_PREFIX}{index:020}")
}

pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    parse_number(name.strip_prefix(SEGMENT_PREFIX)?)
}

/// The file name of the snapshot of `database` that covers the log up to `covered_seq`.
pub fn snapshot_name(database: &str, covered_seq: u64) -> String {
    format!("{SNAPSHOT_PREFIX}{database}-{covered_seq:020}")
}

/// The name of the segment made ahead of time.
pub(crate) const SPARE_SEGMENT_NAME: &str = "wal-spare";

pub(crate) fn temporary_name(name: &str) -> String {
    format!("{name}{TEMPORARY_SUFFIX}")
}

/// The database and covered sequence number of a snapshot file name. The database may itself
/// contain `-`, so the number is split off from the right.
pub(crate) fn parse_snapshot_name(name: &str) -> Option<(&str, u64)> {
    let (database, number) = name.strip_prefix(SNAPSHOT_PREFIX)?.rsplit_once('-')?;
    validate_database_name(database).ok()?;
    Some((database, parse_number(number)?))
}

/// Whether recovery removes `name`: a snapshot or a segment being written, or the spare
/// segment.
pub(crate) fn is_temporary(name: &str) -> bool {
    name == SPARE_SEGMENT_NAME
        || name.strip_suffix(TEMPORARY_SUFFIX).is_some_and(|stem| {
            parse_snapshot_name(stem).is_some() || parse_segment_name(stem).is_some()
        })
}

/// Exactly 20 digits, so that every number has one name.
fn parse_number(digits: &str) -> Option<u64> {
    if digits.len() != 20 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(segment_name(7), "wal-00000000000000000007");
        assert_eq!(parse_segment_name(&segment_name(u64::MAX)), Some(u64::MAX));
        let name = snapshot_name("my-db_2", 4711);
        assert_eq!(name, "snap-my-db_2-00000000000000004711");
        assert_eq!(parse_snapshot_name(&name), Some(("my-db_2", 4711)));
        assert!(is_temporary(&temporary_name(&name)));
        assert!(!is_temporary(&name));
        assert!(is_temporary(&temporary_name(&segment_name(3))));
        assert!(!is_temporary(&segment_name(3)));
        assert_eq!(parse_segment_name(&temporary_name(&segment_name(3))), None);
    }

    #[test]
    fn foreign_names_are_not_ours() {
        for name in [
            "wal-7",
            "wal-0000000000000000000x",
            "snap--00000000000000000001",
            "snap-a/b-00000000000000000001",
            "snap-db",
            "notes.txt",
        ] {
            assert_eq!(parse_segment_name(name), None, "{name}");
            assert_eq!(parse_snapshot_name(name), None, "{name}");
        }
    }

    #[test]
    fn database_names_are_checked() {
        assert!(validate_database_name("default").is_ok());
        assert!(validate_database_name(&"x".repeat(MAX_DATABASE_NAME_BYTES)).is_ok());
        for bad in [
            "",
            "a/b",
            "..",
            "é",
            &"x".repeat(MAX_DATABASE_NAME_BYTES + 1),
        ] {
            assert!(validate_database_name(bad).is_err(), "{bad:?}");
        }
    }
}
