//! REST requests and event streams across the node link. The edge node sends a request's head
//! as it received it and its body (read within the REST limits there); the owner node parses
//! the head with its own settings, so that it checks the credential and the rules itself, runs
//! the call on the shard that owns the database, and sends back the answer's status, headers
//! and body as it would have written them. An event stream opens as a session of the owner
//! like a WebSocket's, and its events come back in the owner's batches.
//!
//! Bodies cross in frames of at most [`MAX_CHUNK_BYTES`], the transfers on their way taking
//! turns with each other and with the link's other messages ([`Outbox`]), so that a large
//! request or answer delays the sessions' traffic by one frame at a time, not by its size.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use hearth_sync::ConnId;
use hyper::http::request::Parts;
use tokio::sync::{mpsc, oneshot};

use crate::codec::{LinkMessage, RequestHead, MAX_CHUNK_BYTES};
use crate::context::{unreachable_owner, Awaited, Context, Forward, RemoteAnswer, Reply};
use crate::nodes::remote_conn;
use hearth_ground::cross_core::ToOwner;
use hearth_ground::inbox::{Forwarded, ShardMessage};
use hearth_ground::namespace::owner_shard;
use hearth_ground::rest::{
    audit_api, build_call, parse_request, Endpoint, PeerAddress, RestResponse,
};

/// The most REST requests one node may have waiting for another's answers at once; past it,
/// the edge node answers `503` at once (and the owner drops a link whose peer sends more).
pub const MAX_FORWARDED_REQUESTS: usize = 1024;

/// The most bytes of one forwarded request's or answer's body: a bound against a broken peer,
/// above the REST limits (256 MiB for a body, and for an answer by the tree's estimate, which
/// a pretty-printed answer may pass). An owner answer past it is replaced by a `500`.
pub const MAX_FORWARDED_BODY_BYTES: usize = 512 * 1024 * 1024;

/// Why the owner could not answer: the request crossed, but no answer fits the link.
const ANSWER_TOO_LARGE: &str = "the answer is too large to cross between the nodes";

// --- The edge node's side: what its shards forward, and the answers that come back. ---

/// Takes a local shard's request for the peer while the link is up: registers who waits for
/// the answer and queues what crosses.
pub fn send(ctx: &Context, forward: Forward, out: &mut BytesMut, outbox: &mut Outbox) {
    let mut state = ctx.state.borrow_mut();
    match forward {
        Forward::Rest { head, body, reply } => {
            if state.requests.len() >= MAX_FORWARDED_REQUESTS {
                let busy = "too many requests wait for the node that owns the database";
                let _ = reply.send(RemoteAnswer::from_rest(RestResponse::error(503, busy)));
                return;
            }
            let id = state.next_request;
            state.next_request += 1;
            let awaited = Awaited {
                reply,
                head: None,
                body: BytesMut::new(),
            };
            state.requests.insert(id, awaited);
            outbox.queue.push_back(Transfer {
                id,
                start: Some(Start::Request(head)),
                body,
            });
        }
        Forward::Stream {
            conn,
            namespace,
            head,
            opened,
        } => {
            state.opened.insert(conn, namespace);
            state.streams.insert(conn, opened);
            LinkMessage::StreamRequest { conn, head }.encode(out);
        }
        Forward::StreamClosed { conn } => {
            if state.opened.remove(&conn).is_some() {
                state.streams.remove(&conn);
                LinkMessage::Closed { conn }.encode(out);
            }
        }
    }
}

/// Answers a local shard's request for the peer while the link is down.
pub fn refuse(forward: Forward) {
    match forward {
        Forward::Rest { reply, .. } => {
            let _ = reply.send(RemoteAnswer::from_rest(unreachable_owner()));
        }
        Forward::Stream { opened, .. } => {
            let _ = opened.send(Err(RemoteAnswer::from_rest(unreachable_owner())));
        }
        Forward::StreamClosed { .. } => {}
    }
}

/// A part of the answer to request `id`: the first carries its head. The error says how the
/// peer broke the protocol.
pub fn on_answer(
    ctx: &Context,
    id: u64,
    head: Option<crate::codec::AnswerHead>,
    body: Bytes,
    more: bool,
) -> Result<(), String> {
    let mut state = ctx.state.borrow_mut();
    let Some(awaited) = state.requests.get_mut(&id) else {
        return Err(format!("an answer to request {id}, which was not sent"));
    };
    match (head, awaited.head.is_some()) {
        (Some(head), false) => awaited.head = Some(head),
        (None, true) => {}
        _ => return Err(format!("the answer to request {id} is out of order")),
    }
    if awaited.body.len() + body.len() > MAX_FORWARDED_BODY_BYTES {
        return Err(format!("the answer to request {id} is too large"));
    }
    awaited.body.extend_from_slice(&body);
    if !more {
        if let Some(awaited) = state.requests.remove(&id) {
            let answer = RemoteAnswer {
                head: awaited.head.unwrap_or_default(),
                body: awaited.body.freeze(),
            };
            // The client may have gone: nobody waits any more.
            let _ = awaited.reply.send(answer);
        }
    }
    Ok(())
}

