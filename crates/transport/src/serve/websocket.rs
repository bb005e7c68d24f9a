//! One WebSocket connection, from the upgrade to the close.

use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, SinkExt, StreamExt};
use hearth_ground::app_check::{app_check_token, APP_CHECK_HEADER};
use hearth_wire::{
    encode_handshake, encode_shutdown, without_lone_surrogates, Assembled, MAX_MESSAGE_BYTES,
};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info, warn};

use crate::front::Front;
pub(crate) use crate::owner_side::OwnerSide;
use crate::serve::attach::{attach, detach_session, send_to_owner};
use crate::serve::rehome;
use hearth_edge::frames::encode_frames;
use hearth_edge::socket::{Accepted, Outbox, SharedStream, Source, Transport};
use hearth_edge::EdgeConn;
use hearth_ground::close::{CloseReason, IDLE_CLOSE, SHUTDOWN_CLOSE, UNWRITABLE_DROP};
use hearth_ground::cross_core::{RealtimeTransport, ToOwner};
use hearth_ground::metrics::labels::CloseCause;
use hearth_ground::namespace::NamespaceError;
use hearth_ground::session_id::new_session_id;
use hearth_net::http_head::Head;
use hearth_net::offload::OFF_THREAD_PARSE_BYTES;
use hearth_net::time::now_ms;
use hearth_owner::dispatch::{
    expire_auth, finish_deferred, on_deferred_decoded, on_message, Handled, LargeMessage,
};

/// Messages handled from one connection before its replies are flushed, so that a burst is
/// answered with one write without starving the writer.
const MAX_MESSAGES_PER_TURN: usize = 256;

/// How far behind the real clock the handshake's time is reported. Clients estimate server
/// time as their clock plus this offset; reporting it slightly early guarantees that a server
/// timestamp resolved after the handshake is never identical to the client's local estimate,
/// so the client always observes the server's value replacing its guess (as it does over any
/// real network).
pub(crate) const HANDSHAKE_CLOCK_LEAD_MS: u64 = 1;

/// The first message of every session, whatever carries it (WebSocket, long polling,
/// WebTransport): the handshake, with the time [`HANDSHAKE_CLOCK_LEAD_MS`] behind `now_ms`.
pub(crate) fn handshake(now_ms: u64, host: &str, session_id: &str) -> String {
    encode_handshake(
        now_ms.saturating_sub(HANDSHAKE_CLOCK_LEAD_MS),
        host,
        session_id,
    )
}

/// The WebSocket library's own read buffer, which every connection holds for its whole life.
/// The library's default (128 KiB), or even 8 KiB, would make that most of an idle
/// connection's cost. Reads from the socket go through the shard's scratch buffer
/// (`SharedStream`), so a small buffer here costs no extra `read`: it only takes a larger
/// burst in several copies. Most requests of the SDKs fit in it; it grows for a larger frame
/// when one arrives (they split messages into 16 KiB pieces).
const READ_BUFFER_BYTES: usize = 512;

pub(crate) type Socket<S> = WebSocketStream<SharedStream<S>>;

