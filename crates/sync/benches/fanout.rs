//! Fan-out: the cost of `Database::handle` for one write that 1,000 listeners see, against the
//! same write with no listener at all.
//!
//! `cargo bench -p hearth-sync --bench fanout`. `HEARTH_BENCH_SCALE` (a fraction, default 1)
//! scales the number of listeners and children, for CI smoke runs (`cargo test --benches`).
//!
//! Every case runs on two databases built the same way, one with the listeners and one
//! without, so the difference is what the listeners cost: finding the affected views,
//! recomputing filtered windows, building the pushes and their target lists.

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use hearth_query::QueryParams;
use hearth_rules::Rules;
use hearth_sync::{Access, ConnId, Database, Effect, Effects, Request, WriteTarget};
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

/// Rules that declare `.indexOn: "score"` for `/scores` (and every other top-level list).
const INDEXED_RULES: &str =
    r#"{"rules": {".read": true, ".write": true, "$list": {".indexOn": ["score"]}}}"#;

/// `database`, with rules that declare the `score` index when `indexed`, set before the
/// listens so that their view reads its windows from an ordered index.
fn scores_database(
    children: usize,
    listeners: usize,
    listen: Option<&dyn Fn(usize) -> Request>,
    indexed: bool,
) -> Database {
    let data: Map<String, Value> = (0..children)
        .map(|i| {
            (
                format!("c{i:06}"),
                json!({"name": format!("player {i}"), "score": i}),
            )
        })
        .collect();
    let mut db = database("/scores", Value::Object(data), 0, None);
    if indexed {
        let rules = Rules::parse(INDEXED_RULES).expect("valid bench rules");
        db.set_access(Access::Rules(Arc::new(rules)), NOW_MS, &mut Effects::new());
    }
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
    assert_eq!(db.index_count(), usize::from(indexed && listen.is_some()));
    db
}

/// A source of writes; each database gets its own, so that each sees the same sequence.
type Writes = Box<dyn FnMut() -> Request>;

/// Like `run_case`, over three databases: the window read from an ordered index, the
/// window found by a scan of the children, and no listener.
fn run_sized(
    c: &mut Criterion,
    group: &str,
    children: usize,
    databases: [(&str, &mut Database); 3],
    writes: &dyn Fn() -> Writes,
    expect: (usize, usize),
) {
    let mut out = Effects::new();
    let mut group = c.benchmark_group(group);
    for (label, db) in databases {
        let mut next = writes();
        let reply = db.handle(WRITER, next(), NOW_MS, &mut out);
        assert!(reply.is_ok(), "{label}: write refused: {reply:?}");
        if label != "baseline_no_listeners" {
            assert_eq!(fanout_of(&out), expect, "{label}: unexpected fan-out");
        }
        out.clear();
        group.bench_function(BenchmarkId::new(label, children), |b| {
            b.iter_batched(
                &mut next,
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

/// The list sizes of the indexed-window cases, scaled for smoke runs.
fn list_sizes() -> Vec<usize> {
    [1_000, 10_000, 100_000]
        .into_iter()
        .map(|n| ((n as f64 * scale()).round() as usize).max(50))
        .collect()
}

/// (d) One tagged `orderByChild('score').limitToLast(10)` view (10 listeners) on lists of
/// 1,000 to 100,000 children, with and without `.indexOn`. Writes that the window
/// shortcuts cannot decide: a child from outside enters the window (the lowest member
/// leaves), or the top member falls to the bottom (the best outsider enters).
fn indexed_windows(c: &mut Criterion) {
    const WATCHERS: usize = 10;
    let query = json!({"i": "score", "l": 10, "vf": "r"});
    let listen_top = |i: usize| listen("/scores", Some(query.clone()), Some(i as u64 + 1));
    for n in list_sizes() {
        let databases = || {
            (
                scores_database(n, WATCHERS, Some(&listen_top), true),
                scores_database(n, WATCHERS, Some(&listen_top), false),
                scores_database(n, 0, None, true),
            )
        };
        // Child `k` (in turn) gets a score above every other.
        let enters = || -> Writes {
            let mut counter = 0usize;
            Box::new(move || {
                counter += 1;
                put(
                    &format!("/scores/c{:06}/score", counter % n),
                    json!(n + counter),
                )
            })
        };
        // The top member falls to the bottom: the children are written from the top down,
        // each below every score so far, so the one written is always the top one.
        let leaves = || -> Writes {
            let mut counter = 0usize;
            Box::new(move || {
                counter += 1;
                put(
                    &format!("/scores/c{:06}/score", n - 1 - (counter - 1) % n),
                    json!(-(counter as i64)),
                )
            })
        };
        for (group, writes) in [
            ("d_window_enters", &enters as &dyn Fn() -> Writes),
            ("d_window_member_leaves", &leaves),
        ] {
            let (mut indexed, mut scan, mut bare) = databases();
            run_sized(
                c,
                group,
                n,
                [
                    ("indexed", &mut indexed),
                    ("scan", &mut scan),
                    ("baseline_no_listeners", &mut bare),
                ],
                writes,
                (1, WATCHERS),
            );
        }
    }
}

/// (e) A leaderboard: 100,000 players, 1,000 watchers of its top 10 (one shared indexed
/// view), each write a player's new score. Either every write puts a player at the top, or
/// the scores are pseudo-random (most land outside the top 10, a few enter it).
fn leaderboard(c: &mut Criterion) {
    let n = list_sizes()[2];
    let watchers = listeners();
    let query = json!({"i": "score", "l": 10, "vf": "r"});
    let listen_top = |i: usize| listen("/scores", Some(query.clone()), Some(i as u64 + 1));
    let mut indexed = scores_database(n, watchers, Some(&listen_top), true);
    let mut bare = scores_database(n, 0, None, true);
    let mut counter = 0usize;
    let mut next = || {
        counter += 1;
        put(
            &format!("/scores/c{:06}/score", counter.wrapping_mul(7_919) % n),
            json!(n + counter),
        )
    };
    run_case(
        c,
        "e_leaderboard_100k_top10_new_leader",
        &mut indexed,
        &mut bare,
        &mut next,
        (1, watchers),
    );

    let mut indexed = scores_database(n, watchers, Some(&listen_top), true);
    let mut bare = scores_database(n, 0, None, true);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut first = true;
    let mut next = || {
        // The first write (checked by run_case) lowers a player far from the top.
        if std::mem::take(&mut first) {
            return put("/scores/c000000/score", json!(-1));
        }
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let player = (state >> 33) as usize % n;
        let score = (state >> 13) as usize % (n + n / 1_000);
        put(&format!("/scores/c{player:06}/score"), json!(score))
    };
    run_case(
        c,
        "e_leaderboard_100k_top10_random_scores",
        &mut indexed,
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
    targets = shared_default, distinct_children, shared_filtered, indexed_windows, leaderboard
}
criterion_main!(benches);
