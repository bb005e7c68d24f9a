//! Recovery time: reading about 1 GB of snapshot, and opening the shard directory that holds it
//! plus about 100 MB of log as a server start does (the newest snapshot read and verified, then
//! every later log record replayed).
//!
//! `cargo bench -p hearth-store --bench recovery`. About 900 MB of snapshot and 100 MB of log
//! at scale 1, in a temporary directory; `HEARTH_BENCH_SCALE` (a fraction, default 1) scales
//! both, for CI smoke runs (`cargo test --benches`). `HEARTH_BENCH_DIR` names a directory to
//! keep the files in and reuse on the next run (the generation takes most of a run).
//!
//! The snapshot is read warm (in the page cache: recovery's own cost) and cold: its pages are
//! dropped from the cache with `posix_fadvise(DONTNEED)` (which needs no privilege, unlike
//! `drop_caches`), then it is read. The disk's sequential read rate is measured on the same file
//! the same way, so the cold number has its floor beside it. Each time is given as wall time and
//! as the thread's CPU time, since the machine may be shared. `HEARTH_BENCH_PROFILE` makes a run
//! read the snapshot warm three times and nothing else, to profile with `perf record`.
use std::fs::File;
use std::io::Read;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

// The server's allocator, so that building the tree costs what it costs in the server.
use hearth_alloc as _;
use hearth_store::{open, read_snapshot, write_snapshot, FileStorage, WalOptions};
use hearth_sync::{Change, Write, WriteOp};
use hearth_tree::{Node, Path};
use rustix::fs::{fadvise, Advice};
use rustix::time::{clock_gettime, ClockId};
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

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let time = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// Runs `f`, returning its result, wall time and CPU time of this thread.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration, Duration) {
    let (wall, cpu) = (Instant::now(), thread_cpu());
    let result = f();
    (result, wall.elapsed(), thread_cpu() - cpu)
}

/// Drops the file's pages from the page cache (they are clean: every file here was synced).
fn evict(path: &FsPath) {
    let file = File::open(path).expect("the file opens");
    fadvise(&file, 0, None, Advice::DontNeed).expect("posix_fadvise");
}

/// Reads the whole file sequentially in 4 MiB reads; returns the bytes read.
fn read_through(path: &FsPath) -> u64 {
    let mut file = File::open(path).expect("the file opens");
    let mut buffer = vec![0u8; 4 << 20];
    let mut total = 0;
    loop {
        match file.read(&mut buffer).expect("the file reads") {
            0 => return total,
            n => total += n as u64,
        }
    }
}

fn files(dir: &FsPath) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("the directory lists")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .collect()
}

fn seconds(time: Duration) -> f64 {
    time.as_secs_f64()
}

/// Writes the shard directory: one database `big` with a snapshot of `chunks` rooms, then
/// `records` log records after it.
fn generate(storage: &Arc<FileStorage>, chunks: usize, records: u64) {
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
    let info = write_snapshot(&**storage, "big", wal.last_seq(), None, &root)
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
    println!(
        "  tree: {chunks} chunks of {CHUNK_CHILDREN} messages, built in {:.2} s",
        seconds(built)
    );
    println!(
        "  snapshot: {:.1} MB, written in {:.2} s",
        info.bytes as f64 / 1e6,
        seconds(snapshot_time)
    );
    println!(
        "  log: {records} records, written in {:.2} s",
        seconds(log_time)
    );
}

/// The files of the shard directory that the timings read.
struct ShardFiles {
    all: Vec<PathBuf>,
    /// The snapshot's file name, as `read_snapshot` takes it.
    snapshot: String,
    snapshot_path: PathBuf,
    snapshot_bytes: u64,
    /// The bytes of every log segment.
    log_bytes: u64,
}

impl ShardFiles {
    fn find(dir: &FsPath) -> ShardFiles {
        let all = files(dir);
        let snapshot = all
            .iter()
            .find_map(|file| {
                let name = file.file_name()?.to_str()?;
                name.starts_with("snap-big-").then(|| name.to_owned())
            })
            .expect("the snapshot is there");
        let snapshot_path = dir.join(&snapshot);
        let snapshot_bytes = std::fs::metadata(&snapshot_path)
            .expect("the snapshot is there")
            .len();
        let log_bytes: u64 = all
            .iter()
            .filter(|file| {
                file.file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with("wal-"))
            })
            .filter_map(|file| std::fs::metadata(file).ok())
            .map(|meta| meta.len())
            .sum();
        ShardFiles {
            all,
            snapshot,
            snapshot_path,
            snapshot_bytes,
            log_bytes,
        }
    }

    fn snapshot_mb(&self) -> f64 {
        self.snapshot_bytes as f64 / 1e6
    }
}

/// How many chunks of tree and log records make the sizes this scale asks for.
fn sizes(scale: f64) -> (usize, u64) {
    let chunks = ((SNAPSHOT_BYTES * scale) / (CHUNK_CHILDREN * (LEAF_BYTES + 40)) as f64)
        .ceil()
        .max(1.0) as usize;
    let records = ((LOG_BYTES * scale) / (LEAF_BYTES + 80) as f64)
        .ceil()
        .max(10.0) as u64;
    (chunks, records)
}

