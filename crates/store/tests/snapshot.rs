//! Snapshots: the streaming format, damage detection, crash safety, the fallback to an older
//! snapshot, and log truncation.

mod common;

use common::{options, reopen, root_of, set, small_segments};
use hearth_store::open_lazily;
use hearth_store::{
    read_snapshot, remove_files, verify_snapshot, write_database_snapshot, write_snapshot,
    Corruption, Fault, FaultPoint, FaultRule, FaultStorage, MemoryStorage, Storage, StoreError,
    SNAPSHOT_FORMAT_VERSION, SNAPSHOT_FRAME_BYTES,
};
use std::sync::Arc;

use hearth_tree::{Node, Priority};
use serde_json::json;

fn big_tree() -> Node {
    let mut root = Node::empty();
    for n in 0..1500 {
        let value =
            json!({ "text": format!("{n}:{}", "z".repeat(400)), "n": n, "f": n as f64 / 7.0 });
        root = set(&format!("/messages/m{n:05}"), value).apply(&root);
    }
    root.with_priority(Priority::String("top".into()))
}

#[test]
fn snapshots_round_trip() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let root = Node::from_json(&json!({"a": {".value": 1, ".priority": 2}, "b": [true, "x"]}))
        .expect("valid");
    let info = write_snapshot(&storage, "db", 41, Some("{\"rules\":{}}"), &root)?;
    assert_eq!(info.name, "snap-db-00000000000000000041");
    let snapshot = read_snapshot(&storage, &info.name)?;
    assert_eq!(snapshot.root, root);
    assert_eq!(snapshot.covered_seq, 41);
    assert_eq!(snapshot.rules.as_deref(), Some("{\"rules\":{}}"));
    assert_eq!(&*snapshot.database, "db");
    let empty = write_snapshot(&storage, "empty", 0, None, &Node::empty())?;
    let snapshot = read_snapshot(&storage, &empty.name)?;
    assert!(snapshot.root.is_empty() && snapshot.rules.is_none());
    assert!(snapshot.settings.is_none());
    Ok(())
}

#[test]
fn a_settings_document_makes_a_version_3_snapshot_with_or_without_an_epoch(
) -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let root = Node::from_json(&json!({"a": 1})).expect("valid");
    let settings = "{\"defaultWriteSizeLimit\":\"small\"}";
    for (name, epoch, rules) in [("solo", 0, None), ("placed", 7, Some("{\"rules\":{}}"))] {
        let info = write_database_snapshot(&storage, name, 3, epoch, rules, Some(settings), &root)?;
        let bytes = storage.contents(&info.name).expect("the snapshot");
        assert_eq!(bytes[8..12], SNAPSHOT_FORMAT_VERSION.to_le_bytes());
        assert_eq!(SNAPSHOT_FORMAT_VERSION, 3);
        let snapshot = read_snapshot(&storage, &info.name)?;
        assert_eq!(snapshot.settings.as_deref(), Some(settings));
        assert_eq!(snapshot.rules.as_deref(), rules);
        assert_eq!(
            (snapshot.epoch, snapshot.root.clone()),
            (epoch, root.clone())
        );
        assert_eq!(verify_snapshot(&storage, &info.name)?.epoch, epoch);
    }
    // Without one, the versions older builds read.
    let plain = write_database_snapshot(&storage, "plain", 3, 0, None, None, &root)?;
    let bytes = storage.contents(&plain.name).expect("the snapshot");
    assert_eq!(bytes[8..12], 1u32.to_le_bytes());
    Ok(())
}

#[test]
fn large_trees_stream_frame_by_frame() -> Result<(), StoreError> {
    let storage = FaultStorage::new();
    let root = big_tree();
    let info = write_snapshot(&storage, "big", 7, None, &root)?;
    assert!(
        info.bytes > 2 * SNAPSHOT_FRAME_BYTES as u64,
        "{} bytes",
        info.bytes
    );
    // Header, one write per frame, end frame: the tree was never serialized whole.
    let frames = info.bytes.div_ceil(SNAPSHOT_FRAME_BYTES as u64);
    assert!(storage.counts().writes > frames);
    let snapshot = read_snapshot(&storage, &info.name)?;
    assert_eq!(snapshot.root, root);
    assert_eq!(snapshot.root.hash(), root.hash());
    Ok(())
}

