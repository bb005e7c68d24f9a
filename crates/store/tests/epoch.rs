//! Fencing epochs in the log (log format 2): the writer stamps and checks them, recovery
//! exposes the highest per database and skips a deposed owner's late records, and a log of
//! format 1, written before records carried an epoch, still recovers unchanged. Snapshots
//! (snapshot format 2) keep a database's epoch once the log is truncated.

mod common;

use common::{record_offsets, reopen, root_of, set};
use std::sync::Arc;

use hearth_store::{
    decode_record, encode_record, open_lazily, read_snapshot, verify_snapshot,
    write_snapshot_with_epoch, MemoryStorage, RecordRef, StaleEpochs, StoreError, WalOptions,
    WAL_FORMAT_VERSION, WAL_FORMAT_VERSION_NO_EPOCH,
};
use serde_json::json;

const FIRST: &str = "wal-00000000000000000001";
const FIRST_DB: &str = "a";

/// A log of format 1 in two segments of 256 bytes (trailing zeros left out), written by the
/// writer before records carried an epoch (commit a3cbbda) with `segment_bytes` 256:
/// `a` set `/x` = 1; `b` rules `{"rules":{}}`; commit; `a` set `/y` = "hé"; `b` set `/` =
/// `{"k":true}`; commit; `a` set `/x` = 2.5; commit.
const FORMAT_1_LOG: &[(&str, usize, &[&str])] = &[
    (
        "wal-00000000000000000001",
        256,
        &[
        "484541525448574c01000000a30e82e701000000000000000100000000000000000000000000000000010000",
        "0000000000000000000000000000000000000000bc0cbbe90a00000001000000000000000000000000000000",
        "010000000000000001610101780100000302000000000000063b48da0f000000020000000000000000000000",
        "00000000020000000000000001620c7b2272756c6573223a7b7d7d00d4465a5b0d0000000300000000000000",
        "020000000000000001000000000000000161010179010000050368c3a9000000cbec43ac0b00000004000000",
        "00000000020000000000000001000000000000000162000100000601016b02",
        ],
    ),
    (
        "wal-00000000000000000002",
        256,
        &[
        "484541525448574c010000003ca5564c02000000000000000500000000000000040000000000000000010000",
        "0000000000000000000000000000000000000000fdbdc0431100000005000000000000000400000000000000",
        "01000000000000000161010178010000040000000000000440",
        ],
    ),
];

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

fn options() -> WalOptions {
    WalOptions { segment_bytes: 256 }
}

#[test]
fn a_log_of_the_first_format_recovers_unchanged_and_goes_on_in_a_new_segment(
) -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    for (name, size, hex) in FORMAT_1_LOG {
        let mut bytes = unhex(&hex.concat());
        bytes.resize(*size, 0);
        assert_eq!(
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]),
            WAL_FORMAT_VERSION_NO_EPOCH
        );
        storage.set_contents(name, bytes);
    }
    let recovered = reopen(&storage, options())?;
    assert_eq!(recovered.report.records_replayed, 5);
    assert_eq!(recovered.report.tail_cut, None);
    assert!(recovered.report.stale_epochs.is_empty());
    assert_eq!(
        root_of(&recovered, "a").to_json(false),
        json!({"x": 2.5, "y": "hé"})
    );
    assert_eq!(root_of(&recovered, "b").to_json(false), json!({"k": true}));
    assert_eq!(
        recovered.databases["b"].rules.as_deref(),
        Some(r#"{"rules":{}}"#)
    );
    assert_eq!(recovered.databases["a"].epoch, 0);
    let mut wal = recovered.wal;
    assert!(wal.epochs().is_empty());
    // The segment of format 1 has room, but new records never go into it.
    assert_eq!(
        wal.append(FIRST_DB, 3, RecordRef::Write(&set("/z", json!(1))))?
            .seq,
        6
    );
    wal.commit()?;
    let third = storage
        .contents("wal-00000000000000000003")
        .expect("a new segment");
    assert_eq!(
        u32::from_le_bytes([third[8], third[9], third[10], third[11]]),
        WAL_FORMAT_VERSION
    );
    let recovered = reopen(&storage, options())?;
    assert_eq!(recovered.report.records_replayed, 6);
    assert_eq!(
        root_of(&recovered, "a").to_json(false),
        json!({"x": 2.5, "y": "hé", "z": 1})
    );
    assert_eq!(recovered.databases["a"].epoch, 3);
    assert_eq!(recovered.wal.epoch_of("a"), 3);
    Ok(())
}

