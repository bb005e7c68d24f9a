//! The socket writes an edge makes per push, counted through the recording transport on the
//! real path (`carry_out` → `EdgeConn::write` → the outbox → one `try_write_vectored`, which
//! is one `write`/`writev` of a real socket), against the regression gate's `writes.` lines
//! (`bench/gate/baseline.tsv`). Unlike a count of a running server's system calls, these do
//! not move with the machine's load: they are what the code asks of the kernel.

use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use hearth_edge::recorder::Recorder;
use hearth_edge::{Edge, EdgeConn, EdgeTarget};
use hearth_ground::cross_core::{Credit, EdgeItem, ToEdge};
use hearth_ground::metrics::ShardCounters;
use hearth_net::budget::{HttpBudgets, ShardBudget};
use hearth_sync::ConnId;

use super::carry_out;

/// The `writes.` baselines: (figure, baseline, tolerance).
fn baselines() -> Vec<(String, f64, f64)> {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/gate/baseline.tsv"
    ));
    text.lines()
        .filter(|line| line.starts_with("writes."))
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let number = |at: usize| fields[at].parse::<f64>().expect("a number in the baseline");
            (fields[0].to_owned(), number(1), number(2))
        })
        .collect()
}

/// An edge holding `count` WebSocket connections (ids 1..=count) on recording sockets with
/// room for everything.
fn edge_with(count: u64) -> (Edge, Vec<Rc<Recorder>>) {
    let budget = ShardBudget::new(Arc::new(HttpBudgets::default()));
    let counters = Rc::new(ShardCounters::default());
    let edge = Edge::new(1, budget.clone(), counters.clone(), false);
    let mut recorders = Vec::new();
    for id in 1..=count {
        let recorder = Recorder::new(usize::MAX);
        let conn = EdgeConn::new(id, recorder.clone(), budget.clone(), counters.clone());
        edge.hold(id, EdgeTarget::Socket(Rc::new(conn)));
        recorders.push(recorder);
    }
    (edge, recorders)
}

fn writes(recorders: &[Rc<Recorder>]) -> usize {
    recorders.iter().map(|recorder| recorder.writes.get()).sum()
}

/// A WebSocket text frame of `text`, as an owner sends it.
fn frame(text: &str) -> Bytes {
    let mut bytes = vec![0x81, text.len() as u8];
    bytes.extend_from_slice(text.as_bytes());
    Bytes::from(bytes)
}

/// The figures the gate holds, measured now.
fn measured() -> Vec<(&'static str, f64)> {
    let credit = Arc::new(Credit::default());
    // A batch of 10 pushes to a room of 50, in the order an owner releases them: each push
    // to every listener in turn.
    let (edge, recorders) = edge_with(50);
    let mut items = Vec::new();
    for push in 0..10 {
        let frames = frame(&format!("push {push}"));
        for conn in 1..=50 as ConnId {
            items.push(EdgeItem::Frames {
                conn,
                frames: frames.clone(),
            });
        }
    }
    carry_out(&edge, ToEdge::new(items, &credit));
    let per_push = writes(&recorders) as f64 / (10.0 * 50.0);
    // One connection's reply and the pushes released with it, consecutive in the batch.
    let (edge, recorders) = edge_with(1);
    let items = (0..8)
        .map(|message| EdgeItem::Frames {
            conn: 1,
            frames: frame(&format!("message {message}")),
        })
        .collect();
    carry_out(&edge, ToEdge::new(items, &credit));
    let per_run = writes(&recorders) as f64;
    vec![
        ("writes.per_listener_per_push", per_push),
        ("writes.per_run_of_one_connection", per_run),
    ]
}

#[test]
fn socket_writes_per_push_hold_the_gates_baseline() {
    let baselines = baselines();
    assert_eq!(baselines.len(), 2, "the writes. lines of baseline.tsv");
    for (figure, value) in measured() {
        let (_, baseline, tolerance) = baselines
            .iter()
            .find(|(name, _, _)| name == figure)
            .expect("a baseline for every figure");
        assert!(
            (value - baseline).abs() <= *tolerance,
            "{figure}: {value:.2} writes against the baseline {baseline:.2} (± {tolerance}); a \
             change that makes fewer or more updates bench/gate/baseline.tsv and says why"
        );
    }
}

#[test]
fn every_frame_reaches_its_socket_once_in_order() {
    let (edge, recorders) = edge_with(2);
    let credit = Arc::new(Credit::default());
    let items = vec![
        EdgeItem::Frames {
            conn: 1,
            frames: frame("a"),
        },
        EdgeItem::Frames {
            conn: 2,
            frames: frame("b"),
        },
        EdgeItem::Frames {
            conn: 1,
            frames: frame("c"),
        },
    ];
    carry_out(&edge, ToEdge::new(items, &credit));
    assert_eq!(
        *recorders[0].written.borrow(),
        [frame("a"), frame("c")].concat()
    );
    assert_eq!(*recorders[1].written.borrow(), frame("b").to_vec());
}
