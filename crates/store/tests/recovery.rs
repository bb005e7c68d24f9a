//! Recovery from damaged logs: torn tails are cut and reported, damage to records that were
//! promised durable is an error naming the file and offset.

mod common;

use common::{options, record_offsets, reopen, root_of, set, small_segments};
use hearth_store::{Corruption, FaultStorage, MemoryStorage, Storage, StoreError, WalOptions};
use serde_json::json;

const FIRST: &str = "wal-00000000000000000001";

/// A log of `batches` batches of `per_batch` records each in one database, each record
/// setting `/k<n>` to `n`.
fn log_of(storage: &MemoryStorage, options: WalOptions, batches: u64, per_batch: u64) {
    let mut wal = reopen(storage, options).expect("opens").wal;
    for n in 0..batches * per_batch {
        wal.append_write("db", &set(&format!("/k{n}"), json!(n)))
            .expect("appends");
        if (n + 1) % per_batch == 0 {
            wal.commit().expect("commits");
        }
    }
}

/// The state after the first `count` records of [`log_of`].
fn first_records(count: u64) -> serde_json::Value {
    let map: serde_json::Map<String, serde_json::Value> =
        (0..count).map(|n| (format!("k{n}"), json!(n))).collect();
    if map.is_empty() {
        serde_json::Value::Null
    } else {
        json!(map)
    }
}

fn segment(storage: &MemoryStorage, name: &str) -> Vec<u8> {
    storage.contents(name).expect("the segment exists")
}

#[test]
fn a_torn_last_record_is_cut_and_reported() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 1, 10);
    let bytes = segment(&storage, FIRST);
    let last = *record_offsets(&bytes).last().expect("records");
    // A crash wrote the first sector of the last record only.
    let mut torn = bytes.clone();
    torn[last + 20..last + 60].fill(0);
    storage.set_contents(FIRST, torn);

    let recovered = reopen(&storage, options())?;
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(9));
    let cut = recovered
        .report
        .tail_cut
        .clone()
        .expect("the cut is reported");
    assert_eq!((cut.file.as_str(), cut.offset), (FIRST, last as u64));
    assert_eq!(cut.reason, Corruption::Checksum);
    assert_eq!(cut.records_dropped, 0);

    // The repair zeroed the tail: new records append cleanly, and no cut is reported again.
    let mut wal = recovered.wal;
    assert_eq!(wal.append_write("db", &set("/new", json!(1)))?.seq, 10);
    wal.commit()?;
    let again = reopen(&storage, options())?;
    assert_eq!(again.report.tail_cut, None);
    assert_eq!(again.databases["db"].seq, 10);
    Ok(())
}

#[test]
fn a_corrupt_byte_in_the_last_record_is_cut() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 3, 4);
    let bytes = segment(&storage, FIRST);
    let last = *record_offsets(&bytes).last().expect("records");
    assert!(storage.flip(FIRST, last as u64 + 40, 0x01));
    let recovered = reopen(&storage, options())?;
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(11));
    let cut = recovered.report.tail_cut.expect("reported");
    assert_eq!(cut.offset, last as u64);
    Ok(())
}

#[test]
fn a_corrupt_byte_before_later_batches_is_an_error() {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 3, 4);
    let offsets = record_offsets(&segment(&storage, FIRST));
    // Record 3 was synced with the first batch; records of the third batch say so.
    let third = offsets[2] as u64;
    assert!(storage.flip(FIRST, third + 33, 0x80));
    match reopen(&storage, options()) {
        Err(StoreError::Corrupt {
            file,
            offset,
            reason,
        }) => {
            assert_eq!((file.as_str(), offset), (FIRST, third));
            assert_eq!(reason, Corruption::Checksum);
        }
        other => panic!(
            "expected a corruption error, got {:?}",
            other.map(|r| r.report)
        ),
    }
}

#[test]
fn a_damaged_length_before_later_batches_is_an_error() {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 3, 4);
    let offsets = record_offsets(&segment(&storage, FIRST));
    // The length is damaged, so the reader cannot step over the record: it finds the later
    // ones by searching.
    assert!(storage.flip(FIRST, offsets[1] as u64 + 5, 0x7f));
    let error = reopen(&storage, options()).err();
    assert!(
        matches!(&error, Some(StoreError::Corrupt { offset, .. }) if *offset == offsets[1] as u64),
        "{error:?}"
    );
}

#[test]
fn damage_inside_the_last_batch_drops_what_follows_and_says_so() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 2, 5);
    let offsets = record_offsets(&segment(&storage, FIRST));
    // Record 7 of the second batch; records 8 to 10 were written with it, and none of them
    // says the batch was durable, so a crash could have torn it exactly like this.
    assert!(storage.flip(FIRST, offsets[6] as u64 + 40, 0x02));
    let recovered = reopen(&storage, options())?;
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(6));
    let cut = recovered.report.tail_cut.expect("reported");
    assert_eq!(cut.offset, offsets[6] as u64);
    assert_eq!(cut.records_dropped, 3);
    Ok(())
}