/// The directory `HEARTH_BENCH_DIR` names, or a temporary one; the caller keeps the temporary
/// directory for the whole run, since dropping it removes the files.
fn bench_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("HEARTH_BENCH_DIR") {
        Some(dir) => (PathBuf::from(dir), None),
        None => {
            let temporary = tempfile::Builder::new()
                .prefix("hearth-recovery-bench-")
                .tempdir()
                .expect("a temporary directory");
            (temporary.path().to_path_buf(), Some(temporary))
        }
    }
}

/// Generates the shard directory unless it already holds what this scale writes: a kept
/// directory is reused, since the generation takes most of a run.
fn ensure_generated(dir: &FsPath, storage: &Arc<FileStorage>, chunks: usize, records: u64) {
    let marker = dir.join("bench-done");
    let wanted = format!("{chunks} {records}");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(&wanted) {
        for file in files(dir) {
            std::fs::remove_file(file).expect("an old file is removed");
        }
        generate(storage, chunks, records);
        std::fs::write(&marker, &wanted).expect("the marker is written");
    }
}

/// Only warm snapshot reads, for `perf record`.
fn profile_warm_reads(storage: &FileStorage, snapshot: &str) {
    for _ in 0..3 {
        let (state, wall, cpu) = timed(|| read_snapshot(storage, snapshot).expect("it reads"));
        drop(state);
        println!(
            "  read_snapshot warm: {:.2} s ({:.2} s CPU)",
            seconds(wall),
            seconds(cpu)
        );
    }
}

/// The disk's sequential read rate on the snapshot file, cold and warm: the floor under the
/// cold snapshot read.
fn time_disk(shard: &ShardFiles) {
    evict(&shard.snapshot_path);
    let (read, disk, _) = timed(|| read_through(&shard.snapshot_path));
    assert_eq!(read, shard.snapshot_bytes);
    let mb = shard.snapshot_mb();
    println!(
        "  disk: the snapshot's {mb:.1} MB read cold in {:.2} s ({:.0} MB/s), warm in {:.2} s",
        seconds(disk),
        mb / seconds(disk),
        seconds(timed(|| read_through(&shard.snapshot_path)).1)
    );
}

/// Reads and verifies the snapshot cold, then warm (the cold read leaves it in the cache).
fn time_snapshot_reads(storage: &FileStorage, shard: &ShardFiles) {
    let mb = shard.snapshot_mb();
    evict(&shard.snapshot_path);
    let (state, wall, cpu) = timed(|| read_snapshot(storage, &shard.snapshot).expect("it reads"));
    assert!(!state.root.get(&path("/rooms/r00000/m0000/text")).is_empty());
    drop(state);
    println!(
        "  read_snapshot cold: {:.2} s ({:.2} s CPU) for {mb:.1} MB",
        seconds(wall),
        seconds(cpu)
    );
    let (state, wall, cpu) = timed(|| read_snapshot(storage, &shard.snapshot).expect("it reads"));
    drop(state);
    println!(
        "  read_snapshot warm: {:.2} s ({:.2} s CPU) for {mb:.1} MB",
        seconds(wall),
        seconds(cpu)
    );
}

/// Opens the directory as a server start does, with every file in the cache first so that the
/// time is recovery's own; the snapshot and all `records` log records must come back.
fn time_recovery(storage: &Arc<FileStorage>, shard: &ShardFiles, records: u64) {
    for file in &shard.all {
        read_through(file);
    }
    let (recovered, wall, cpu) =
        timed(|| open(storage.clone(), WalOptions::default()).expect("recovery succeeds"));
    let database = recovered
        .databases
        .get("big")
        .expect("the database is back");
    assert_eq!(recovered.report.records_replayed, records);
    assert!(!database
        .root
        .get(&path("/rooms/r00000/m0000/text"))
        .is_empty());
    println!(
        "  recovery (open), warm: {:.2} s ({:.2} s CPU) for {:.1} MB of snapshot + {records} log records ({:.1} MB of segments)",
        seconds(wall),
        seconds(cpu),
        shard.snapshot_mb(),
        shard.log_bytes as f64 / 1e6
    );
}

fn main() {
    hearth_alloc::return_freed_memory_at_once();
    let (chunks, records) = sizes(scale());
    let (dir, _temporary) = bench_dir();
    let storage = Arc::new(FileStorage::open(&dir).expect("the directory opens"));
    println!("recovery of one shard directory ({})", dir.display());
    ensure_generated(&dir, &storage, chunks, records);
    let shard = ShardFiles::find(&dir);
    if std::env::var_os("HEARTH_BENCH_PROFILE").is_some() {
        profile_warm_reads(&storage, &shard.snapshot);
        return;
    }
    time_disk(&shard);
    time_snapshot_reads(&storage, &shard);
    time_recovery(&storage, &shard, records);
}
