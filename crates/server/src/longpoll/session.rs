//! A long-polling session on the core that received its start (its home core), where it is
//! an edge connection like a WebSocket one: an [`EdgeConn`] whose outbox writes into a
//! [`Mailbox`] instead of a socket. So the owner of its database sees an ordinary session
//! (the same routing, held queue, durability tags, budgets, onDisconnect, `ls`, credential
//! expiry and closes), and only this file knows that its bytes leave through polls.
//!
//! The client's polls may land on any core; those that land elsewhere come here through the
//! shards' queues (`ShardMessage::LongPoll`), since the session's id names its home core.
//! One task per session hands the client's messages to the owner in order, answers the held
//! poll when messages wait or when it has been held long enough, and ends the session when
//! the client leaves, stops polling, or the owner closes it.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hearth_sync::ConnId;
use hearth_wire::{encode_handshake, without_lone_surrogates};
use tokio::sync::{oneshot, Notify};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{debug, info, warn};

use crate::close::{CloseReason, IDLE_CLOSE, MAX_OUTBOUND_BYTES, SHUTDOWN_CLOSE};
use crate::edge::socket::Transport;
use crate::edge::websocket::send_to_owner;
use crate::edge::{EdgeConn, EdgeTarget};
use crate::link::ToOwner;
use crate::longpoll::request::Segment;
use crate::longpoll::script::{self, FrameReader};
use crate::longpoll::segments::Reassembler;
use crate::longpoll::{script_answer, MAX_ANSWER_BYTES, MAX_SESSIONS_PER_SHARD, POLL_HOLD};
use crate::namespace::owner_shard;
use crate::offload::OFF_THREAD_PARSE_BYTES;
use crate::owner::dispatch::{decode_large, expire_auth, on_large_decoded, on_message, Handled};
use crate::owner::outbound::{encode_frames, ConnHandle, Route};
use crate::owner::sessions;
use crate::rest::RestResponse;
use crate::session::new_session_id;
use crate::shard::Shard;
use crate::time::now_ms;

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

    fn insert(&self, session: Rc<LpSession>) {
        self.sessions
            .borrow_mut()
            .insert(session.public_id.clone(), session);
    }

    fn remove(&self, id: &str) {
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
    arrived: Rc<Notify>,
}

impl Mailbox {
    fn is_full(&self) -> bool {
        self.bytes.get() + self.reader.borrow().buffered() >= MAX_OUTBOUND_BYTES
    }

    fn is_empty(&self) -> bool {
        self.messages.borrow().is_empty()
    }

    /// The waiting messages that fit in one answer (at least one).
    fn take(&self) -> Vec<String> {
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
    conn: ConnId,
    /// What the client's polls name it by: its home core, a dash, its connection id.
    pub public_id: String,
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
}

impl LpSession {
    /// Whether `password` is this session's, compared in time independent of where they
    /// differ.
    pub fn accepts(&self, password: &str) -> bool {
        let ours = self.password.as_bytes();
        let theirs = password.as_bytes();
        ours.len() == theirs.len()
            && ours.iter().zip(theirs).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
    }