#[test]
fn garbage_after_the_last_record_is_cut() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 1, 3);
    let bytes = segment(&storage, FIRST);
    let end = record_offsets(&bytes).last().copied().expect("records") + 64;
    assert!(storage.flip(FIRST, end as u64 + 4096, 0x55));
    let recovered = reopen(&storage, options())?;
    assert_eq!(recovered.databases["db"].seq, 3);
    let cut = recovered.report.tail_cut.expect("reported");
    assert_eq!(cut.reason, Corruption::Garbage);
    assert_eq!(
        segment(&storage, FIRST)[end + 4096],
        0,
        "zeroed by the repair"
    );
    Ok(())
}

#[test]
fn damage_in_an_earlier_segment_is_an_error() {
    let storage = MemoryStorage::new();
    log_of(&storage, small_segments(), 10, 6);
    let names = storage.list().expect("lists");
    assert!(names.len() >= 3, "{names:?}");
    let offsets = record_offsets(&segment(&storage, FIRST));
    let victim = *offsets.last().expect("records") as u64;
    assert!(storage.flip(FIRST, victim + 34, 0x10));
    match reopen(&storage, small_segments()) {
        Err(StoreError::Corrupt { file, offset, .. }) => {
            assert_eq!((file.as_str(), offset), (FIRST, victim));
        }
        other => panic!("expected an error, got {:?}", other.map(|r| r.report)),
    }
}

#[test]
fn a_damaged_header_in_an_earlier_segment_is_an_error() {
    let storage = MemoryStorage::new();
    log_of(&storage, small_segments(), 10, 6);
    assert!(storage.flip(FIRST, 20, 0x01));
    let error = reopen(&storage, small_segments()).err();
    assert!(
        matches!(&error, Some(StoreError::Corrupt { file, offset: 0, reason: Corruption::HeaderChecksum }) if file == FIRST),
        "{error:?}"
    );
}

#[test]
fn a_half_created_last_segment_is_dropped() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    log_of(&storage, small_segments(), 4, 3);
    let mut names = storage.list().expect("lists");
    names.sort();
    let last = names.last().expect("segments").clone();
    let index: u64 = last["wal-".len()..].parse().expect("numbered");
    let next = format!("wal-{:020}", index + 1);
    // A crash while creating the next segment: the name made it, the header did not.
    storage.set_contents(&next, vec![0; 100]);
    let recovered = reopen(&storage, small_segments())?;
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(12));
    let cut = recovered.report.tail_cut.clone().expect("reported");
    assert_eq!(cut.segments_dropped, vec![next.clone()]);
    assert!(storage.contents(&next).is_none(), "removed");
    let mut wal = recovered.wal;
    wal.append_write("db", &set("/k12", json!(12)))?;
    wal.commit()?;
    assert_eq!(
        root_of(&reopen(&storage, small_segments())?, "db").to_json(false),
        first_records(13)
    );
    Ok(())
}

#[test]
fn a_missing_segment_is_an_error() {
    let storage = MemoryStorage::new();
    log_of(&storage, small_segments(), 10, 6);
    storage.remove("wal-00000000000000000002").expect("exists");
    let error = reopen(&storage, small_segments()).err();
    assert!(
        matches!(&error, Some(StoreError::MissingSegment { missing, after })
            if missing == "wal-00000000000000000002" && after == FIRST),
        "{error:?}"
    );
}

#[test]
fn a_segment_of_a_newer_format_is_refused() {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 1, 2);
    assert!(storage.flip(FIRST, 8, 0x08));
    let error = reopen(&storage, options()).err();
    assert!(
        matches!(
            error,
            Some(StoreError::UnsupportedVersion {
                found: 13,
                supported: 5,
                ..
            })
        ),
        "{error:?}"
    );
}

#[test]
fn a_valid_record_of_an_unknown_kind_is_an_error() {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 1, 2);
    let bytes = segment(&storage, FIRST);
    let at = record_offsets(&bytes)[1];
    let mut patched = bytes.clone();
    patched[at + 24] = 77;
    let length = u32::from_le_bytes(patched[at + 4..at + 8].try_into().expect("4 bytes"));
    let crc = crc32c::crc32c(&patched[at + 4..at + 32 + length as usize]);
    patched[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    storage.set_contents(FIRST, patched);
    let error = reopen(&storage, options()).err();
    assert!(
        matches!(&error, Some(StoreError::Corrupt { reason: Corruption::UnknownKind(77), offset, .. }) if *offset == at as u64),
        "{error:?}"
    );
}

