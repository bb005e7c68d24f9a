//! A connection's outbound side. Each message, encoded once as WebSocket frames, carries its
//! durability tag (see `persist::gate`): it is written to the socket as soon as its write is
//! on disk, by whoever is running then (see `socket`), and waits in the held queue until the
//! shard releases it after the log sync.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use hearth_sync::ConnId;
use hearth_wire::split_frames;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Utf8Bytes;

use crate::budget::ShardBudget;
use crate::persist::{HeldQueue, Pushed, Tagger};
use crate::socket::{Outbox, Sent, Transport};

/// The most bytes that may wait in one connection's queue. A client that reads slower than
/// its data arrives is disconnected rather than allowed to grow the server's memory: it gets
/// [`SLOW_READER_CLOSE`] (1008), as it does when its queued bytes do not fit in the server's
/// answer budget (`budget::DEFAULT_ANSWER_BUDGET_BYTES`).
pub const MAX_OUTBOUND_BYTES: usize = 64 * 1024 * 1024;

/// The close reason of a connection closed for reading too slowly.
pub const SLOW_READER_CLOSE: &str = "the client reads too slowly: outbound queue limit reached";

/// Why the server closes a connection, sent as the close frame's reason.
#[derive(Debug, Clone)]
pub struct CloseReason {
    pub code: CloseCode,
    pub text: String,
}

impl CloseReason {
    pub fn new(code: CloseCode, text: impl Into<String>) -> CloseReason {
        CloseReason {
            code,
            text: text.into(),
        }
    }

    /// The close frame; its reason is cut to the 123 bytes that a close frame can carry.
    pub fn frame(&self) -> CloseFrame {
        let mut end = self.text.len().min(123);
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        CloseFrame {
            code: self.code,
            reason: Utf8Bytes::from(self.text[..end].to_owned()),
        }
    }
}

/// The shard's handle on one open connection.
pub struct ConnHandle {
    pub id: ConnId,
    pub namespace: String,
    pub session_id: String,
    /// Encoded messages with their durability tags, until their writes are durable. They are
    /// not counted in the server's answer budget: they wait for the server's own disk, not for
    /// the client, leave at the next log sync whatever the client does, and are mostly one
    /// copy shared by every listener; counting them per connection would close readers that
    /// keep up whenever a large push fans out in strict durability. Once they leave, what the
    /// socket refuses is counted (by the outbox).
    queue: HeldQueue<Bytes>,
    /// Encoded messages that may leave, until the kernel takes them.
    outbox: Rc<Outbox>,
    /// Wakes the connection's task: to close, to wait for a full socket, or to rearm a timer.
    notify: Notify,
    closing: RefCell<Option<CloseReason>>,
    /// When the connection's credential expires (seconds since the epoch).
    auth_expires_at: Cell<Option<u64>>,
}

impl ConnHandle {
    pub fn new(
        id: ConnId,
        namespace: String,
        session_id: String,
        tagger: Tagger,
        transport: Rc<dyn Transport>,
        budget: Rc<ShardBudget>,
    ) -> ConnHandle {
        ConnHandle {
            id,
            namespace,
            session_id,
            queue: HeldQueue::new(id, tagger),
            outbox: Rc::new(Outbox::new(transport, Some(budget))),
            notify: Notify::new(),
            closing: RefCell::new(None),
            auth_expires_at: Cell::new(None),
        }
    }

    /// Sends one message, split into frames when it is long.
    pub fn send_text(&self, text: String) {
        self.send_frames(&encode_frames(text));
    }