#[test]
fn damage_anywhere_is_detected() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let info = write_snapshot(&storage, "db", 3, Some("r"), &big_tree())?;
    let original = storage.contents(&info.name).expect("written");
    let size = original.len() as u64;
    let frame = SNAPSHOT_FRAME_BYTES as u64 + 8;
    let offsets = [
        0,
        12,
        17,
        32,
        36,
        40,
        32 + frame,
        32 + frame + 4,
        32 + frame + 1000,
        size - 20,
        size - 10,
        size - 1,
    ];
    for offset in offsets {
        storage.set_contents(&info.name, original.clone());
        assert!(storage.flip(&info.name, offset, 0x08));
        match read_snapshot(&storage, &info.name) {
            Err(StoreError::Corrupt { file, .. }) => assert_eq!(file, info.name),
            other => panic!(
                "offset {offset}: expected corruption, got {:?}",
                other.err()
            ),
        }
        // The check without decoding sees the same damage.
        assert!(
            matches!(
                verify_snapshot(&storage, &info.name),
                Err(StoreError::Corrupt { .. })
            ),
            "offset {offset}: the verification missed the damage"
        );
    }
    for cut in [10, 40, size / 2, size - 16, size - 1] {
        storage.set_contents(&info.name, original[..cut as usize].to_vec());
        assert!(
            matches!(
                read_snapshot(&storage, &info.name),
                Err(StoreError::Corrupt { .. })
            ),
            "cut at {cut}"
        );
        assert!(
            matches!(
                verify_snapshot(&storage, &info.name),
                Err(StoreError::Corrupt { .. })
            ),
            "cut at {cut}"
        );
    }
    storage.set_contents(&info.name, original.clone());
    assert_eq!(verify_snapshot(&storage, &info.name)?.covered_seq, 3);
    let mut longer = original.clone();
    longer.extend_from_slice(&[0; 8]);
    storage.set_contents(&info.name, longer);
    assert!(matches!(
        read_snapshot(&storage, &info.name),
        Err(StoreError::Corrupt {
            reason: Corruption::Garbage,
            ..
        })
    ));
    Ok(())
}

#[test]
fn a_snapshot_under_another_name_is_refused() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let info = write_snapshot(&storage, "db", 3, None, &Node::empty())?;
    storage
        .rename(&info.name, "snap-db-00000000000000000004")
        .expect("renames");
    assert!(matches!(
        read_snapshot(&storage, "snap-db-00000000000000000004"),
        Err(StoreError::Corrupt { .. })
    ));
    Ok(())
}

#[test]
fn a_crash_while_writing_leaves_no_snapshot_and_recovery_cleans_up() -> Result<(), StoreError> {
    let storage = FaultStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    let write = set("/a", json!(1));
    wal.append_write("db", &write)?;
    wal.commit()?;
    storage.inject(FaultRule::once(FaultPoint::Rename, Fault::Halt));
    assert!(write_snapshot(&storage, "db", 1, None, &write.apply(&Node::empty())).is_err());
    for seed in 0..8 {
        let crashed = storage.crash(seed);
        let recovered = reopen(&crashed, options())?;
        assert!(recovered.report.snapshots_loaded.is_empty());
        assert_eq!(root_of(&recovered, "db").to_json(false), json!({"a": 1}));
        let names = crashed.list().expect("lists");
        assert!(
            names.iter().all(|name| !name.ends_with(".tmp")),
            "seed {seed}: {names:?}"
        );
    }
    Ok(())
}

/// Writes to two databases with snapshots along the way; returns the final roots.
/// Removes the log segments the snapshots cover; some must be.
fn truncate(recovered: &mut hearth_store::Recovered<MemoryStorage>) -> Result<(), StoreError> {
    let catalog = &recovered.snapshots;
    let removal = recovered
        .wal
        .take_removable(|database| catalog.covered_for_truncation(database));
    assert!(!removal.names().is_empty(), "old segments are removable");
    removal.execute()?;
    Ok(())
}

