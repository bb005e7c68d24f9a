//! A long-polling session on the core that received its start (its home core), where it is
//! an edge connection like a WebSocket one: an [`EdgeConn`] whose outbox writes into a
//! [`Mailbox`] instead of a socket. So the owner of its database sees an ordinary session
//! (the same routing, held queue, durability tags, budgets, onDisconnect, `ls`, credential
//! expiry and closes), and only this module knows that its bytes leave through polls.
//!
//! This file holds the session's state and what a poll does to it; `task` runs it.

pub mod script;
pub mod segments;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use hearth_sync::ConnId;
use tokio::sync::{oneshot, Notify};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use crate::edge::socket::{Outbox, Transport};
use crate::edge::EdgeConn;
use crate::owner_side::OwnerSide;
use hearth_ground::close::{CloseReason, MAX_OUTBOUND_BYTES};
use hearth_ground::longpoll_request::Segment;
use hearth_ground::rest::RestResponse;
use script::{script_answer, FrameReader};
use segments::Reassembler;

/// The most bytes of messages in one answer (one message larger than it goes alone). The
/// SDK polls again as soon as an answer is loaded.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// The long-polling sessions whose home is this core, by public id.
#[derive(Default)]
pub struct Registry {
    sessions: RefCell<HashMap<String, Rc<LpSession>>>,
}

impl Registry {
    pub fn get(&self, id: &str) -> Option<Rc<LpSession>> {
        self.sessions.borrow().get(id).cloned()
    }

    pub fn len(&self) -> usize {
        self.sessions.borrow().len()
    }

    pub(super) fn insert(&self, session: Rc<LpSession>) {
        self.sessions
            .borrow_mut()
            .insert(session.public_id.clone(), session);
    }

    pub(super) fn remove(&self, id: &str) {
        self.sessions.borrow_mut().remove(id);
    }
}

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
    pub(super) arrived: Rc<Notify>,
}

impl Mailbox {
    fn is_full(&self) -> bool {
        self.bytes.get() + self.reader.borrow().buffered() >= MAX_OUTBOUND_BYTES
    }

