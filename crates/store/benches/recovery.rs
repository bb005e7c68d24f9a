//! Recovery time: opening a shard directory that holds about 1 GB of snapshot plus log, as a
//! server start does (the newest snapshot read and verified, then every later log record
//! replayed).
//!
//! `cargo bench -p hearth-store --bench recovery`. About 900 MB of snapshot and 100 MB of log
//! at scale 1, in a temporary directory; `HEARTH_BENCH_SCALE` (a fraction, default 1) scales
//! both, for CI smoke runs (`cargo test --benches`). The page cache is warm (the files were just
//! written), so this is the CPU cost of recovery; a cold read adds the disk's read time.

use std::sync::Arc;
use std::time::Instant;

use hearth_store::{open, write_snapshot, FileStorage, WalOptions};
use hearth_sync::{Change, Write, WriteOp};
use hearth_tree::{Node, Path};
use serde_json::{json, Map, Value};

const SNAPSHOT_BYTES: f64 = 900.0 * 1024.0 * 1024.0;
const LOG_BYTES: f64 = 100.0 * 1024.0 * 1024.0;
/// Children per chunk of the tree, each holding about `LEAF_BYTES` of text.
const CHUNK_CHILDREN: usize = 1000;
const LEAF_BYTES: usize = 1000;

fn scale() -> f64 {
    std::env::var("HEARTH_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0)
}

/// Deterministic text: varied enough that nothing in the path compresses it away.
fn text(n: usize) -> String {
    let mut state = n as u64 ^ 0x9e37_79b9_7f4a_7c15;
    (0..LEAF_BYTES)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect()
}

fn chunk(index: usize) -> Node {
    let mut children = Map::new();
    for child in 0..CHUNK_CHILDREN {
        let n = index * CHUNK_CHILDREN + child;
        children.insert(
            format!("m{child:04}"),
            json!({"text": text(n), "ts": 1_700_000_000_000u64 + n as u64, "ok": n.is_multiple_of(3)}),
        );
    }
    Node::from_json(&Value::Object(children)).expect("a valid chunk")
}

fn path(text: &str) -> Path {
    Path::parse(text).expect("a valid path")
}

fn main() {
    let scale = scale();
    let chunks = ((SNAPSHOT_BYTES * scale) / (CHUNK_CHILDREN * (LEAF_BYTES + 40)) as f64)
        .ceil()
        .max(1.0) as usize;
    let records = ((LOG_BYTES * scale) / (LEAF_BYTES + 80) as f64)
        .ceil()
        .max(10.0) as u64;
    let dir = tempfile::Builder::new()
        .prefix("hearth-recovery-bench-")
        .tempdir()
        .expect("a temporary directory");
    let storage = Arc::new(FileStorage::open(dir.path()).expect("the directory opens"));

    let started = Instant::now();
    let mut root = Node::empty();
    for index in 0..chunks {
        root = root.set(&path(&format!("/rooms/r{index:05}")), chunk(index));
    }
    let built = started.elapsed();

    let mut wal = open(storage.clone(), WalOptions::default())
        .expect("an empty directory opens")
        .wal;
    let started = Instant::now();
    let info = write_snapshot(&*storage, "big", wal.last_seq(), None, &root)
        .expect("the snapshot is written");
    let snapshot_time = started.elapsed();
    drop(root);

    let started = Instant::now();
    for n in 0..records {
        let write = Write {
            base: path(&format!("/log/w{n:07}")),
            ops: vec![WriteOp {
                path: Path::root(),
                change: Change::Set(
                    Node::from_json(&json!({"text": text(n as usize), "n": n}))
                        .expect("a valid value"),
                ),
            }],
        };
        wal.append_write("big", &write).expect("appended");
        if (n + 1).is_multiple_of(1000) {
            wal.commit().expect("committed");
        }
    }
    wal.commit().expect("committed");
    let log_time = started.elapsed();
    drop(wal);
    let log_bytes: u64 = std::fs::read_dir(dir.path())
        .expect("the directory lists")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("wal-"))
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.len())
        .sum();

    let started = Instant::now();
    let recovered = open(storage.clone(), WalOptions::default()).expect("recovery succeeds");
    let recovery = started.elapsed();
    let database = recovered
        .databases
        .get("big")
        .expect("the database is back");
    assert_eq!(recovered.report.records_replayed, records);
    assert!(!database
        .root
        .get(&path("/rooms/r00000/m0000/text"))
        .is_empty());

    println!("recovery of one shard directory (warm page cache)");
    println!(
        "  tree: {chunks} chunks of {CHUNK_CHILDREN} messages, built in {:.2} s",
        built.as_secs_f64()
    );
    println!(
        "  snapshot: {:.1} MB, written in {:.2} s",
        info.bytes as f64 / 1e6,
        snapshot_time.as_secs_f64()
    );
    println!(
        "  log: {records} records in {:.1} MB of segments (preallocated), written in {:.2} s",
        log_bytes as f64 / 1e6,
        log_time.as_secs_f64()
    );
    println!(
        "  recovery (open): {:.2} s for {:.1} MB of snapshot + log records",
        recovery.as_secs_f64(),
        (info.bytes as f64 + records as f64 * (LEAF_BYTES + 80) as f64) / 1e6
    );
}
