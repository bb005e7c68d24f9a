//! One WebTransport session, from its request to its end, on the shard that serves the
//! endpoint (its edge).
//!
//! The owner writes to it through an `EdgeConn` like to any connection: WebSocket frames,
//! encoded once per push for all its listeners. The session's [`Outlet`] is that connection's
//! transport: it reads the frames back into messages as they are written and sends each push
//! as a datagram at once (`codec::sort_message`), everything else on the stream. The owner
//! writes a tick's pushes in one loop turn, so quinn's connection task finds them all queued
//! when it next runs: it packs several datagrams into one QUIC packet and hands the packets
//! to the kernel together (with UDP segmentation offload where the kernel has it), not one
//! syscall per update.

use std::rc::Rc;

use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{debug, info};
use wtransport::endpoint::IncomingSession;
use wtransport::{Connection, RecvStream, VarInt};

use crate::front::Front;
use crate::owner_side::OwnerSide;
use crate::serve::attach::{attach, detach_session, send_to_owner};
use crate::serve::websocket::{auth_expired, auth_expiry, handshake, write_stalled};
use crate::webtransport::codec::{classify, listen_request, Bucket, LineReader, Request};
use crate::webtransport::outlet::{write_lines, Outlet};
use crate::webtransport::spread::Slot;
use crate::webtransport::{
    MAX_DATAGRAMS_PER_SECOND, MAX_DATAGRAM_BURST, MAX_DATAGRAM_BYTES, MAX_LISTENS_PER_SESSION,
    MAX_STREAM_MESSAGE_BYTES, MAX_WEBTRANSPORT_SESSIONS, STREAM_OPEN_TIMEOUT,
};
use hearth_edge::frames::encode_frames;
use hearth_edge::socket::Transport;
use hearth_edge::EdgeConn;
use hearth_ground::close::{CloseReason, SHUTDOWN_CLOSE, SLOW_READER_CLOSE, UNWRITABLE_DROP};
use hearth_ground::cross_core::RealtimeTransport;
use hearth_ground::metrics::labels::{CloseCause, SessionTransport};
use hearth_ground::metrics::ShardCounters;
use hearth_ground::namespace::resolve;
use hearth_ground::session_id::new_session_id;
use hearth_net::query_string::QueryString;
use hearth_net::time::now_ms;
use hearth_owner::dispatch::{finish_deferred, on_deferred_decoded, on_message, Handled};
use hearth_owner::outbound::ConnHandle;

/// The close reason of a session that asked for more than [`MAX_LISTENS_PER_SESSION`].
const TOO_MANY_LISTENS: &str = "too many listens on one WebTransport session";

/// Counts a session in its shard's `webtransport_sessions` while it lives.
struct Counted(Rc<ShardCounters>);

impl Counted {
    fn new(counters: Rc<ShardCounters>) -> Counted {
        counters.webtransport_session(true);
        Counted(counters)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.webtransport_session(false);
    }
}