    pub(super) fn is_empty(&self) -> bool {
        self.messages.borrow().is_empty()
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

/// One long-polling session on its home core.
pub struct LpSession {
    pub(super) conn: ConnId,
    /// What the client's polls name it by: its home core, a dash, its connection id.
    pub(super) public_id: String,
    /// A secret like the session id (128 random bits): holding it is what a poll proves.
    pub(super) password: String,
    pub(super) callback: u32,
    pub(super) edge: Rc<EdgeConn>,
    pub(super) mailbox: Rc<Mailbox>,
    pub(super) reassembler: RefCell<Reassembler>,
    /// Messages of the client not yet handed to the owner.
    pub(super) inbound: RefCell<VecDeque<String>>,
    /// The poll waiting for messages, and since when.
    pub(super) held: RefCell<Option<(oneshot::Sender<RestResponse>, Instant)>>,
    /// The number of the next answer with messages.
    pub(super) next_answer: Cell<u64>,
    pub(super) last_request: Cell<Instant>,
    /// Why the session must end, when the client's side decided it.
    pub(super) ending: RefCell<Option<Option<CloseReason>>>,
    /// Wakes the task: a poll came, or the client left.
    pub(super) wake: Notify,
    /// The database, which a WebSocket taking the session over must name too.
    pub(super) namespace: String,
    /// The random part of the handshake's session id (`<public id>.<secret>`), which a
    /// WebSocket taking the session over names (`s`): the SDK sends no password then.
    pub(super) secret: String,
    /// The WebSocket waiting to take the session over, until the client switches.
    pub(super) secondary: RefCell<Option<Secondary>>,
    /// Set when the session moved to its WebSocket: the polls only get what waited, then the
    /// close.
    pub(super) switched: Cell<bool>,
}

impl LpSession {
    /// Whether `password` is this session's, compared in time independent of where they
    /// differ.
    pub fn accepts(&self, password: &str) -> bool {
        same_secret(&self.password, password)
    }

    /// A poll: its segments are taken, the poll held before it is answered, and this one
    /// answered at once when messages wait, or held.
    pub fn poll(&self, segments: Vec<Segment>, reply: oneshot::Sender<RestResponse>) {
        self.last_request.set(Instant::now());
        if self.switched.get() {
            // The client sends nothing more here; it reads what waited, then the close.
            let _ = reply.send(self.answer());
            self.wake.notify_one();
            return;
        }
        let mut complete = Vec::new();
        {
            let mut reassembler = self.reassembler.borrow_mut();
            for segment in segments {
                if let Err(error) = reassembler.push(segment, &mut complete) {
                    debug!(conn = self.conn, %error, "long poll refused");
                    let reason = CloseReason::new(CloseCode::Protocol, error.to_string());
                    self.end(Some(reason));
                    let _ = reply.send(RestResponse::error(400, error.to_string()));
                    return;
                }
            }
        }
        self.inbound.borrow_mut().extend(complete);
        if let Some((older, _)) = self.held.borrow_mut().take() {
            let _ = older.send(self.answer());
        }
        if self.mailbox.is_empty() {
            *self.held.borrow_mut() = Some((reply, Instant::now()));
        } else {
            let _ = reply.send(self.answer());
        }
        self.wake.notify_one();
    }

    /// The client's page went away, or its polls broke the protocol: the task ends the
    /// session.
    pub fn end(&self, reason: Option<CloseReason>) {
        let mut ending = self.ending.borrow_mut();
        if ending.is_none() {
            *ending = Some(reason);
        }
        self.wake.notify_one();
    }

    /// An answer with the messages that wait, or an empty one; once the session moved to a
    /// WebSocket, the answer that empties the mailbox ends with the close.
    pub(super) fn answer(&self) -> RestResponse {
        let mut text = self.take_answer();
        if self.switched.get() && self.mailbox.is_empty() {
            text.push_str(&self.close_text());
        }
        script_answer(text)
    }

    /// The messages that fit in one answer, numbered; empty when none wait.
    fn take_answer(&self) -> String {
        let messages = self.mailbox.take();
        if messages.is_empty() {
            return String::new();
        }
        let number = self.next_answer.get();
        self.next_answer.set(number + 1);
        script::data(self.callback, number, &messages)
    }

    /// The close, after the last numbered answer.
    fn close_text(&self) -> String {
        script::close(self.callback, self.next_answer.get().checked_sub(1))
    }

    /// Answers the held poll when messages wait for it.
    pub(super) fn answer_held_if_ready(&self) {
        if self.mailbox.is_empty() {
            return;
        }
        if let Some((held, _)) = self.held.borrow_mut().take() {
            let _ = held.send(self.answer());
        }
    }

    /// The last answer: what waits, then the close.
    pub(super) fn answer_close(&self) {
        let Some((held, _)) = self.held.borrow_mut().take() else {
            return;
        };
        let mut text = self.take_answer();
        text.push_str(&self.close_text());
        let _ = held.send(script_answer(text));
    }
}

/// A WebSocket waiting to take a session over.
pub(crate) struct Secondary {
    /// Its socket, which the session's outbox writes from the switch on.
    pub(crate) transport: Rc<dyn Transport>,
    /// What the WebSocket wrote before the switch (the upgrade's answer, its
    /// acknowledgement, pongs) and its socket has not taken yet: it leaves first.
    pub(crate) first: Rc<Outbox>,
    /// Where the session goes at the switch.
    pub(crate) handover: oneshot::Sender<Handover>,
}

/// What a WebSocket gets at the switch: the session to serve.
pub(crate) struct Handover {
    pub(crate) edge: Rc<EdgeConn>,
    pub(crate) side: OwnerSide,
}

/// Compares two secrets in time that does not depend on where they differ.
pub fn same_secret(ours: &str, theirs: &str) -> bool {
    let ours = ours.as_bytes();
    let theirs = theirs.as_bytes();
    ours.len() == theirs.len() && ours.iter().zip(theirs).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
}
