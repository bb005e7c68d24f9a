//! A long-polling session's task on its home core: the session opened for a start, then,
//! until it ends, the client's messages handed to the owner in order (as a WebSocket
//! connection's are), the held poll answered when messages wait or when it has been held long
//! enough, and the session ended when the client leaves, stops polling, or the owner closes
//! it.

use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use hearth_wire::without_lone_surrogates;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{debug, info, warn};

use crate::front::Front;
use crate::longpoll::switch::linger;
use crate::longpoll_session::{Handover, LpSession, Mailbox, NewSession};
use crate::owner_side::OwnerSide;
use crate::serve::attach::{attach, detach_session, send_to_owner};
use crate::serve::websocket::handshake;
use hearth_edge::frames::encode_frames;
use hearth_edge::socket::Transport;
use hearth_edge::EdgeConn;
use hearth_ground::close::{CloseReason, IDLE_CLOSE, SHUTDOWN_CLOSE};
use hearth_ground::cross_core::RealtimeTransport;
use hearth_ground::cross_core::ToOwner;
use hearth_ground::metrics::labels::{CloseCause, SessionTransport};
use hearth_ground::rest::RestResponse;
use hearth_ground::session_id::new_session_id;
use hearth_net::offload::OFF_THREAD_PARSE_BYTES;
use hearth_net::time::now_ms;
use hearth_owner::dispatch::{expire_auth, finish_deferred, on_large_decoded, on_message, Handled};

/// The most long-polling sessions one core holds; a start past it is refused with 503 (the
/// SDK retries with back-off). Each costs a task and its buffers, like a WebSocket
/// connection, but unlike a socket nothing else bounds them.
pub const MAX_SESSIONS_PER_SHARD: usize = 4096;

/// How long a poll is held when there is nothing to send. The SDK opens a new poll when one
/// has been out for 25 s, so the server answers first; proxies that cut slow answers rarely
/// do so under 30 s.
pub const POLL_HOLD: Duration = Duration::from_secs(20);

/// Opens a session on this core for a start request and answers it: the session's id and
/// password, then the handshake. `address` is the client's, as the start's connection saw it.
pub fn start(
    front: &Rc<Front>,
    callback: u32,
    namespace: String,
    previous: Option<String>,
    host: String,
    app_check: Option<String>,
    address: Option<IpAddr>,
) -> RestResponse {
    if front.long_polls().len() >= MAX_SESSIONS_PER_SHARD {
        return RestResponse::error(503, "too many long-polling sessions");
    }
    let (Ok(secret), Ok(password)) = (new_session_id(), new_session_id()) else {
        warn!("no session id: the random source failed; refusing a long poll");
        return RestResponse::error(503, "no session id");
    };
    let conn = front.next_conn_id();
    let public_id = format!("{}-{}", front.index(), conn);
    // The handshake's session id names the session's public id too, so that the WebSocket
    // that takes the session over (`s`, on any core) finds its home (`longpoll::secondary`).
    let session_id = format!("{public_id}.{secret}");
    let mailbox = Rc::new(Mailbox::default());
    let transport: Rc<dyn Transport> = mailbox.clone();
    let edge = Rc::new(EdgeConn::new(
        conn,
        transport,
        front.edge().budget().clone(),
        front.counters().clone(),
    ));
    // As on a WebSocket, the handshake goes first.
    edge.write([encode_frames(handshake(now_ms(), &host, &session_id))]);
    let side = attach(
        front,
        &edge,
        namespace.clone(),
        session_id,
        previous.as_deref(),
        app_check,
        address,
        RealtimeTransport::LongPolling,
    );
    let session = Rc::new(LpSession::new(NewSession {
        conn,
        public_id,
        password,
        secret,
        namespace,
        callback,
        edge,
        mailbox,
    }));
    let answer = session.start_answer();
    front.long_polls().insert(session.clone());
    debug!(conn, "long-polling session opened");
    tokio::task::spawn_local(serve_to_end(front.clone(), session, side));
    answer
}

/// The session's task: serves it until it ends, then ends it, or until it moves to a
/// WebSocket, then hands it over.
async fn serve_to_end(front: Rc<Front>, session: Rc<LpSession>, side: OwnerSide) {
    let reason = match run(&front, &session, &side).await {
        Outcome::Ended(reason) => reason,
        Outcome::Switched(handover) => {
            debug!(
                conn = session.conn(),
                "long-polling session moved to a WebSocket"
            );
            let edge = session.edge().clone();
            if let Err(Handover { side, .. }) = handover.send(Handover { edge, side }) {
                // Its WebSocket's task is gone (it drops its place before it goes, so this
                // is only a safeguard): nobody can serve the session any more.
                detach_session(&front, session.conn(), &side);
                session.edge().detach();
            }
            linger(&front, &session).await;
            front.long_polls().remove(session.public_id());
            return;
        }
    };
    end(&front, &session, &side, reason);
}