/// Serves one connection handed to this shard; `slot` counts it there until it ends.
pub async fn serve_session(front: Rc<Front>, incoming: IncomingSession, slot: Slot) {
    let request = match incoming.await {
        Ok(request) => request,
        Err(error) => {
            debug!(%error, "WebTransport session request failed");
            return;
        }
    };
    // The slot counts this session too.
    if slot.total() > MAX_WEBTRANSPORT_SESSIONS {
        request.too_many_requests().await;
        return;
    }
    let query = request
        .path()
        .split_once('?')
        .map(|(_, query)| QueryString::parse(query));
    let namespace = resolve(
        query.as_ref().and_then(|query| query.get("ns")),
        Some(request.authority()),
        &front.config().default_namespace,
    );
    let Ok(namespace) = namespace else {
        request.not_found().await;
        return;
    };
    let previous = query
        .as_ref()
        .and_then(|query| query.get("ls"))
        .map(str::to_owned);
    let app_check = hearth_ground::app_check::app_check_token(
        query.as_ref().and_then(|query| query.get("ac")),
        request
            .headers()
            .get(hearth_ground::app_check::APP_CHECK_HEADER)
            .map(String::as_str),
    );
    let host = request.authority().to_owned();
    // The client's: the QUIC connection's peer when the session was asked for (an IPv4
    // client of a dual-stack endpoint is itself, not a mapped IPv6).
    let address = Some(request.remote_address().ip().to_canonical());
    let Ok(connection) = request.accept().await else {
        return;
    };
    let _counted = Counted::new(front.counters().clone());
    let Ok(Ok((send, recv))) =
        tokio::time::timeout(STREAM_OPEN_TIMEOUT, connection.accept_bi()).await
    else {
        connection.close(VarInt::from_u32(1008), b"no stream opened");
        return;
    };
    let Ok(session_id) = new_session_id() else {
        return;
    };
    let max_datagram = connection
        .max_datagram_size()
        .unwrap_or(0)
        .min(MAX_DATAGRAM_BYTES);
    let outlet = Rc::new(Outlet::new(Box::new(connection.clone()), max_datagram));
    let transport: Rc<dyn Transport> = outlet.clone();
    let id = front.next_conn_id();
    let edge = Rc::new(EdgeConn::new(
        id,
        transport,
        front.edge().budget().clone(),
        front.counters().clone(),
    ));
    // As on a WebSocket (the same time, a millisecond behind the clock), the handshake
    // goes first.
    edge.write([encode_frames(handshake(now_ms(), &host, &session_id))]);
    let side = attach(
        &front,
        &edge,
        namespace,
        session_id,
        previous.as_deref(),
        app_check,
        address,
        RealtimeTransport::WebTransport,
    );
    let writer = tokio::task::spawn_local(write_lines(outlet.clone(), edge.clone(), send));
    let ended = run(&front, &edge, &outlet, &side, &connection, recv).await;
    detach_session(&front, id, &side);
    let cause = ended.as_ref().map_or(CloseCause::Client, |reason| {
        CloseCause::of_reason(&reason.text)
    });
    front
        .counters()
        .session_closed(SessionTransport::WebTransport, cause);
    match ended {
        Some(reason) => {
            if reason.text == SHUTDOWN_CLOSE {
                debug!(conn = id, reason = %reason.text, "closing WebTransport session");
            } else {
                info!(conn = id, reason = %reason.text, "closing WebTransport session");
            }
            // What waits on the stream goes first, for a moment.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), outlet.drained()).await;
            connection.close(
                VarInt::from_u32(u32::from(u16::from(reason.code))),
                reason.text.as_bytes(),
            );
        }
        None => debug!(conn = id, "WebTransport session ended by the client"),
    }
    outlet.finish();
    writer.abort();
    edge.detach();
}

