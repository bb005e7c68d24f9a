//! Serializing one push for 10,000 connections: encode once and share (default listens) or
//! splice the tag (filtered listens), against serializing the node once per connection.
//!
//! `cargo bench -p hearth-wire --bench serialize`. `HEARTH_BENCH_SCALE` (a fraction, default
//! 1) scales the number of connections, for CI smoke runs (`cargo test --benches`).
//!
//! Each connection's outbound queue is modelled as a `Vec<bytes::Bytes>` (the server queues
//! `tungstenite::Message::Text(Utf8Bytes)`, which is a `Bytes` inside), so every variant ends
//! with one queued message per connection, and the queues are drained inside the measurement.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hearth_sync::{Push, PushData};
use hearth_tree::{Node, Path};
use hearth_wire::encode_push;
use serde_json::{json, Map, Value};

const CONNECTIONS: usize = 10_000;

fn scale() -> f64 {
    std::env::var("HEARTH_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0)
}

fn connections() -> usize {
    ((CONNECTIONS as f64 * scale()).round() as usize).clamp(10, CONNECTIONS * 100)
}

/// A chat message as the JS SDK writes it (`push()` with a server timestamp resolved).
fn chat_message() -> Value {
    json!({
        "author": "Ada Lovelace",
        "uid": "x7Gq2LmB9cTzR4vWn1KsPq0aZ3",
        "text": "Meet at the engine room at 10? I'll bring the punch cards \u{1F4C7} and the new loom notes.",
        "ts": 1_795_323_485_336u64,
        "edited": false,
    })
}

/// About 10 KB: a document of 170 fields of mixed types: numbers, strings, small objects and
/// lists.
fn big_object() -> Value {
    let mut map = Map::new();
    for i in 0..170 {
        let value = match i % 4 {
            0 => json!(i as f64 * 1.25),
            1 => json!(format!(
                "field {i}: {}",
                "lorem ipsum dolor sit amet ".repeat(4)
            )),
            2 => json!({"x": i, "y": -i, "label": format!("point {i}"), "on": i % 3 == 0}),
            _ => json!([i, i + 1, i + 2, format!("tag-{i}")]),
        };
        map.insert(format!("k{i:03}"), value);
    }
    Value::Object(map)
}

fn push_of(data: &Value) -> Push {
    Push {
        path: Path::parse("/rooms/general/messages/-Nq7ZtYwB3kF9xLm2PaA").expect("valid path"),
        data: PushData::Put(Node::from_json(data).expect("valid bench data")),
    }
}

/// One outbound queue per connection, reused across iterations so that only the queueing is
/// measured, not the allocation of the queues.
struct Queues(Vec<Vec<Bytes>>);

impl Queues {
    fn new(n: usize) -> Queues {
        Queues((0..n).map(|_| Vec::with_capacity(4)).collect())
    }

    /// Drains every queue (what the connection tasks do after writing), returning the bytes.
    fn drain(&mut self) -> usize {
        let mut total = 0;
        for queue in &mut self.0 {
            total += queue.iter().map(Bytes::len).sum::<usize>();
            queue.clear();
        }
        total
    }
}

fn bench_payload(c: &mut Criterion, name: &str, data: &Value) {
    let n = connections();
    let push = push_of(data);
    let message_len = encode_push(&push).untagged().len();
    println!("serialize bench: {name}: {message_len} bytes per message, {n} connections");

    let mut group = c.benchmark_group(format!("serialize_{name}"));
    group.throughput(Throughput::Elements(n as u64));
    if message_len > 4096 {
        // The naive baseline takes a few hundred milliseconds per run at this size.
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(5));
    }
    let mut queues = Queues::new(n);

    // What the server does for default listeners: encode once, clone a reference count.
    group.bench_function(BenchmarkId::new("encode_once_shared", n), |b| {
        b.iter(|| {
            let encoded = encode_push(black_box(&push));
            let shared = Bytes::from(encoded.untagged());
            for queue in &mut queues.0 {
                queue.push(shared.clone());
            }
            queues.drain()
        })
    });

    // Filtered listeners: encode once, then copy the bytes with each connection's tag.
    group.bench_function(BenchmarkId::new("encode_once_tagged", n), |b| {
        b.iter(|| {
            let encoded = encode_push(black_box(&push));
            for (tag, queue) in queues.0.iter_mut().enumerate() {
                queue.push(Bytes::from(encoded.tagged(tag as u64 + 1)));
            }
            queues.drain()
        })
    });

    // The naive baseline: every connection serializes the node itself.
    let node = match &push.data {
        PushData::Put(node) => node.clone(),
        PushData::Merge(_) => unreachable!("the bench push is a put"),
    };
    let head = format!(r#"{{"t":"d","d":{{"a":"d","b":{{"p":"{}","d":"#, push.path);
    group.bench_function(
        BenchmarkId::new("baseline_write_json_per_connection", n),
        |b| {
            b.iter(|| {
                for queue in &mut queues.0 {
                    let mut out = Vec::with_capacity(head.len() + 64);
                    out.extend_from_slice(head.as_bytes());
                    black_box(&node).write_json(&mut out, true);
                    out.extend_from_slice(b"}}}");
                    queue.push(Bytes::from(out));
                }
                queues.drain()
            })
        },
    );
    group.finish();

    // The same bytes either way.
    let encoded = encode_push(&push).untagged();
    let mut naive = head.into_bytes();
    node.write_json(&mut naive, true);
    naive.extend_from_slice(b"}}}");
    assert_eq!(
        encoded.as_bytes(),
        &naive[..],
        "baseline builds another message"
    );
}

fn bench_serialize(c: &mut Criterion) {
    bench_payload(c, "chat_message", &chat_message());
    bench_payload(c, "object_10kb", &big_object());
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    targets = bench_serialize
}
criterion_main!(benches);
