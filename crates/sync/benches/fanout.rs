//! Fan-out: the cost of `Database::handle` for one write that 1,000 listeners see, against the
//! same write with no listener at all.
//!
//! `cargo bench -p hearth-sync --bench fanout`. `HEARTH_BENCH_SCALE` (a fraction, default 1)
//! scales the number of listeners and children, for CI smoke runs (`cargo test --benches`).
//!
//! Every case runs on two databases built the same way, one with the listeners and one
//! without, so the difference is what the listeners cost: finding the affected views,
//! recomputing filtered windows, building the pushes and their target lists.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use hearth_query::QueryParams;
use hearth_sync::{ConnId, Database, Effect, Effects, Request, WriteTarget};
use hearth_tree::{Node, Path};
use serde_json::{json, Map, Value};

const LISTENERS: usize = 1_000;
const NOW_MS: u64 = 1_795_000_000_000;
/// The connection that writes; it listens to nothing.
const WRITER: ConnId = 0;

fn scale() -> f64 {
    std::env::var("HEARTH_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0)
}

fn listeners() -> usize {
    ((LISTENERS as f64 * scale()).round() as usize).clamp(20, LISTENERS * 100)
}

fn path(text: &str) -> Path {
    Path::parse(text).expect("valid bench path")
}

fn put(at: &str, data: Value) -> Request {
    Request::Put {
        target: WriteTarget::whole(path(at)),
        data,
        hash: None,
    }
}

fn listen(at: &str, query: Option<Value>, tag: Option<u64>) -> Request {
    let params = match &query {
        Some(q) => QueryParams::from_wire(q).expect("valid bench query"),
        None => QueryParams::default(),
    };
    Request::Listen {
        path: path(at),
        query: params,
        query_wire: query,
        tag,
        hash: None,
    }
}

/// A database holding `data` at `at`, with the writer connected and, when `listen` is given,
/// one more connection per listen request it returns (connection `i` gets `listen(i)`).
fn database(
    at: &str,
    data: Value,
    listeners: usize,
    listen: Option<&dyn Fn(usize) -> Request>,
) -> Database {
    let mut db = Database::with_root(
        Node::empty().set(&path(at), Node::from_json(&data).expect("valid bench data")),
    );
    db.connect(WRITER);
    let mut out = Effects::new();
    if let Some(listen) = listen {
        for i in 0..listeners {
            let conn = i as ConnId + 1;
            db.connect(conn);
            let reply = db.handle(conn, listen(i), NOW_MS, &mut out);
            assert!(reply.is_ok(), "listen {i} refused: {reply:?}");
            out.clear();
        }
    }
    db
}

/// How many pushes and targets a write produced (for the sanity checks below).
fn fanout_of(out: &Effects) -> (usize, usize) {
    out.iter()
        .fold((0, 0), |(pushes, targets), effect| match effect {
            Effect::Push { targets: t, .. } => (pushes + 1, targets + t.len()),
            _ => (pushes, targets),
        })
}

/// Runs `next()` writes against the listened and the bare database. `expect` checks the first
/// write's (pushes, targets) on the listened database.
fn run_case(
    c: &mut Criterion,
    name: &str,
    listened: &mut Database,
    bare: &mut Database,
    next: &mut dyn FnMut() -> Request,
    expect: (usize, usize),
) {
    let mut out = Effects::new();
    let reply = listened.handle(WRITER, next(), NOW_MS, &mut out);
    assert!(reply.is_ok(), "{name}: write refused: {reply:?}");
    assert_eq!(fanout_of(&out), expect, "{name}: unexpected fan-out");
    out.clear();

    let mut group = c.benchmark_group("fanout");
    for (label, db) in [("listeners", listened), ("baseline_no_listeners", bare)] {
        group.bench_function(BenchmarkId::new(name, label), |b| {
            b.iter_batched(
                &mut *next,
                |request| {
                    let reply = db.handle(WRITER, request, NOW_MS, &mut out);
                    out.clear();
                    reply
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

fn chat_message(n: u64) -> Value {
    json!({
        "author": "Ada Lovelace",
        "uid": "x7Gq2LmB9cTzR4vWn1Ks",
        "text": format!("message number {n}: the analytical engine weaves algebraic patterns"),
        "ts": NOW_MS + n,
    })
}

/// (a) 1,000 connections with a default listen on the same path (one shared view); a new value
/// for one message below it.
fn shared_default(c: &mut Criterion) {
    let n = listeners();
    let messages: Map<String, Value> = (0..100u64)
        .map(|i| (format!("-Nm{i:017}"), chat_message(i)))
        .collect();
    let data = Value::Object(messages);
    let at = "/rooms/general/messages";
    let listen_default = |_: usize| listen(at, None, None);
    let mut listened = database(at, data.clone(), n, Some(&listen_default));
    let mut bare = database(at, data, 0, None);
    let mut counter = 0u64;
    let mut next = || {
        counter += 1;
        put(
            &format!("{at}/-Nm{:017}", counter % 100),
            chat_message(1_000 + counter),
        )
    };
    run_case(
        c,
        "a_shared_default",
        &mut listened,
        &mut bare,
        &mut next,
        (1, n),
    );
}

fn player(i: usize, round: u64) -> Value {
    json!({"name": format!("player {i}"), "score": i as u64 * 10 + round})
}

/// (b) 1,000 connections each listening on its own child of `/players`; a set of the whole
/// parent. Either every child changes (1,000 distinct pushes) or only one does (999 views
/// compare equal and send nothing).
fn distinct_children(c: &mut Criterion) {
    let n = listeners();
    let players = |round: u64, only: Option<usize>| -> Value {
        let map: Map<String, Value> = (0..n)
            .map(|i| {
                let r = if only.is_none_or(|o| o == i) {
                    round
                } else {
                    0
                };
                (format!("p{i:04}"), player(i, r))
            })
            .collect();
        Value::Object(map)
    };
    let at = "/players";
    let listen_child = |i: usize| listen(&format!("{at}/p{i:04}"), None, None);

    // Every child changes: alternate between two versions of all players.
    let versions = [players(1, None), players(2, None)];
    let mut listened = database(at, players(0, None), n, Some(&listen_child));
    let mut bare = database(at, players(0, None), 0, None);
    let mut counter = 0usize;
    let mut next = || {
        counter += 1;
        put(at, versions[counter % 2].clone())
    };
    run_case(
        c,
        "b_distinct_children_all_changed",
        &mut listened,
        &mut bare,
        &mut next,
        (n, n),
    );

    // Only one child changes: alternate its score, everything else is rewritten unchanged.
    let versions = [players(0, None), players(5, Some(n / 2))];
    let mut listened = database(at, players(0, None), n, Some(&listen_child));
    let mut bare = database(at, players(0, None), 0, None);
    let mut counter = 0usize;
    let mut next = || {
        counter += 1;
        put(at, versions[counter % 2].clone())
    };
    run_case(
        c,
        "b_distinct_children_one_changed",
        &mut listened,
        &mut bare,
        &mut next,
        (1, 1),
    );
}

/// (c) 1,000 tagged `orderByChild('score').limitToLast(10)` listens on the same 1,000
/// children (one shared filtered view). A write either moves a child into the window (a merge
/// push to everybody) or changes a child outside it (the window is recomputed, nothing sent).
fn shared_filtered(c: &mut Criterion) {
    let n = listeners();
    let at = "/scores";
    let data: Map<String, Value> = (0..n)
        .map(|i| {
            (
                format!("c{i:04}"),
                json!({"name": format!("player {i}"), "score": i}),
            )
        })
        .collect();
    let data = Value::Object(data);
    let query = json!({"i": "score", "l": 10, "vf": "r"});
    let listen_filtered = |i: usize| listen(at, Some(query.clone()), Some(i as u64 + 1));

    // Child `k` gets a score above every other: it enters the window and the lowest leaves.
    // The children are visited in turn, so the one written is never already in the window.
    let mut listened = database(at, data.clone(), n, Some(&listen_filtered));
    let mut bare = database(at, data.clone(), 0, None);
    let mut counter = 0usize;
    let mut next = || {
        counter += 1;
        put(
            &format!("{at}/c{:04}/score", counter % n),
            json!(n + counter),
        )
    };
    run_case(
        c,
        "c_shared_filtered_enters_window",
        &mut listened,
        &mut bare,
        &mut next,
        (1, n),
    );

    // A child far below the window changes: the view recomputes and finds nothing to send.
    let mut listened = database(at, data.clone(), n, Some(&listen_filtered));
    let mut bare = database(at, data.clone(), 0, None);
    let mut counter = 0usize;
    let mut next = || {
        counter += 1;
        put(&format!("{at}/c0000/score"), json!(-(counter as i64)))
    };
    run_case(
        c,
        "c_shared_filtered_outside_window",
        &mut listened,
        &mut bare,
        &mut next,
        (0, 0),
    );

    // The top child's score rises: it stays in the window, which changes in place.
    let mut listened = database(at, data.clone(), n, Some(&listen_filtered));
    let mut bare = database(at, data.clone(), 0, None);
    let top = format!("{at}/c{:04}/score", n - 1);
    let mut counter = 0usize;
    let mut next = || {
        counter += 1;
        put(&top, json!(n + counter))
    };
    run_case(
        c,
        "c_shared_filtered_member_rises",
        &mut listened,
        &mut bare,
        &mut next,
        (1, n),
    );

    // The same as an update of two fields of that child (a score and a time), as the
    // leaderboard scenario writes: several paths below one child.
    let mut listened = database(at, data.clone(), n, Some(&listen_filtered));
    let mut bare = database(at, data, 0, None);
    let mut counter = 0usize;
    let mut next = || {
        counter += 1;
        let field = |name: &str| WriteTarget::parse(name).expect("a valid key");
        Request::Merge {
            path: path(&format!("{at}/c0000")),
            entries: vec![
                (field("score"), json!(-(counter as i64))),
                (field("t"), json!(counter)),
            ],
        }
    };
    run_case(
        c,
        "c_shared_filtered_outside_window_update",
        &mut listened,
        &mut bare,
        &mut next,
        (0, 0),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    targets = shared_default, distinct_children, shared_filtered
}
criterion_main!(benches);
