//! REST event streams (spec §15.6): `GET <path>.json` with `Accept: text/event-stream`.
//!
//! A stream is a session of its database, exactly like a WebSocket connection: it connects,
//! listens at its path (with the request's query, as a tagged listen when it filters) and is
//! disconnected when the client goes away. Its pushes therefore come from the same views as
//! WebSocket listens. `route_effects` hands each push to `SseFanout`, which serializes the
//! data once per push and gives every stream the same bytes; only the short event head, whose
//! path is relative to the stream's location, is made once per distinct stream path.

use std::rc::Rc;
use std::time::Duration;

use hearth_sync::{AuthState, ConnId};
use hyper::header::HeaderValue;
use hyper::Response;
use tokio::sync::oneshot;

use crate::front::Front;
use hearth_edge::event_stream::StreamHandle;
use hearth_edge::http_body::stream_body::{OnEnd, StreamBody};
use hearth_edge::http_body::HearthBody;
use hearth_edge::EdgeTarget;
use hearth_ground::cross_core::ToOwner;
use hearth_ground::rest::{DataRequest, RestRequest, RestResponse};
use hearth_net::time::now_ms;
use hearth_owner::sessions;
use hearth_owner::streams::{new_handle, start};
use hearth_persist::Tagger;

/// Opens a stream whose database this shard owns, for an HTTP connection on this shard. The
/// first event is the `put` of the whole current value (or query result) at the stream's
/// path. The listen is checked against the database's rules like a WebSocket listen; when the
/// rules later stop allowing it, the engine revokes it and the stream ends with a `cancel`
/// event.
pub fn open_stream(
    front: &Rc<Front>,
    namespace: &str,
    auth: AuthState,
    auth_expires_at: Option<u64>,
    request: &DataRequest,
) -> Result<Response<HearthBody>, RestResponse> {
    let id = front.next_conn_id();
    let handle =
        new_handle(front.owner(), id, namespace, request)?.counted_in(front.config().http.clone());
    let handle = Rc::new(handle);
    // From here on, dropping the body ends the session.
    let owner = front.owner().clone();
    let body = StreamBody::new(
        handle.clone(),
        Box::new(move |handle: &StreamHandle| sessions::close_stream(&owner, handle)),
        front.config().sse_keep_alive,
        expires_in(auth_expires_at),
    );
    start(front.owner(), handle, auth, request)?;
    Ok(response(body))
}

/// Opens a stream whose database another shard owns, for an HTTP connection on this shard:
/// the owner opens the session, and its events arrive here in its batches.
pub async fn open_remote_stream(
    front: &Rc<Front>,
    owner: usize,
    parsed: &RestRequest,
    request: &DataRequest,
) -> Result<Response<HearthBody>, RestResponse> {
    let edge = front.clone();
    // From here on, dropping the body ends the session (the owner is told).
    let (id, body) = hold_remote_stream(
        front,
        parsed,
        request,
        Box::new(move |queue: &StreamHandle| edge.release_connection(queue.id, owner)),
    );
    let (opened, answer) = oneshot::channel();
    front.send_to_owner(
        owner,
        ToOwner::OpenStream {
            conn: id,
            edge: front.index(),
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
    front: &Rc<Front>,
    parsed: &RestRequest,
    request: &DataRequest,
    release: OnEnd,
) -> (ConnId, StreamBody) {
    let id = front.next_conn_id();
    // No gate here: the owner sends only what is durable.
    let queue = StreamHandle::new(
        id,
        parsed.namespace.clone(),
        request.target.path.clone(),
        request.style.export,
        Tagger::open(),
    )
    .counted_in(front.config().http.clone())
    .counted_by(front.counters().clone());
    let queue = Rc::new(queue);
    front.edge().hold(id, EdgeTarget::Stream(queue.clone()));
    let body = StreamBody::new(
        queue,
        release,
        front.config().sse_keep_alive,
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
