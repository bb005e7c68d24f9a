//! The log writer, group commit, segment rollover, and disk errors.

mod common;

use std::sync::Arc;

use common::{options, record_offsets, reopen, root_of, set, small_segments};
use hearth_store::{
    decode_record, open, Fault, FaultPoint, FaultRule, FaultStorage, MemoryStorage, Operation,
    SegmentHeader, Storage, StoreError,
};
use hearth_tree::Node;
use serde_json::json;

const FIRST_SEGMENT: &str = "wal-00000000000000000001";

#[test]
fn records_survive_reopen_in_order() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    let mut model_a = Node::empty();
    for n in 0..20 {
        let write = set(&format!("/items/{}", n % 7), json!({ "n": n }));
        model_a = write.apply(&model_a);
        wal.append_write("a", &write)?;
    }
    wal.append_write("b", &set("/", json!("only")))?;
    wal.append_rules("a", r#"{"rules":{}}"#)?;
    wal.append_settings("b", r#"{"old":1}"#)?;
    wal.append_settings("b", r#"{"new":2}"#)?;
    assert_eq!(wal.last_seq(), 24);
    assert_eq!(wal.durable_seq(), 0, "nothing is durable before the batch");
    assert_eq!(wal.commit()?, 24);

    let recovered = reopen(&storage, options())?;
    assert_eq!(root_of(&recovered, "a"), model_a);
    assert_eq!(root_of(&recovered, "b").to_json(false), json!("only"));
    let a = &recovered.databases["a"];
    assert_eq!(a.rules.as_deref(), Some(r#"{"rules":{}}"#));
    assert_eq!(a.seq, 22);
    assert_eq!(a.settings, None);
    let b = &recovered.databases["b"];
    assert_eq!(
        b.settings.as_deref(),
        Some(r#"{"new":2}"#),
        "the last one counts"
    );
    assert_eq!(b.rules, None);
    assert_eq!(recovered.report.records_replayed, 24);
    assert_eq!(recovered.report.tail_cut, None);
    let mut wal = recovered.wal;
    assert_eq!(wal.append_write("b", &set("/", json!(1)))?.seq, 25);
    Ok(())
}

#[test]
fn one_batch_is_one_write_and_one_sync() -> Result<(), StoreError> {
    let storage = FaultStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    wal.append_write("db", &set("/warm", json!(1)))?;
    wal.commit()?; // Creates the segment: zero fill, syncs of file and directory.
    let before = storage.counts();
    for n in 0..100 {
        wal.append_write("db", &set(&format!("/k{n}"), json!(n)))?;
    }
    let batch = wal.prepare_batch()?.expect("records are pending");
    assert_eq!((batch.first_seq(), batch.last_seq()), (2, 101));
    assert_eq!(batch.writes().count(), 1);
    wal.complete(batch.execute())?;
    let after = storage.counts();
    assert_eq!(after.writes - before.writes, 1);
    assert_eq!(after.syncs - before.syncs, 1);
    assert_eq!(after.dir_syncs, before.dir_syncs);
    assert_eq!(wal.durable_seq(), 101);
    assert!(wal.prepare_batch()?.is_none(), "nothing left");
    Ok(())
}

#[test]
fn batches_run_on_another_thread_while_appends_go_on() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    wal.append_write("db", &set("/a", json!(1)))?;
    wal.append_write("db", &set("/b", json!(2)))?;
    let batch = wal.prepare_batch()?.expect("records are pending");
    let worker = std::thread::spawn(move || batch.execute());
    // The shard keeps appending while the batch is written.
    wal.append_write("db", &set("/c", json!(3)))?;
    assert!(
        wal.prepare_batch()?.is_none(),
        "one batch in flight at a time"
    );
    let done = worker.join().expect("the batch thread does not panic");
    assert_eq!(wal.complete(done)?, 2);
    assert_eq!(wal.commit()?, 3);
    // The third record was appended before anything was durable; a later one knows 3.
    wal.append_write("db", &set("/d", json!(4)))?;
    wal.commit()?;
    let segment = storage.contents(FIRST_SEGMENT).expect("the segment exists");
    let synced: Vec<(u64, u64)> = record_offsets(&segment)
        .into_iter()
        .map(|offset| {
            let (record, _) = decode_record(&segment[offset..]).expect("valid");
            (record.seq, record.synced_seq)
        })
        .collect();
    assert_eq!(synced, vec![(1, 0), (2, 0), (3, 0), (4, 3)]);
    Ok(())
}

#[test]
fn completing_the_wrong_batch_is_misuse() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    wal.append_write("db", &set("/a", json!(1)))?;
    let batch = wal.prepare_batch()?.expect("pending");
    assert!(matches!(wal.commit(), Err(StoreError::Misuse(_))));
    let mut other = reopen(&MemoryStorage::new(), options())?.wal;
    assert!(matches!(
        other.complete(batch.execute()),
        Err(StoreError::Misuse(_))
    ));
    Ok(())
}

#[test]
fn segments_roll_over_and_chain() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, small_segments())?.wal;
    let mut model = Node::empty();
    for n in 0..60u64 {
        let write = set(
            &format!("/k{}", n % 9),
            json!({ "n": n, "pad": "x".repeat(40) }),
        );
        model = write.apply(&model);
        wal.append_write("db", &write)?;
        if n % 7 == 0 {
            wal.commit()?;
        }
    }
    // A record larger than a segment gets a segment of its own.
    let big = set("/big", json!("y".repeat(3000)));
    model = big.apply(&model);
    wal.append_write("db", &big)?;
    wal.commit()?;
    let mut names = storage.list().expect("memory lists");
    names.sort();
    assert!(names.len() > 5, "{names:?}");
    let mut previous_last = 0;
    for name in &names {
        let bytes = storage.contents(name).expect("listed");
        let header = header_of(&bytes);
        assert_eq!(header.previous_seq, previous_last, "{name}");
        assert_eq!(header.first_seq, previous_last + 1, "{name}");
        assert_eq!(bytes.len() as u64, header.size, "preallocated");
        previous_last += record_offsets(&bytes).len() as u64;
    }
    assert_eq!(previous_last, 61);
    let last = storage
        .contents(names.last().expect("segments"))
        .expect("exists");
    assert!(last.len() > 3000);
    let recovered = reopen(&storage, small_segments())?;
    assert_eq!(root_of(&recovered, "db"), model);
    assert_eq!(recovered.wal.segments().segments().len(), names.len());
    Ok(())
}

#[test]
fn no_space_on_write_stops_the_writer() -> Result<(), StoreError> {
    let storage = FaultStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    wal.append_write("db", &set("/a", json!(1)))?;
    wal.commit()?;
    wal.append_write("db", &set("/b", json!(2)))?;
    storage.inject(FaultRule::once(FaultPoint::Write, Fault::NoSpace));
    let error = wal.commit().expect_err("the write fails");
    assert!(error.is_no_space(), "{error}");
    assert!(matches!(
        error,
        StoreError::NoSpace {
            operation: Operation::Write,
            ..
        }
    ));
    assert!(wal.is_failed());
    assert_eq!(wal.durable_seq(), 1, "the failed batch is not durable");
    assert!(matches!(
        wal.append_write("db", &set("/c", json!(3))),
        Err(StoreError::Failed { .. })
    ));
    assert!(matches!(
        wal.prepare_batch(),
        Err(StoreError::Failed { .. })
    ));
    // Reopening finds what is really on disk: the first write only.
    let recovered = reopen(&storage, options())?;
    assert_eq!(root_of(&recovered, "db").to_json(false), json!({"a": 1}));
    let mut wal = recovered.wal;
    assert_eq!(wal.append_write("db", &set("/c", json!(3)))?.seq, 2);
    assert_eq!(wal.commit()?, 2);
    Ok(())
}

#[test]
fn an_eio_on_sync_is_never_counted_as_durable() -> Result<(), StoreError> {
    let storage = FaultStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    wal.append_write("db", &set("/a", json!(1)))?;
    wal.commit()?;
    wal.append_write("db", &set("/b", json!(2)))?;
    storage.inject(FaultRule::once(FaultPoint::Sync, Fault::Io));
    let error = wal.commit().expect_err("the sync fails");
    assert!(matches!(
        error,
        StoreError::Io {
            operation: Operation::Sync,
            ..
        }
    ));
    assert_eq!(wal.durable_seq(), 1);
    // The kernel dropped the pages: a power loss now loses the second write...
    let lost = reopen(&storage.crash_losing_unsynced(), options())?;
    assert_eq!(root_of(&lost, "db").to_json(false), json!({"a": 1}));
    // ...although the page cache still shows it. Reopening reads it, and rewrites and syncs
    // it, so that from then on it really is durable.
    let recovered = reopen(&storage, options())?;
    assert_eq!(
        root_of(&recovered, "db").to_json(false),
        json!({"a": 1, "b": 2})
    );
    let after_crash = reopen(&storage.crash_losing_unsynced(), options())?;
    assert_eq!(
        root_of(&after_crash, "db").to_json(false),
        json!({"a": 1, "b": 2})
    );
    Ok(())
}

#[test]
fn no_space_while_creating_a_segment() -> Result<(), StoreError> {
    let storage = FaultStorage::new();
    let mut wal = reopen(&storage, small_segments())?.wal;
    storage.inject(FaultRule::once(FaultPoint::Create, Fault::NoSpace));
    wal.append_write("db", &set("/a", json!(1)))?;
    let error = wal.commit().expect_err("the segment cannot be created");
    assert!(matches!(
        error,
        StoreError::NoSpace {
            operation: Operation::Create,
            ..
        }
    ));
    assert_eq!(wal.durable_seq(), 0);
    let mut wal = reopen(&storage, small_segments())?.wal;
    wal.append_write("db", &set("/a", json!(1)))?;
    assert_eq!(wal.commit()?, 1);
    Ok(())
}

#[test]
fn invalid_database_names_do_not_stop_the_writer() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    wal.append_write("ok", &set("/a", json!(1)))?;
    assert!(matches!(
        wal.append_write("../etc", &set("/a", json!(1))),
        Err(StoreError::InvalidDatabaseName(_))
    ));
    assert_eq!(wal.append_write("ok", &set("/b", json!(2)))?.seq, 2);
    assert_eq!(wal.commit()?, 2);
    assert_eq!(
        root_of(&reopen(&storage, options())?, "ok").to_json(false),
        json!({"a": 1, "b": 2})
    );
    Ok(())
}

