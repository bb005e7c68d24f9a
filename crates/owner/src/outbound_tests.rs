use std::io::Cursor;

use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

use std::sync::Arc;

use super::*;
use hearth_edge::recorder::Recorder;
use hearth_edge::socket::Sent;
use hearth_ground::close::MAX_OUTBOUND_BYTES;
use hearth_net::budget::{HttpBudgets, ShardBudget, SharedBudgets};

/// The socket's side of a session whose socket is on this core.
fn local(handle: &ConnHandle) -> &EdgeConn {
    handle
        .local_edge()
        .expect("the connection's socket is on this core")
}

/// The payloads of the text frames in `bytes`.
fn texts(bytes: &[u8]) -> Vec<String> {
    let mut cursor = Cursor::new(bytes);
    let mut texts = Vec::new();
    while let Ok(Some((header, length))) = FrameHeader::parse(&mut cursor) {
        assert_eq!(header.opcode, OpCode::Data(Data::Text));
        assert!(header.is_final && header.mask.is_none());
        let start = cursor.position() as usize;
        let end = start + length as usize;
        texts.push(String::from_utf8(bytes[start..end].to_vec()).expect("text"));
        cursor.set_position(end as u64);
    }
    assert_eq!(cursor.position() as usize, bytes.len(), "trailing bytes");
    texts
}

fn handle(tagger: Tagger, recorder: &Rc<Recorder>) -> ConnHandle {
    let budgets = Arc::new(HttpBudgets::default());
    counted_handle(tagger, recorder, &ShardBudget::new(budgets))
}

fn counted_handle(tagger: Tagger, recorder: &Rc<Recorder>, budget: &Rc<ShardBudget>) -> ConnHandle {
    let transport: Rc<dyn hearth_edge::socket::Transport> = recorder.clone();
    let edge = Rc::new(EdgeConn::new(
        1,
        transport,
        budget.clone(),
        Default::default(),
    ));
    ConnHandle::new(1, "ns".into(), "s".into(), tagger, Route::Local(edge))
}

fn strict_tagger() -> Tagger {
    Tagger {
        gate: Rc::new(hearth_persist::Gate::new(true, 0)),
        database_seq: Rc::new(Cell::new(0)),
    }
}

const MIB: usize = 1024 * 1024;

fn budgets(answers: usize) -> (SharedBudgets, Rc<ShardBudget>) {
    let budgets = HttpBudgets::for_answers(answers);
    (budgets.clone(), ShardBudget::new(budgets))
}

#[test]
fn batches_arriving_while_a_message_waits_are_held_in_order() {
    let handle = handle(Tagger::open(), &Recorder::new(usize::MAX));
    let room = Arc::new(tokio::sync::Semaphore::new(8));
    let batch = |text: &str| MessageBatch {
        texts: vec![text.to_owned()],
        done: None,
        room: room.clone().try_acquire_owned().expect("room"),
    };
    let now = handle.hold_if_waiting(batch("a"));
    assert!(now.is_some(), "nothing waits: handled on arrival");
    handle.start_holding();
    assert!(handle.hold_if_waiting(batch("b")).is_none());
    assert!(handle.hold_if_waiting(batch("c")).is_none());
    assert_eq!(
        room.available_permits(),
        5,
        "held batches keep the edge's room"
    );
    let order: Vec<String> = std::iter::from_fn(|| handle.next_held())
        .map(|held| held.texts.concat())
        .collect();
    assert_eq!(order, ["b", "c"]);
    assert!(
        handle.hold_if_waiting(batch("d")).is_some(),
        "once all were given back, batches are handled on arrival again"
    );
    drop(now);
    assert_eq!(room.available_permits(), 8);
}

#[test]
fn connections_past_the_server_budget_are_closed_and_let_go_of_their_bytes() {
    let (budgets, budget) = budgets(6 * MIB + MIB / 2);
    let reader = Recorder::new(usize::MAX);
    let reading = counted_handle(Tagger::open(), &reader, &budget);
    let stalled: Vec<_> = (0..3)
        .map(|_| counted_handle(Tagger::open(), &Recorder::new(0), &budget))
        .collect();
    let push = encode_frames("x".repeat(MIB));
    for _ in 0..3 {
        reading.send_frames(&push);
        for handle in &stalled {
            handle.send_frames(&push);
        }
    }
    // Each stalled connection counts the shared frames it holds: the third round does not
    // fit for the first; closed, it keeps one message, so the second's fits, and the
    // third's does not.
    for closed in [&stalled[0], &stalled[2]] {
        let reason = local(closed).closing().expect("closed");
        assert_eq!(reason.code, CloseCode::Policy);
        assert_eq!(reason.text, SLOW_READER_CLOSE);
        assert_eq!(
            local(closed).outbox().bytes(),
            push.len(),
            "only the front message stays"
        );
    }
    assert!(local(&stalled[1]).closing().is_none());
    assert_eq!(local(&stalled[1]).outbox().bytes(), 3 * push.len());
    assert!(budgets.answers.used() <= 6 * MIB + MIB / 2);
    // The reading connection got every message, unchanged.
    assert_eq!(&reader.written.borrow()[..], &push.repeat(3)[..]);
    assert!(local(&reading).closing().is_none());
    drop(stalled);
    drop(reading);
    drop(budget);
    assert_eq!(budgets.answers.used(), 0);
}

#[test]
fn pushes_the_socket_takes_at_once_are_not_counted() {
    let (budgets, budget) = budgets(4 * MIB);
    let recorder = Recorder::new(usize::MAX);
    let handle = counted_handle(Tagger::open(), &recorder, &budget);
    for _ in 0..10 {
        handle.send_text("x".repeat(MIB));
    }
    assert!(local(&handle).closing().is_none());
    assert_eq!(budgets.answers.used(), 0);
}

