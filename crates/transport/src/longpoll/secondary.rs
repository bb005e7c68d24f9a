//! A WebSocket naming a long-polling session (`/.ws?…&s=<session id>`): the web SDK moving
//! that session onto a WebSocket (its `s` is the session id of the long poll's handshake,
//! `<public id>.<secret>`). The long-polling side of the move is `switch`.
//!
//! The WebSocket is served on the session's home core: one that lands on another core is
//! moved there, socket and all, before its upgrade is answered, so that the session's state
//! keeps its one owner and the session's outbox can write to the socket. There it is
//! refused (a reset `r`, which tells the SDK to drop it, then a close counted as
//! `upgrade_refused`) unless it names a live session by its secret, on the same database,
//! that no other WebSocket is taking over. Until the switch it answers only the SDK's pings
//! (after its own acknowledgement `a`, which starts them) and waits for the client's `a`;
//! at the switch it is handed the session and serves it as any WebSocket connection
//! (`edge::websocket::serve_session`), until the session ends.

use std::rc::{Rc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use hearth_wire::{control_type, encode_reset, PONG, SWITCH_ACK};
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tracing::debug;

use crate::front::Front;
use crate::longpoll_session::{Handover, LpSession, Secondary};
use crate::serve::websocket::{
    accept_response, end_socket, serve_session, websocket_config, Ended, Socket, BAD_UPGRADE,
};
use hearth_edge::frames::encode_frames;
use hearth_edge::socket::{Accepted, Outbox, SharedStream, Source, Transport};
use hearth_edge::Settled;
use hearth_ground::close::{CloseReason, SHUTDOWN_CLOSE, UPGRADE_REFUSED_CLOSE};
use hearth_ground::longpoll_request::MovedUpgrade;
use hearth_ground::namespace::NamespaceError;
use hearth_net::http_head::Head;

/// How long a WebSocket may wait for the client to switch to it. The SDK gives up on a move
/// after 60 s; it switches within a few round trips.
pub const SWITCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The most pings a WebSocket answers before the switch (the SDK sends two).
pub const MAX_PINGS_BEFORE_SWITCH: u32 = 8;

/// Serves a WebSocket that names a long-polling session, on that session's home core.
pub async fn serve<S: Accepted>(
    front: Rc<Front>,
    mut stream: S,
    head: Head,
    leftover: Vec<u8>,
    namespace: Result<String, NamespaceError>,
) {
    if head.header("sec-websocket-key").is_none() {
        let _ = stream.write_all(BAD_UPGRADE).await;
        return;
    }
    let home = head
        .query_param("s")
        .and_then(home_core)
        .filter(|home| *home < front.shard_count());
    match home {
        Some(home) if home != front.index() => match stream.into_movable() {
            Ok(stream) => front.inboxes().forward_upgrade(
                home,
                MovedUpgrade {
                    stream,
                    head,
                    leftover,
                    namespace,
                },
            ),
            Err(error) => debug!(%error, "a WebSocket could not leave this core; dropped"),
        },
        // Here, or nowhere: an unknown session is refused here.
        _ => serve_here(front, stream.into_shared(), head, leftover, namespace).await,
    }
}

/// Serves a WebSocket that another core moved here.
pub async fn serve_moved(front: Rc<Front>, moved: MovedUpgrade) {
    let MovedUpgrade {
        stream,
        head,
        leftover,
        namespace,
    } = moved;
    match Settled::from_movable(stream) {
        Ok(Settled::Plain(socket)) => serve_here(front, socket, head, leftover, namespace).await,
        Ok(Settled::Tls(socket)) => serve_here(front, socket, head, leftover, namespace).await,
        Err(error) => debug!(%error, "a WebSocket moved here could not be registered; dropped"),
    }
}

/// The core `s` names: the public id before the dot is `<core>-<connection>`.
fn home_core(session_id: &str) -> Option<usize> {
    let (public_id, _) = session_id.split_once('.')?;
    public_id.split_once('-')?.0.parse().ok()
}

/// The session `s` names by its secret on `namespace`, if it may move.
fn find(
    front: &Front,
    head: &Head,
    namespace: &Result<String, NamespaceError>,
) -> Option<Rc<LpSession>> {
    let (public_id, secret) = head.query_param("s")?.split_once('.')?;
    let namespace = namespace.as_ref().ok()?;
    front
        .long_polls()
        .get(public_id)
        .filter(|session| session.may_move(namespace, secret))
}

async fn serve_here<T: Source + Transport + 'static>(
    front: Rc<Front>,
    socket: Rc<T>,
    head: Head,
    leftover: Vec<u8>,
    namespace: Result<String, NamespaceError>,
) {
    let Some(key) = head.header("sec-websocket-key") else {
        return;
    };
    let transport: Rc<dyn Transport> = socket.clone();
    // Not in the answer budget: it holds the upgrade's answer and a few small frames.
    let first = Rc::new(Outbox::new(transport.clone(), None));
    first.send([accept_response(key).into_bytes().into()]);
    front.counters().websocket_opened();
    let id = front.next_conn_id();
    let (handover, handed) = oneshot::channel();
    let session = find(&front, &head, &namespace).and_then(|session| {
        let secondary = Secondary::new(transport, first.clone(), handover);
        session
            .attach_secondary(secondary)
            .ok()
            .map(|()| Rc::downgrade(&session))
    });
    let shared = SharedStream::new(socket, first.clone());
    let mut ws = WebSocketStream::from_partially_read(
        shared,
        leftover,
        Role::Server,
        Some(websocket_config()),
    )
    .await;
    let Some(session) = session else {
        let host = head.header("host").unwrap_or_default();
        first.send([encode_frames(encode_reset(host))]);
        let refused = CloseReason::new(CloseCode::Policy, UPGRADE_REFUSED_CLOSE);
        end_socket(&front, id, Ended::Closed(refused), &mut ws).await;
        first.detach();
        return;
    };
    first.send([encode_frames(SWITCH_ACK.to_owned())]);
    match before_switch(&front, &mut ws, &first, handed).await {
        Ok(Handover { edge, side }) => {
            debug!(
                conn = edge.id(),
                "a WebSocket took a long-polling session over"
            );
            ws.get_mut().set_outbox(edge.outbox());
            serve_session(&front, edge, side, ws).await;
        }
        Err(ended) => {
            if let Some(session) = Weak::upgrade(&session) {
                session.drop_secondary(&first);
            }
            end_socket(&front, id, ended, &mut ws).await;
            first.detach();
        }
    }
}