#[test]
fn the_writer_stamps_epochs_and_refuses_older_ones() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, common::options())?.wal;
    assert_eq!(wal.append_write("solo", &set("/a", json!(1)))?.seq, 1);
    assert_eq!(
        wal.append("db", 1, RecordRef::Write(&set("/a", json!(1))))?
            .seq,
        2
    );
    assert_eq!(
        wal.append("db", 2, RecordRef::Write(&set("/b", json!(2))))?
            .seq,
        3
    );
    let refused = wal.append("db", 1, RecordRef::Write(&set("/c", json!(3))));
    assert!(
        matches!(&refused, Err(StoreError::StaleEpoch { database, epoch: 1, logged: 2 }) if database == "db"),
        "{refused:?}"
    );
    assert!(
        !wal.is_failed(),
        "a refused record leaves the writer working"
    );
    // Rules and writes without an epoch of their own keep the database's.
    assert_eq!(wal.append_rules("db", "{}")?.seq, 4);
    assert_eq!((wal.epoch_of("db"), wal.epoch_of("solo")), (2, 0));
    wal.commit()?;
    let bytes = storage.contents(FIRST).expect("the segment");
    let epochs: Vec<u64> = record_offsets(&bytes)
        .into_iter()
        .map(|at| decode_record(&bytes[at..]).expect("decodes").0.epoch)
        .collect();
    assert_eq!(epochs, vec![0, 1, 2, 2]);
    let recovered = reopen(&storage, common::options())?;
    assert_eq!(recovered.databases["db"].epoch, 2);
    assert_eq!(recovered.databases["solo"].epoch, 0);
    assert_eq!(recovered.wal.epoch_of("db"), 2);
    assert_eq!(
        recovered.wal.epochs().len(),
        1,
        "only non-zero epochs are kept"
    );
    Ok(())
}

#[test]
fn recovery_skips_a_deposed_owners_late_records() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, common::options())?.wal;
    wal.append("db", 1, RecordRef::Write(&set("/a", json!(1))))?;
    wal.append("db", 2, RecordRef::Write(&set("/b", json!(2))))?;
    wal.append("db", 2, RecordRef::Write(&set("/c", json!(3))))?;
    wal.append("other", 1, RecordRef::Write(&set("/d", json!(4))))?;
    wal.commit()?;
    drop(wal);
    // Record 3 is replaced by the same write under epoch 1, as a follower could receive it
    // from the owner that epoch 2 deposed (the writer itself refuses to log it).
    let mut bytes = storage.contents(FIRST).expect("the segment");
    let at = record_offsets(&bytes)[2];
    let (original, size) = decode_record(&bytes[at..]).expect("decodes");
    let mut forged = Vec::new();
    let forged_size = encode_record(
        &mut forged,
        original.seq,
        original.synced_seq,
        1,
        "db",
        RecordRef::Write(&set("/c", json!(3))),
    )?;
    assert_eq!(forged_size, size);
    bytes[at..at + size].copy_from_slice(&forged);
    storage.set_contents(FIRST, bytes);

    let recovered = reopen(&storage, common::options())?;
    assert_eq!(
        root_of(&recovered, "db").to_json(false),
        json!({"a": 1, "b": 2})
    );
    assert_eq!(root_of(&recovered, "other").to_json(false), json!({"d": 4}));
    assert_eq!(recovered.report.records_replayed, 3);
    assert_eq!(
        recovered.report.tail_cut, None,
        "a stale record is not damage"
    );
    assert_eq!(
        recovered.report.stale_epochs.get("db"),
        Some(&StaleEpochs {
            records: 1,
            epoch: 1,
            superseded_by: 2
        })
    );
    assert_eq!(recovered.report.stale_epochs.len(), 1);
    assert_eq!(
        recovered.databases["db"].seq, 2,
        "the state ends at record 2"
    );
    let mut wal = recovered.wal;
    assert_eq!(wal.epoch_of("db"), 2);
    // The log goes on after the skipped record.
    assert_eq!(
        wal.append("db", 3, RecordRef::Write(&set("/e", json!(5))))?
            .seq,
        5
    );
    wal.commit()?;
    let recovered = reopen(&storage, common::options())?;
    assert_eq!(
        root_of(&recovered, "db").to_json(false),
        json!({"a": 1, "b": 2, "e": 5})
    );
    assert_eq!(recovered.databases["db"].epoch, 3);
    Ok(())
}

