//! A connection's outbound queue. Everything a loop turn produces for a connection is queued
//! here, and the connection's task writes the whole queue with one flush. Each message carries
//! its durability tag (see `persist::gate`): the task writes the prefix of the queue whose
//! writes are on disk, and the shard wakes it again when the disk catches up.

use std::cell::{Cell, RefCell};

use hearth_sync::ConnId;
use hearth_wire::split_frames;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::persist::{HeldQueue, Pushed, Tagger};

/// The most bytes that may wait in one connection's queue. A client that reads slower than
/// its data arrives is disconnected rather than allowed to grow the server's memory.
pub const MAX_OUTBOUND_BYTES: usize = 64 * 1024 * 1024;

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
    /// Messages with their durability tags.
    queue: HeldQueue<Message>,
    notify: Notify,
    closing: RefCell<Option<CloseReason>>,
    /// When the connection's credential expires (seconds since the epoch).
    auth_expires_at: Cell<Option<u64>>,
}

impl ConnHandle {
    pub fn new(id: ConnId, namespace: String, session_id: String, tagger: Tagger) -> ConnHandle {
        ConnHandle {
            id,
            namespace,
            session_id,
            queue: HeldQueue::new(id, tagger),
            notify: Notify::new(),
            closing: RefCell::new(None),
            auth_expires_at: Cell::new(None),
        }
    }

    /// Queues one message, split into frames when it is long.
    pub fn send_text(&self, text: String) {
        self.send_frames(&to_frames(text));
    }

    /// Queues frames that may be shared with other connections.
    pub fn send_frames(&self, frames: &[Message]) {
        if self.closing.borrow().is_some() {
            return;
        }
        match self.queue.push(frames) {
            Pushed::Ready => self.notify.notify_one(),
            Pushed::Held => {}
            Pushed::Overflow => self.close(CloseReason::new(
                CloseCode::Policy,
                "the client reads too slowly: outbound queue limit reached",
            )),
        }
    }

    /// Takes the messages that may be sent now: the front of the queue, up to the first
    /// message whose write is not yet durable.
    pub fn take_ready(&self) -> Vec<Message> {
        self.queue.take_ready()
    }

    /// The disk caught up: the held messages may be ready.
    pub fn wake_after_disk(&self) {
        self.queue.woken();
        self.notify.notify_one();
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

/// The frames of one message: the message itself, or a count frame and its chunks.
pub fn to_frames(text: String) -> Vec<Message> {
    match split_frames(&text) {
        None => vec![Message::Text(Utf8Bytes::from(text))],
        Some(chunks) => {
            let mut frames = Vec::with_capacity(chunks.len() + 1);
            frames.push(Message::Text(Utf8Bytes::from(chunks.len().to_string())));
            frames.extend(
                chunks
                    .into_iter()
                    .map(|chunk| Message::Text(Utf8Bytes::from(chunk.to_owned()))),
            );
            frames
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_become_count_and_chunks() {
        let frames = to_frames("x".repeat(40_054));
        let texts: Vec<usize> = frames.iter().map(Message::len).collect();
        assert_eq!(texts, vec![1, 16_384, 16_384, 7_286]);
        assert_eq!(frames[0], Message::Text(Utf8Bytes::from("3".to_owned())));
    }

    #[test]
    fn slow_readers_are_closed() {
        let handle = ConnHandle::new(1, "ns".into(), "s".into(), Tagger::open());
        let big = "x".repeat(1024 * 1024);
        for _ in 0..=(MAX_OUTBOUND_BYTES / big.len()) {
            handle.send_text(big.clone());
        }
        assert!(handle.closing().is_some());
        assert!(handle.take_ready().is_empty());
    }

    #[test]
    fn messages_wait_for_their_write_to_be_durable() {
        let tagger = Tagger {
            gate: std::rc::Rc::new(crate::persist::Gate::new(true, 0)),
            database_seq: std::rc::Rc::new(Cell::new(0)),
        };
        let handle = ConnHandle::new(1, "ns".into(), "s".into(), tagger.clone());
        handle.send_text("before".into());
        tagger.database_seq.set(3);
        handle.send_text("after the write".into());
        assert_eq!(handle.take_ready().len(), 1);
        assert!(handle.take_ready().is_empty());
        assert_eq!(tagger.gate.advance(3), vec![1]);
        handle.wake_after_disk();
        assert_eq!(
            handle.take_ready(),
            vec![Message::Text(Utf8Bytes::from("after the write".to_owned()))]
        );
    }
}
