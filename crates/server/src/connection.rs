//! One WebSocket connection, from the upgrade to the close.

use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, SinkExt, StreamExt};
use hearth_wire::{encode_handshake, encode_shutdown, MAX_MESSAGE_BYTES};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, warn};

use crate::dispatch::{
    decode_large, expire_auth, on_frame, on_large_decoded, Handled, LargeMessage,
};
use crate::http_head::Head;
use crate::namespace::NamespaceError;
use crate::outbound::{CloseReason, ConnHandle};
use crate::shard::Shard;
use crate::socket::{Outbox, SharedStream, Transport};
use crate::time::now_ms;

/// Messages handled from one connection before its replies are flushed, so that a burst is
/// answered with one write without starving the writer.
const MAX_MESSAGES_PER_TURN: usize = 256;

/// How far behind the real clock the handshake's time is reported (see `serve_websocket`).
const HANDSHAKE_CLOCK_LEAD_MS: u64 = 1;

/// Initial read buffer of a WebSocket connection. The library's default (128 KiB) would make
/// every idle connection cost that much; Firebase clients send small frames (the SDKs split
/// messages into 16 KiB pieces), and the buffer grows for a larger frame when one arrives.
const READ_BUFFER_BYTES: usize = 8 * 1024;

type Socket = WebSocketStream<SharedStream>;

/// Completes the upgrade and serves the connection until it ends.
pub async fn serve_websocket(
    shard: Rc<Shard>,
    mut stream: TcpStream,
    head: Head,
    leftover: Vec<u8>,
    namespace: Result<String, NamespaceError>,
) {
    let Some(key) = head.header("sec-websocket-key") else {
        let _ = stream
            .write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await;
        return;
    };
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        derive_accept_key(key.as_bytes())
    );
    if stream.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    // The library writes each control frame through at once (a buffer of 0): the outbox is
    // the only buffer, so its frames and the pushes stay in order.
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES));
    let stream = Rc::new(stream);
    let transport: Rc<dyn Transport> = stream.clone();
    let namespace = match namespace {
        Ok(namespace) => namespace,
        Err(error) => {
            let write_timeout = shard.config.http.write_timeout;
            refuse(stream, transport, leftover, config, write_timeout, &error).await;
            return;
        }
    };
    if let Some(previous) = head.query_param("ls") {
        shard.end_previous_session(previous, &namespace);
    }
    let handle = match shard.open_connection(&namespace, transport) {
        Ok(handle) => handle,
        Err(error) => {
            warn!(%error, "no session id: the random source failed; dropping the connection");
            return;
        }
    };
    let shared = SharedStream::new(stream, handle.outbox());
    let mut socket =
        WebSocketStream::from_partially_read(shared, leftover, Role::Server, Some(config)).await;
    let host = head.header("host").map(str::to_owned).unwrap_or_else(|| {
        shard
            .config
            .listen
            .first()
            .map_or_else(String::new, ToString::to_string)
    });
    // The handshake reports the time one millisecond behind the clock. Clients estimate server
    // time as their clock plus this offset; reporting it slightly early guarantees that a
    // server timestamp resolved after the handshake is never identical to the client's local
    // estimate, so the client always observes the server's value replacing its guess (as it
    // does over any real network).
    handle.send_text(encode_handshake(
        now_ms().saturating_sub(HANDSHAKE_CLOCK_LEAD_MS),
        &host,
        &handle.session_id,
    ));
    let reason = run(&shard, &handle, &mut socket).await;
    shard.close_connection(&handle);
    if let Some(reason) = reason {
        debug!(conn = handle.id, reason = %reason.text, "closing connection");
        let write_timeout = shard.config.http.write_timeout;
        let _ = tokio::time::timeout(write_timeout, socket.close(Some(reason.frame()))).await;
    }
    handle.detach();
}

