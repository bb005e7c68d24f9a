//! Memory for a loaded JSON document, as a multiple of its bytes: the tree (`Node`) against
//! `serde_json::Value`, measured in the same run by a counting allocator.
//!
//! `cargo bench -p hearth-tree --bench memory`. The document is deterministic and shaped like
//! an app's data (see `document`): about 50 MB at scale 1; `HEARTH_BENCH_SCALE` (a fraction,
//! default 1) scales it for CI smoke runs (`cargo test --benches`). `HEARTH_BENCH_FILE=path`
//! measures that JSON file instead (the documents of `scripts/bench-server-memory`).

use std::alloc::System;

use hearth_tree::Node;
use serde_json::Value;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

/// Counts heap bytes and allocations (the workspace forbids `unsafe`, so the counting
/// allocator comes from `stats_alloc`).
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes of JSON at scale 1.
const TARGET_BYTES: usize = 50 * 1024 * 1024;

fn scale() -> f64 {
    std::env::var("HEARTH_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0)
}

/// A small deterministic generator (SplitMix64), so every run measures the same document.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn text(&mut self, min: usize, max: usize) -> String {
        const WORDS: [&str; 12] = [
            "hello", "the", "meeting", "is", "at", "noon", "see", "you", "there", "thanks",
            "great", "idea",
        ];
        let len = min + self.below((max - min) as u64 + 1) as usize;
        let mut text = String::with_capacity(len + 8);
        while text.len() < len {
            text.push_str(WORDS[self.below(WORDS.len() as u64) as usize]);
            text.push(' ');
        }
        text.truncate(len);
        text
    }

    /// A push id (20 characters, time then randomness).
    fn push_id(&mut self, time: u64) -> String {
        const CHARS: &[u8] = b"-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
        let mut id = String::with_capacity(20);
        for shift in (0..8).rev() {
            id.push(CHARS[((time >> (shift * 6)) & 63) as usize] as char);
        }
        for _ in 0..12 {
            id.push(CHARS[self.below(64) as usize] as char);
        }
        id
    }
}

/// An app's data: user profiles (names, emails, settings, scores), chat rooms whose messages
/// have push-id keys and 20-200 characters of text, and per-user counters. About a quarter of
/// the bytes are profiles, the rest messages.
fn document(target: usize) -> String {
    let mut rng = Rng(42);
    let mut users = serde_json::Map::new();
    let mut rooms = serde_json::Map::new();
    let mut bytes = 0usize;
    let mut time = 1_700_000_000_000u64;
    let mut user = 0;
    while bytes < target {
        if user % 4 == 0 || rooms.is_empty() {
            let id = format!("user{user:07}");
            let profile = serde_json::json!({
                "name": rng.text(5, 20),
                "email": format!("{id}@example.com"),
                "score": rng.below(100_000),
                "level": rng.below(50) as f64 + 0.5,
                "online": rng.below(2) == 1,
                "settings": {"theme": "dark", "notifications": rng.below(2) == 0, "lang": "en"},
            });
            bytes += profile.to_string().len() + id.len() + 4;
            users.insert(id, profile);
        }
        let room = format!("room{:05}", rng.below((target / 200_000).max(1) as u64));
        let messages = rooms
            .entry(room.clone())
            .or_insert_with(|| serde_json::json!({"messages": {}}));
        time += rng.below(5_000);
        let message = serde_json::json!({
            "uid": format!("user{:07}", rng.below(user as u64 + 1)),
            "text": rng.text(20, 200),
            "ts": time,
        });
        bytes += message.to_string().len() + 26;
        if let Some(messages) = messages.get_mut("messages").and_then(Value::as_object_mut) {
            messages.insert(rng.push_id(time), message);
        }
        user += 1;
    }
    serde_json::json!({"users": users, "rooms": rooms}).to_string()
}

/// Live heap bytes now. `stats_alloc` counts a reallocation's growth in `bytes_allocated`
/// (and its shrinking in `bytes_deallocated`) as well as in `bytes_reallocated`, so the
/// latter must not be added again.
fn live() -> usize {
    let stats = GLOBAL.stats();
    stats
        .bytes_allocated
        .saturating_sub(stats.bytes_deallocated)
}

fn allocations() -> usize {
    GLOBAL.stats().allocations
}

fn main() {
    // A benchmark may measure a real document from disk; the library it measures reads none.
    #[allow(clippy::disallowed_methods)]
    let text = match std::env::var("HEARTH_BENCH_FILE") {
        Ok(path) => std::fs::read_to_string(&path).expect("HEARTH_BENCH_FILE is readable"),
        Err(_) => document(((TARGET_BYTES as f64 * scale()) as usize).max(64 * 1024)),
    };
    let json_bytes = text.len();

    let (before, count) = (live(), allocations());
    let value: Value = serde_json::from_str(&text).expect("the document parses");
    let value_bytes = live() - before;
    let value_allocations = allocations() - count;

    let (before, count) = (live(), allocations());
    let node = Node::from_json(&value).expect("the document is a valid tree");
    let node_bytes = live() - before;
    let node_allocations = allocations() - count;
    drop(value);

    let (before_hash, _) = (live(), allocations());
    let _ = node.hash();
    let hash_bytes = live().saturating_sub(before_hash);

    println!("memory for a loaded JSON document of {json_bytes} bytes");
    println!(
        "{:<22} {:>14} {:>10} {:>14}",
        "representation", "live bytes", "× JSON", "allocations"
    );
    let row = |name: &str, bytes: usize, allocs: usize| {
        println!(
            "{:<22} {:>14} {:>10.2} {:>14}",
            name,
            bytes,
            bytes as f64 / json_bytes as f64,
            allocs
        )
    };
    row("serde_json::Value", value_bytes, value_allocations);
    row("hearth Node", node_bytes, node_allocations);
    row(
        "Node + cached hashes",
        node_bytes + hash_bytes,
        node_allocations,
    );
    println!(
        "ratio Node / Value: {:.2}",
        node_bytes as f64 / value_bytes as f64
    );
    drop(node);
}