fn busy_shard(storage: &MemoryStorage) -> Result<(Node, Node), StoreError> {
    let mut recovered = reopen(storage, small_segments())?;
    let (mut a, mut b) = (Node::empty(), Node::empty());
    for n in 0..120u64 {
        let write = set(
            &format!("/k{}", n % 13),
            json!({ "n": n, "pad": "p".repeat(30) }),
        );
        let (database, root) = if n % 3 == 0 {
            ("b", &mut b)
        } else {
            ("a", &mut a)
        };
        *root = write.apply(root);
        recovered.wal.append_write(database, &write)?;
        if n % 5 == 4 {
            recovered.wal.commit()?;
        }
        if n % 40 == 39 {
            let seq = recovered.wal.last_seq();
            for (database, root) in [("a", &a), ("b", &b)] {
                let info = write_snapshot(storage, database, seq, None, root)?;
                recovered.snapshots.add(&info);
            }
        }
    }
    recovered.wal.commit()?;
    truncate(&mut recovered)?;
    for database in ["a", "b"] {
        let old = recovered.snapshots.prune(database);
        assert_eq!(old.len(), 1, "three snapshots, two kept");
        remove_files(storage, &old)?;
    }
    Ok((a, b))
}

#[test]
fn truncated_logs_and_snapshots_recover_the_same_state() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let (a, b) = busy_shard(&storage)?;
    let recovered = reopen(&storage, small_segments())?;
    assert_eq!(root_of(&recovered, "a"), a);
    assert_eq!(root_of(&recovered, "b"), b);
    assert_eq!(recovered.report.snapshots_loaded.len(), 2);
    assert!(
        recovered.report.records_skipped > 0,
        "records covered by snapshots"
    );
    assert!(
        recovered.wal.segments().first_seq() > Some(1),
        "the log was truncated"
    );
    Ok(())
}

#[test]
fn an_unreadable_newest_snapshot_falls_back_to_the_older_one() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let (a, b) = busy_shard(&storage)?;
    let newest = "snap-a-00000000000000000120";
    assert!(storage.contents(newest).is_some());
    assert!(storage.flip(newest, 100, 0x01));
    let recovered = reopen(&storage, small_segments())?;
    assert_eq!(root_of(&recovered, "a"), a);
    assert_eq!(root_of(&recovered, "b"), b);
    assert_eq!(recovered.report.snapshots_unreadable.len(), 1);
    assert_eq!(recovered.report.snapshots_unreadable[0].0, newest);
    assert_eq!(recovered.snapshots.newest("a"), Some(80));
    Ok(())
}

#[test]
fn without_a_usable_snapshot_or_log_recovery_refuses() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    busy_shard(&storage)?;
    assert!(storage.flip("snap-a-00000000000000000120", 100, 0x01));
    assert!(storage.flip("snap-a-00000000000000000080", 100, 0x01));
    match reopen(&storage, small_segments()) {
        Err(StoreError::SnapshotUnrecoverable { database, .. }) => assert_eq!(database, "a"),
        other => panic!("expected a refusal, got {:?}", other.map(|r| r.report)),
    }
    Ok(())
}

#[test]
fn a_quiet_database_pins_its_segments_until_covered_twice() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut recovered = reopen(&storage, small_segments())?;
    let quiet = set("/x", json!(1)).apply(&Node::empty());
    recovered.wal.append_write("quiet", &set("/x", json!(1)))?;
    let mut busy = Node::empty();
    for n in 0..60 {
        let write = set(&format!("/k{n}"), json!("v".repeat(40)));
        busy = write.apply(&busy);
        recovered.wal.append_write("busy", &write)?;
    }
    let durable = recovered.wal.commit()?;
    assert_eq!(durable, 61);
    let removable = |recovered: &hearth_store::Recovered<MemoryStorage>| {
        let catalog = &recovered.snapshots;
        recovered
            .wal
            .segments()
            .removable(durable, |database| catalog.covered_for_truncation(database))
    };
    for seq in [60, 61] {
        let info = write_snapshot(&storage, "busy", seq, None, &busy)?;
        recovered.snapshots.add(&info);
    }
    assert_eq!(removable(&recovered), 0, "the first segment holds `quiet`");
    let info = write_snapshot(&storage, "quiet", 61, None, &quiet)?;
    recovered.snapshots.add(&info);
    // One snapshot is not enough: the log must still rebuild `quiet` if it is damaged.
    assert_eq!(removable(&recovered), 0);
    let info = write_snapshot(&storage, "quiet", 60, None, &quiet)?;
    recovered.snapshots.add(&info);
    assert!(removable(&recovered) > 0);
    Ok(())
}

