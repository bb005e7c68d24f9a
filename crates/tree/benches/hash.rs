//! Node hash (spec §10) of a 100k-node tree: cold, warm, and after a one-leaf write, against
//! raw SHA-1 over the same canonical text.
//!
//! `cargo bench -p hearth-tree --bench hash`. `HEARTH_BENCH_SCALE` (a fraction, default 1)
//! shrinks the tree for CI smoke runs (`cargo test --benches`).

use std::hint::black_box;
use std::time::Duration;

use base64::Engine as _;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hearth_tree::{Leaf, Node, Path, Priority};
use serde_json::{json, Map, Value};
use sha1::{Digest, Sha1};

/// Children of the root at scale 1; each holds [`LEAVES`] leaves.
const RECORDS: usize = 1_000;
const LEAVES: usize = 100;

fn scale() -> f64 {
    std::env::var("HEARTH_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0)
}

fn records() -> usize {
    ((RECORDS as f64 * scale()).round() as usize).clamp(2, RECORDS * 100)
}

fn record_key(i: usize) -> String {
    // Push-ID shaped: 20 characters starting with '-'.
    format!("-Nq{i:017}")
}

fn leaf_key(j: usize) -> String {
    format!("f{j:02}")
}

/// One leaf of record `i`: integers, fractions, short and long strings; every tenth leaf has
/// a numeric priority.
fn leaf_value(i: usize, j: usize) -> Value {
    let value = match j % 4 {
        0 => json!((i * LEAVES + j) as u64),
        1 => json!(i as f64 * 0.37 + j as f64 * 1.5 + 0.25),
        2 => json!(format!("user-{i}-{j}")),
        _ => json!(format!("a somewhat longer text field {i}/{j} of a record")),
    };
    if j % 10 == 5 {
        json!({".value": value, ".priority": (j % 7) as f64})
    } else {
        value
    }
}

/// The data: `records()` records of [`LEAVES`] leaves; every seventh record has a string
/// priority, so the root's hash has to sort its children.
fn data() -> Value {
    let mut root = Map::new();
    for i in 0..records() {
        let mut record = Map::new();
        for j in 0..LEAVES {
            record.insert(leaf_key(j), leaf_value(i, j));
        }
        if i % 7 == 3 {
            record.insert(".priority".into(), json!(format!("p{}", i % 13)));
        }
        root.insert(record_key(i), Value::Object(record));
    }
    Value::Object(root)
}

fn build(data: &Value) -> Node {
    Node::from_json(data).expect("valid bench data")
}

// ---- The canonical texts (spec §10), rebuilt outside the crate for the SHA-1 baseline ----

fn number_hex(n: f64) -> String {
    // The client's reconstruction equals the real bits for every value used here.
    format!("{:016x}", n.to_bits())
}

fn priority_prefix(text: &mut String, priority: &Priority) {
    match priority {
        Priority::None => {}
        Priority::Number(n) => {
            text.push_str("priority:number:");
            text.push_str(&number_hex(*n));
            text.push(':');
        }
        Priority::String(s) => {
            text.push_str("priority:string:");
            text.push_str(s);
            text.push(':');
        }
    }
}

/// The text SHA-1 hashes for `node` (its children's hashes taken from the warm tree).
fn canonical_text(node: &Node) -> String {
    let mut text = String::new();
    priority_prefix(&mut text, node.priority());
    if let Some(leaf) = node.leaf_value() {
        match leaf {
            Leaf::Bool(b) => text.push_str(if *b { "boolean:true" } else { "boolean:false" }),
            Leaf::Number(n) => {
                text.push_str("number:");
                text.push_str(&number_hex(*n));
            }
            Leaf::String(s) => {
                text.push_str("string:");
                text.push_str(s);
            }
        }
        return text;
    }
    let mut children: Vec<_> = node.children().collect();
    if children.iter().any(|(_, c)| !c.priority().is_none()) {
        children.sort_by(|a, b| a.1.priority().cmp(b.1.priority()));
    }
    for (key, child) in children {
        text.push(':');
        text.push_str(key.as_str());
        text.push(':');
        text.push_str(&child.hash());
    }
    text
}

/// Every node's canonical text, children before parents (the order the hash computes them).
fn all_texts(node: &Node, out: &mut Vec<String>) {
    for (_, child) in node.children() {
        all_texts(&child, out);
    }
    out.push(canonical_text(node));
}

fn sha1_base64(text: &[u8], out: &mut [u8; 28]) {
    let digest = Sha1::digest(text);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(digest.as_slice(), out)
        .expect("28 bytes hold a base64 SHA-1");
    debug_assert_eq!(written, 28);
}

fn bench_hash(c: &mut Criterion) {
    let data = data();
    let warm = build(&data);
    warm.hash();

    let texts = {
        let mut texts = Vec::new();
        all_texts(&warm, &mut texts);
        texts
    };
    // The rebuilt texts must be the real ones, or the baseline would measure something else.
    let mut check = [0u8; 28];
    sha1_base64(texts.last().expect("root text").as_bytes(), &mut check);
    assert_eq!(&check[..], warm.hash().as_bytes(), "root canonical text");
    let first = warm.children().next().expect("a record").1;
    sha1_base64(canonical_text(&first).as_bytes(), &mut check);
    assert_eq!(&check[..], first.hash().as_bytes(), "record canonical text");
    let total_bytes: usize = texts.iter().map(String::len).sum();
    let contiguous: Vec<u8> = texts.concat().into_bytes();
    println!(
        "hash bench: {} nodes, {} bytes of canonical text",
        texts.len(),
        total_bytes
    );

    let mut group = c.benchmark_group("tree_hash");
    group.throughput(Throughput::Bytes(total_bytes as u64));

    group.bench_function("cold_100k", |b| {
        b.iter_batched_ref(|| build(&data), |root| root.hash(), BatchSize::PerIteration)
    });
    group.bench_function("baseline_sha1_contiguous", |b| {
        b.iter(|| Sha1::digest(black_box(&contiguous[..])))
    });
    group.bench_function("baseline_sha1_per_node", |b| {
        // The same texts as separate digests, each base64 encoded: the floor for this
        // hash definition with this tree shape.
        let mut out = [0u8; 28];
        b.iter(|| {
            for text in &texts {
                sha1_base64(black_box(text.as_bytes()), &mut out);
            }
            out
        })
    });
    group.finish();

    // Every node's hash is cached: the root's is a reference-count increment.
    let mut group = c.benchmark_group("tree_hash_cached");
    group.bench_function("warm_100k", |b| b.iter(|| black_box(&warm).hash()));
    group.finish();

    // A write that changes one leaf: the new root shares all but one record with the warm
    // tree, so re-hashing visits the leaf, its record and the root only.
    let mut group = c.benchmark_group("tree_write");
    let middle = records() / 2;
    let target = Path::parse(&format!("/{}/{}", record_key(middle), leaf_key(40)))
        .expect("valid bench path");
    let mut counter = 0.0f64;
    group.bench_function("set_one_leaf", |b| {
        b.iter(|| {
            counter += 1.0;
            warm.set(&target, Node::leaf(Leaf::Number(counter)))
        })
    });
    group.bench_function("set_one_leaf_then_hash_root", |b| {
        b.iter(|| {
            counter += 1.0;
            warm.set(&target, Node::leaf(Leaf::Number(counter))).hash()
        })
    });
    // The SHA-1 part of that re-hash: the root's text (one entry per record) plus the
    // record's text (one entry per leaf) plus the leaf.
    let root_text = texts.last().expect("root text").clone();
    let record_text = canonical_text(&warm.get(&target.parent().expect("a parent")));
    group.bench_function("baseline_sha1_root_and_record_texts", |b| {
        let mut out = [0u8; 28];
        b.iter(|| {
            sha1_base64(black_box(root_text.as_bytes()), &mut out);
            sha1_base64(black_box(record_text.as_bytes()), &mut out);
            sha1_base64(black_box(b"number:3ff0000000000000"), &mut out);
            out
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_hash
}
criterion_main!(benches);