/// The peer opened the stream of `conn`, or refused it.
pub fn on_stream_opened(ctx: &Context, conn: ConnId, refusal: Option<RemoteAnswer>) {
    // A stream that ended here before its answer came is no longer waited for.
    if let Some(opened) = ctx.state.borrow_mut().streams.remove(&conn) {
        let _ = opened.send(refusal.map_or(Ok(()), Err));
    }
}

// --- The owner node's side: serving what the peer forwards. ---

/// The head of the peer's request `id` and the first part of its body.
pub fn on_request(
    ctx: &Rc<Context>,
    id: u64,
    head: RequestHead,
    body: Bytes,
    more: bool,
    replies: &mpsc::UnboundedSender<Reply>,
) -> Result<(), String> {
    {
        let mut state = ctx.state.borrow_mut();
        if state.serving >= MAX_FORWARDED_REQUESTS {
            return Err("the peer forwarded too many requests at once".into());
        }
        if state.arriving.contains_key(&id) {
            return Err(format!("request {id} was sent twice"));
        }
        state.serving += 1;
        if more {
            state.arriving.insert(id, (head, BytesMut::from(&body[..])));
            return Ok(());
        }
    }
    serve(ctx, id, head, body, replies);
    Ok(())
}

/// More of the body of the peer's request `id`.
pub fn on_request_more(
    ctx: &Rc<Context>,
    id: u64,
    body: Bytes,
    more: bool,
    replies: &mpsc::UnboundedSender<Reply>,
) -> Result<(), String> {
    let whole = {
        let mut state = ctx.state.borrow_mut();
        let Some((_, arrived)) = state.arriving.get_mut(&id) else {
            return Err(format!("more of request {id}, which was not started"));
        };
        if arrived.len() + body.len() > MAX_FORWARDED_BODY_BYTES {
            return Err(format!("request {id} is too large"));
        }
        arrived.extend_from_slice(&body);
        if more {
            return Ok(());
        }
        state.arriving.remove(&id)
    };
    if let Some((head, body)) = whole {
        serve(ctx, id, head, body.freeze(), replies);
    }
    Ok(())
}

/// Answers the peer's request `id` once its shard did, through the writer.
fn serve(
    ctx: &Rc<Context>,
    id: u64,
    head: RequestHead,
    body: Bytes,
    replies: &mpsc::UnboundedSender<Reply>,
) {
    let ctx = ctx.clone();
    let replies = replies.clone();
    tokio::task::spawn_local(async move {
        let answer = answer(&ctx, head, body).await;
        // A link lost meanwhile took the request with it.
        let _ = replies.send(Reply::Answer { id, answer });
    });
}

/// The answer this node gives the request, as if it had arrived here.
async fn answer(ctx: &Context, head: RequestHead, body: Bytes) -> RemoteAnswer {
    let started = Instant::now();
    let response = match call(ctx, &head, body, started).await {
        Ok(response) | Err(response) => response,
    };
    let answer = RemoteAnswer::from_rest(response);
    if answer.body.len() > MAX_FORWARDED_BODY_BYTES || !answer.head.fits() {
        return RemoteAnswer::from_rest(RestResponse::error(500, ANSWER_TOO_LARGE));
    }
    answer
}