/// Ends a session that the client left or the server closed (with `reason`): with the owner,
/// in the counters and the log.
fn end(front: &Front, session: &LpSession, side: &OwnerSide, reason: Option<CloseReason>) {
    session.refuse_secondary();
    session.answer_close();
    front.long_polls().remove(session.public_id());
    detach_session(front, session.conn(), side);
    let cause = reason.as_ref().map_or(CloseCause::Client, |reason| {
        CloseCause::of_reason(&reason.text)
    });
    front
        .counters()
        .session_closed(SessionTransport::LongPoll, cause);
    match reason {
        Some(reason) if reason.text != SHUTDOWN_CLOSE => {
            info!(conn = session.conn(), reason = %reason.text, "closing long-polling session");
        }
        _ => debug!(conn = session.conn(), "long-polling session ended"),
    }
    session.edge().detach();
}

/// How a session's loop ended.
enum Outcome {
    /// The client went, or the server closed the session (with its reason).
    Ended(Option<CloseReason>),
    /// The session moved to a WebSocket, which is handed it through this channel.
    Switched(oneshot::Sender<Handover>),
}

/// The session's loop, until the client goes, the server closes it, or it moves to a
/// WebSocket.
async fn run(front: &Front, session: &LpSession, side: &OwnerSide) -> Outcome {
    match serve(front, session, side).await {
        Ok(reason) => Outcome::Ended(reason),
        Err(handover) => Outcome::Switched(handover),
    }
}

/// [`run`]'s loop: the reason the server closed the session, if it did; `Err` when it moved.
async fn serve(
    front: &Front,
    session: &LpSession,
    side: &OwnerSide,
) -> Result<Option<CloseReason>, oneshot::Sender<Handover>> {
    let mut shutdown = front.shutdown();
    let idle = front.config().idle_timeout;
    let edge = session.edge();
    loop {
        if let Some(reason) = edge.closing() {
            return Ok(Some(reason));
        }
        if let Some(reason) = session.ending() {
            return Ok(reason);
        }
        if edge.write_failed() {
            return Ok(None);
        }
        match hand_over(front, session, side).await {
            Ok(HandedOver::All) => {}
            Ok(HandedOver::Switched(handover)) => return Err(handover),
            Err(reason) => return Ok(Some(reason)),
        }
        session.answer_held_if_ready();
        let held_since = session.held_since();
        let hold_ends = held_since.map(|since| since + POLL_HOLD);
        let idle_ends = session.last_request() + idle;
        tokio::select! {
            biased;
            _ = shutdown.changed() => {
                return Ok(Some(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE)));
            }
            _ = edge.notified() => {}
            _ = session.woken() => {}
            _ = session.messages_arrived() => {}
            written = edge.drained(), if edge.has_pending() => {
                if written.is_err() {
                    return Ok(None);
                }
            }
            // The held poll's connection closed before its answer: the page went away (a
            // live SDK never drops a poll; one that failed to load makes it start over with
            // a new session), so the session ends now and its onDisconnect writes run.
            _ = session.held_poll_closed(), if held_since.is_some() => {
                if session.held_poll_dropped() {
                    return Ok(None);
                }
            }
            _ = sleep_until(hold_ends), if hold_ends.is_some() => session.answer_held(),
            // A held poll is a client that is there; once it is answered, the client has the
            // idle timeout to poll again.
            _ = tokio::time::sleep_until(idle_ends.into()), if held_since.is_none() => {
                if session.last_request().elapsed() >= idle {
                    return Ok(Some(CloseReason::new(CloseCode::Away, IDLE_CLOSE)));
                }
            }
            _ = auth_expiry(edge.auth_expiry()) => match side {
                OwnerSide::Local(handle) => expire_auth(front.owner(), handle),
                OwnerSide::Remote(owner) => {
                    edge.set_auth_expiry(None);
                    front.send_to_owner(*owner, ToOwner::AuthExpired { conn: session.conn() });
                }
            },
        }
    }
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

/// How far [`hand_over`] went.
enum HandedOver {
    /// Every message of the client is with the owner.
    All,
    /// The client ended its transmission here to move to the WebSocket that waits: the
    /// session switched, and goes to that WebSocket through this channel.
    Switched(oneshot::Sender<Handover>),
}

/// Hands the client's complete messages to the owner, in order, as a WebSocket connection's
/// are handed over (`edge::websocket`), up to the end of transmission of a move to a
/// WebSocket.
async fn hand_over(
    front: &Front,
    session: &LpSession,
    side: &OwnerSide,
) -> Result<HandedOver, CloseReason> {
    loop {
        let Some(message) = session.next_inbound() else {
            return Ok(HandedOver::All);
        };
        if let Some(handover) = session.switch_at(&message) {
            return Ok(HandedOver::Switched(handover));
        }
        match side {
            OwnerSide::Local(handle) => {
                front.owner().outgoing().room().await;
                session.edge().cork();
                let handled = on_message(front.owner(), handle, message);
                session.edge().uncork();
                match handled? {
                    Handled::Done => {}
                    Handled::ParseOffThread(large) => {
                        let decoded = finish_deferred(large).await.ok_or_else(|| {
                            CloseReason::new(CloseCode::Error, "a message could not be decoded")
                        })?;
                        on_large_decoded(front.owner(), handle, decoded)?;
                    }
                }
            }
            OwnerSide::Remote(owner) => {
                let message = without_lone_surrogates(message);
                let large = message.len() > OFF_THREAD_PARSE_BYTES;
                if !send_to_owner(front, session.edge(), *owner, vec![message], large).await {
                    return Err(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
                }
            }
        }
    }
}