#[test]
fn snapshots_newer_than_the_log_continue_after_a_gap() -> Result<(), StoreError> {
    let storage = FaultStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    let mut root = Node::empty();
    for n in 0..5 {
        let write = set(&format!("/k{n}"), json!(n));
        root = write.apply(&root);
        wal.append_write("db", &write)?;
        if n == 1 {
            wal.commit()?;
        }
    }
    // The snapshot includes records 3 to 5, which never reach the log.
    write_snapshot(&storage, "db", wal.last_seq(), None, &root)?;
    let crashed = storage.crash_losing_unsynced();
    let recovered = reopen(&crashed, options())?;
    assert_eq!(root_of(&recovered, "db"), root);
    let mut wal = recovered.wal;
    // Sequence numbers go on after the snapshot, so later records are not taken as covered.
    let after = set("/after", json!(true));
    root = after.apply(&root);
    assert_eq!(wal.append_write("db", &after)?.seq, 6);
    wal.commit()?;
    assert_eq!(
        wal.segments().segments().len(),
        2,
        "a new segment holds the jump"
    );
    let recovered = reopen(&crashed.crash_losing_unsynced(), options())?;
    assert_eq!(root_of(&recovered, "db"), root);
    assert_eq!(recovered.report.tail_cut, None);
    Ok(())
}

#[test]
fn lazy_recovery_leaves_databases_their_snapshot_covers_on_disk() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let (a, b) = busy_shard(&storage)?;
    let recovered = open_lazily(Arc::new(storage.clone()), small_segments())?;
    assert!(recovered.databases.is_empty(), "nothing loaded");
    let on_disk: Vec<(&str, u64)> = recovered
        .on_disk
        .iter()
        .map(|(name, seq)| (&**name, *seq))
        .collect();
    assert_eq!(on_disk, vec![("a", 120), ("b", 120)]);
    assert_eq!(
        read_snapshot(&storage, "snap-a-00000000000000000120")?.root,
        a
    );
    assert_eq!(
        read_snapshot(&storage, "snap-b-00000000000000000120")?.root,
        b
    );
    assert!(recovered.report.snapshots_loaded.is_empty());

    // A write to `a` after the snapshot: `a` is loaded (snapshot and record), `b` stays out.
    let mut wal = recovered.wal;
    let write = set("/late", json!(true));
    wal.append_write("a", &write)?;
    wal.commit()?;
    assert_eq!(wal.last_seq(), 121, "numbering goes on after the snapshots");
    drop(wal);
    let recovered = open_lazily(Arc::new(storage.clone()), small_segments())?;
    assert_eq!(root_of(&recovered, "a"), write.apply(&a));
    assert!(!recovered.databases.contains_key("b"));
    assert_eq!(recovered.on_disk.get("b"), Some(&120));
    // The eager path recovers the same states.
    let eager = reopen(&storage, small_segments())?;
    assert_eq!(root_of(&eager, "a"), write.apply(&a));
    assert_eq!(root_of(&eager, "b"), b);
    Ok(())
}

#[test]
fn lazy_recovery_loads_a_database_whose_newest_snapshot_is_damaged() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let (a, _) = busy_shard(&storage)?;
    let newest = "snap-a-00000000000000000120";
    assert!(storage.flip(newest, 100, 0x01));
    let recovered = open_lazily(Arc::new(storage.clone()), small_segments())?;
    assert_eq!(
        root_of(&recovered, "a"),
        a,
        "fell back to the older snapshot and the log"
    );
    assert_eq!(recovered.report.snapshots_unreadable.len(), 1);
    assert!(recovered.on_disk.contains_key("b"));
    assert!(!recovered.on_disk.contains_key("a"));
    Ok(())
}