/// Completes the upgrade and serves the connection until it ends. (A WebSocket that names a
/// long-polling session, `s`, is that session's move to a WebSocket: `longpoll::secondary`.)
/// `address` is the client's: the accepted socket's peer.
pub async fn serve_websocket<S: Accepted>(
    front: Rc<Front>,
    mut stream: S,
    head: Head,
    leftover: Vec<u8>,
    namespace: Result<String, NamespaceError>,
    address: Option<IpAddr>,
) {
    // Nothing of the request head is kept past the upgrade: its strings would stay for the
    // connection's whole life (BENCHMARKS.md §9, idle connections).
    let upgrade = Upgrade::of(&head, &front);
    drop(head);
    let Some(response) = upgrade.response else {
        let _ = stream.write_all(BAD_UPGRADE).await;
        return;
    };
    // (Flushing plain TCP does nothing; a TLS stream sends its records.)
    if stream.write_all(response.as_bytes()).await.is_err() || stream.flush().await.is_err() {
        return;
    }
    drop(response);
    let config = websocket_config();
    let stream = stream.into_shared();
    let transport: Rc<dyn Transport> = stream.clone();
    let namespace = match namespace {
        Ok(namespace) => namespace,
        Err(error) => {
            let write_timeout = front.config().http.write_timeout;
            refuse(stream, transport, leftover, config, write_timeout, &error).await;
            return;
        }
    };
    let session_id = match new_session_id() {
        Ok(session_id) => session_id,
        Err(error) => {
            warn!(%error, "no session id: the random source failed; dropping the connection");
            return;
        }
    };
    let id = front.next_conn_id();
    front.counters().websocket_opened();
    let batched = transport.raw_fd().is_some();
    let edge = Rc::new(EdgeConn::new(
        id,
        transport,
        front.edge().budget().clone(),
        front.counters().clone(),
    ));
    if batched {
        front.edge().batch_sends_of(&edge);
    }
    // The handshake goes first, before anything the owner sends.
    edge.write([encode_frames(handshake(
        now_ms(),
        &upgrade.host,
        &session_id,
    ))]);
    let side = attach(
        &front,
        &edge,
        namespace.clone(),
        session_id.clone(),
        upgrade.previous.as_deref(),
        upgrade.app_check.clone(),
        address,
        RealtimeTransport::WebSocket,
    );
    rehome::follow(
        &front,
        &edge,
        &side,
        &namespace,
        &session_id,
        upgrade.app_check,
        address,
    );
    drop((namespace, session_id));
    drop(upgrade.host);
    drop(upgrade.previous);
    let shared = SharedStream::new(stream, edge.outbox());
    let socket =
        WebSocketStream::from_partially_read(shared, leftover, Role::Server, Some(config)).await;
    serve_session(&front, edge, side, socket).await;
}

/// The answer to an upgrade without a key.
pub(crate) const BAD_UPGRADE: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// The answer that completes an upgrade with `key`.
pub(crate) fn accept_response(key: &str) -> String {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        derive_accept_key(key.as_bytes())
    )
}

/// The WebSocket library's settings for a realtime connection.
pub(crate) fn websocket_config() -> WebSocketConfig {
    // The library writes each control frame through at once (a buffer of 0): the outbox is
    // the only buffer, so its frames and the pushes stay in order.
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
}

/// Serves the session of `edge` over `socket` until it ends, then ends it: with the owner,
/// in the counters and the log, and on the socket.
pub(crate) async fn serve_session<S: Source>(
    front: &Front,
    edge: Rc<EdgeConn>,
    mut side: OwnerSide,
    mut socket: Socket<S>,
) {
    let ended = run(front, &edge, &mut side, &mut socket).await;
    // The session may have moved to another owner meanwhile, under another id.
    let id = edge.id();
    detach_session(front, id, &side);
    end_socket(front, id, ended, &mut socket).await;
    edge.detach();
}

/// Counts, logs and (with a close frame, when the server closes it) ends a connection's
/// socket.
pub(crate) async fn end_socket<S: Source>(
    front: &Front,
    id: hearth_sync::ConnId,
    ended: Ended,
    socket: &mut Socket<S>,
) {
    count_close(front, &ended);
    match ended {
        Ended::ByClient => {}
        Ended::Dropped(why) => info!(conn = id, reason = why, "connection dropped"),
        Ended::Closed(reason) => {
            if reason.text == SHUTDOWN_CLOSE {
                debug!(conn = id, reason = %reason.text, "closing connection");
            } else {
                info!(conn = id, code = u16::from(reason.code), reason = %reason.text, "closing connection");
            }
            let write_timeout = front.config().http.write_timeout;
            let _ = tokio::time::timeout(write_timeout, socket.close(Some(reason.frame()))).await;
        }
    }
}

/// What the upgrade needs of the request head, owned, so that the head can go at once.
struct Upgrade {
    /// The answer that completes the upgrade; `None` without a key (refused).
    response: Option<String>,
    /// The host the handshake names.
    host: String,
    /// The session the client replaces (`ls`).
    previous: Option<String>,
    /// Its App Check token (`ac`, or the header).
    app_check: Option<String>,
}

