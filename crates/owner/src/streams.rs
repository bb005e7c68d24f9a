//! The owner's side of a REST event stream (`sse/`): the session opened on the database, for
//! an HTTP connection on this core or held by another core's edge, its first event queued.

use std::rc::Rc;

use hearth_sync::{AuthState, ConnId, Effects, Reply, Request, Status};

use crate::caller_limits::Identity;

use crate::effects::route_effects;
use crate::rest::reply_error;
use crate::sessions;
use crate::state::Owner;
use hearth_edge::event_stream::StreamHandle;
use hearth_ground::rest::{DataRequest, RestResponse, MAX_REST_RESPONSE_BYTES};
use hearth_net::time::now_ms;

/// The tag of a stream's filtered listen. A stream holds exactly one listen, so any constant
/// will do; the engine needs a tag to tell filtered listens apart.
const STREAM_TAG: u64 = 1;

/// Opens the session of a stream whose HTTP connection core `edge` holds (`link::ToOwner`):
/// its released events go to that core's queue for the stream.
pub fn open_stream_for_edge(
    owner: &Owner,
    id: ConnId,
    edge: usize,
    namespace: &str,
    auth: AuthState,
    request: &DataRequest,
) -> Result<(), RestResponse> {
    let handle = new_handle(owner, id, namespace, request)?.held_by(edge, owner.outgoing().clone());
    start(owner, Rc::new(handle), auth, request)
}

/// The owner's queue of a new stream, unless what it would start with is too large.
pub fn new_handle(
    owner: &Owner,
    id: ConnId,
    namespace: &str,
    request: &DataRequest,
) -> Result<StreamHandle, RestResponse> {
    let path = &request.target.path;
    let current_bytes = owner
        .databases()
        .get(namespace)
        .map_or(0, |database| database.root().get(path).estimated_bytes());
    if current_bytes > MAX_REST_RESPONSE_BYTES {
        return Err(RestResponse::error(
            400,
            "Data requested exceeds the maximum size that can be accessed with a single request.",
        ));
    }
    Ok(StreamHandle::new(
        id,
        namespace.to_owned(),
        path.clone(),
        request.style.export,
        owner.tagger(namespace),
    )
    .counted_by(owner.counters().clone()))
}

/// Registers the stream as a session of its database and listens at its path; the first
/// event is queued. A refused listen ends the session at once.
pub fn start(
    owner: &Owner,
    handle: Rc<StreamHandle>,
    auth: AuthState,
    request: &DataRequest,
) -> Result<(), RestResponse> {
    let token = request.app_check.as_deref();
    if let Some(refusal) = crate::app_check::refuses_request(owner, &handle.namespace, &auth, token)
    {
        return Err(refusal);
    }
    if auth != AuthState::Admin {
        let admitted = owner.with_database(&handle.namespace, |database| database.admit_session());
        if let Err(refusal) = admitted {
            return Err(RestResponse::error(429, refusal.message));
        }
    }
    if request.profile {
        return start_profiler(owner, handle, auth);
    }
    if let Some(since) = request.changes_since {
        return crate::feed::start_feed(owner, handle, auth, request, since);
    }
    let id = handle.id;
    let namespace = handle.namespace.clone();
    owner.add_stream(handle.clone());
    let query = request
        .query
        .as_ref()
        .map(|query| query.params.clone())
        .unwrap_or_default();
    let tag = query.is_filtered().then_some(STREAM_TAG);
    let mut effects = Effects::new();
    let reply = owner.with_database(&namespace, |database| {
        // A stream is a connection and a listen of its caller's, under the rules' limits.
        sessions::follow_limits(owner, database);
        let admitted = database
            .admit_caller(id, Identity::of(&auth, request.address))
            .and_then(|()| database.claim_caller(id));
        if let Err(refusal) = admitted {
            return Reply::error(Status::LimitExceeded, refusal.message);
        }
        database.connect(id);
        database.set_auth(id, auth, now_ms(), &mut effects);
        if database.has_caller_limits() {
            if let Err(refusal) = database.admit_caller_listen(id, &handle.path, tag) {
                return Reply::error(Status::LimitExceeded, refusal.message);
            }
        }
        let listen = Request::Listen {
            path: handle.path.clone(),
            query,
            query_wire: None,
            tag,
            hash: None,
        };
        let profiled = crate::profile::Operation::of_request(database, &listen);
        let reply = database.handle(id, listen, now_ms(), &mut effects);
        if let Some(operation) = profiled {
            operation.done(database, reply.status, None);
        }
        reply
    });
    route_effects(owner, &namespace, effects);
    if !reply.is_ok() {
        sessions::close_stream(owner, &handle);
        // A limit per caller answers as a rate limit does.
        if reply.status == Status::LimitExceeded {
            let mut refused = reply_error(reply);
            refused.status = 429;
            return Err(refused);
        }
        return Err(reply_error(reply));
    }
    Ok(())
}

/// Opens `handle` as a profiler of its database (an admin's: the endpoint refuses others).
pub fn start_profiler(
    owner: &Owner,
    handle: Rc<StreamHandle>,
    auth: AuthState,
) -> Result<(), RestResponse> {
    let namespace = handle.namespace.clone();
    owner.add_stream(handle.clone());
    let mut effects = Effects::new();
    let opened = owner.with_database(&namespace, |loaded| {
        let profilers = loaded.profilers_mut();
        profilers.open.retain(|stream| stream.strong_count() > 0);
        if profilers.open.len() >= crate::profile::MAX_PROFILERS_PER_DATABASE {
            return Err(RestResponse::error(
                429,
                format!(
                    "at most {} profilers may watch a database at once",
                    crate::profile::MAX_PROFILERS_PER_DATABASE
                ),
            ));
        }
        profilers.open.push(Rc::downgrade(&handle));
        loaded.connect(handle.id);
        loaded.set_auth(handle.id, auth, now_ms(), &mut effects);
        Ok(())
    });
    route_effects(owner, &namespace, effects);
    if opened.is_err() {
        sessions::close_stream(owner, &handle);
    }
    opened
}
