//! A connection's session with its database's owner, from the core that holds its socket:
//! opening it (here, or by a message to the owning core or node), ending it, and handing it
//! the client's messages. Shared by the WebSocket loop, a session that moves to its
//! database's next owner (`rehome`), long polling and WebTransport.

use std::net::IpAddr;
use std::rc::Rc;

use tokio::sync::oneshot;

use crate::front::Front;
use crate::owner_side::OwnerSide;
use hearth_edge::{EdgeConn, EdgeTarget};
use hearth_ground::cross_core::{ConnMessages, Opening, RealtimeTransport, ToOwner};
use hearth_owner::outbound::Route;
use hearth_owner::sessions;

/// Opens the session of a connection held by `edge` with the owner of `namespace`: here when
/// this core owns it, else by a message to the owner (the connection's messages follow it
/// there). `previous` names a session the client replaces (`ls`); `address` is the client's
/// as the transport saw it (its socket's peer), for the owner's limits keyed by address.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attach(
    front: &Front,
    edge: &Rc<EdgeConn>,
    namespace: String,
    session_id: String,
    previous: Option<&str>,
    app_check: Option<String>,
    address: Option<IpAddr>,
    transport: RealtimeTransport,
) -> OwnerSide {
    let id = edge.id();
    let owner = front.owner_of(&namespace);
    if owner == front.index() {
        if let Some(previous) = previous {
            sessions::end_previous_session(front.owner(), previous, &namespace);
        }
        let route = Route::Local(edge.clone());
        let session = sessions::open_session(
            front.owner(),
            id,
            &namespace,
            session_id,
            app_check,
            address,
            route,
        );
        session.set_transport(transport);
        OwnerSide::Local(session)
    } else {
        front.edge().hold(id, EdgeTarget::Socket(edge.clone()));
        front.send_to_owner(
            owner,
            ToOwner::Open {
                edge: front.index(),
                opening: Opening {
                    conn: id,
                    namespace,
                    session_id,
                    previous: previous.map(str::to_owned),
                    app_check,
                    address,
                    transport,
                },
            },
        );
        OwnerSide::Remote(owner)
    }
}

/// Ends the session that [`attach`] opened.
pub(crate) fn detach_session(front: &Front, id: hearth_sync::ConnId, side: &OwnerSide) {
    match side {
        OwnerSide::Local(session) => sessions::close_connection(front.owner(), session),
        OwnerSide::Remote(owner) => front.release_connection(id, *owner),
    }
}

/// Hands whole messages to the owner of the connection's database, once it has room for
/// them; after a large one, waits until the owner has handled it. `false` when the owner is
/// gone (the server is stopping).
pub(crate) async fn send_to_owner(
    front: &Front,
    edge: &EdgeConn,
    owner: usize,
    texts: Vec<String>,
    large: bool,
) -> bool {
    let bytes = texts.iter().map(String::len).sum();
    let Some(room) = front.edge().owner_room(owner, bytes).await else {
        return false;
    };
    let (done, handled) = if large {
        let (done, handled) = oneshot::channel();
        (Some(done), Some(handled))
    } else {
        (None, None)
    };
    front.send_to_owner(
        owner,
        ToOwner::Messages {
            messages: ConnMessages {
                conn: edge.id(),
                texts,
            },
            done,
            room,
        },
    );
    if let Some(handled) = handled {
        // Dropped unsent once the owner is done (or gone): either way, go on.
        let _ = handled.await;
    }
    true
}