/// The WebSocket until the switch: the client's pings answered, its acknowledgement
/// awaited, then the session awaited from its long-polling task.
async fn before_switch<S: Source>(
    front: &Front,
    ws: &mut Socket<S>,
    first: &Outbox,
    mut handed: oneshot::Receiver<Handover>,
) -> Result<Handover, Ended> {
    let mut shutdown = front.shutdown();
    let deadline = tokio::time::Instant::now() + SWITCH_TIMEOUT;
    let mut pings = 0;
    let mut acknowledged = false;
    loop {
        tokio::select! {
            biased;
            // First: from the switch on, the session's outbox holds this socket.
            handover = &mut handed => {
                return handover.map_err(|_| {
                    // The session ended before the client switched.
                    Ended::Closed(CloseReason::new(CloseCode::Policy, UPGRADE_REFUSED_CLOSE))
                });
            }
            _ = shutdown.changed() => {
                return Err(Ended::Closed(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE)));
            }
            _ = tokio::time::sleep_until(deadline) => {
                return Err(protocol("the client did not switch to this WebSocket in time"));
            }
            drained = std::future::poll_fn(|cx| first.poll_drain(cx)), if !first.is_empty() => {
                if drained.is_err() {
                    return Err(Ended::ByClient);
                }
            }
            // After its acknowledgement the client sends only the session's messages here,
            // which wait in the socket until the switch.
            message = ws.next(), if !acknowledged => match message {
                Some(Ok(Message::Text(text))) => match control_type(text.as_str()).as_deref() {
                    Some("p") => {
                        pings += 1;
                        if pings > MAX_PINGS_BEFORE_SWITCH {
                            return Err(protocol("too many pings before the switch"));
                        }
                        first.send([encode_frames(PONG.to_owned())]);
                    }
                    Some("a") => acknowledged = true,
                    // The SDK's keep-alive.
                    _ if text.as_str() == "0" => {}
                    _ => return Err(protocol("only pings and the switch come before the switch")),
                },
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Binary(_))) => {
                    return Err(Ended::Closed(CloseReason::new(
                        CloseCode::Unsupported,
                        "binary frames are not part of the protocol",
                    )));
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => return Err(Ended::ByClient),
            },
        }
    }
}

fn protocol(reason: &str) -> Ended {
    Ended::Closed(CloseReason::new(CloseCode::Protocol, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_core_is_read_from_the_public_id() {
        assert_eq!(home_core("3-17.AbCdEf_-xyz"), Some(3));
        assert_eq!(home_core("0-1.x"), Some(0));
        assert_eq!(
            home_core("AbCdEfGhIjKlMnOpQrStUv"),
            None,
            "a WebSocket session's id"
        );
        assert_eq!(home_core("x-1.y"), None);
        assert_eq!(home_core("3-17"), None, "no secret");
    }
}
