//! What an owner does with a message from an edge about a connection held there: it opens and
//! ends the connection's session and handles its requests exactly as for a connection on its
//! own core (`dispatch`), in the order the edge received them.

use std::rc::Rc;

use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use crate::dispatch::{
    expire_auth, finish_deferred, on_large_decoded, on_message, Handled, LargeMessage,
};
use crate::outbound::{ConnHandle, Route};
use crate::sessions;
use crate::state::Owner;
use crate::streams::open_stream_for_edge;
use hearth_ground::close::CloseReason;
use hearth_ground::cross_core::{ConnMessages, MessageBatch, Opening, ToOwner};
use hearth_net::time::now_ms;

pub fn on_link_message(owner: &Rc<Owner>, message: ToOwner) {
    match message {
        ToOwner::Open { edge, opening } => {
            let Opening {
                conn,
                namespace,
                session_id,
                previous,
                app_check,
                address,
                transport,
            } = opening;
            if let Some(previous) = previous {
                sessions::end_previous_session(owner, &previous, &namespace);
            }
            let route = Route::Remote {
                edge,
                outgoing: owner.outgoing().clone(),
            };
            let handle = sessions::open_session(
                owner, conn, &namespace, session_id, app_check, address, route,
            );
            handle.set_transport(transport);
        }
        ToOwner::Messages {
            messages: ConnMessages { conn, texts },
            done,
            room,
        } => {
            let Some(handle) = owner.session(conn) else {
                return;
            };
            let batch = MessageBatch { texts, done, room };
            if let Some(batch) = handle.hold_if_waiting(batch) {
                on_batch(owner, handle, batch);
            }
        }
        ToOwner::AuthExpired { conn } => {
            let Some(handle) = owner.session(conn) else {
                return;
            };
            // The client may have authenticated again since the edge's timer was set.
            let expired = handle
                .auth_expiry()
                .is_some_and(|expires_at| expires_at.saturating_mul(1000) <= now_ms());
            if expired {
                expire_auth(owner, &handle);
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
            let outcome = open_stream_for_edge(owner, conn, edge, &namespace, auth, &request);
            // An edge that is gone lets go of the stream when its body drops.
            let _ = opened.send(outcome);
        }
        ToOwner::Closed { conn } => {
            if let Some(handle) = owner.session(conn) {
                sessions::close_connection(owner, &handle);
            } else if let Some(stream) = owner.stream(conn) {
                sessions::close_stream(owner, &stream);
            }
        }
        ToOwner::Moved { conn } => {
            if let Some(handle) = owner.session(conn) {
                sessions::move_connection(owner, &handle);
            }
        }
    }
}

/// Handles a batch of a connection's messages in order. When one must be finished later (a
/// large one, or one waiting for the cluster's claim on its database), the rest of the batch
/// and the batches that arrive meanwhile wait behind it, and the edge's room and signal are
/// held until the batch is handled.
fn on_batch(owner: &Rc<Owner>, handle: Rc<ConnHandle>, batch: MessageBatch) {
    let MessageBatch { texts, done, room } = batch;
    let mut texts = texts.into_iter();
    let Some(first) = handle_until_deferred(owner, &handle, &mut texts) else {
        return;
    };
    handle.start_holding();
    let owner = owner.clone();
    tokio::task::spawn_local(async move {
        let (mut deferred, mut texts, mut held) = (first, texts, (done, room));
        loop {
            let decoded = finish_deferred(deferred).await;
            if handle.is_closing() {
                // Closed, or stopped for a move (whose edge then sends it again elsewhere),
                // while it waited: nothing more of the connection is handled.
                while handle.next_held().is_some() {}
                return;
            }
            let outcome = match decoded {
                Some(decoded) => on_large_decoded(&owner, &handle, decoded),
                None => Err(CloseReason::new(
                    CloseCode::Error,
                    "a message could not be decoded",
                )),
            };
            if let Err(reason) = outcome {
                close(&handle, reason);
                while handle.next_held().is_some() {}
                return;
            }
            // The rest of this batch, then the held ones, up to the next deferred message.
            loop {
                if let Some(next) = handle_until_deferred(&owner, &handle, &mut texts) {
                    deferred = next;
                    break;
                }
                drop(held);
                let Some(batch) = handle.next_held() else {
                    return;
                };
                texts = batch.texts.into_iter();
                held = (batch.done, batch.room);
            }
        }
    });
}

/// Handles `texts` in order until one must be finished later (a large one, or one waiting for
/// the cluster's claim on its database), which is returned; the rest stay in `texts`.
fn handle_until_deferred(
    owner: &Owner,
    handle: &ConnHandle,
    texts: &mut std::vec::IntoIter<String>,
) -> Option<LargeMessage> {
    for text in texts.by_ref() {
        if handle.is_closing() {
            return None;
        }
        match on_message(owner, handle, text) {
            Ok(Handled::Done) => {}
            Ok(Handled::ParseOffThread(message)) => return Some(message),
            Err(reason) => {
                close(handle, reason);
                return None;
            }
        }
    }
    None
}

fn close(handle: &ConnHandle, reason: CloseReason) {
    debug!(conn = handle.id, reason = %reason.text, "closing a connection held by another core");
    handle.close(reason);
}
