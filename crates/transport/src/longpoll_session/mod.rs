//! A long-polling session on the core that received its start (its home core), where it is
//! an edge connection like a WebSocket one: an [`EdgeConn`] whose outbox writes into a
//! [`Mailbox`] instead of a socket. So the owner of its database sees an ordinary session
//! (the same routing, held queue, durability tags, budgets, onDisconnect, `ls`, credential
//! expiry and closes), and only this module knows that its bytes leave through polls.
//!
//! This file holds the session's state and what a poll does to it; `mailbox` where its outbox
//! writes; `switch_state` its move to a WebSocket. `longpoll::task` runs it, through the
//! methods here only: every field is private to this folder, so each piece of the session's
//! state has one writer.

mod mailbox;
pub mod script;
pub mod segments;
mod switch_state;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::task::Poll;
use std::time::Instant;

use hearth_sync::ConnId;
use tokio::sync::futures::Notified;
use tokio::sync::{oneshot, Notify};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use hearth_edge::EdgeConn;
use hearth_ground::close::CloseReason;
use hearth_ground::longpoll_request::Segment;
use hearth_ground::rest::RestResponse;
pub use mailbox::Mailbox;
use script::script_answer;
use segments::Reassembler;
pub(crate) use switch_state::{Handover, Secondary};

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

    pub(crate) fn insert(&self, session: Rc<LpSession>) {
        self.sessions
            .borrow_mut()
            .insert(session.public_id.clone(), session);
    }

    pub(crate) fn remove(&self, id: &str) {
        self.sessions.borrow_mut().remove(id);
    }
}

/// What a session is made of when its start comes, gathered by name so that its three
/// strings of random bits cannot be passed in each other's place.
pub(crate) struct NewSession {
    pub(crate) conn: ConnId,
    /// What the client's polls name it by: its home core, a dash, its connection id.
    pub(crate) public_id: String,
    /// A secret like the session id (128 random bits): holding it is what a poll proves.
    pub(crate) password: String,
    /// The random part of the handshake's session id (`<public id>.<secret>`).
    pub(crate) secret: String,
    /// The database.
    pub(crate) namespace: String,
    /// The number of the page's callbacks (the start's `cb`).
    pub(crate) callback: u32,
    /// The session's edge connection, whose outbox writes into `mailbox`.
    pub(crate) edge: Rc<EdgeConn>,
    pub(crate) mailbox: Rc<Mailbox>,
}

/// One long-polling session on its home core.
pub struct LpSession {
    conn: ConnId,
    /// What the client's polls name it by: its home core, a dash, its connection id.
    public_id: String,
    /// A secret like the session id (128 random bits): holding it is what a poll proves.
    password: String,
    callback: u32,
    edge: Rc<EdgeConn>,
    mailbox: Rc<Mailbox>,
    reassembler: RefCell<Reassembler>,
    /// Messages of the client not yet handed to the owner.
    inbound: RefCell<VecDeque<String>>,
    /// The poll waiting for messages, and since when.
    held: RefCell<Option<(oneshot::Sender<RestResponse>, Instant)>>,
    /// The number of the next answer with messages.
    next_answer: Cell<u64>,
    last_request: Cell<Instant>,
    /// Why the session must end, when the client's side decided it.
    ending: RefCell<Option<Option<CloseReason>>>,
    /// Wakes the task: a poll came, or the client left.
    wake: Notify,
    /// The database, which a WebSocket taking the session over must name too.
    namespace: String,
    /// The random part of the handshake's session id (`<public id>.<secret>`), which a
    /// WebSocket taking the session over names (`s`): the SDK sends no password then.
    secret: String,
    /// The WebSocket waiting to take the session over, until the client switches.
    secondary: RefCell<Option<Secondary>>,
    /// Set when the session moved to a WebSocket: the polls only get what waited, then the
    /// close.
    switched: Cell<bool>,
}