#[test]
fn lazy_recovery_replays_databases_without_a_snapshot() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut wal = reopen(&storage, options())?.wal;
    let write = set("/x", json!(1));
    wal.append_write("plain", &write)?;
    wal.commit()?;
    drop(wal);
    let recovered = open_lazily(Arc::new(storage.clone()), options())?;
    assert_eq!(root_of(&recovered, "plain"), write.apply(&Node::empty()));
    assert!(recovered.on_disk.is_empty());
    Ok(())
}

/// The write records of `database` a recovery kept for change feeds, as positions.
fn kept_changes(
    recovered: &hearth_store::Recovered<MemoryStorage>,
    database: &str,
) -> (u64, Vec<u64>) {
    let changes = &recovered.databases[database].changes;
    let floor = changes.floor();
    let kept = changes
        .since(floor, u64::MAX)
        .expect("from the floor")
        .map(|(seq, _)| seq)
        .collect();
    (floor, kept)
}

#[test]
fn recovery_keeps_for_feeds_every_write_record_the_log_still_holds() -> Result<(), StoreError> {
    let storage = MemoryStorage::new();
    let mut recovered = reopen(&storage, small_segments())?;
    let mut of_a = Vec::new();
    let mut root = Node::empty();
    for n in 0..60u64 {
        let database = if n % 2 == 0 { "a" } else { "b" };
        let write = set(
            &format!("/k{}", n % 7),
            json!({ "n": n, "pad": "p".repeat(30) }),
        );
        let appended = recovered.wal.append_write(database, &write)?;
        if database == "a" {
            root = write.apply(&root);
            of_a.push(appended.seq);
        }
        recovered.wal.commit()?;
        if n == 29 {
            let info = write_snapshot(&storage, "a", recovered.wal.last_seq(), None, &root)?;
            recovered.snapshots.add(&info);
        }
    }
    // `b` has no snapshot, so it pins the whole log: the records of `a` that its snapshot
    // covers are still there, and a feed may resume from before the snapshot.
    let again = reopen(&storage, small_segments())?;
    assert_eq!(again.report.snapshots_loaded.len(), 1);
    assert_eq!(kept_changes(&again, "a"), (0, of_a.clone()));
    // Once `b` is covered too, the log is cut: what it no longer holds is below the floor.
    // (Truncation waits for each database's older kept snapshot: two of each.)
    let mut b_root = root_of(&again, "b");
    let mut recovered = again;
    for round in 0..2u64 {
        for n in 0..8u64 {
            let database = if n % 2 == 0 { "a" } else { "b" };
            let write = set(
                &format!("/r{round}"),
                json!({ "n": n, "pad": "p".repeat(30) }),
            );
            let appended = recovered.wal.append_write(database, &write)?;
            let tree = if database == "a" {
                &mut root
            } else {
                &mut b_root
            };
            *tree = write.apply(tree);
            if database == "a" {
                of_a.push(appended.seq);
            }
        }
        recovered.wal.commit()?;
        for (database, tree) in [("a", &root), ("b", &b_root)] {
            let info = write_snapshot(&storage, database, recovered.wal.last_seq(), None, tree)?;
            recovered.snapshots.add(&info);
        }
    }
    truncate(&mut recovered)?;
    let again = reopen(&storage, small_segments())?;
    let first = again.wal.segments().first_seq().expect("a log");
    assert!(first > 1, "the log was cut");
    let (floor, kept) = kept_changes(&again, "a");
    assert_eq!(floor, first - 1);
    let expected: Vec<u64> = of_a.into_iter().filter(|&seq| seq >= first).collect();
    assert_eq!(kept, expected);
    // A lazy recovery leaves `a` on disk (its snapshot covers every record) and keeps the
    // same records aside for its feeds.
    drop(again);
    let lazy = open_lazily(Arc::new(storage.clone()), small_segments())?;
    assert!(lazy.on_disk.contains_key("a"));
    let changes = &lazy.on_disk_changes["a"];
    assert_eq!(changes.floor(), first - 1);
    let aside: Vec<u64> = changes
        .since(changes.floor(), u64::MAX)
        .expect("from the floor")
        .map(|(seq, _)| seq)
        .collect();
    assert_eq!(aside, expected);
    Ok(())
}