    /// A poll: its segments are taken, the poll held before it is answered, and this one
    /// answered at once when messages wait, or held.
    pub fn poll(&self, segments: Vec<Segment>, reply: oneshot::Sender<RestResponse>) {
        self.last_request.set(Instant::now());
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

    /// An answer with the messages that wait, or an empty one.
    fn answer(&self) -> RestResponse {
        let messages = self.mailbox.take();
        if messages.is_empty() {
            return script_answer(String::new());
        }
        let number = self.next_answer.get();
        self.next_answer.set(number + 1);
        script_answer(script::data(self.callback, number, &messages))
    }

    /// Answers the held poll when messages wait for it.
    fn answer_held_if_ready(&self) {
        if self.mailbox.is_empty() {
            return;
        }
        if let Some((held, _)) = self.held.borrow_mut().take() {
            let _ = held.send(self.answer());
        }
    }

    /// The last answer: what waits, then the close.
    fn answer_close(&self) {
        let Some((held, _)) = self.held.borrow_mut().take() else {
            return;
        };
        let messages = self.mailbox.take();
        let mut text = String::new();
        if !messages.is_empty() {
            let number = self.next_answer.get();
            self.next_answer.set(number + 1);
            text.push_str(&script::data(self.callback, number, &messages));
        }
        let last = self.next_answer.get().checked_sub(1);
        text.push_str(&script::close(self.callback, last));
        let _ = held.send(script_answer(text));
    }
}

/// Where the session's messages are handled.
enum OwnerSide {
    Local(Rc<ConnHandle>),
    Remote(usize),
}

/// Opens a session on this core for a start request and answers it: the session's id and
/// password, then the handshake.
pub fn start(
    shard: &Rc<Shard>,
    callback: u32,
    namespace: String,
    previous: Option<String>,
    host: String,
) -> RestResponse {
    if shard.long_polls.len() >= MAX_SESSIONS_PER_SHARD {
        return RestResponse::error(503, "too many long-polling sessions");
    }
    let (Ok(session_id), Ok(password)) = (new_session_id(), new_session_id()) else {
        warn!("no session id: the random source failed; refusing a long poll");
        return RestResponse::error(503, "no session id");
    };
    let conn = shard.next_conn_id();
    let mailbox = Rc::new(Mailbox::default());
    let transport: Rc<dyn Transport> = mailbox.clone();
    let edge = Rc::new(EdgeConn::new(
        conn,
        transport,
        shard.ws_budget.clone(),
        shard.counters.clone(),
    ));
    // As on a WebSocket (see `serve_websocket`), the handshake's time is a millisecond
    // behind the clock, and it goes first.
    edge.write([encode_frames(encode_handshake(
        now_ms().saturating_sub(1),
        &host,
        &session_id,
    ))]);
    let owner = owner_shard(&namespace, shard.shard_count);
    let side = if owner == shard.index {
        if let Some(previous) = &previous {
            sessions::end_previous_session(shard, previous, &namespace);
        }
        let route = Route::Local(edge.clone());
        OwnerSide::Local(sessions::open_session(
            shard, conn, &namespace, session_id, route,
        ))
    } else {
        shard.hold(conn, EdgeTarget::Socket(edge.clone()));
        shard.send_to_owner(
            owner,
            ToOwner::Open {
                conn,
                edge: shard.index,
                namespace,
                session_id,
                previous,
            },
        );
        OwnerSide::Remote(owner)
    };
    let session = Rc::new(LpSession {
        conn,
        public_id: format!("{}-{}", shard.index, conn),
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
    });
    let first = session.mailbox.take();
    if !first.is_empty() {
        session.next_answer.set(1);
    }
    let answer = script::start(callback, &session.public_id, &session.password, &first);
    shard.long_polls.insert(session.clone());
    debug!(conn, "long-polling session opened");
    let shard = shard.clone();
    tokio::task::spawn_local(async move {
        let reason = run(&shard, &session, &side).await;
        session.answer_close();
        shard.long_polls.remove(&session.public_id);
        match &side {
            OwnerSide::Local(handle) => sessions::close_connection(&shard, handle),
            OwnerSide::Remote(owner) => shard.release_connection(session.conn, *owner),
        }
        match reason {
            Some(reason) if reason.text != SHUTDOWN_CLOSE => {
                info!(conn = session.conn, reason = %reason.text, "closing long-polling session");
            }
            _ => debug!(conn = session.conn, "long-polling session ended"),
        }
        session.edge.detach();
    });
    script_answer(answer)
}

/// The session's loop, until the client goes or the server closes it; the reason the server
/// closed it, if it did.
async fn run(shard: &Shard, session: &LpSession, side: &OwnerSide) -> Option<CloseReason> {
    let mut shutdown = shard.shutdown.clone();
    let idle = shard.config.idle_timeout;
    let edge = &session.edge;
    loop {
        if let Some(reason) = edge.closing() {
            return Some(reason);
        }
        if let Some(reason) = session.ending.borrow().clone() {
            return reason;
        }
        if edge.write_failed() {
            return None;
        }
        if let Err(reason) = hand_over(shard, session, side).await {
            return Some(reason);
        }
        session.answer_held_if_ready();
        let held_since = session.held.borrow().as_ref().map(|(_, since)| *since);
        let hold_ends = held_since.map(|since| since + POLL_HOLD);
        let idle_ends = session.last_request.get() + idle;
        tokio::select! {
            biased;
            _ = shutdown.changed() => {
                return Some(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
            }
            _ = edge.notified() => {}
            _ = session.wake.notified() => {}
            _ = session.mailbox.arrived.notified() => {}
            written = edge.drained(), if edge.has_pending() => {
                if written.is_err() {
                    return None;
                }
            }
            // The held poll's connection closed before its answer: the page went away (a
            // live SDK never drops a poll; one that failed to load makes it start over with
            // a new session), so the session ends now and its onDisconnect writes run.
            _ = held_dropped(session), if held_since.is_some() => {
                if held_poll_dropped(session) {
                    return None;
                }
            }
            _ = sleep_until(hold_ends), if hold_ends.is_some() => {
                if let Some((held, _)) = session.held.borrow_mut().take() {
                    let _ = held.send(session.answer());
                }
            }
            // A held poll is a client that is there; once it is answered, the client has the
            // idle timeout to poll again.
            _ = tokio::time::sleep_until(idle_ends.into()), if held_since.is_none() => {
                if session.last_request.get().elapsed() >= idle {
                    return Some(CloseReason::new(CloseCode::Away, IDLE_CLOSE));
                }
            }
            _ = auth_expiry(edge.auth_expiry()) => match side {
                OwnerSide::Local(handle) => expire_auth(shard, handle),
                OwnerSide::Remote(owner) => {
                    edge.set_auth_expiry(None);
                    shard.send_to_owner(*owner, ToOwner::AuthExpired { conn: session.conn });
                }
            },
        }
    }
}

/// Completes when the held poll's client stopped waiting for its answer.
async fn held_dropped(session: &LpSession) {
    std::future::poll_fn(|cx| match session.held.borrow_mut().as_mut() {
        Some((held, _)) => held.poll_closed(cx),
        None => Poll::Pending,
    })
    .await
}

fn held_poll_dropped(session: &LpSession) -> bool {
    session
        .held
        .borrow()
        .as_ref()
        .is_some_and(|(held, _)| held.is_closed())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// Completes when a credential that expires at `expires_at` (seconds since the epoch) has
/// expired; never without one.
async fn auth_expiry(expires_at: Option<u64>) {
    match expires_at {
        Some(expires_at) => {
            let left = expires_at.saturating_mul(1000).saturating_sub(now_ms());
            tokio::time::sleep(Duration::from_millis(left)).await;
        }
        None => std::future::pending().await,
    }
}

/// Hands the client's complete messages to the owner, in order, as a WebSocket connection's
/// are handed over (`edge::websocket`).
async fn hand_over(
    shard: &Shard,
    session: &LpSession,
    side: &OwnerSide,
) -> Result<(), CloseReason> {
    loop {
        let Some(message) = session.inbound.borrow_mut().pop_front() else {
            return Ok(());
        };
        match side {
            OwnerSide::Local(handle) => {
                shard.outgoing.room().await;
                session.edge.cork();
                let handled = on_message(shard, handle, message);
                session.edge.uncork();
                match handled? {
                    Handled::Done => {}
                    Handled::ParseOffThread(large) => {
                        let decoded = tokio::task::spawn_blocking(move || decode_large(large))
                            .await
                            .map_err(|_| {
                                CloseReason::new(CloseCode::Error, "a message could not be decoded")
                            })?;
                        on_large_decoded(shard, handle, decoded)?;
                    }
                }
            }
            OwnerSide::Remote(owner) => {
                let message = without_lone_surrogates(message);
                let large = message.len() > OFF_THREAD_PARSE_BYTES;
                if !send_to_owner(shard, &session.edge, *owner, vec![message], large).await {
                    return Err(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
                }
            }
        }
    }
}