#[test]
fn messages_waiting_for_the_disk_count_once_the_socket_refuses_them() {
    let (budgets, budget) = budgets(2 * MIB);
    let tagger = strict_tagger();
    let reader = Recorder::new(usize::MAX);
    let reading = counted_handle(tagger.clone(), &reader, &budget);
    let stalled = counted_handle(tagger.clone(), &Recorder::new(0), &budget);
    tagger.database_seq.set(1);
    let push = encode_frames("x".repeat(MIB));
    for _ in 0..3 {
        reading.send_frames(&push);
        stalled.send_frames(&push);
    }
    assert_eq!(budgets.answers.used(), 0, "held for the disk: not counted");
    assert!(local(&stalled).closing().is_none());
    assert_eq!(tagger.gate.advance(1).len(), 2, "both wait for the disk");
    reading.wake_after_disk();
    stalled.wake_after_disk();
    assert_eq!(&reader.written.borrow()[..], &push.repeat(3)[..]);
    assert_eq!(
        local(&stalled).closing().map(|reason| reason.text),
        Some(SLOW_READER_CLOSE.to_owned()),
        "refused by the socket, they do not fit"
    );
    assert_eq!(local(&stalled).outbox().bytes(), push.len());
    drop(stalled);
    drop(reading);
    drop(budget);
    assert_eq!(budgets.answers.used(), 0);
}

#[test]
fn long_messages_become_count_and_chunks() {
    let sizes: Vec<usize> = texts(&encode_frames("x".repeat(40_054)))
        .iter()
        .map(String::len)
        .collect();
    assert_eq!(sizes, vec![1, 16_384, 16_384, 7_286]);
    assert_eq!(texts(&encode_frames("x".repeat(40_054)))[0], "3");
    let long = "y".repeat(70_000);
    assert_eq!(texts(&encode_frames(long.clone())).len(), 6);
    assert_eq!(texts(&encode_frames("short".into())), vec!["short"]);
}

#[test]
fn slow_readers_are_closed() {
    let recorder = Recorder::new(0);
    let handle = handle(Tagger::open(), &recorder);
    let big = "x".repeat(1024 * 1024);
    for _ in 0..=(MAX_OUTBOUND_BYTES / big.len()) {
        handle.send_text(big.clone());
    }
    assert!(local(&handle).closing().is_some());
    assert!(recorder.written.borrow().is_empty());
}

#[test]
fn messages_wait_for_their_write_to_be_durable() {
    let recorder = Recorder::new(1 << 20);
    let tagger = Tagger {
        gate: Rc::new(hearth_persist::Gate::new(true, 0)),
        database_seq: Rc::new(Cell::new(0)),
    };
    let handle = handle(tagger.clone(), &recorder);
    handle.send_text("before".into());
    tagger.database_seq.set(3);
    handle.send_text("after the write".into());
    handle.send_text("and another".into());
    assert_eq!(texts(&recorder.written.borrow()), vec!["before"]);
    assert_eq!(tagger.gate.advance(3), vec![1]);
    handle.wake_after_disk();
    assert_eq!(
        texts(&recorder.written.borrow()),
        vec!["before", "after the write", "and another"]
    );
}

#[test]
fn a_given_up_write_is_answered_unavailable_and_what_shows_it_is_dropped() {
    let recorder = Recorder::new(1 << 20);
    let tagger = strict_tagger();
    let handle = handle(tagger.clone(), &recorder);
    tagger.database_seq.set(2);
    handle.send_text(r#"{"t":"d","d":{"r":4,"b":{"s":"ok","d":""}}}"#.into());
    tagger.database_seq.set(3);
    handle.send_text(r#"{"t":"d","d":{"b":{"p":"a","d":1},"a":"d"}}"#.into());
    handle.send_text(r#"{"t":"d","d":{"r":5,"b":{"s":"ok","d":""}}}"#.into());
    handle.send_text(r#"{"t":"d","d":{"r":6,"b":{"s":"ok","d":{"a":1}}}}"#.into());
    // Record 2 reached a copy that may take over; 3 did not and is given up.
    assert!(handle.give_up_from(3));
    tagger.gate.advance(3);
    handle.wake_after_disk();
    let sent = texts(&recorder.written.borrow());
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0], r#"{"t":"d","d":{"r":4,"b":{"s":"ok","d":""}}}"#);
    let reply: serde_json::Value = serde_json::from_str(&sent[1]).expect("json");
    assert_eq!(reply["d"]["r"], 5);
    assert_eq!(reply["d"]["b"]["s"], "unavailable");
    assert!(reply["d"]["b"]["d"]
        .as_str()
        .is_some_and(|text| text.contains("may or may not have been applied")));
}

#[test]
fn a_full_socket_keeps_the_messages_in_order() {
    let recorder = Recorder::new(5);
    let handle = handle(Tagger::open(), &recorder);
    handle.send_text("first message".into());
    handle.send_text("second".into());
    assert!(local(&handle).has_pending());
    recorder.room.set(1 << 20);
    assert_eq!(local(&handle).outbox().write_now(), Sent::Written);
    assert_eq!(
        texts(&recorder.written.borrow()),
        vec!["first message", "second"]
    );
}

#[test]
fn corked_answers_leave_together() {
    let recorder = Recorder::new(1 << 20);
    let handle = handle(Tagger::open(), &recorder);
    local(&handle).cork();
    handle.send_text("a".into());
    handle.send_text("b".into());
    assert!(recorder.written.borrow().is_empty());
    local(&handle).uncork();
    assert_eq!(texts(&recorder.written.borrow()), vec!["a", "b"]);
}