#[test]
fn a_valid_record_out_of_sequence_is_not_replayed() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 1, 3);
    let bytes = segment(&storage, FIRST);
    let third = record_offsets(&bytes)[2];
    // A well-formed record numbered 9 where record 3 should be: never replayed out of order.
    let mut forged = Vec::new();
    hearth_store::encode_record(
        &mut forged,
        9,
        0,
        0,
        "db",
        hearth_store::RecordRef::Write(&set("/k2", json!(2))),
    )?;
    let mut patched = bytes.clone();
    patched[third..third + forged.len()].copy_from_slice(&forged);
    storage.set_contents(FIRST, patched);
    let recovered = reopen(&storage, options())?;
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(2));
    let cut = recovered.report.tail_cut.expect("reported");
    assert_eq!(
        cut.reason,
        Corruption::Sequence {
            expected: 3,
            found: 9
        }
    );
    assert_eq!(cut.records_dropped, 1);
    Ok(())
}

#[test]
fn reopening_a_whole_log_rewrites_only_the_last_batch() -> Result<(), StoreError> {
    // One batch in the last segment: no later record vouches for its sync, so the repair
    // rewrites and syncs it. The segment itself (64 MiB of zeros) is not written again: its
    // name proves its creation complete, and a start must not cost a segment's worth of disk.
    let storage = FaultStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    for n in 0..10u64 {
        wal.append_write("db", &set(&format!("/k{n}"), json!(n)))?;
    }
    wal.commit()?;
    drop(wal);
    let before = storage.counts();
    let recovered = reopen(&storage, options())?;
    let after = storage.counts();
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(10));
    assert_eq!(
        after.writes - before.writes,
        1,
        "one rewrite of the unsure batch"
    );
    assert_eq!(after.syncs - before.syncs, 1);
    assert_eq!(after.dir_syncs - before.dir_syncs, 0);
    Ok(())
}

#[test]
fn a_segment_left_half_made_under_its_temporary_name_is_removed() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    log_of(&storage, options(), 2, 3);
    let half_made = "wal-00000000000000000002.tmp";
    storage.set_contents(half_made, vec![0; 100]);
    let recovered = reopen(&storage, options())?;
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(6));
    assert_eq!(recovered.report.temporary_files_removed, vec![half_made]);
    assert!(recovered.report.tail_cut.is_none(), "not part of the log");
    assert!(storage.contents(half_made).is_none());
    Ok(())
}

#[test]
fn recovery_returns_every_audit_entry_the_log_holds_and_a_torn_one_is_cut() -> Result<(), StoreError>
{
    use hearth_store::SideKind::{Audit, Triggered};
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    wal.append("db", 0, hearth_store::RecordRef::Triggered(r#"{"t":1}"#))?;
    for n in 0..3u64 {
        wal.append_write("db", &set(&format!("/k{n}"), json!(n)))?;
        let entry = format!(r#"{{"n":{n}}}"#);
        wal.append("db", 0, hearth_store::RecordRef::Audit(&entry))?;
    }
    wal.commit()?;
    drop(wal);
    let recovered = reopen(&storage, options())?;
    let seen: Vec<(u64, &str, _, &str)> = recovered
        .side
        .iter()
        .map(|record| (record.seq, &*record.database, record.kind, &*record.entry))
        .collect();
    assert_eq!(
        seen,
        [
            (1, "db", Triggered, r#"{"t":1}"#),
            (3, "db", Audit, r#"{"n":0}"#),
            (5, "db", Audit, r#"{"n":1}"#),
            (7, "db", Audit, r#"{"n":2}"#)
        ]
    );
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(3));
    drop(recovered);
    // A crash tore the last audit entry: its write stays (it is whole), the entry goes.
    let bytes = segment(&storage, FIRST);
    let last = *record_offsets(&bytes).last().expect("records");
    let mut torn = bytes.clone();
    torn[last + 20..last + 40].fill(0);
    storage.set_contents(FIRST, torn);
    let recovered = reopen(&storage, options())?;
    assert_eq!(recovered.side.len(), 3);
    assert_eq!(root_of(&recovered, "db").to_json(false), first_records(3));
    Ok(())
}

#[test]
fn an_empty_rules_text_puts_the_servers_default_back() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    wal.append_rules("db", r#"{"rules": {".read": true}}"#)?;
    wal.commit()?;
    drop(wal);
    let recovered = reopen(&storage, options())?;
    assert!(recovered.databases["db"].rules.is_some());
    let mut wal = recovered.wal;
    wal.append_rules("db", "")?;
    wal.commit()?;
    drop(wal);
    assert_eq!(reopen(&storage, options())?.databases["db"].rules, None);
    Ok(())
}
