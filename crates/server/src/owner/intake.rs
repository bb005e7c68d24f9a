//! What an owner does with a message from an edge about a connection held there: it opens and
//! ends the connection's session and handles its requests exactly as for a connection on its
//! own core (`dispatch`), in the order the edge received them.

use std::rc::Rc;

use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use crate::close::CloseReason;
use crate::link::ToOwner;
use crate::owner::dispatch::{decode_large, expire_auth, on_large_decoded, on_message, Handled};
use crate::owner::outbound::{ConnHandle, Route};
use crate::owner::sessions;
use crate::shard::Shard;
use crate::sse::open_stream_for_edge;
use crate::time::now_ms;

pub fn on_link_message(shard: &Rc<Shard>, message: ToOwner) {
    match message {
        ToOwner::Open {
            conn,
            edge,
            namespace,
            session_id,
            previous,
        } => {
            if let Some(previous) = previous {
                sessions::end_previous_session(shard, &previous, &namespace);
            }
            let route = Route::Remote {
                edge,
                outgoing: shard.owner.outgoing().clone(),
            };
            sessions::open_session(shard, conn, &namespace, session_id, route);
        }
        ToOwner::Messages {
            conn,
            texts,
            done,
            room,
        } => {
            let Some(handle) = shard.owner.session(conn) else {
                return;
            };
            for text in texts {
                if handle.is_closing() {
                    return;
                }
                match on_message(shard, &handle, text) {
                    Ok(Handled::Done) => {}
                    Ok(Handled::ParseOffThread(message)) => {
                        // The edge reads nothing more of this connection until `done` is
                        // dropped, so this is its last message of the batch.
                        let shard = shard.clone();
                        tokio::task::spawn_local(async move {
                            let decoded =
                                tokio::task::spawn_blocking(move || decode_large(message)).await;
                            let outcome = match decoded {
                                Ok(decoded) => on_large_decoded(&shard, &handle, decoded),
                                Err(_) => Err(CloseReason::new(
                                    CloseCode::Error,
                                    "a message could not be decoded",
                                )),
                            };
                            if let Err(reason) = outcome {
                                close(&handle, reason);
                            }
                            drop((done, room));
                        });
                        return;
                    }
                    Err(reason) => {
                        close(&handle, reason);
                        return;
                    }
                }
            }
        }
        ToOwner::AuthExpired { conn } => {
            let Some(handle) = shard.owner.session(conn) else {
                return;
            };
            // The client may have authenticated again since the edge's timer was set.
            let expired = handle
                .auth_expiry()
                .is_some_and(|expires_at| expires_at.saturating_mul(1000) <= now_ms());
            if expired {
                expire_auth(shard, &handle);
            }
        }
        ToOwner::OpenStream {
            conn,
            edge,
            namespace,
            auth,
            request,
            opened,
        } => {
            let outcome = open_stream_for_edge(shard, conn, edge, &namespace, auth, &request);
            // An edge that is gone lets go of the stream when its body drops.
            let _ = opened.send(outcome);
        }
        ToOwner::Closed { conn } => {
            if let Some(handle) = shard.owner.session(conn) {
                sessions::close_connection(shard, &handle);
            } else if let Some(stream) = shard.owner.stream(conn) {
                sessions::close_stream(shard, &stream);
            }
        }
    }
}

fn close(handle: &ConnHandle, reason: CloseReason) {
    debug!(conn = handle.id, reason = %reason.text, "closing a connection held by another core");
    handle.close(reason);
}