#[test]
fn a_crash_mid_batch_keeps_everything_synced() -> Result<(), StoreError> {
    let (mut cuts, mut dropped) = (0, 0);
    for seed in 0..100 {
        let storage = FaultStorage::new();
        let mut wal = open(Arc::new(storage.clone()), options())?.wal;
        for n in 0..12 {
            wal.append_write("db", &set(&format!("/k{n}"), json!(n)))?;
        }
        wal.commit()?;
        for n in 12..30 {
            wal.append_write("db", &set(&format!("/k{n}"), json!(n)))?;
        }
        // The process dies in the batch's first sync: its writes reach the disk in any mix.
        storage.inject(FaultRule::always(FaultPoint::Sync, Fault::Halt));
        assert!(wal.commit().is_err());
        let crashed = storage.crash(seed);
        let recovered = reopen(&crashed, options())?;
        let state = &recovered.databases["db"];
        assert!(state.seq >= 12, "seed {seed}: synced records survive");
        if let Some(cut) = &recovered.report.tail_cut {
            cuts += 1;
            dropped += cut.records_dropped;
        }
        let expected: serde_json::Map<String, serde_json::Value> = (0..state.seq)
            .map(|n| (format!("k{n}"), json!(n)))
            .collect();
        assert_eq!(state.root.to_json(false), json!(expected), "seed {seed}");
        // The repaired log takes new records, and they survive the next crash.
        let mut wal = recovered.wal;
        let seq = wal.append_write("db", &set("/after", json!(true)))?.seq;
        wal.commit()?;
        let again = reopen(&crashed.crash(seed + 1000), options())?;
        assert_eq!(again.databases["db"].seq, seq, "seed {seed}");
        assert_eq!(
            again.report.tail_cut, None,
            "seed {seed}: the repair left no tail"
        );
    }
    // The seeds do produce torn tails, some with valid records after the tear.
    assert!(
        cuts >= 5 && dropped > 0,
        "{cuts} cuts, {dropped} records dropped"
    );
    Ok(())
}

#[test]
fn real_files_round_trip() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let storage = hearth_store::FileStorage::open(dir.path()).expect("opens");
    let mut wal = reopen(&storage, small_segments())?.wal;
    let mut model = Node::empty();
    for n in 0..40 {
        let write = set(&format!("/k{}", n % 11), json!({ "n": n }));
        model = write.apply(&model);
        wal.append_write("db", &write)?;
        if n % 6 == 5 {
            wal.commit()?;
        }
    }
    wal.append_rules("db", "{}")?;
    wal.commit()?;
    drop(wal);
    let recovered = reopen(&storage, small_segments())?;
    assert_eq!(root_of(&recovered, "db"), model);
    assert_eq!(recovered.databases["db"].rules.as_deref(), Some("{}"));
    let segments = storage.list().expect("lists").len();
    assert!(segments > 1, "{segments} segments");
    Ok(())
}

/// The fields of a segment header, read directly (the test checks the documented layout).
fn header_of(bytes: &[u8]) -> SegmentHeader {
    let word = |at: usize| {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(buf)
    };
    SegmentHeader {
        version: word(8) as u32,
        index: word(16),
        first_seq: word(24),
        previous_seq: word(32),
        size: word(40),
    }
}