impl Upgrade {
    fn of(head: &Head, front: &Front) -> Upgrade {
        let response = head.header("sec-websocket-key").map(accept_response);
        let host = head.header("host").map(str::to_owned).unwrap_or_else(|| {
            front
                .config()
                .listen
                .first()
                .map_or_else(String::new, ToString::to_string)
        });
        Upgrade {
            response,
            host,
            previous: head.query_param("ls").map(str::to_owned),
            app_check: app_check_token(head.query_param("ac"), head.header(APP_CHECK_HEADER)),
        }
    }
}

/// Counts how a connection ended, by cause.
fn count_close(front: &Front, ended: &Ended) {
    let cause = match ended {
        Ended::ByClient => CloseCause::Client,
        Ended::Dropped(_) => CloseCause::Unwritable,
        Ended::Closed(reason) => CloseCause::of_reason(&reason.text),
    };
    front.counters().websocket_closed(cause);
}

/// Tells a client that asked for a database that cannot exist why, and closes.
async fn refuse<S: Source + 'static>(
    stream: Rc<S>,
    transport: Rc<dyn Transport>,
    leftover: Vec<u8>,
    config: WebSocketConfig,
    write_timeout: Duration,
    error: &NamespaceError,
) {
    // Refused before it opens: it holds a single small message, not counted.
    let outbox = Rc::new(Outbox::new(transport, None));
    let shared = SharedStream::new(stream, outbox.clone());
    let mut socket =
        WebSocketStream::from_partially_read(shared, leftover, Role::Server, Some(config)).await;
    // `s` tells the client not to reconnect: retrying cannot fix a bad name.
    let refusal = async {
        let _ = socket
            .send(Message::text(encode_shutdown(&error.to_string())))
            .await;
        let _ = socket.close(None).await;
    };
    let _ = tokio::time::timeout(write_timeout, refusal).await;
    outbox.detach();
}