    /// Sends encoded frames that may be shared with other connections: now if their write is
    /// durable and the socket has room, else as soon as both hold.
    pub fn send_frames(&self, frames: &Bytes) {
        if self.closing.borrow().is_some() {
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

    /// Moves the durable front of the held queue to the socket.
    fn deliver(&self) {
        let ready = std::iter::from_fn(|| self.queue.pop_ready());
        match self.outbox.send(ready) {
            Sent::Written => {}
            // The task waits for the socket to take the rest (or lifts the cork itself).
            Sent::Pending
                if self.outbox.bytes() > MAX_OUTBOUND_BYTES || self.outbox.over_budget() =>
            {
                self.overflow()
            }
            Sent::Pending if self.outbox.is_corked() => {}
            Sent::Pending | Sent::Failed => self.notify.notify_one(),
        }
    }

    /// Closes a connection that holds too much, and lets go of the messages it held: the
    /// client cannot have them any more, it reconnects and resyncs.
    fn overflow(&self) {
        self.close(CloseReason::new(CloseCode::Policy, SLOW_READER_CLOSE));
        self.queue.clear();
        self.outbox.shed();
    }

    /// The outbox, which the WebSocket library writes through too.
    pub fn outbox(&self) -> Rc<Outbox> {
        self.outbox.clone()
    }

    /// While the task answers a burst of requests, its answers are written together.
    pub fn cork(&self) {
        self.outbox.cork();
    }

    pub fn uncork(&self) {
        self.outbox.uncork();
    }

    /// Whether bytes wait for the socket to become writable.
    pub fn has_pending(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Whether the socket failed on a write.
    pub fn write_failed(&self) -> bool {
        self.outbox.failed()
    }

    /// How long the client has not accepted data that waits for it.
    pub fn blocked_for(&self) -> Option<Duration> {
        self.outbox.blocked_for()
    }

    /// Completes when every pending byte is written.
    pub async fn drained(&self) -> std::io::Result<()> {
        std::future::poll_fn(|cx| self.outbox.poll_drain(cx)).await
    }

    /// The connection ended: nothing more is written, and the socket may close.
    pub fn detach(&self) {
        self.outbox.detach();
    }

    /// Drops the messages that wait for writes that will never be durable (the log failed).
    pub fn discard_held(&self) {
        self.queue.discard_held();
    }

    /// Asks the connection's task to close the socket.
    pub fn close(&self, reason: CloseReason) {
        let mut closing = self.closing.borrow_mut();
        if closing.is_none() {
            *closing = Some(reason);
        }
        self.notify.notify_one();
    }

    pub fn closing(&self) -> Option<CloseReason> {
        self.closing.borrow().clone()
    }

    pub fn set_auth_expiry(&self, expires_at: Option<u64>) {
        self.auth_expires_at.set(expires_at);
        // Wake the connection's task so that it waits for the new deadline.
        self.notify.notify_one();
    }

    pub fn auth_expiry(&self) -> Option<u64> {
        self.auth_expires_at.get()
    }

    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

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
    use crate::budget::{HttpBudgets, SharedBudgets};
    use crate::socket::tests::Recorder;

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
        ConnHandle::new(
            1,
            "ns".into(),
            "s".into(),
            tagger,
            recorder.clone(),
            budget.clone(),
        )
    }

    fn strict_tagger() -> Tagger {
        Tagger {
            gate: Rc::new(crate::persist::Gate::new(true, 0)),
            database_seq: Rc::new(Cell::new(0)),
        }
    }

    const MIB: usize = 1024 * 1024;

    fn budgets(answers: usize) -> (SharedBudgets, Rc<ShardBudget>) {
        let budgets = HttpBudgets::for_answers(answers);
        (budgets.clone(), ShardBudget::new(budgets))
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
            let reason = closed.closing().expect("closed");
            assert_eq!(reason.code, CloseCode::Policy);
            assert_eq!(reason.text, SLOW_READER_CLOSE);
            assert_eq!(
                closed.outbox().bytes(),
                push.len(),
                "only the front message stays"
            );
        }
        assert!(stalled[1].closing().is_none());
        assert_eq!(stalled[1].outbox().bytes(), 3 * push.len());
        assert!(budgets.answers.used() <= 6 * MIB + MIB / 2);
        // The reading connection got every message, unchanged.
        assert_eq!(&reader.written.borrow()[..], &push.repeat(3)[..]);
        assert!(reading.closing().is_none());
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
        assert!(handle.closing().is_none());
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
        assert!(stalled.closing().is_none());
        assert_eq!(tagger.gate.advance(1).len(), 2, "both wait for the disk");
        reading.wake_after_disk();
        stalled.wake_after_disk();
        assert_eq!(&reader.written.borrow()[..], &push.repeat(3)[..]);
        assert_eq!(
            stalled.closing().map(|reason| reason.text),
            Some(SLOW_READER_CLOSE.to_owned()),
            "refused by the socket, they do not fit"
        );
        assert_eq!(stalled.outbox().bytes(), push.len());
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
        assert!(handle.closing().is_some());
        assert!(recorder.written.borrow().is_empty());
    }

    #[test]
    fn messages_wait_for_their_write_to_be_durable() {
        let recorder = Recorder::new(1 << 20);
        let tagger = Tagger {
            gate: Rc::new(crate::persist::Gate::new(true, 0)),
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
    fn a_full_socket_keeps_the_messages_in_order() {
        let recorder = Recorder::new(5);
        let handle = handle(Tagger::open(), &recorder);
        handle.send_text("first message".into());
        handle.send_text("second".into());
        assert!(handle.has_pending());
        recorder.room.set(1 << 20);
        assert_eq!(handle.outbox().write_now(), Sent::Written);
        assert_eq!(
            texts(&recorder.written.borrow()),
            vec!["first message", "second"]
        );
    }

    #[test]
    fn corked_answers_leave_together() {
        let recorder = Recorder::new(1 << 20);
        let handle = handle(Tagger::open(), &recorder);
        handle.cork();
        handle.send_text("a".into());
        handle.send_text("b".into());
        assert!(recorder.written.borrow().is_empty());
        handle.uncork();
        assert_eq!(texts(&recorder.written.borrow()), vec!["a", "b"]);
    }
}