/// Parses and runs a forwarded request on the shard that owns its database, within its
/// `timeout` counted from its arrival here (the edge counts its own, from its arrival there).
async fn call(
    ctx: &Context,
    head: &RequestHead,
    body: Bytes,
    started: Instant,
) -> Result<RestResponse, RestResponse> {
    let parts = parts_of(head)?;
    let parsed = parse_request(&parts, &ctx.rest.auth, &ctx.rest.default_namespace)?;
    // The audit trail is this node's (the database's owner's) files, not a shard's call.
    let trail = ctx.rest.audit.as_ref();
    if let Some(answer) = audit_api::answer(trail, &parsed.namespace, &parsed.endpoint).await {
        return Ok(answer);
    }
    if matches!(&parsed.endpoint, Endpoint::Data(data) if data.stream) {
        return Err(RestResponse::error(
            400,
            "an event stream was sent as a request",
        ));
    }
    // The edge read the body within the same limit; a peer that did not is refused as a
    // client would be.
    let bytes = match parsed.endpoint.body_limit() {
        Some(limit) if body.len() > limit => {
            return Err(RestResponse::error(413, "the request body is too large"))
        }
        Some(_) => Some(Vec::from(body)),
        None => None,
    };
    let timeout = parsed.read_timeout();
    let shard = owner_shard(&parsed.namespace, ctx.owners.len());
    let work = async {
        let call = build_call(parsed, bytes, started).await?;
        let (reply, answer) = oneshot::channel();
        if let Some(owner) = ctx.owners.get(shard) {
            let _ = owner.send(ShardMessage::Rest(Box::new(Forwarded { call, reply })));
        }
        Ok(answer
            .await
            .unwrap_or_else(|_| RestResponse::error(503, "the database's shard is unavailable")))
    };
    match timeout {
        Some(timeout) => {
            let due = tokio::time::Instant::from_std(started + timeout);
            tokio::time::timeout_at(due, work)
                .await
                .unwrap_or_else(|_| Ok(RestResponse::timed_out(timeout)))
        }
        None => work.await,
    }
}

/// The peer forwarded an event stream's request on its connection `conn`: parsed here as one
/// of ours, its session opens on the shard that owns the database, with the peer as that
/// shard's edge, like a WebSocket session.
pub fn on_stream_request(
    ctx: &Context,
    conn: ConnId,
    head: RequestHead,
    replies: &mpsc::UnboundedSender<Reply>,
) {
    let refuse = |response: RestResponse| {
        let refusal = Some(RemoteAnswer::from_rest(response));
        let _ = replies.send(Reply::StreamOpened { conn, refusal });
    };
    let parsed = match parts_of(&head)
        .and_then(|parts| parse_request(&parts, &ctx.rest.auth, &ctx.rest.default_namespace))
    {
        Ok(parsed) => parsed,
        Err(response) => return refuse(response),
    };
    let Endpoint::Data(request) = parsed.endpoint else {
        return refuse(RestResponse::error(400, "not an event stream"));
    };
    if !request.stream {
        return refuse(RestResponse::error(400, "not an event stream"));
    }
    let shards = ctx.owners.len();
    let shard = owner_shard(&parsed.namespace, shards);
    let Some(owner) = ctx.owners.get(shard) else {
        return refuse(unreachable_owner());
    };
    ctx.state.borrow_mut().sessions.insert(conn, shard);
    let (opened, answer) = oneshot::channel();
    let open = ToOwner::OpenStream {
        conn: remote_conn(ctx.node, conn),
        // The peer is one more edge of every local owner, after the local shards.
        edge: shards + ctx.node,
        namespace: parsed.namespace,
        auth: parsed.auth,
        request,
        opened,
    };
    let _ = owner.send(ShardMessage::Owner(open));
    let replies = replies.clone();
    tokio::task::spawn_local(async move {
        let refusal = match answer.await {
            Ok(Ok(())) => None,
            Ok(Err(response)) => Some(RemoteAnswer::from_rest(response)),
            Err(_) => Some(RemoteAnswer::from_rest(unreachable_owner())),
        };
        // A refused stream's session entry goes when the edge says it ended.
        let _ = replies.send(Reply::StreamOpened { conn, refusal });
    });
}

/// The request head as hyper would have parsed it here, with the client's address as the
/// edge node saw it.
fn parts_of(head: &RequestHead) -> Result<Parts, RestResponse> {
    let mut request = hyper::Request::builder()
        .method(head.method.as_str())
        .uri(head.target.as_str());
    for (name, value) in &head.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    if let Some(address) = head.address {
        request = request.extension(PeerAddress(address));
    }
    request
        .body(())
        .map(|request| request.into_parts().0)
        .map_err(|_| RestResponse::error(400, "the forwarded request head is malformed"))
}

// --- Both sides: the writer's transfers. ---

/// Requests (edge side) and answers (owner side) on their way out, a frame at a time, taking
/// turns.
#[derive(Default)]
pub struct Outbox {
    queue: VecDeque<Transfer>,
}

struct Transfer {
    id: u64,
    /// The head, until the first frame left; an answer's `None` body frames are `AnswerMore`.
    start: Option<Start>,
    body: Bytes,
}

enum Start {
    Request(RequestHead),
    Answer(crate::codec::AnswerHead),
    /// The head left: more of a request (`false`) or an answer (`true`).
    Left {
        answer: bool,
    },
}

impl Outbox {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queues the answer to the peer's request `id`.
    pub fn answer(&mut self, id: u64, answer: RemoteAnswer) {
        self.queue.push_back(Transfer {
            id,
            start: Some(Start::Answer(answer.head)),
            body: answer.body,
        });
    }

