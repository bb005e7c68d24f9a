//! Sessions of this core's databases opening and ending: a WebSocket connection (held here or
//! by another core) or an event stream. Ending a session drops its listens and runs its
//! onDisconnect queue at once.

use std::net::IpAddr;
use std::rc::Rc;

use hearth_sync::{AuthState, ConnId, Effects};

use crate::caller_limits::Identity;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use crate::audit::Origin;
use crate::effects::route_effects_from;
use crate::outbound::{ConnHandle, Route};
use crate::state::{Owner, Session};
use hearth_edge::event_stream::StreamHandle;
use hearth_ground::close::{CloseReason, REPLACED_CLOSE};
use hearth_ground::session_id::may_replace;
use hearth_net::time::now_ms;
use hearth_persist::Tagger;

/// Opens a session of `namespace` (creating the database on first use) for a connection whose
/// messages go by `route`, with the App Check token it came with (verified here) and the
/// client's address as its edge saw it (kept on the handle, [`ConnHandle::address`]).
pub fn open_session(
    owner: &Owner,
    id: ConnId,
    namespace: &str,
    session_id: String,
    app_check: Option<String>,
    address: Option<IpAddr>,
    route: Route,
) -> Rc<ConnHandle> {
    let (database_seq, refused) = owner.with_database(namespace, |loaded| {
        // Past the database's quota of connections the session never joins it.
        if let Err(refusal) = loaded.admit_session() {
            return (loaded.shared_seq(), Some(refusal.message));
        }
        // Past the rules' limit of connections per caller, likewise (anonymous until it
        // signs in: counted by its address).
        follow_limits(owner, loaded);
        let caller = Identity::of(&AuthState::Anonymous, address);
        if let Err(refusal) = loaded.admit_caller(id, caller) {
            return (loaded.shared_seq(), Some(refusal.message));
        }
        loaded.connect(id);
        crate::profile::session_event(loaded, "concurrent-connect");
        (loaded.shared_seq(), None)
    });
    let tagger = Tagger {
        gate: owner.gate().clone(),
        database_seq,
    };
    let handle = Rc::new(
        ConnHandle::new(id, namespace.to_owned(), session_id, tagger, route).with_address(address),
    );
    if let Some(refusal) = refused {
        handle.send_text(hearth_wire::encode_shutdown(&refusal));
        handle.close(CloseReason::new(CloseCode::Policy, refusal));
        return handle;
    }
    if let Some((seen, _)) = crate::app_check::verify(owner, app_check.as_deref()) {
        handle.set_app_check(seen);
    }
    owner.add_session(handle.clone());
    handle
}

/// Keeps `database`'s count of callers in step with its rules (`caller_limits`): started
/// from its open sessions when its rules come to declare limits, dropped when they no longer
/// do, so that a database without limits keeps nothing per session. Event streams opened
/// before are followed without an address.
pub fn follow_limits(owner: &Owner, database: &mut crate::loaded::Loaded) {
    if !database.callers_out_of_step() {
        return;
    }
    let namespace = database.name().clone();
    database.follow_callers(|| {
        owner
            .sessions()
            .all()
            .filter_map(|session| match session {
                Session::Socket(conn) if *conn.namespace == *namespace => {
                    Some((conn.id, conn.address()))
                }
                Session::Stream(stream) if *stream.namespace == *namespace => {
                    Some((stream.id, None))
                }
                _ => None,
            })
            .collect()
    });
}

/// Ends a connection's session: its listens go, and its onDisconnect queue runs now. Calling it
/// twice is harmless.
pub fn close_connection(owner: &Owner, handle: &ConnHandle) {
    if owner.remove_session(handle) {
        end_session(
            owner,
            &handle.namespace,
            handle.id,
            Origin::session(handle.transport(), handle.address()),
        );
    }
}

/// Ends the session of a connection that stays open but moves to another owner
/// (`ToOwner::Moved`): its listens go and nothing more is sent to it from here, but its
/// onDisconnect queue does not run, since its client did not disconnect (the edge sets the
/// queue up again on the new owner, which runs it when the client does go). Calling it twice,
/// or after [`close_connection`], is harmless.
pub fn move_connection(owner: &Owner, handle: &ConnHandle) {
    handle.detach();
    if owner.remove_session(handle) {
        owner.with_loaded(&handle.namespace, |database| {
            database.forget_caller(handle.id);
            database.leave(handle.id);
            database.touched(now_ms());
        });
    }
}

/// Ends an event stream's session. Calling it twice is harmless.
pub fn close_stream(owner: &Owner, handle: &StreamHandle) {
    if owner.remove_stream(handle.id) {
        end_session(owner, &handle.namespace, handle.id, Origin::rest(None));
    }
}

/// `origin`: where the session's requests came from, which its onDisconnect writes name.
fn end_session(owner: &Owner, namespace: &str, id: ConnId, origin: Origin) {
    let mut effects = Effects::new();
    owner.with_loaded(namespace, |database| {
        database.forget_caller(id);
        database.disconnect(id, now_ms(), &mut effects);
        crate::profile::session_event(database, "concurrent-disconnect");
        database.touched(now_ms());
    });
    route_effects_from(owner, namespace, effects, origin);
}

/// A client reconnected to `namespace` naming its previous session: if that socket still looks
/// open (half-open TCP), end it now so that its onDisconnect queue runs before the new
/// connection's requests. An unknown id, or a session of another database, is ignored alike.
/// The id is a secret, so it is not logged.
pub fn end_previous_session(owner: &Owner, previous: &str, namespace: &str) {
    let Some(handle) = owner.session_by_secret(previous) else {
        return;
    };
    if !may_replace(&handle.namespace, namespace) {
        debug!(
            conn = handle.id,
            "a reconnect named a session of another database; ignored"
        );
        return;
    }
    debug!(conn = handle.id, "previous session replaced by a reconnect");
    close_connection(owner, &handle);
    handle.close(CloseReason::new(CloseCode::Away, REPLACED_CLOSE));
}