/// The connection's loop, until the client goes or the server closes it.
async fn run<S: Source>(
    front: &Front,
    edge: &Rc<EdgeConn>,
    side: &mut OwnerSide,
    socket: &mut Socket<S>,
) -> Ended {
    let config = front.config();
    let write_timeout = config.http.write_timeout;
    let mut shutdown = front.shutdown();
    let mut assembler = hearth_wire::FrameAssembler::default();
    let mut last_seen = Instant::now();
    let mut ping = tokio::time::interval(config.ping_interval);
    ping.tick().await;
    // While the session moves to its database's next owner, the client is not read.
    let mut moving: Option<rehome::Moving> = None;
    loop {
        if let Some(reason) = edge.closing() {
            let _ = drain(edge, write_timeout).await;
            return Ended::Closed(reason);
        }
        if edge.write_failed() {
            return Ended::ByClient;
        }
        if !rehome::begin_if_asked(front, edge, side, &mut moving) {
            continue;
        }
        tokio::select! {
            biased;
            _ = shutdown.changed() => {
                let _ = drain(edge, write_timeout).await;
                return Ended::Closed(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
            }
            // Something changed: closing, bytes waiting for the socket, or a new deadline.
            _ = edge.notified() => {}
            written = edge.drained(), if edge.has_pending() => {
                if written.is_err() {
                    return Ended::ByClient;
                }
            }
            // The client accepts no byte of what waits for it: a close frame could not reach
            // it either, so the socket is dropped.
            _ = write_stalled(edge, write_timeout), if edge.has_pending() => {
                if edge.blocked_for().is_some_and(|blocked| blocked >= write_timeout) {
                    return Ended::Dropped(UNWRITABLE_DROP);
                }
            }
            _ = tokio::time::sleep(rehome::MOVE_POLL), if moving.is_some() => {
                if rehome::move_on(front, edge, side, &mut moving).await {
                    // The client was not read meanwhile: its silence proves nothing.
                    last_seen = Instant::now();
                }
            }
            message = socket.next(), if moving.is_none() => {
                last_seen = Instant::now();
                if let OwnerSide::Local(_) = side {
                    // This core's databases take no new request while an edge is far behind
                    // on what they sent it.
                    front.owner().outgoing().room().await;
                }
                let (outcome, forward) = read_burst(front, edge, side, socket, &mut assembler, message);
                if !forward_burst(front, edge, side, forward, &outcome).await {
                    return Ended::Closed(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
                }
                match outcome {
                    Burst::Continue | Burst::ForwardLarge => {}
                    Burst::End(Some(reason)) => return Ended::Closed(reason),
                    Burst::End(None) => return Ended::ByClient,
                    Burst::ParseOffThread(message) => {
                        let OwnerSide::Local(session) = &*side else {
                            continue;
                        };
                        // The shard serves everyone else meanwhile; this connection's next
                        // message is read only after this one is handled.
                        let decoded = finish_deferred(message).await;
                        if let Err(reason) = on_deferred_decoded(front.owner(), session, decoded) {
                            return Ended::Closed(reason);
                        }
                    }
                }
            }
            _ = auth_expiry(edge.auth_expiry()), if moving.is_none() => auth_expired(front, edge, side),
            _ = ping.tick() => {
                // A moving connection's pongs are not read: its silence proves nothing.
                if moving.is_none() && last_seen.elapsed() > config.idle_timeout {
                    return Ended::Closed(CloseReason::new(CloseCode::Away, IDLE_CLOSE));
                }
                // Queued behind any pending bytes; the branch above writes them.
                if socket.feed(Message::Ping(Bytes::new())).await.is_err() {
                    return Ended::ByClient;
                }
            }
        }
    }
}

/// Sends the whole messages of a burst to the owner of a session another core or node owns;
/// `false` when the owner is gone (the server stops).
async fn forward_burst(
    front: &Front,
    edge: &EdgeConn,
    side: &OwnerSide,
    forward: Vec<String>,
    outcome: &Burst,
) -> bool {
    match side {
        OwnerSide::Remote(owner) if !forward.is_empty() => {
            let large = matches!(outcome, Burst::ForwardLarge);
            send_to_owner(front, edge, *owner, forward, large).await
        }
        _ => true,
    }
}

/// Tells the session's owner that the connection's credential expired by this edge's clock.
pub(crate) fn auth_expired(front: &Front, edge: &EdgeConn, side: &OwnerSide) {
    match side {
        OwnerSide::Local(session) => expire_auth(front.owner(), session),
        OwnerSide::Remote(owner) => {
            // The owner checks its own record: the client may have authenticated again
            // meanwhile.
            edge.set_auth_expiry(None);
            front.send_to_owner(*owner, ToOwner::AuthExpired { conn: edge.id() });
        }
    }
}

/// How a connection ended.
pub enum Ended {
    /// The client closed it, or its socket failed.
    ByClient,
    /// The server closed it with this reason.
    Closed(CloseReason),
    /// The server dropped the socket without a close frame, for this reason.
    Dropped(&'static str),
}

/// What a burst of messages left to do.
enum Burst {
    Continue,
    /// The connection must end, with the reason to send, if any.
    End(Option<CloseReason>),
    /// A large write to decode off the shard's thread before anything else of this
    /// connection is read (this core owns its database).
    ParseOffThread(LargeMessage),
    /// The last message to forward is large: nothing more is read until the owner has handled
    /// it.
    ForwardLarge,
}

/// Handles `first` and the messages already received after it, up to
/// [`MAX_MESSAGES_PER_TURN`] in all, stopping early at a message to parse off the thread;
/// with the whole messages for another core's database, to forward.
fn read_burst<S: Source>(
    front: &Front,
    edge: &EdgeConn,
    side: &OwnerSide,
    socket: &mut Socket<S>,
    assembler: &mut hearth_wire::FrameAssembler,
    first: Option<Result<Message, WsError>>,
) -> (Burst, Vec<String>) {
    // The answers to a burst of requests leave in one write.
    edge.cork();
    let mut forward = Vec::new();
    // The pushes the burst makes to this core's other sockets leave together.
    let batch = front.edge().send_batch();
    let mut next = first;
    let mut handled = 0;
    let outcome = loop {
        match inbound(front, edge, side, assembler, next, &mut forward) {
            Inbound::Continue => {}
            Inbound::Close(reason) => break Burst::End(reason),
            Inbound::ParseOffThread(message) => break Burst::ParseOffThread(message),
            Inbound::ForwardLarge => break Burst::ForwardLarge,
        }
        handled += 1;
        // Checked before taking another message: one taken would be lost.
        if handled >= MAX_MESSAGES_PER_TURN {
            break Burst::Continue;
        }
        match socket.next().now_or_never() {
            Some(message) => next = message,
            None => break Burst::Continue,
        }
    };
    drop(batch);
    edge.uncork();
    (outcome, forward)
}

/// Completes when the connection's socket may have taken no byte for `timeout`: when the time
/// left since it last refused bytes runs out (the caller checks again, as bytes may have
/// moved meanwhile).
pub(crate) async fn write_stalled(edge: &EdgeConn, timeout: Duration) {
    let blocked = edge.blocked_for().unwrap_or_default();
    tokio::time::sleep(timeout.saturating_sub(blocked)).await;
}

/// Completes when a credential that expires at `expires_at` (seconds since the epoch) has
/// expired; never without one.
pub(crate) async fn auth_expiry(expires_at: Option<u64>) {
    match expires_at {
        Some(expires_at) => {
            let now = hearth_net::time::now_ms();
            let left = expires_at.saturating_mul(1000).saturating_sub(now);
            tokio::time::sleep(Duration::from_millis(left)).await;
        }
        None => std::future::pending().await,
    }
}

enum Inbound {
    Continue,
    Close(Option<CloseReason>),
    ParseOffThread(LargeMessage),
    ForwardLarge,
}

fn inbound(
    front: &Front,
    edge: &EdgeConn,
    side: &OwnerSide,
    assembler: &mut hearth_wire::FrameAssembler,
    message: Option<Result<Message, WsError>>,
    forward: &mut Vec<String>,
) -> Inbound {
    match message {
        Some(Ok(Message::Text(text))) => match assembler.push(text.as_str()) {
            Ok(Assembled::Message(message)) => match side {
                OwnerSide::Local(session) => match on_message(front.owner(), session, message) {
                    Ok(Handled::Done) => Inbound::Continue,
                    Ok(Handled::ParseOffThread(message)) => Inbound::ParseOffThread(message),
                    Err(reason) => Inbound::Close(Some(reason)),
                },
                OwnerSide::Remote(_) => {
                    // The owner decides what to do with a large message exactly as for its
                    // own connections; the edge only learns that it must wait for it.
                    let message = without_lone_surrogates(message);
                    let large = message.len() > OFF_THREAD_PARSE_BYTES;
                    // Followed, for a session that may move to another owner.
                    edge.note_sent(&message);
                    forward.push(message);
                    if large {
                        Inbound::ForwardLarge
                    } else {
                        Inbound::Continue
                    }
                }
            },
            Ok(Assembled::Partial | Assembled::KeepAlive) => Inbound::Continue,
            Err(error) => {
                Inbound::Close(Some(CloseReason::new(CloseCode::Size, error.to_string())))
            }
        },
        Some(Ok(Message::Binary(_))) => Inbound::Close(Some(CloseReason::new(
            CloseCode::Unsupported,
            "binary frames are not part of the protocol",
        ))),
        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Inbound::Continue,
        Some(Ok(Message::Close(_))) | None => Inbound::Close(None),
        Some(Err(WsError::Capacity(error))) => Inbound::Close(Some(CloseReason::new(
            CloseCode::Size,
            format!("message too large: {error}"),
        ))),
        Some(Err(error)) => {
            debug!(%error, "connection error");
            Inbound::Close(None)
        }
    }
}

/// Writes everything that may leave before the connection closes, for at most `timeout`.
async fn drain(edge: &EdgeConn, timeout: Duration) -> std::io::Result<()> {
    match tokio::time::timeout(timeout, edge.drained()).await {
        Ok(result) => result,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_handshake_reports_the_time_a_millisecond_early() {
        let text = handshake(1_795_323_485_336, "localhost:9555", "sessABC");
        assert!(text.contains(r#""ts":1795323485335,"#), "{text}");
        assert!(handshake(0, "h", "s").contains(r#""ts":0,"#));
    }
}
