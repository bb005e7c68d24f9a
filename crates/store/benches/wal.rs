//! Log throughput: encoding and appending one record, and group commit to a real file with one
//! fdatasync per batch.
//!
//! `cargo bench -p hearth-store --bench wal` measures; `cargo test --benches` runs each
//! benchmark once as a smoke test, with small segments so that it stays fast.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use hearth_store::{
    encode_record, open, FileStorage, MemoryStorage, RecordRef, Storage, StorageFile, WalOptions,
    SEGMENT_BYTES,
};
use hearth_sync::{Change, Write, WriteOp};
use hearth_tree::{Node, Path};
use serde_json::json;

/// Whether criterion is measuring (`cargo bench`) rather than smoke-testing.
fn measuring() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}

fn segment_bytes() -> u64 {
    if measuring() {
        SEGMENT_BYTES
    } else {
        1024 * 1024
    }
}

/// A typical chat-message write: a push id under a room, a few fields, a server timestamp.
fn message(n: u64) -> Write {
    let value = json!({
        "author": "user-4711",
        "text": "see you at the station at half past",
        "sent": 1_700_000_000_000u64 + n,
    });
    Write {
        base: Path::parse(&format!("/rooms/r42/messages/-N{n:018}")).expect("valid path"),
        ops: vec![WriteOp {
            path: Path::root(),
            change: Change::Set(Node::from_json(&value).expect("valid value")),
        }],
    }
}

fn encode(c: &mut Criterion) {
    let write = message(1);
    let mut group = c.benchmark_group("wal/record");
    group.throughput(Throughput::Elements(1));
    let mut out = Vec::with_capacity(1 << 20);
    group.bench_function("encode", |b| {
        b.iter(|| {
            out.clear();
            encode_record(
                &mut out,
                7,
                6,
                0,
                "chat",
                RecordRef::Write(black_box(&write)),
            )
            .expect("encodes")
        })
    });
    let options = WalOptions {
        segment_bytes: segment_bytes(),
    };
    let mut wal = open(Arc::new(MemoryStorage::new()), options)
        .expect("opens")
        .wal;
    group.bench_function("append", |b| {
        // Only the appends are timed; the batches handed over now and then (as the shard does
        // every loop turn) are not.
        b.iter_custom(|iterations| {
            let mut timed = Duration::ZERO;
            let mut left = iterations;
            while left > 0 {
                let chunk = left.min(1024);
                let start = Instant::now();
                for _ in 0..chunk {
                    black_box(
                        wal.append_write("chat", black_box(&write))
                            .expect("appends"),
                    );
                }
                timed += start.elapsed();
                wal.commit().expect("commits to memory");
                left -= chunk;
            }
            timed
        })
    });
    group.finish();
}

fn group_commit(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let storage = Arc::new(FileStorage::open(dir.path()).expect("opens the directory"));
    let options = WalOptions {
        segment_bytes: segment_bytes(),
    };
    let mut wal = open(storage.clone(), options).expect("opens").wal;
    // Create the first segment outside the measurement.
    wal.append_write("chat", &message(0)).expect("appends");
    wal.commit().expect("commits");
    let writes: Vec<Write> = (0..1024).map(message).collect();
    let mut group = c.benchmark_group("wal/group_commit");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(if measuring() { 5 } else { 1 }));
    for records in [1usize, 16, 256, 1024] {
        group.throughput(Throughput::Elements(records as u64));
        group.bench_with_input(BenchmarkId::from_parameter(records), &records, |b, &n| {
            b.iter(|| {
                for write in &writes[..n] {
                    wal.append_write("chat", write).expect("appends");
                }
                // One positional write and one fdatasync for the whole batch.
                wal.commit().expect("commits")
            })
        });
    }
    group.finish();

    // The cost of fdatasync alone: rewrite one 4 KiB block of a preallocated file and sync.
    let file = storage.create("fsync-probe").expect("creates");
    file.write_at(0, &vec![0u8; 1 << 20]).expect("preallocates");
    file.sync_data().expect("syncs");
    let block = vec![1u8; 4096];
    let mut group = c.benchmark_group("wal/fdatasync");
    group.sample_size(20);
    group.bench_function("4KiB", |b| {
        b.iter_batched(
            || (),
            |()| {
                file.write_at(0, &block).expect("writes");
                file.sync_data().expect("syncs")
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, encode, group_commit);
criterion_main!(benches);