    /// Encodes the next frame of the transfer whose turn it is. True when that was the last
    /// frame of an answer (the request is served).
    pub fn encode_next(&mut self, out: &mut BytesMut) -> bool {
        let Some(mut transfer) = self.queue.pop_front() else {
            return false;
        };
        let body = transfer
            .body
            .split_to(transfer.body.len().min(MAX_CHUNK_BYTES));
        let more = !transfer.body.is_empty();
        let id = transfer.id;
        let (message, answer) = match transfer.start.take() {
            Some(Start::Request(head)) => (
                LinkMessage::Request {
                    id,
                    head,
                    body,
                    more,
                },
                false,
            ),
            Some(Start::Answer(head)) => (
                LinkMessage::Answer {
                    id,
                    head,
                    body,
                    more,
                },
                true,
            ),
            Some(Start::Left { answer: false }) | None => {
                (LinkMessage::RequestMore { id, body, more }, false)
            }
            Some(Start::Left { answer: true }) => {
                (LinkMessage::AnswerMore { id, body, more }, true)
            }
        };
        message.encode(out);
        if more {
            transfer.start = Some(Start::Left { answer });
            self.queue.push_back(transfer);
        }
        answer && !more
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{split_frame, AnswerHead};

    fn decode_all(out: &mut BytesMut) -> Vec<LinkMessage> {
        let mut messages = Vec::new();
        while let Some(body) = split_frame(out).expect("frame") {
            messages.push(LinkMessage::decode(body).expect("decodes"));
        }
        messages
    }

    #[test]
    fn large_transfers_take_turns_a_frame_at_a_time() {
        let mut outbox = Outbox::default();
        let big = Bytes::from(vec![b'x'; 2 * MAX_CHUNK_BYTES + 1]);
        outbox.queue.push_back(Transfer {
            id: 1,
            start: Some(Start::Request(RequestHead::default())),
            body: big.clone(),
        });
        let head = AnswerHead {
            status: 200,
            headers: Vec::new(),
        };
        let small = Bytes::from_static(b"null");
        outbox.answer(
            2,
            RemoteAnswer {
                head: head.clone(),
                body: small.clone(),
            },
        );
        let mut out = BytesMut::new();
        let mut served = Vec::new();
        while !outbox.is_empty() {
            served.push(outbox.encode_next(&mut out));
        }
        assert_eq!(served, vec![false, true, false, false]);
        let messages = decode_all(&mut out);
        let kinds: Vec<(u64, usize, bool)> = messages
            .iter()
            .map(|message| match message {
                LinkMessage::Request { id, body, more, .. }
                | LinkMessage::RequestMore { id, body, more }
                | LinkMessage::Answer { id, body, more, .. } => (*id, body.len(), *more),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        // The small answer leaves after the large request's first frame, not its last.
        assert_eq!(
            kinds,
            vec![
                (1, MAX_CHUNK_BYTES, true),
                (2, 4, false),
                (1, MAX_CHUNK_BYTES, true),
                (1, 1, false)
            ]
        );
        assert!(matches!(messages[0], LinkMessage::Request { .. }));
        assert!(matches!(messages[2], LinkMessage::RequestMore { .. }));
    }

    #[test]
    fn a_forwarded_request_keeps_its_clients_address() {
        let address = std::net::IpAddr::from([203, 0, 113, 9]);
        let head = RequestHead {
            method: "GET".into(),
            target: "/a.json?ns=demo".into(),
            headers: Vec::new(),
            address: Some(address),
        };
        let parts = parts_of(&head).expect("a valid head");
        let auth = hearth_auth::AuthConfig::development();
        let parsed = parse_request(&parts, &auth, "default").expect("a valid request");
        let Endpoint::Data(data) = parsed.endpoint else {
            panic!("not a data request");
        };
        assert_eq!(data.address, Some(address));
        let unknown = parts_of(&RequestHead {
            address: None,
            ..head
        })
        .expect("a valid head");
        assert_eq!(PeerAddress::of(&unknown), None);
    }

    #[test]
    fn a_refusal_keeps_its_status_and_headers() {
        let answer = RemoteAnswer::from_rest(
            RestResponse::error(412, "ETag mismatch").with_header("etag", "abc"),
        );
        assert_eq!(answer.head.status, 412);
        let header = |name: &str| {
            answer
                .head
                .headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("etag"), Some("abc"));
        assert!(header("content-type").is_some_and(|t| t.starts_with("application/json")));
        assert!(answer.body.starts_with(b"{"));
    }
}
