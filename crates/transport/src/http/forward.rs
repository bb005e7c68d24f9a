//! REST requests and event streams for a database another node of the cluster owns: they
//! cross the node link (`peer::forward`) with their head as this node received it, and the
//! owner node answers them as if they had arrived there. This node has checked the request's
//! form and read its body within its limits; the owner checks its credential and rules.

use std::rc::Rc;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};
use tokio::sync::oneshot;

use crate::front::Front;
use crate::sse::hold_remote_stream;
use hearth_edge::event_stream::StreamHandle;
use hearth_edge::http_body::HearthBody;
use hearth_ground::rest::{DataRequest, PeerAddress, RestRequest, RestResponse};
use hearth_peer::codec::RequestHead;
use hearth_peer::{Forward, RemoteAnswer};

/// The answer when the owner node's link is down, or was lost before the answer came.
const OWNER_UNREACHABLE: &str = "the node that owns the database is unreachable";

/// The answer to a request head too large to cross (the link's limits are above the edge's
/// own, so only a misconfiguration gets here).
const HEAD_TOO_LARGE: &str = "the request head is too large to forward";

/// Sends a REST request to node `node`, which owns its database, and answers with what it
/// answered.
pub async fn forward_rest(
    front: &Front,
    node: usize,
    parts: &Parts,
    body: Option<Vec<u8>>,
) -> Response<HearthBody> {
    let Some(nodes) = front.nodes() else {
        return RestResponse::error(503, OWNER_UNREACHABLE).into_http();
    };
    let head = head_of(parts);
    if !head.fits() {
        return RestResponse::error(431, HEAD_TOO_LARGE).into_http();
    }
    front.counters().rest_forwarded();
    let (reply, answer) = oneshot::channel();
    let body = body.map(Bytes::from).unwrap_or_default();
    nodes.forward(node, Forward::Rest { head, body, reply });
    match answer.await {
        Ok(answer) => into_http(answer),
        Err(_) => RestResponse::error(503, OWNER_UNREACHABLE).into_http(),
    }
}

/// Opens an event stream whose session is on node `node`: its events
/// come back in the owner's batches, to a queue held here until the stream ends on either
/// side, or the link is lost.
pub async fn forward_stream(
    front: &Rc<Front>,
    node: usize,
    parts: &Parts,
    parsed: &RestRequest,
    request: &DataRequest,
) -> Response<HearthBody> {
    let Some(nodes) = front.nodes().cloned() else {
        return RestResponse::error(503, OWNER_UNREACHABLE).into_http();
    };
    let head = head_of(parts);
    if !head.fits() {
        return RestResponse::error(431, HEAD_TOO_LARGE).into_http();
    }
    let edge = front.clone();
    let closing = nodes.clone();
    // From here on, dropping the body ends the session on the owner node. The end goes on
    // the same queue as the opening, so that it never overtakes it.
    let release = Box::new(move |queue: &StreamHandle| {
        edge.edge().forget(queue.id);
        closing.forward(node, Forward::StreamClosed { conn: queue.id });
    });
    let (conn, body) = hold_remote_stream(front, parsed, request, release);
    let (opened, answer) = oneshot::channel();
    let namespace = parsed.namespace.as_str().into();
    nodes.forward(
        node,
        Forward::Stream {
            conn,
            namespace,
            head,
            opened,
        },
    );
    match answer.await {
        Ok(Ok(())) => crate::sse::response(body),
        Ok(Err(refusal)) => into_http(refusal),
        Err(_) => RestResponse::error(503, OWNER_UNREACHABLE).into_http(),
    }
}

/// The head as the owner node needs it to parse the request: method, path and query, every
/// header with a text value (the parser reads no other), and the client's address.
fn head_of(parts: &Parts) -> RequestHead {
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |target| target.to_string());
    let headers = parts
        .headers
        .iter()
        .filter_map(|(name, value)| {
            let value = value.to_str().ok()?;
            Some((name.as_str().to_owned(), value.to_owned()))
        })
        .collect();
    RequestHead {
        method: parts.method.as_str().to_owned(),
        target,
        headers,
        address: PeerAddress::of(parts),
    }
}

/// The owner's answer as this node's HTTP response: its status, headers and body.
fn into_http(answer: RemoteAnswer) -> Response<HearthBody> {
    let mut response = Response::new(HearthBody::from(answer.body));
    *response.status_mut() =
        StatusCode::from_u16(answer.head.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    for (name, value) in answer.head.headers {
        // The owner wrote valid headers; one that still is not is left out.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            headers.append(name, value);
        }
    }
    response
}