/// The session's loop: the client's stream lines and datagrams go to the owner; ends with the
/// reason to close with, or `None` when the client went.
async fn run(
    front: &Front,
    edge: &EdgeConn,
    outlet: &Outlet,
    side: &OwnerSide,
    connection: &Connection,
    mut recv: RecvStream,
) -> Option<CloseReason> {
    let mut shutdown = front.shutdown();
    let mut lines = LineReader::new(MAX_STREAM_MESSAGE_BYTES);
    let mut bucket = Bucket::new(MAX_DATAGRAMS_PER_SECOND, MAX_DATAGRAM_BURST, now_ms());
    let mut listens = 0usize;
    let mut buffer = vec![0u8; 16 * 1024];
    let write_timeout = front.config().http.write_timeout;
    loop {
        if let Some(reason) = edge.closing() {
            return Some(reason);
        }
        if edge.write_failed() {
            return Some(CloseReason::new(CloseCode::Policy, SLOW_READER_CLOSE));
        }
        let mut messages = Vec::new();
        tokio::select! {
            biased;
            _ = shutdown.changed() => {
                return Some(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
            }
            _ = edge.notified() => continue,
            // Bytes wait in the outbox for the stream's backlog to shrink.
            written = edge.drained(), if edge.has_pending() => {
                if written.is_err() {
                    return None;
                }
                continue;
            }
            _ = write_stalled(edge, write_timeout), if edge.has_pending() => {
                if edge.blocked_for().is_some_and(|blocked| blocked >= write_timeout) {
                    return Some(CloseReason::new(CloseCode::Policy, UNWRITABLE_DROP));
                }
                continue;
            }
            read = recv.read(&mut buffer) => match read {
                Ok(Some(read)) => {
                    if let Err(error) = lines.feed(&buffer[..read], |line| messages.push(line)) {
                        return Some(CloseReason::new(CloseCode::Size, error.to_string()));
                    }
                }
                Ok(None) | Err(_) => return None,
            },
            datagram = connection.receive_datagram() => match datagram {
                Ok(datagram) => take_datagram(&mut bucket, &datagram.payload(), &mut messages),
                Err(_) => return None,
            },
            _ = auth_expiry(edge.auth_expiry()) => auth_expired(front, edge, side),
        }
        if let Err(reason) = count_listens(outlet, &messages, &mut listens) {
            return Some(reason);
        }
        if messages.is_empty() {
            continue;
        }
        match side {
            OwnerSide::Local(session) => {
                let refused = handle_here(front, edge, session, messages).await;
                if refused.is_some() {
                    return refused;
                }
            }
            OwnerSide::Remote(owner) => {
                if !send_to_owner(front, edge, *owner, messages, false).await {
                    return Some(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
                }
            }
        }
    }
}

/// Takes a datagram among the client's messages when it is a write within the datagrams'
/// rate: only writes travel as datagrams; the rest needs the stream's order.
fn take_datagram(bucket: &mut Bucket, payload: &[u8], messages: &mut Vec<String>) {
    match std::str::from_utf8(payload) {
        Ok(text) if bucket.take(now_ms()) && classify(text) == Request::Write => {
            messages.push(text.to_owned());
        }
        // Over the rate, or not a write: dropped, as the network may drop any.
        _ => {}
    }
}

/// Counts the session's listens in `listens` (at most [`MAX_LISTENS_PER_SESSION`]: `Err`
/// past it) and notes each new one in the outlet, until it is answered.
fn count_listens(
    outlet: &Outlet,
    messages: &[String],
    listens: &mut usize,
) -> Result<(), CloseReason> {
    for message in messages {
        match classify(message) {
            Request::Listen if *listens >= MAX_LISTENS_PER_SESSION => {
                return Err(CloseReason::new(CloseCode::Policy, TOO_MANY_LISTENS));
            }
            Request::Listen => {
                *listens += 1;
                if let Some(listen) = listen_request(message) {
                    outlet.pending_listens.borrow_mut().push(listen);
                }
            }
            Request::Unlisten => *listens = listens.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Hands the client's messages to their session on this core, in order; the reason to close
/// with when one is refused.
async fn handle_here(
    front: &Front,
    edge: &EdgeConn,
    session: &ConnHandle,
    messages: Vec<String>,
) -> Option<CloseReason> {
    // This core's databases take no new request while an edge is far behind.
    front.owner().outgoing().room().await;
    edge.cork();
    let mut refused = None;
    for message in messages {
        let handled = match on_message(front.owner(), session, message) {
            Ok(Handled::Done) => Ok(()),
            // A message waiting for the cluster's claim on its database (none is longer
            // than the stream's limit): the next ones wait behind it.
            Ok(Handled::ParseOffThread(deferred)) => {
                edge.uncork();
                let decoded = finish_deferred(deferred).await;
                edge.cork();
                on_deferred_decoded(front.owner(), session, decoded)
            }
            Err(reason) => Err(reason),
        };
        if let Err(reason) = handled {
            refused = Some(reason);
            break;
        }
    }
    edge.uncork();
    refused
}
