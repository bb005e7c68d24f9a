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

use hearth_sync::{AuthState, Effects, Request};
use hyper::header::HeaderValue;
use hyper::Response;

pub use body::StreamBody;
pub use stream::StreamHandle;

use crate::edge::http_body::HearthBody;
use crate::owner::effects::route_effects;
use crate::owner::sessions;
use crate::rest::execute::reply_error;
use crate::rest::{DataRequest, RestResponse, MAX_REST_RESPONSE_BYTES};
use crate::shard::Shard;
use crate::time::now_ms;

/// The tag of a stream's filtered listen. A stream holds exactly one listen, so any constant
/// will do; the engine needs a tag to tell filtered listens apart.
const STREAM_TAG: u64 = 1;

/// Opens a stream on the shard that owns its database. The first event is the `put` of the
/// whole current value (or query result) at the stream's path. The listen is checked against
/// the database's rules like a WebSocket listen; when the rules later stop allowing it, the
/// engine revokes it and the stream ends with a `cancel` event.
pub fn open_stream(
    shard: &Rc<Shard>,
    namespace: &str,
    auth: AuthState,
    auth_expires_at: Option<u64>,
    request: &DataRequest,
) -> Result<Response<HearthBody>, RestResponse> {
    let path = request.target.path.clone();
    let current_bytes = shard
        .databases
        .borrow()
        .get(namespace)
        .map_or(0, |database| database.root().get(&path).estimated_bytes());
    if current_bytes > MAX_REST_RESPONSE_BYTES {
        return Err(RestResponse::error(
            400,
            "Data requested exceeds the maximum size that can be accessed with a single request.",
        ));
    }
    let query = request
        .query
        .as_ref()
        .map(|query| query.params.clone())
        .unwrap_or_default();
    let tag = query.is_filtered().then_some(STREAM_TAG);
    let id = shard.next_conn_id();
    let handle = Rc::new(
        StreamHandle::new(
            id,
            namespace.to_owned(),
            path.clone(),
            request.style.export,
            shard.tagger(namespace),
        )
        .counted_in(shard.config.http.clone()),
    );
    shard.streams.borrow_mut().insert(id, handle.clone());
    shard.stats.borrow_mut().streams_opened += 1;
    // A credential that expires ends the stream with `auth_revoked` when it does; the client
    // then reconnects with a fresh one. (Development credentials never expire.)
    let expires_in = auth_expires_at
        .map(|at| Duration::from_millis(at.saturating_mul(1000).saturating_sub(now_ms())));
    // From here on, dropping the body ends the session.
    let owner = shard.clone();
    let body = StreamBody::new(
        handle.clone(),
        Box::new(move |handle: &StreamHandle| sessions::close_stream(&owner, handle)),
        shard.config.sse_keep_alive,
        expires_in,
    );
    let mut effects = Effects::new();
    let reply = {
        let mut databases = shard.databases.borrow_mut();
        let database = shard.database(&mut databases, namespace);
        database.connect(id);
        database.set_auth(id, auth, now_ms(), &mut effects);
        let listen = Request::Listen {
            path,
            query,
            query_wire: None,
            tag,
            hash: None,
        };
        database.handle(id, listen, now_ms(), &mut effects)
    };
    route_effects(shard, namespace, effects);
    if !reply.is_ok() {
        // Dropping the body ends the session.
        drop(body);
        return Err(reply_error(reply));
    }
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
    headers.insert(
        hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    Ok(response)
}
