//! The heap allocations of one write that listeners see, counted and held to the regression
//! gate's baselines (`bench/gate/baseline.tsv`, the `alloc.` lines, each with its tolerance):
//! a change that makes the write path allocate more (or, past the tolerance, less) fails here
//! until that line is updated in the same commit. Counts are exact and the same on any
//! machine; they are taken in the build this test runs in (`cargo test`, the dev profile).
//!
//! One test function only: the counting allocator sees every thread of the process.

use std::alloc::System;

use hearth_query::QueryParams;
use hearth_sync::{ConnId, Database, Effect, Effects, Request, WriteTarget};
use hearth_tree::{Node, Path};
use serde_json::{json, Map, Value};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const NOW_MS: u64 = 1_795_000_000_000;
const WRITER: ConnId = 0;
/// Writes measured per case, after as many unmeasured ones.
const WRITES: u64 = 200;

fn path(text: &str) -> Path {
    Path::parse(text).expect("a valid path")
}

fn message(n: u64) -> Value {
    json!({"author": "Ada", "uid": "x7Gq2LmB9cTzR4vWn1Ks", "text": format!("message {n}"), "ts": NOW_MS + n})
}

/// A chat room of 100 messages at `at`, the writer and `listeners` connections listening to
/// it with `query` (one view shared by all when they listen alike).
fn room(at: &str, listeners: usize, query: Option<Value>) -> Database {
    let messages: Map<String, Value> = (0..100u64)
        .map(|i| (format!("-Nm{i:017}"), message(i)))
        .collect();
    let root = Node::from_json(&Value::Object(messages)).expect("valid data");
    let mut db = Database::with_root(Node::empty().set(&path(at), root));
    db.connect(WRITER);
    let mut out = Effects::new();
    for i in 0..listeners {
        let conn = i as ConnId + 1;
        db.connect(conn);
        let listen = Request::Listen {
            path: path(at),
            query: query
                .as_ref()
                .map(|q| QueryParams::from_wire(q).expect("a valid query"))
                .unwrap_or_default(),
            query_wire: query.clone(),
            tag: query.as_ref().map(|_| 1),
            hash: None,
        };
        assert!(db.handle(conn, listen, NOW_MS, &mut out).is_ok());
        out.clear();
    }
    db
}

/// Allocations (and reallocations) per write of a new message into the room, every listener
/// told: the average over [`WRITES`] writes after as many unmeasured ones.
fn per_write(db: &mut Database, at: &str, listeners: usize) -> f64 {
    let mut out = Effects::new();
    let mut write = |n: u64, out: &mut Effects| {
        let request = Request::Put {
            target: WriteTarget::whole(path(&format!("{at}/-Nz{n:017}"))),
            data: message(1_000 + n),
            hash: None,
        };
        assert!(db.handle(WRITER, request, NOW_MS + n, out).is_ok());
        let told: usize = out
            .iter()
            .map(|effect| match effect {
                Effect::Push { targets, .. } => targets.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(told, listeners, "every listener is told");
        out.clear();
    };
    for n in 0..WRITES {
        write(n, &mut out);
    }
    let region = Region::new(GLOBAL);
    for n in WRITES..2 * WRITES {
        write(n, &mut out);
    }
    let stats = region.change();
    (stats.allocations + stats.reallocations) as f64 / WRITES as f64
}

/// The `alloc.` baselines: (figure, baseline, tolerance).
fn baselines() -> Vec<(String, f64, f64)> {
    // Built in, not read: this crate does no file IO, tests included.
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/gate/baseline.tsv"
    ));
    text.lines()
        .filter(|line| line.starts_with("alloc."))
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let number = |i: usize| fields[i].parse::<f64>().expect("a number");
            (fields[0].to_owned(), number(1), number(2))
        })
        .collect()
}

#[test]
fn allocations_per_write_stay_at_their_baselines() {
    let at = "/rooms/general/messages";
    let measured = [
        ("alloc.write_1000_default_listeners", {
            let mut db = room(at, 1_000, None);
            per_write(&mut db, at, 1_000)
        }),
        ("alloc.write_100_limit_to_last_listeners", {
            let mut db = room(at, 100, Some(json!({"l": 50, "vf": "r", "i": "ts"})));
            per_write(&mut db, at, 100)
        }),
    ];
    let baselines = baselines();
    let mut out_of_bounds = Vec::new();
    for (name, now) in measured {
        println!("{name}\t{now:.2}");
        match baselines.iter().find(|(figure, ..)| figure == name) {
            Some((_, base, tolerance)) if (now - base).abs() <= *tolerance => {}
            Some((_, base, tolerance)) => {
                out_of_bounds.push(format!("{name}: {now:.2} against {base} ± {tolerance}"))
            }
            None => out_of_bounds.push(format!("{name}: {now:.2}, no baseline")),
        }
    }
    assert!(
        out_of_bounds.is_empty(),
        "allocations per write moved past the gate's tolerance (update bench/gate/baseline.tsv in \
         the same commit, saying why, if the change means it): {out_of_bounds:#?}"
    );
}
