//! REST event streams (spec §15.6): `GET <path>.json` with `Accept: text/event-stream`.
//!
//! A stream is a session of its database, exactly like a WebSocket connection: it connects,
//! listens at its path (with the request's query, as a tagged listen when it filters) and is
//! disconnected when the client goes away. Its pushes therefore come from the same views as
//! WebSocket listens. `route_effects` hands each push to [`SseFanout`], which serializes the
//! data once per push and gives every stream the same bytes; only the short event head, whose
//! path is relative to the stream's location, is made once per distinct stream path.

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use hearth_sync::{AuthState, ConnId, Effects, Push, Request};
use hearth_tree::Path;
use hearth_wire::{
    encode_sse_payload, SSE_AUTH_REVOKED, SSE_CANCEL, SSE_EVENT_END, SSE_KEEP_ALIVE,
};
use hyper::body::{Body, Frame};
use hyper::header::HeaderValue;
use hyper::Response;
use tokio::time::Sleep;

use crate::budget::SharedBudgets;
use crate::dispatch::route_effects;
use crate::http_body::HearthBody;
use crate::http_unsent::ConnUnsent;
use crate::persist::{HeldQueue, Pushed, Tagger};
use crate::rest::{reply_error, DataRequest, RestResponse, MAX_REST_RESPONSE_BYTES};
use crate::shard::Shard;
use crate::time::now_ms;

/// The tag of a stream's filtered listen. A stream holds exactly one listen, so any constant
/// will do; the engine needs a tag to tell filtered listens apart.
const STREAM_TAG: u64 = 1;

/// The shard's handle on one open event stream.
pub struct StreamHandle {
    pub id: ConnId,
    pub namespace: String,
    /// The stream's location: event paths are relative to it.
    pub path: Path,
    /// `format=export`: data keeps its priorities.
    pub export: bool,
    /// Chunks with their durability tags (see `persist::gate`).
    queue: HeldQueue<Bytes>,
    /// The server's answer budget, which the queued chunks are counted in (see
    /// `http_unsent`); `None` in tests of the queue alone.
    budgets: Option<SharedBudgets>,
    waker: RefCell<Option<Waker>>,
    closing: Cell<bool>,
}

impl StreamHandle {
    pub fn new(
        id: ConnId,
        namespace: String,
        path: Path,
        export: bool,
        tagger: Tagger,
    ) -> StreamHandle {
        StreamHandle {
            id,
            namespace,
            path,
            export,
            queue: HeldQueue::new(id, tagger),
            waker: RefCell::new(None),
            closing: Cell::new(false),
            budgets: None,
        }
    }

    /// Counts the stream's unsent chunks in the server's answer budget, like REST answers.
    pub fn counted_in(mut self, budgets: SharedBudgets) -> StreamHandle {
        self.budgets = Some(budgets);
        self
    }

    /// Queues the chunks of one event. A client that reads slower than its events arrive is
    /// cut off at [`crate::outbound::MAX_OUTBOUND_BYTES`], as WebSocket clients are, and a
    /// stream whose event does not fit in the server's answer budget is ended; the client
    /// reconnects and starts again from a fresh `put`.
    pub fn send(&self, chunks: &[Bytes]) {
        if self.closing.get() {
            return;
        }
        let bytes: usize = chunks.iter().map(Bytes::len).sum();
        if let Some(budgets) = &self.budgets {
            if !budgets.answers.try_take(bytes) {
                self.close();
                return;
            }
        }
        let queued = self.queue.bytes();
        match self.queue.push(chunks) {
            Pushed::Ready => self.wake(),
            Pushed::Held => {}
            Pushed::Overflow => {
                self.give_back(queued + bytes);
                self.close();
            }
        }
    }

    fn give_back(&self, bytes: usize) {
        if let Some(budgets) = &self.budgets {
            budgets.answers.give_back(bytes);
        }
    }

    /// The disk caught up: held events may be ready.
    pub fn wake_after_disk(&self) {
        self.queue.woken();
        self.wake();
    }

    /// Drops the events that wait for writes that will never be durable (the log failed).
    pub fn discard_held(&self) {
        let queued = self.queue.bytes();
        self.queue.discard_held();
        self.give_back(queued - self.queue.bytes());
    }

    /// Whether nothing is left to send.
    fn is_drained(&self) -> bool {
        self.queue.is_empty()
    }

    /// RULES HOOK target: the stream's read permission was withdrawn. Sends `cancel` and ends
    /// the stream. (`route_effects` calls this for an `Effect::Cancel` aimed at the stream.)
    pub fn cancel(&self) {
        self.send(&[Bytes::from_static(SSE_CANCEL)]);
        self.close();
    }

