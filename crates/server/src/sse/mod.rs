//! REST event streams (spec §15.6): `GET <path>.json` with `Accept: text/event-stream`.
//!
//! A stream is a session of its database, exactly like a WebSocket connection: it connects,
//! listens at its path (with the request's query, as a tagged listen when it filters) and is
//! disconnected when the client goes away. Its pushes therefore come from the same views as
//! WebSocket listens. `route_effects` hands each push to `SseFanout`, which serializes the
//! data once per push and gives every stream the same bytes; only the short event head, whose
//! path is relative to the stream's location, is made once per distinct stream path.

pub mod body;
pub mod stream;

use std::rc::Rc;
use std::time::Duration;

use hearth_sync::{AuthState, ConnId, Effects, Request};
use hyper::header::HeaderValue;
use hyper::Response;
use tokio::sync::oneshot;

pub use body::{OnEnd, StreamBody};
pub use stream::StreamHandle;

use crate::edge::http_body::HearthBody;
use crate::edge::EdgeTarget;
use crate::owner::effects::route_effects;
use crate::owner::rest::reply_error;
use crate::owner::sessions;
use crate::shard::Shard;
use hearth_ground::cross_core::ToOwner;
use hearth_ground::rest::{DataRequest, RestRequest, RestResponse, MAX_REST_RESPONSE_BYTES};
use hearth_net::time::now_ms;
use hearth_persist::Tagger;

/// The tag of a stream's filtered listen. A stream holds exactly one listen, so any constant
/// will do; the engine needs a tag to tell filtered listens apart.
const STREAM_TAG: u64 = 1;

/// Opens a stream whose database this shard owns, for an HTTP connection on this shard. The
/// first event is the `put` of the whole current value (or query result) at the stream's
/// path. The listen is checked against the database's rules like a WebSocket listen; when the
/// rules later stop allowing it, the engine revokes it and the stream ends with a `cancel`
/// event.
pub fn open_stream(
    shard: &Rc<Shard>,
    namespace: &str,
    auth: AuthState,
    auth_expires_at: Option<u64>,
    request: &DataRequest,
) -> Result<Response<HearthBody>, RestResponse> {
    let id = shard.next_conn_id();
    let handle = new_handle(shard, id, namespace, request)?.counted_in(shard.config.http.clone());
    let handle = Rc::new(handle);
    // From here on, dropping the body ends the session.
    let owner = shard.clone();
    let body = StreamBody::new(
        handle.clone(),
        Box::new(move |handle: &StreamHandle| sessions::close_stream(&owner, handle)),
        shard.config.sse_keep_alive,
        expires_in(auth_expires_at),
    );
    start(shard, handle, auth, request)?;
    Ok(response(body))
}

/// Opens the session of a stream whose HTTP connection core `edge` holds (`link::ToOwner`):
/// its released events go to that core's queue for the stream.
pub fn open_stream_for_edge(
    shard: &Rc<Shard>,
    id: ConnId,
    edge: usize,
    namespace: &str,
    auth: AuthState,
    request: &DataRequest,
) -> Result<(), RestResponse> {
    let handle =
        new_handle(shard, id, namespace, request)?.held_by(edge, shard.owner.outgoing().clone());
    start(shard, Rc::new(handle), auth, request)
}

/// Opens a stream whose database another shard owns, for an HTTP connection on this shard:
/// the owner opens the session, and its events arrive here in its batches.
pub async fn open_remote_stream(
    shard: &Rc<Shard>,
    owner: usize,
    parsed: &RestRequest,
    request: &DataRequest,
) -> Result<Response<HearthBody>, RestResponse> {
    let edge = shard.clone();
    // From here on, dropping the body ends the session (the owner is told).
    let (id, body) = hold_remote_stream(
        shard,
        parsed,
        request,
        Box::new(move |queue: &StreamHandle| edge.release_connection(queue.id, owner)),
    );
    let (opened, answer) = oneshot::channel();
    shard.send_to_owner(
        owner,
        ToOwner::OpenStream {
            conn: id,
            edge: shard.index,
            namespace: parsed.namespace.clone(),
            auth: parsed.auth.clone(),
            request: Box::new(request.clone()),
            opened,
        },
    );
    match answer.await {
        Ok(Ok(())) => Ok(response(body)),
        Ok(Err(refused)) => Err(refused),
        Err(_) => Err(RestResponse::error(
            503,
            "the database's shard is unavailable",
        )),
    }
}