#[test]
fn a_snapshot_keeps_the_epoch_once_the_log_is_truncated() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, common::options())?.wal;
    wal.append("db", 4, RecordRef::Write(&set("/a", json!(1))))?;
    wal.append("db", 5, RecordRef::Write(&set("/b", json!(2))))?;
    wal.append_write("solo", &set("/c", json!(3)))?;
    wal.commit()?;
    drop(wal);
    let recovered = reopen(&storage, common::options())?;
    let epoch = recovered.wal.epoch_of("db");
    assert_eq!(epoch, 5);
    let db = write_snapshot_with_epoch(&storage, "db", 2, epoch, None, &root_of(&recovered, "db"))?;
    let solo =
        write_snapshot_with_epoch(&storage, "solo", 3, 0, None, &root_of(&recovered, "solo"))?;
    // On disk: version 2 with the epoch in header bytes 24..32; without one, version 1 and
    // zeros, which builds from before the epoch read too.
    let header = |name: &str| {
        let bytes = storage.contents(name).expect("the snapshot");
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let epoch = u64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
        (version, epoch)
    };
    assert_eq!(header(&db.name), (2, 5));
    assert_eq!(header(&solo.name), (1, 0));
    assert_eq!(read_snapshot(&storage, &db.name)?.epoch, 5);
    assert_eq!(verify_snapshot(&storage, &db.name)?.epoch, 5);
    assert_eq!(read_snapshot(&storage, &solo.name)?.epoch, 0);

    // The log truncated past every record: only the snapshots are left.
    let truncated = MemoryStorage::new();
    for name in [&db.name, &solo.name] {
        truncated.set_contents(name, storage.contents(name).expect("the snapshot"));
    }
    let lazily = open_lazily(Arc::new(truncated.clone()), common::options())?;
    assert!(
        lazily.on_disk.contains_key("db"),
        "left on disk, its header read"
    );
    assert_eq!(lazily.wal.epoch_of("db"), 5);
    drop(lazily);
    let recovered = reopen(&truncated, common::options())?;
    assert_eq!(recovered.databases["db"].epoch, 5);
    assert_eq!(
        root_of(&recovered, "db").to_json(false),
        json!({"a": 1, "b": 2})
    );
    let mut wal = recovered.wal;
    assert_eq!((wal.epoch_of("db"), wal.epoch_of("solo")), (5, 0));
    // The writer still refuses an older epoch, and a deposed owner's late record logged
    // after the snapshot is skipped as stale at the next recovery.
    let refused = wal.append("db", 4, RecordRef::Write(&set("/x", json!(0))));
    assert!(
        matches!(
            refused,
            Err(StoreError::StaleEpoch {
                epoch: 4,
                logged: 5,
                ..
            })
        ),
        "{refused:?}"
    );
    wal.append("db", 6, RecordRef::Write(&set("/e", json!(6))))?;
    wal.commit()?;
    drop(wal);
    let recovered = reopen(&truncated, common::options())?;
    assert_eq!(recovered.wal.epoch_of("db"), 6);
    assert_eq!(
        root_of(&recovered, "db").to_json(false),
        json!({"a": 1, "b": 2, "e": 6})
    );
    assert!(recovered.report.stale_epochs.is_empty());
    Ok(())
}

#[test]
fn records_a_snapshot_covers_are_never_stale() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, common::options())?.wal;
    wal.append("db", 2, RecordRef::Write(&set("/a", json!(1))))?;
    wal.append("db", 3, RecordRef::Write(&set("/b", json!(2))))?;
    wal.append("db", 3, RecordRef::Write(&set("/c", json!(3))))?;
    wal.commit()?;
    drop(wal);
    // A snapshot of epoch 3 covering records 1 and 2, the log not truncated yet: record 1,
    // of epoch 2, is in the snapshot, not a deposed owner's late write.
    write_snapshot_with_epoch(
        &storage,
        "db",
        2,
        3,
        None,
        &json_root(json!({"a": 1, "b": 2})),
    )?;
    let recovered = reopen(&storage, common::options())?;
    assert!(
        recovered.report.stale_epochs.is_empty(),
        "{:?}",
        recovered.report.stale_epochs
    );
    assert_eq!(
        (
            recovered.report.records_skipped,
            recovered.report.records_replayed
        ),
        (2, 1)
    );
    assert_eq!(recovered.wal.epoch_of("db"), 3);
    assert_eq!(recovered.databases["db"].epoch, 3);
    assert_eq!(
        root_of(&recovered, "db").to_json(false),
        json!({"a": 1, "b": 2, "c": 3})
    );
    Ok(())
}

fn json_root(value: serde_json::Value) -> hearth_tree::Node {
    hearth_tree::Node::from_json(&value).expect("a tree")
}