    /// The stream's credential expired or was revoked: sends `auth_revoked` and ends the
    /// stream; the client reconnects with a fresh credential.
    pub fn revoke_auth(&self) {
        self.send(&[Bytes::from_static(SSE_AUTH_REVOKED)]);
        self.close();
    }

    /// Ends the stream once what is queued has been sent.
    pub fn close(&self) {
        self.closing.set(true);
        self.wake();
    }

    pub fn is_closing(&self) -> bool {
        self.closing.get()
    }

    fn wake(&self) {
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    /// The next chunk, if its write is durable.
    fn pop(&self) -> Option<Bytes> {
        self.queue.pop_ready()
    }
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        self.give_back(self.queue.bytes());
    }
}

/// The response body of a stream: the queued events, and a keep-alive event every period.
/// Dropping it (the client went away, or the stream ended) ends the session.
pub struct StreamBody {
    shard: Rc<Shard>,
    handle: Rc<StreamHandle>,
    keep_alive: Pin<Box<Sleep>>,
    period: Duration,
    /// Fires when the stream's credential expires.
    expiry: Option<Pin<Box<Sleep>>>,
    /// The connection that counts the chunks handed to hyper until the socket takes them.
    unsent: Option<Rc<ConnUnsent>>,
}

impl StreamBody {
    fn new(
        shard: Rc<Shard>,
        handle: Rc<StreamHandle>,
        period: Duration,
        expires_in: Option<Duration>,
    ) -> StreamBody {
        StreamBody {
            shard,
            handle,
            keep_alive: Box::pin(tokio::time::sleep(period)),
            period,
            expiry: expires_in.map(|wait| Box::pin(tokio::time::sleep(wait))),
            unsent: None,
        }
    }
}

impl StreamBody {
    /// Counts the chunks this stream hands to hyper on the connection's unsent bytes.
    pub fn count_on(&mut self, unsent: Rc<ConnUnsent>) {
        self.unsent = Some(unsent);
    }

    /// The next chunk; its bytes stay counted until the socket has written them.
    fn pop(&self) -> Option<Bytes> {
        let chunk = self.handle.pop()?;
        match &self.unsent {
            Some(unsent) if self.handle.budgets.is_some() => unsent.adopt(chunk.len()),
            _ => self.handle.give_back(chunk.len()),
        }
        Some(chunk)
    }
}

impl Body for StreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(chunk) = this.pop() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        // A closing stream ends once everything it may still send is sent; chunks held for
        // the disk are waited for (the log failing discards them).
        if this.handle.is_closing() && this.handle.is_drained() {
            return Poll::Ready(None);
        }
        if let Some(expiry) = &mut this.expiry {
            if expiry.as_mut().poll(cx).is_ready() {
                this.expiry = None;
                this.handle.revoke_auth();
                return match this.pop() {
                    Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                    None => Poll::Ready(None),
                };
            }
        }
        if this.keep_alive.as_mut().poll(cx).is_ready() {
            let next = tokio::time::Instant::now() + this.period;
            this.keep_alive.as_mut().reset(next);
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(SSE_KEEP_ALIVE)))));
        }
        *this.handle.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        false
    }
}

impl Drop for StreamBody {
    fn drop(&mut self) {
        self.shard.close_stream(&self.handle);
    }
}

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
    let body = StreamBody::new(
        shard.clone(),
        handle.clone(),
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

/// The stream side of delivering one push: the data is serialized at most once per form
/// (plain, export) and each distinct stream path gets its own event head once; every stream
/// then receives shared, reference-counted chunks.
pub struct SseFanout<'a> {
    push: &'a Push,
    data: [Option<Bytes>; 2],
    heads: Vec<(Path, bool, Option<Bytes>)>,
}

