//! A connection's outbound side on the core that owns its database. Each message, encoded once
//! as WebSocket frames, carries its durability tag (see `hearth_persist::Gate`): it waits in the held
//! queue until its write is on disk, then goes to the socket at once when the socket is on
//! this core, or into this core's next batch for the core that holds the socket (`link`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use bytes::Bytes;
use hearth_sync::ConnId;
use hearth_wire::split_frames;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

use crate::close::{CloseReason, SLOW_READER_CLOSE};
use crate::edge::EdgeConn;
use crate::link::{EdgeItem, MessageBatch, MoveCause, Outgoing};
use hearth_persist::{HeldQueue, Pushed, Tagger};

/// Where a connection's messages go once they may leave.
pub enum Route {
    /// The connection's socket is on this core: written at once.
    Local(Rc<EdgeConn>),
    /// The socket is on another core (its edge): the messages leave with this core's next
    /// batch for that edge.
    Remote { edge: usize, outgoing: Rc<Outgoing> },
}

/// The owner's handle on one session of its database: a WebSocket connection, on this core or
/// on another.
pub struct ConnHandle {
    pub id: ConnId,
    pub namespace: String,
    pub session_id: String,
    /// Encoded messages with their durability tags, until their writes are durable. They are
    /// not counted in the server's answer budget: they wait for the server's own disk, not for
    /// the client, leave at the next log sync whatever the client does, and are mostly one
    /// copy shared by every listener; counting them per connection would close readers that
    /// keep up whenever a large push fans out in strict durability. Once they leave, what the
    /// socket refuses is counted (by the edge's outbox).
    queue: HeldQueue<Bytes>,
    route: Route,
    /// Set once the owner asked the connection to close: nothing more is queued.
    closing: Cell<bool>,
    /// Set once the owner stopped handling the connection's requests for a move
    /// ([`ConnHandle::stop_for_move`]): nothing more is queued either, but it may still be
    /// closed instead.
    stopped: Cell<bool>,
    /// When the connection's credential expires (seconds since the epoch), as the owner set it.
    auth_expires_at: Cell<Option<u64>>,
    /// A read was refused (`owner::dispatch::refuse_read`): the session is to close once its
    /// replies have left.
    refused_reads: Cell<bool>,
    /// While one of the connection's messages from another core waits to be finished (for
    /// its database's claim, or its decoding off the thread: `owner::intake`), the batches
    /// that arrive after it, to be handled after it in order. `None` while nothing waits.
    held_batches: RefCell<Option<VecDeque<MessageBatch>>>,
}

impl ConnHandle {
    pub fn new(
        id: ConnId,
        namespace: String,
        session_id: String,
        tagger: Tagger,
        route: Route,
    ) -> ConnHandle {
        ConnHandle {
            id,
            namespace,
            session_id,
            queue: HeldQueue::new(id, tagger),
            route,
            closing: Cell::new(false),
            stopped: Cell::new(false),
            auth_expires_at: Cell::new(None),
            refused_reads: Cell::new(false),
            held_batches: RefCell::new(None),
        }
    }

    /// Marks the session to be closed: a listen was left unanswered.
    pub fn refuse_reads(&self) {
        self.refused_reads.set(true);
    }

    /// Whether a read of the session was refused.
    pub fn reads_refused(&self) -> bool {
        self.refused_reads.get()
    }

    /// Keeps `batch` for later if a message of the connection waits (see
    /// [`ConnHandle::start_holding`]); otherwise gives it back, to be handled now.
    pub fn hold_if_waiting(&self, batch: MessageBatch) -> Option<MessageBatch> {
        match self.held_batches.borrow_mut().as_mut() {
            Some(held) => {
                held.push_back(batch);
                None
            }
            None => Some(batch),
        }
    }

    /// From now on, batches that arrive are held until [`ConnHandle::next_held`] has given
    /// them all back.
    pub fn start_holding(&self) {
        self.held_batches
            .borrow_mut()
            .get_or_insert_with(VecDeque::new);
    }

    /// The next held batch; when none is left, batches are handled on arrival again.
    pub fn next_held(&self) -> Option<MessageBatch> {
        let mut held = self.held_batches.borrow_mut();
        let next = held.as_mut().and_then(VecDeque::pop_front);
        if next.is_none() {
            *held = None;
        }
        next
    }

    /// Sends one message, split into frames when it is long.
    pub fn send_text(&self, text: String) {
        self.send_frames(&encode_frames(text));
    }