/// Tells a client that asked for a database that cannot exist why, and closes.
async fn refuse(
    stream: Rc<TcpStream>,
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

/// The connection's loop. Returns the reason to send when the server closes it, or `None` when
/// the client went away.
async fn run(shard: &Shard, handle: &ConnHandle, socket: &mut Socket) -> Option<CloseReason> {
    let config = &shard.config;
    let write_timeout = config.http.write_timeout;
    let mut shutdown = shard.shutdown.clone();
    let mut assembler = hearth_wire::FrameAssembler::default();
    let mut last_seen = Instant::now();
    let mut ping = tokio::time::interval(config.ping_interval);
    ping.tick().await;
    loop {
        if let Some(reason) = handle.closing() {
            let _ = drain(handle, write_timeout).await;
            return Some(reason);
        }
        if handle.write_failed() {
            return None;
        }
        tokio::select! {
            biased;
            _ = shutdown.changed() => {
                let _ = drain(handle, write_timeout).await;
                return Some(CloseReason::new(CloseCode::Away, "the server is shutting down"));
            }
            // Something changed: closing, bytes waiting for the socket, or a new deadline.
            _ = handle.notified() => {}
            written = handle.drained(), if handle.has_pending() => {
                if written.is_err() {
                    return None;
                }
            }
            // The client accepts no byte of what waits for it: a close frame could not reach
            // it either, so the socket is dropped.
            _ = write_stalled(handle, write_timeout), if handle.has_pending() => {
                if handle.blocked_for().is_some_and(|blocked| blocked >= write_timeout) {
                    debug!(conn = handle.id, "the client accepts no data: dropping it");
                    return None;
                }
            }
            message = socket.next() => {
                last_seen = Instant::now();
                // The answers to a burst of requests leave in one write.
                handle.cork();
                let outcome = read_burst(shard, handle, socket, &mut assembler, message);
                handle.uncork();
                match outcome {
                    Burst::Continue => {}
                    Burst::End(reason) => return reason,
                    Burst::ParseOffThread(message) => {
                        // The shard serves everyone else meanwhile; this connection's next
                        // message is read only after this one is handled.
                        let decoded =
                            tokio::task::spawn_blocking(move || decode_large(message)).await;
                        let Ok(decoded) = decoded else {
                            return Some(CloseReason::new(CloseCode::Error, "a message could not be decoded"));
                        };
                        if let Err(reason) = on_large_decoded(shard, handle, decoded) {
                            return Some(reason);
                        }
                    }
                }
            }
            _ = auth_expiry(handle.auth_expiry()) => expire_auth(shard, handle),
            _ = ping.tick() => {
                if last_seen.elapsed() > config.idle_timeout {
                    return Some(CloseReason::new(CloseCode::Away, "no answer to pings"));
                }
                // Queued behind any pending bytes; the branch above writes them.
                if socket.feed(Message::Ping(Bytes::new())).await.is_err() {
                    return None;
                }
            }
        }
    }
}

/// What a burst of messages left to do.
enum Burst {
    Continue,
    /// The connection must end, with the reason to send, if any.
    End(Option<CloseReason>),
    /// A large write to decode off the shard's thread before anything else of this
    /// connection is read.
    ParseOffThread(LargeMessage),
}

/// Handles `first` and the messages already received after it, up to
/// [`MAX_MESSAGES_PER_TURN`] in all, stopping early at a message to parse off the thread.
fn read_burst(
    shard: &Shard,
    handle: &ConnHandle,
    socket: &mut Socket,
    assembler: &mut hearth_wire::FrameAssembler,
    first: Option<Result<Message, WsError>>,
) -> Burst {
    let mut next = first;
    let mut handled = 0;
    loop {
        match inbound(shard, handle, assembler, next) {
            Inbound::Continue => {}
            Inbound::Close(reason) => return Burst::End(reason),
            Inbound::ParseOffThread(message) => return Burst::ParseOffThread(message),
        }
        handled += 1;
        // Checked before taking another message: one taken would be lost.
        if handled >= MAX_MESSAGES_PER_TURN {
            return Burst::Continue;
        }
        match socket.next().now_or_never() {
            Some(message) => next = message,
            None => return Burst::Continue,
        }
    }
}

/// Completes when the connection's socket may have taken no byte for `timeout`: when the time
/// left since it last refused bytes runs out (the caller checks again, as bytes may have
/// moved meanwhile).
async fn write_stalled(handle: &ConnHandle, timeout: Duration) {
    let blocked = handle.blocked_for().unwrap_or_default();
    tokio::time::sleep(timeout.saturating_sub(blocked)).await;
}

/// Completes when a credential that expires at `expires_at` (seconds since the epoch) has
/// expired; never without one.
async fn auth_expiry(expires_at: Option<u64>) {
    match expires_at {
        Some(expires_at) => {
            let now = crate::time::now_ms();
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
}

fn inbound(
    shard: &Shard,
    handle: &ConnHandle,
    assembler: &mut hearth_wire::FrameAssembler,
    message: Option<Result<Message, WsError>>,
) -> Inbound {
    match message {
        Some(Ok(Message::Text(text))) => match on_frame(shard, handle, assembler, text.as_str()) {
            Ok(Handled::Done) => Inbound::Continue,
            Ok(Handled::ParseOffThread(message)) => Inbound::ParseOffThread(message),
            Err(reason) => Inbound::Close(Some(reason)),
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
            debug!(conn = handle.id, %error, "connection error");
            Inbound::Close(None)
        }
    }
}

/// Writes everything that may leave before the connection closes, for at most `timeout`.
async fn drain(handle: &ConnHandle, timeout: Duration) -> std::io::Result<()> {
    match tokio::time::timeout(timeout, handle.drained()).await {
        Ok(result) => result,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}