impl LpSession {
    /// A session whose start has just come: no poll yet, no answer numbered yet, and its
    /// idle time counted from now.
    pub(crate) fn new(parts: NewSession) -> LpSession {
        let NewSession {
            conn,
            public_id,
            password,
            secret,
            namespace,
            callback,
            edge,
            mailbox,
        } = parts;
        LpSession {
            conn,
            public_id,
            password,
            callback,
            edge,
            mailbox,
            reassembler: RefCell::default(),
            inbound: RefCell::default(),
            held: RefCell::default(),
            next_answer: Cell::new(0),
            last_request: Cell::new(Instant::now()),
            ending: RefCell::default(),
            wake: Notify::new(),
            namespace,
            secret,
            secondary: RefCell::default(),
            switched: Cell::new(false),
        }
    }

    /// The connection id of the session with its owner, which the logs and the owner's
    /// messages name.
    pub fn conn(&self) -> ConnId {
        self.conn
    }

    /// What the client's polls name the session by, and the registry keeps it under.
    pub fn public_id(&self) -> &str {
        &self.public_id
    }

    /// The session's edge connection, which its task watches and the owner writes to.
    pub fn edge(&self) -> &Rc<EdgeConn> {
        &self.edge
    }

    /// The start's answer: the session's id and password, then what waits (the handshake)
    /// as answer 0, so that the polls' answers are numbered on from 1.
    pub fn start_answer(&self) -> RestResponse {
        let first = self.mailbox.take();
        if !first.is_empty() {
            self.next_answer.set(1);
        }
        script_answer(script::start(
            self.callback,
            &self.public_id,
            &self.password,
            &first,
        ))
    }

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

    /// Why the session must end, once the client's side decided it: `Some(None)` when the
    /// client left, `Some(Some(reason))` when its polls broke the protocol.
    pub fn ending(&self) -> Option<Option<CloseReason>> {
        self.ending.borrow().clone()
    }

    /// When the client last polled, from which its idle time and the linger after a move
    /// are counted.
    pub fn last_request(&self) -> Instant {
        self.last_request.get()
    }

    /// Completes when a poll came or the client left, so that the task looks at the
    /// session again.
    pub fn woken(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// Completes when messages arrived in the mailbox, so that the task answers the held
    /// poll with them.
    pub fn messages_arrived(&self) -> Notified<'_> {
        self.mailbox.arrived()
    }

    /// The client's next complete message not yet handed to the owner, in the order sent.
    pub fn next_inbound(&self) -> Option<String> {
        self.inbound.borrow_mut().pop_front()
    }

    /// Since when the poll that waits for messages has been held, if one is.
    pub fn held_since(&self) -> Option<Instant> {
        self.held.borrow().as_ref().map(|(_, since)| *since)
    }

    /// Completes when the held poll's client stopped waiting for its answer; never while no
    /// poll is held.
    pub async fn held_poll_closed(&self) {
        std::future::poll_fn(|cx| match self.held.borrow_mut().as_mut() {
            Some((held, _)) => held.poll_closed(cx),
            None => Poll::Pending,
        })
        .await
    }

    /// Whether the held poll's client stopped waiting for its answer (not a poll answered
    /// meanwhile, which is no longer held).
    pub fn held_poll_dropped(&self) -> bool {
        self.held
            .borrow()
            .as_ref()
            .is_some_and(|(held, _)| held.is_closed())
    }

    /// Answers the held poll now with what waits, or empty: it was held long enough, or the
    /// session moved to a WebSocket and every poll gets what waits at once.
    pub fn answer_held(&self) {
        let held = self.held.borrow_mut().take();
        if let Some((held, _)) = held {
            let _ = held.send(self.answer());
        }
    }

    /// Answers the held poll when messages wait for it.
    pub fn answer_held_if_ready(&self) {
        if self.mailbox.is_empty() {
            return;
        }
        self.answer_held();
    }

    /// The last answer: what waits, then the close.
    pub fn answer_close(&self) {
        let Some((held, _)) = self.held.borrow_mut().take() else {
            return;
        };
        let mut text = self.take_answer();
        text.push_str(&self.close_text());
        let _ = held.send(script_answer(text));
    }

    /// An answer with the messages that wait, or an empty one; once the session moved to a
    /// WebSocket, the answer that empties the mailbox ends with the close.
    fn answer(&self) -> RestResponse {
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
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(ours: &str, theirs: &str) -> bool {
    let ours = ours.as_bytes();
    let theirs = theirs.as_bytes();
    ours.len() == theirs.len() && ours.iter().zip(theirs).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
}