    /// Sends encoded frames that may be shared with other connections: now if their write is
    /// durable, else as soon as it is.
    pub fn send_frames(&self, frames: &Bytes) {
        if self.is_closing() {
            return;
        }
        match self.queue.push(std::slice::from_ref(frames)) {
            Pushed::Ready => self.deliver(),
            Pushed::Held => {}
            Pushed::Overflow => self.overflow(),
        }
    }

    /// The disk caught up: the held messages may leave.
    pub fn wake_after_disk(&self) {
        self.queue.woken();
        self.deliver();
    }

    /// Moves the durable front of the held queue to the socket, or to the edge's batch.
    fn deliver(&self) {
        let ready = std::iter::from_fn(|| self.queue.pop_ready());
        match &self.route {
            Route::Local(edge) => edge.write(ready),
            Route::Remote { edge, outgoing } => {
                for frames in ready {
                    outgoing.push(
                        *edge,
                        EdgeItem::Frames {
                            conn: self.id,
                            frames,
                        },
                    );
                }
            }
        }
    }

    /// Closes a connection whose held messages grew past the limit, and lets go of them.
    fn overflow(&self) {
        self.queue.clear();
        self.close_with(CloseReason::new(CloseCode::Policy, SLOW_READER_CLOSE), true);
    }

    /// Drops the messages that wait for writes that will never be durable (the log failed).
    pub fn discard_held(&self) {
        self.queue.discard_held();
    }

