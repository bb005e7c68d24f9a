//! Where a long-polling session's outbox writes: the messages the owner sends, taken out of
//! their frames, until the client's polls take them.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use hearth_edge::socket::Transport;
use hearth_ground::close::MAX_OUTBOUND_BYTES;

use super::script::FrameReader;

/// The most bytes of messages in one answer (one message larger than it goes alone). The
/// SDK polls again as soon as an answer is loaded.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// Where a session's outbox writes: whole messages, taken out of their frames, waiting for
/// the client's next poll. Past [`MAX_OUTBOUND_BYTES`] it refuses bytes as a full socket
/// would, so that the outbox counts the rest in the server's answer budget and a client
/// that stopped polling is closed as a slow reader, as a WebSocket one is.
#[derive(Default)]
pub struct Mailbox {
    reader: RefCell<FrameReader>,
    messages: RefCell<VecDeque<String>>,
    bytes: Cell<usize>,
    /// The outbox's task, waiting for room.
    waker: RefCell<Option<Waker>>,
    /// Wakes the session's task when messages arrive.
    arrived: Rc<Notify>,
}

impl Mailbox {
    fn is_full(&self) -> bool {
        self.bytes.get() + self.reader.borrow().buffered() >= MAX_OUTBOUND_BYTES
    }

    pub(super) fn is_empty(&self) -> bool {
        self.messages.borrow().is_empty()
    }

    /// Completes when messages arrived since the last time it completed, so that the
    /// session's task answers the held poll with them.
    pub(super) fn arrived(&self) -> Notified<'_> {
        self.arrived.notified()
    }

    /// Appends a message of the transport itself after the waiting ones (the end of
    /// transmission of a session that moves to a WebSocket), outside the outbox: nothing the
    /// owner sends may come after it here.
    pub(super) fn push_message(&self, text: &str) {
        self.bytes.set(self.bytes.get() + text.len());
        self.messages.borrow_mut().push_back(text.to_owned());
        self.arrived.notify_one();
    }

    /// The waiting messages that fit in one answer (at least one).
    pub(super) fn take(&self) -> Vec<String> {
        let mut messages = self.messages.borrow_mut();
        let mut taken = Vec::new();
        let mut size = 0;
        while let Some(message) = messages.front() {
            if !taken.is_empty() && size + message.len() > MAX_ANSWER_BYTES {
                break;
            }
            size += message.len();
            taken.extend(messages.pop_front());
        }
        self.bytes.set(self.bytes.get().saturating_sub(size));
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
        taken
    }
}

impl Transport for Mailbox {
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.is_full() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut written = 0;
        let mut messages = self.messages.borrow_mut();
        let before = messages.len();
        for buf in bufs {
            self.reader.borrow_mut().push(buf, &mut messages);
            written += buf.len();
        }
        let added: usize = messages.iter().skip(before).map(String::len).sum();
        self.bytes.set(self.bytes.get() + added);
        if messages.len() > before {
            self.arrived.notify_one();
        }
        Ok(written)
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.is_full() {
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(Ok(()))
        }
    }
}