/// The queue and body of a stream whose session is elsewhere (another core, or another node),
/// held by this core's edge under a new connection id until `release` runs, when the body is
/// dropped.
pub fn hold_remote_stream(
    shard: &Rc<Shard>,
    parsed: &RestRequest,
    request: &DataRequest,
    release: OnEnd,
) -> (ConnId, StreamBody) {
    let id = shard.next_conn_id();
    // No gate here: the owner sends only what is durable.
    let queue = StreamHandle::new(
        id,
        parsed.namespace.clone(),
        request.target.path.clone(),
        request.style.export,
        Tagger::open(),
    )
    .counted_in(shard.config.http.clone())
    .counted_by(shard.counters.clone());
    let queue = Rc::new(queue);
    shard.edge.hold(id, EdgeTarget::Stream(queue.clone()));
    let body = StreamBody::new(
        queue,
        release,
        shard.config.sse_keep_alive,
        expires_in(parsed.auth_expires_at),
    );
    (id, body)
}

/// A credential that expires ends the stream with `auth_revoked` when it does; the client then
/// reconnects with a fresh one. (Development credentials never expire.)
fn expires_in(auth_expires_at: Option<u64>) -> Option<Duration> {
    auth_expires_at
        .map(|at| Duration::from_millis(at.saturating_mul(1000).saturating_sub(now_ms())))
}

/// The owner's queue of a new stream, unless what it would start with is too large.
fn new_handle(
    shard: &Shard,
    id: ConnId,
    namespace: &str,
    request: &DataRequest,
) -> Result<StreamHandle, RestResponse> {
    let path = &request.target.path;
    let current_bytes = shard
        .owner
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
        shard.tagger(namespace),
    )
    .counted_by(shard.counters.clone()))
}

/// Registers the stream as a session of its database and listens at its path; the first
/// event is queued. A refused listen ends the session at once.
fn start(
    shard: &Rc<Shard>,
    handle: Rc<StreamHandle>,
    auth: AuthState,
    request: &DataRequest,
) -> Result<(), RestResponse> {
    let id = handle.id;
    let namespace = handle.namespace.clone();
    shard.owner.add_stream(handle.clone());
    let query = request
        .query
        .as_ref()
        .map(|query| query.params.clone())
        .unwrap_or_default();
    let tag = query.is_filtered().then_some(STREAM_TAG);
    let mut effects = Effects::new();
    let reply = shard.with_database(&namespace, |database| {
        database.connect(id);
        database.set_auth(id, auth, now_ms(), &mut effects);
        let listen = Request::Listen {
            path: handle.path.clone(),
            query,
            query_wire: None,
            tag,
            hash: None,
        };
        database.handle(id, listen, now_ms(), &mut effects)
    });
    route_effects(shard, &namespace, effects);
    if !reply.is_ok() {
        sessions::close_stream(shard, &handle);
        return Err(reply_error(reply));
    }
    Ok(())
}

/// The answer that starts an event stream.
pub fn response(body: StreamBody) -> Response<HearthBody> {
    let mut response = Response::new(HearthBody::Stream(body));
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    // Tells a reverse proxy (nginx) not to buffer the stream: each event must leave as it is
    // written (docs/deploy-proxy.md).
    headers.insert(
        hyper::header::HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    headers.insert(
        hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    response
}