    /// The messages that depend on a write from `first` on, which will never be
    /// acknowledged (`replica::sync_set`): the acknowledgement of a write becomes an
    /// `unavailable` reply that says it may or may not have been applied (so that the SDK
    /// does not send it again, as it would after a lost connection, to be refused there
    /// while this attempt survives on a copy), and everything else is dropped (pushes and
    /// answers that show the writes). Whether anything changed.
    pub fn give_up_from(&self, first: u64) -> bool {
        self.queue.replace_from(first, |frames| {
            let crate::edge::reply_scan::FromOwner::Reply { request, status } =
                crate::edge::reply_scan::read(frames)
            else {
                return None;
            };
            // A write's acknowledgement is `ok` with an empty text (`ReplyData::EmptyText`).
            let write_ack = status == "ok" && frames.ends_with(br#","d":""}}}"#);
            write_ack.then(|| {
                encode_frames(hearth_wire::encode_reply_status(
                    request,
                    "unavailable",
                    GIVEN_UP_REPLY,
                ))
            })
        })
    }

    /// Asks the connection's edge to close it.
    pub fn close(&self, reason: CloseReason) {
        self.close_with(reason, false);
    }

    fn close_with(&self, reason: CloseReason, shed: bool) {
        if self.closing.replace(true) {
            return;
        }
        match &self.route {
            Route::Local(edge) if shed => edge.close_shedding(reason),
            Route::Local(edge) => edge.close(reason),
            Route::Remote { edge, outgoing } => outgoing.push(
                *edge,
                EdgeItem::Close {
                    conn: self.id,
                    reason,
                    shed,
                },
            ),
        }
    }

    /// Nothing more is sent to the connection from here: its session moved to another
    /// owner (`sessions::move_connection`), and its edge carries on with that one.
    pub fn detach(&self) {
        self.closing.set(true);
        self.queue.clear();
    }

    /// Stops handling the requests of a connection held by another node, whose session is to
    /// move to the database's next owner (this node is stopping: `Shard::drain`); the replies
    /// to what it handled still leave as their writes become durable
    /// ([`ConnHandle::replies_sent`]), then [`ConnHandle::move_away`]. `false`, and nothing
    /// done, for a connection held by this node, whose socket closes with it.
    pub fn stop_for_move(&self, local_edges: usize) -> bool {
        let Route::Remote { edge, .. } = &self.route else {
            return false;
        };
        *edge >= local_edges && !self.closing.get() && !self.stopped.replace(true)
    }

    /// Whether every reply the connection was sent has left (none waits for the disk).
    pub fn replies_sent(&self) -> bool {
        self.queue.is_empty()
    }

    /// Asks the edge of a connection stopped by [`ConnHandle::stop_for_move`] to move its
    /// session; it comes after every reply sent before.
    pub fn move_away(&self) {
        let Route::Remote { edge, outgoing } = &self.route else {
            return;
        };
        if self.closing.replace(true) {
            return;
        }
        let cause = MoveCause::OwnerStopping;
        outgoing.push(
            *edge,
            EdgeItem::Moved {
                conn: self.id,
                cause,
            },
        );
    }

    /// Whether the connection is closing: asked by the owner, or, on this core, by its
    /// socket's side.
    pub fn is_closing(&self) -> bool {
        self.closing.get()
            || self.stopped.get()
            || matches!(&self.route, Route::Local(edge) if edge.closing().is_some())
    }

    pub fn set_auth_expiry(&self, expires_at: Option<u64>) {
        self.auth_expires_at.set(expires_at);
        match &self.route {
            Route::Local(edge) => edge.set_auth_expiry(expires_at),
            Route::Remote { edge, outgoing } => outgoing.push(
                *edge,
                EdgeItem::AuthExpiry {
                    conn: self.id,
                    expires_at,
                },
            ),
        }
    }

    pub fn auth_expiry(&self) -> Option<u64> {
        self.auth_expires_at.get()
    }

    /// The socket's side, when it is on this core (tests).
    #[cfg(test)]
    pub fn edge(&self) -> &EdgeConn {
        match &self.route {
            Route::Local(edge) => edge,
            Route::Remote { .. } => panic!("the connection's socket is on another core"),
        }
    }
}

/// What a client is told of a write whose acknowledgement was given up.
pub const GIVEN_UP_REPLY: &str = "this node lost the right to acknowledge the write before it \
     reached a copy that may take the database over; it may or may not have been applied";

/// One message as the bytes of its WebSocket frames: one text frame, or a count frame and
/// its chunks. Server frames are not masked, so the bytes are the same for every listener.
pub fn encode_frames(text: String) -> Bytes {
    let mut out = Vec::with_capacity(text.len() + 16);
    match split_frames(&text) {
        None => push_text_frame(&mut out, text.as_bytes()),
        Some(chunks) => {
            push_text_frame(&mut out, chunks.len().to_string().as_bytes());
            for chunk in chunks {
                push_text_frame(&mut out, chunk.as_bytes());
            }
        }
    }
    Bytes::from(out)
}

fn push_text_frame(out: &mut Vec<u8>, payload: &[u8]) {
    let header = FrameHeader {
        opcode: OpCode::Data(Data::Text),
        ..FrameHeader::default()
    };
    // Writing into a vector cannot fail.
    if header.format(payload.len() as u64, out).is_ok() {
        out.extend_from_slice(payload);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use std::sync::Arc;

    use super::*;
    use crate::budget::{HttpBudgets, ShardBudget, SharedBudgets};
    use crate::close::MAX_OUTBOUND_BYTES;
    use crate::edge::socket::tests::Recorder;
    use crate::edge::socket::Sent;

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

    fn counted_handle(
        tagger: Tagger,
        recorder: &Rc<Recorder>,
        budget: &Rc<ShardBudget>,
    ) -> ConnHandle {
        let transport: Rc<dyn crate::edge::socket::Transport> = recorder.clone();
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
            let reason = closed.edge().closing().expect("closed");
            assert_eq!(reason.code, CloseCode::Policy);
            assert_eq!(reason.text, SLOW_READER_CLOSE);
            assert_eq!(
                closed.edge().outbox().bytes(),
                push.len(),
                "only the front message stays"
            );
        }
        assert!(stalled[1].edge().closing().is_none());
        assert_eq!(stalled[1].edge().outbox().bytes(), 3 * push.len());
        assert!(budgets.answers.used() <= 6 * MIB + MIB / 2);
        // The reading connection got every message, unchanged.
        assert_eq!(&reader.written.borrow()[..], &push.repeat(3)[..]);
        assert!(reading.edge().closing().is_none());
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
        assert!(handle.edge().closing().is_none());
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
        assert!(stalled.edge().closing().is_none());
        assert_eq!(tagger.gate.advance(1).len(), 2, "both wait for the disk");
        reading.wake_after_disk();
        stalled.wake_after_disk();
        assert_eq!(&reader.written.borrow()[..], &push.repeat(3)[..]);
        assert_eq!(
            stalled.edge().closing().map(|reason| reason.text),
            Some(SLOW_READER_CLOSE.to_owned()),
            "refused by the socket, they do not fit"
        );
        assert_eq!(stalled.edge().outbox().bytes(), push.len());
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
        assert!(handle.edge().closing().is_some());
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
        assert!(handle.edge().has_pending());
        recorder.room.set(1 << 20);
        assert_eq!(handle.edge().outbox().write_now(), Sent::Written);
        assert_eq!(
            texts(&recorder.written.borrow()),
            vec!["first message", "second"]
        );
    }

    #[test]
    fn corked_answers_leave_together() {
        let recorder = Recorder::new(1 << 20);
        let handle = handle(Tagger::open(), &recorder);
        handle.edge().cork();
        handle.send_text("a".into());
        handle.send_text("b".into());
        assert!(recorder.written.borrow().is_empty());
        handle.edge().uncork();
        assert_eq!(texts(&recorder.written.borrow()), vec!["a", "b"]);
    }
}