impl<'a> SseFanout<'a> {
    pub fn new(push: &'a Push) -> SseFanout<'a> {
        SseFanout {
            push,
            data: [None, None],
            heads: Vec::new(),
        }
    }

    /// Queues the push on `stream`.
    pub fn deliver(&mut self, stream: &StreamHandle) {
        let form = usize::from(stream.export);
        if self.data[form].is_none() {
            let payload = encode_sse_payload(self.push, stream.export);
            self.data[form] = Some(Bytes::from(payload.data));
        }
        let head = match self
            .heads
            .iter()
            .find(|(path, export, _)| *export == stream.export && *path == stream.path)
        {
            Some((_, _, head)) => head.clone(),
            None => {
                let head =
                    self.push.path.strip_prefix(&stream.path).map(|relative| {
                        Bytes::from(hearth_wire::event_head(self.kind(), &relative))
                    });
                self.heads
                    .push((stream.path.clone(), stream.export, head.clone()));
                head
            }
        };
        let (Some(head), Some(data)) = (head, self.data[form].clone()) else {
            return;
        };
        stream.send(&[head, data, Bytes::from_static(SSE_EVENT_END)]);
    }

    fn kind(&self) -> hearth_wire::SseKind {
        match self.push.data {
            hearth_sync::PushData::Put(_) => hearth_wire::SseKind::Put,
            hearth_sync::PushData::Merge(_) => hearth_wire::SseKind::Patch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_sync::PushData;
    use hearth_tree::Node;
    use serde_json::json;

    fn drain(handle: &StreamHandle) -> String {
        let mut out = Vec::new();
        while let Some(chunk) = handle.pop() {
            out.extend_from_slice(&chunk);
        }
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn fanout_shares_the_data_bytes() {
        let push = Push {
            path: Path::parse("/a/b").expect("valid"),
            data: PushData::Put(Node::from_json(&json!({"c": 1})).expect("valid")),
        };
        let root = StreamHandle::new(1, "ns".into(), Path::root(), false, Tagger::open());
        let at_a = StreamHandle::new(
            2,
            "ns".into(),
            Path::parse("/a").expect("valid"),
            false,
            Tagger::open(),
        );
        let also_root = StreamHandle::new(3, "ns".into(), Path::root(), false, Tagger::open());
        let mut fanout = SseFanout::new(&push);
        fanout.deliver(&root);
        fanout.deliver(&at_a);
        fanout.deliver(&also_root);
        let shared = |handle: &StreamHandle| handle.queue.peek(1).map(|chunk| chunk.as_ptr());
        assert_eq!(shared(&root), shared(&at_a));
        assert_eq!(fanout.heads.len(), 2);
        assert_eq!(
            drain(&root),
            "event: put\ndata: {\"path\":\"/a/b\",\"data\":{\"c\":1}}\n\n"
        );
        assert_eq!(
            drain(&at_a),
            "event: put\ndata: {\"path\":\"/b\",\"data\":{\"c\":1}}\n\n"
        );
    }

    #[test]
    fn cancel_and_revoke_end_the_stream() {
        let handle = StreamHandle::new(1, "ns".into(), Path::root(), false, Tagger::open());
        handle.cancel();
        assert!(handle.is_closing());
        assert_eq!(drain(&handle), "event: cancel\ndata: null\n\n");
        handle.send(&[Bytes::from_static(b"late")]);
        assert_eq!(drain(&handle), "");
        let revoked = StreamHandle::new(2, "ns".into(), Path::root(), false, Tagger::open());
        revoked.revoke_auth();
        assert_eq!(
            drain(&revoked),
            "event: auth_revoked\ndata: credential is no longer valid\n\n"
        );
    }

    #[test]
    fn queued_chunks_are_counted_in_the_answer_budget() {
        let budgets = crate::budget::HttpBudgets::for_answers(100);
        let handle = StreamHandle::new(1, "ns".into(), Path::root(), false, Tagger::open())
            .counted_in(budgets.clone());
        handle.send(&[Bytes::from(vec![b'x'; 60])]);
        assert_eq!(budgets.answers.used(), 60);
        handle.send(&[Bytes::from(vec![b'y'; 50])]);
        assert!(
            handle.is_closing(),
            "an event past the budget ends the stream"
        );
        assert_eq!(budgets.answers.used(), 60);
        drop(handle);
        assert_eq!(
            budgets.answers.used(),
            0,
            "a dropped stream gives its queue back"
        );
        let roomy = crate::budget::HttpBudgets::for_answers(usize::MAX);
        let overflowing = StreamHandle::new(2, "ns".into(), Path::root(), false, Tagger::open())
            .counted_in(roomy.clone());
        let big = Bytes::from(vec![b'x'; crate::outbound::MAX_OUTBOUND_BYTES]);
        overflowing.send(&[Bytes::from(vec![b'x'; 60])]);
        overflowing.send(&[big]);
        assert!(overflowing.is_closing());
        assert_eq!(
            roomy.answers.used(),
            0,
            "an overflowing queue gives its bytes back"
        );
    }

    #[test]
    fn slow_streams_are_cut_off() {
        let handle = StreamHandle::new(1, "ns".into(), Path::root(), false, Tagger::open());
        let big = Bytes::from(vec![b'x'; 1024 * 1024]);
        for _ in 0..=(crate::outbound::MAX_OUTBOUND_BYTES / big.len()) {
            handle.send(std::slice::from_ref(&big));
        }
        assert!(handle.is_closing());
        assert_eq!(drain(&handle), "");
    }
}
