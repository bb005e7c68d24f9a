//! HTTP/1.1 on the realtime port: every connection that is not a WebSocket upgrade of `/.ws`
//! is served here by hyper, with keep-alive.
//!
//! A connection stays on the shard that accepted it (its edge), which already read its first
//! request head to tell WebSocket upgrades apart, so the bytes already read are fed back to
//! hyper first ([`Rewind`]). A request for a database another shard owns is checked here and,
//! for a write, pre-checked by the owner before its body is read; the body is read here, and
//! the call goes as plain data to the owner, whose answer comes back through a oneshot
//! channel. An event stream's session lives on the owner, and its released events come back
//! in the owner's batches for this core (`link`), to a queue that the response body drains.

mod forward;

use std::convert::Infallible;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Incoming};
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tracing::debug;

use crate::console;
use crate::front::Front;
use crate::http::forward::{forward_rest, forward_stream};
use crate::sse::{open_remote_stream, open_stream};
use hearth_edge::http_body::unsent::{ConnUnsent, WriteGuard};
use hearth_edge::http_body::{admit, busy, HearthBody};
use hearth_edge::request_body::read_body;
use hearth_ground::metrics::labels::{Channel, HttpRefusal, Outcome, RequestKind};
use hearth_ground::metrics::ShardCounters;
use hearth_ground::rest::audit_api;
use hearth_ground::rest::precheck::write_check;
use hearth_ground::rest::{
    build_call, parse_request, DataMethod, DataRequest, Endpoint, PeerAddress, RestRequest,
    RestResponse,
};
use hearth_owner::rest::execute_durable;
use hearth_owner::rest_precheck::refuse_early;

/// How long a kept-alive connection may stay idle, or a client may take to send a request
/// head, before the connection is closed.
pub const HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// hyper's read buffer per connection; request heads (after the first, which is limited by
/// `http_head::MAX_HEAD_BYTES`) must fit in it.
pub const MAX_HTTP_BUFFER_BYTES: usize = 64 * 1024;

/// The most headers one request may carry.
pub const MAX_HEADERS: usize = 64;

/// How long shutdown waits for in-flight requests of one connection.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves HTTP on a connection whose first `buffered` bytes were already read. Each request
/// carries `address`, the client's (the socket's peer), in its extensions ([`PeerAddress`]).
pub async fn serve_http<S>(front: Rc<Front>, stream: S, buffered: Vec<u8>, address: Option<IpAddr>)
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let unsent = ConnUnsent::new(front.config().http.clone());
    let io = TokioIo::new(Rewind::new(
        buffered,
        stream,
        WriteGuard::new(unsent.clone()),
        front.counters().clone(),
    ));
    let service = {
        let front = front.clone();
        service_fn(move |mut request: Request<Incoming>| {
            if let Some(address) = address {
                request.extensions_mut().insert(PeerAddress(address));
            }
            let front = front.clone();
            let unsent = unsent.clone();
            async move { Ok::<_, Infallible>(respond(front, &unsent, request).await) }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HTTP_IDLE_TIMEOUT)
        .keep_alive(true)
        .max_buf_size(MAX_HTTP_BUFFER_BYTES)
        .max_headers(MAX_HEADERS);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut shutdown = front.shutdown();
    if front.is_shutting_down() {
        return;
    }
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                debug!(%error, "HTTP connection ended with an error");
            }
        }
        _ = shutdown.changed() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection).await;
        }
    }
}

/// Answers one request. A body the answer did not need (a refused or bodiless request that
/// came with one anyway) is drained for a short while after the answer, see [`linger`]. The
/// answer is counted as unsent until the socket takes it; while the server's answer budget is
/// spent, requests are refused before any answer is computed.
async fn respond(
    front: Rc<Front>,
    unsent: &Rc<ConnUnsent>,
    request: Request<Incoming>,
) -> Response<HearthBody> {
    let (parts, body) = request.into_parts();
    // Health and metrics answer even while the answer budget is spent: a probe that failed
    // then would restart a server that only has slow clients. Their size is bounded (a
    // fixed set of series per shard, and the top lists).
    if front.endpoints().observes(parts.uri.path()) {
        if let Some(response) = front.endpoints().observe(&parts).await {
            return response.into_http();
        }
    }
    let mut body = Some(body);
    let mut kind = rest_kind(&parts.method);
    let counters = front.counters().clone();
    let response = if unsent.server_is_full() {
        counters.http_refused(HttpRefusal::AnswersBusy);
        busy()
    } else {
        let answered = answer(front, &parts, &mut body, &mut kind).await;
        let computed = answered.status();
        let admitted = admit(unsent, answered);
        // An answer replaced by the answer budget's 503 (one that was a 503 already is
        // counted under its own reason).
        if admitted.status() == StatusCode::SERVICE_UNAVAILABLE && computed != admitted.status() {
            counters.http_refused(HttpRefusal::AnswersBusy);
        }
        admitted
    };
    counters.request(kind, Outcome::of_http(response.status().as_u16()));
    if let Some(body) = body {
        let expects_continue = parts
            .headers
            .get(hyper::header::EXPECT)
            .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        // A client waiting for `100 Continue` has sent nothing yet and never will: reading
        // now would invite the very body the answer refuses.
        if !body.is_end_stream() && !expects_continue {
            linger(body);
        }
    }
    response
}

/// The kind of a request, by its method alone (before its head is parsed).
fn rest_kind(method: &Method) -> RequestKind {
    match *method {
        Method::GET | Method::HEAD => RequestKind::RestGet,
        Method::PUT => RequestKind::RestPut,
        Method::PATCH => RequestKind::RestPatch,
        Method::POST => RequestKind::RestPost,
        Method::DELETE => RequestKind::RestDelete,
        _ => RequestKind::RestOther,
    }
}

/// The kind of a parsed request (after `X-HTTP-Method-Override`).
fn parsed_kind(endpoint: &Endpoint) -> RequestKind {
    match endpoint {
        Endpoint::Status | Endpoint::Preflight { .. } => RequestKind::RestOther,
        Endpoint::RulesGet { .. }
        | Endpoint::RulesPut
        | Endpoint::Coverage { .. }
        | Endpoint::TriggersGet
        | Endpoint::TriggerRegister
        | Endpoint::Settings(_) => RequestKind::RestRules,
        Endpoint::AdminDatabases
        | Endpoint::InspectDatabases
        | Endpoint::Backup
        | Endpoint::AuditQuery(_)
        | Endpoint::Triggers(_)
        | Endpoint::AuditErase { .. } => RequestKind::RestAdmin,
        Endpoint::Data(data) if data.stream => RequestKind::RestStream,
        Endpoint::Data(data) => match data.method {
            DataMethod::Get => RequestKind::RestGet,
            DataMethod::Put => RequestKind::RestPut,
            DataMethod::Patch => RequestKind::RestPatch,
            DataMethod::Post => RequestKind::RestPost,
            DataMethod::Delete => RequestKind::RestDelete,
        },
    }
}

/// What a refusal of [`read_body`] counts as.
fn body_refusal(status: u16) -> Option<HttpRefusal> {
    match status {
        413 => Some(HttpRefusal::BodyTooLarge),
        408 => Some(HttpRefusal::BodyTooSlow),
        503 => Some(HttpRefusal::BodiesBusy),
        _ => None,
    }
}

async fn answer(
    front: Rc<Front>,
    parts: &hyper::http::request::Parts,
    body: &mut Option<Incoming>,
    kind: &mut RequestKind,
) -> Response<HearthBody> {
    let started = Instant::now();
    if let Some(response) = crate::longpoll::answer(&front, parts).await {
        // Long polls are a realtime transport, not database requests.
        *kind = RequestKind::RestOther;
        return response.into_http();
    }
    if let Some(response) = console::answer(front.config(), parts, body).await {
        // The console's files are not database requests.
        *kind = RequestKind::RestOther;
        return response;
    }
    let parsed = match parse_request(
        parts,
        &front.config().auth,
        &front.config().default_namespace,
    ) {
        Ok(parsed) => parsed,
        Err(response) => return response.into_http(),
    };
    *kind = parsed_kind(&parsed.endpoint);
    match &parsed.endpoint {
        Endpoint::Status => {
            return RestResponse::json(200, "{\"status\":\"ok\",\"server\":\"hearth\"}").into_http()
        }
        Endpoint::Preflight { request_headers } => {
            return preflight(request_headers.as_deref()).into_http()
        }
        Endpoint::AdminDatabases => {
            return crate::admin::databases(front.inboxes()).await.into_http()
        }
        Endpoint::InspectDatabases => {
            return crate::admin::inspect_databases(front.inboxes())
                .await
                .into_http()
        }
        Endpoint::Backup => return front.endpoints().backup().await,
        // This node's outbox: its files are read off the shard's thread.
        Endpoint::Triggers(endpoint) => {
            let triggers = front.config().triggers.clone();
            let endpoint = endpoint.clone();
            let declaration = match read_needed_body(&front, parts, &parsed, body).await {
                Ok(bytes) => bytes.unwrap_or_default(),
                Err(refused) => return refused,
            };
            let answered = tokio::task::spawn_blocking(move || {
                hearth_ground::rest::triggers_api::answer(
                    &triggers,
                    &endpoint,
                    &declaration,
                    hearth_net::time::now_ms(),
                )
            })
            .await;
            return match answered {
                Ok(answer) => answer.into_http(),
                Err(_) => RestResponse::error(500, "the trigger outbox failed").into_http(),
            };
        }
        _ => {}
    }
    let owner = front.owner_of(&parsed.namespace);
    // Past the local shards: another node of the cluster owns the database, and the request
    // crosses the node link (`http_forward`).
    let remote = owner.checked_sub(front.shard_count());
    // The audit trail is answered by the node that owns the database, from its files. An
    // erasure through another node erases its own copy (a follower's) too, so that running it
    // against every node reaches every copy.
    if matches!(
        parsed.endpoint,
        Endpoint::AuditQuery(_) | Endpoint::AuditErase { .. }
    ) {
        let trail = front.config().audit.trail.as_ref();
        if let Some(node) = remote {
            if let (Endpoint::AuditErase { .. }, Some(_)) = (&parsed.endpoint, trail) {
                let here = audit_api::answer(trail, &parsed.namespace, &parsed.endpoint).await;
                if let Some(refused) = here.filter(|answer| answer.status != 200) {
                    return refused.into_http();
                }
            }
            return forward_rest(&front, node, parts, None).await;
        }
        if let Some(answer) = audit_api::answer(trail, &parsed.namespace, &parsed.endpoint).await {
            return answer.into_http();
        }
    }
    if let Endpoint::Data(data) = &parsed.endpoint {
        if data.stream {
            return match remote {
                Some(node) => forward_stream(&front, node, parts, &parsed, data).await,
                None => stream(&front, owner, &parsed, data).await,
            };
        }
    }
    // Before a byte of the body is read: a write no rule could allow costs nothing more.
    // (Another node checks a write's rules once its body arrived.)
    if let Some(check) = write_check(&parsed).filter(|_| remote.is_none()) {
        let refusal = if owner == front.index() {
            refuse_early(front.owner(), &check)
        } else {
            front.inboxes().precheck(owner, check).await
        };
        if let Some(refusal) = refusal {
            return refusal.into_http();
        }
    }
    let bytes = match read_needed_body(&front, parts, &parsed, body).await {
        Ok(bytes) => bytes,
        Err(response) => return response,
    };
    let timeout = parsed.read_timeout();
    let work = run_call(&front, parts, parsed, bytes, started, owner, remote);
    // A read's `timeout` counts from its arrival, whichever shard or node owns the database:
    // the queue to the owner, the wait for earlier writes to be durable and the
    // serialization.
    match timeout {
        Some(timeout) => {
            let due = tokio::time::Instant::from_std(started + timeout);
            tokio::time::timeout_at(due, work)
                .await
                .unwrap_or_else(|_| RestResponse::timed_out(timeout).into_http())
        }
        None => work.await,
    }
}

/// Reads the request's body when its endpoint takes one, and takes `body` then; `Err` with
/// the answer that refused it (counted).
async fn read_needed_body(
    front: &Front,
    parts: &hyper::http::request::Parts,
    parsed: &RestRequest,
    body: &mut Option<Incoming>,
) -> Result<Option<Vec<u8>>, Response<HearthBody>> {
    match (parsed.endpoint.body_limit(), body.as_mut()) {
        (Some(limit), Some(incoming)) => {
            match read_body(incoming, &parts.headers, limit, &front.config().http.bodies).await {
                Ok(bytes) => {
                    *body = None;
                    Ok(Some(bytes))
                }
                Err(response) => {
                    if let Some(refusal) = body_refusal(response.status) {
                        front.counters().http_refused(refusal);
                    }
                    Err(response.into_http())
                }
            }
        }
        _ => Ok(None),
    }
}

/// Runs the call where its database is: on another node (the request as received), on this
/// shard, or on the shard that owns it; the answer.
async fn run_call(
    front: &Front,
    parts: &hyper::http::request::Parts,
    parsed: RestRequest,
    bytes: Option<Vec<u8>>,
    started: Instant,
    owner: usize,
    remote: Option<usize>,
) -> Response<HearthBody> {
    if let Some(node) = remote {
        return forward_rest(front, node, parts, bytes).await;
    }
    let call = match build_call(parsed, bytes, started).await {
        Ok(call) => call,
        Err(response) => return response.into_http(),
    };
    let response = if owner == front.index() {
        execute_durable(front.owner(), call).await
    } else {
        front
            .forward(owner, call)
            .await
            .unwrap_or_else(|_| RestResponse::error(503, "the database's shard is unavailable"))
    };
    response.into_http()
}

/// How long an unneeded request body is drained after the answer.
pub const LINGER_TIME: Duration = Duration::from_secs(2);

/// The most bytes of an unneeded request body drained after the answer.
pub const LINGER_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Reads and discards what is left of a request body for a bounded time and size, without
/// keeping any of it. A socket closed with unread input makes the kernel send a reset, which
/// can destroy the answer (a 413, say) before the client has read it; reading on for a moment
/// lets the answer arrive, as servers' "lingering close" does.
fn linger(mut body: Incoming) {
    tokio::task::spawn_local(async move {
        let drain = async {
            let mut seen = 0usize;
            while let Some(Ok(frame)) =
                std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
            {
                seen += frame.data_ref().map_or(0, Bytes::len);
                if seen > LINGER_MAX_BYTES {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(LINGER_TIME, drain).await;
    });
}

/// An event stream: its session is opened by the shard that owns the namespace, and its
/// events are written here.
async fn stream(
    front: &Rc<Front>,
    owner: usize,
    parsed: &RestRequest,
    request: &DataRequest,
) -> Response<HearthBody> {
    let opened = if owner == front.index() {
        open_stream(
            front,
            &parsed.namespace,
            parsed.auth.clone(),
            parsed.auth_expires_at,
            request,
        )
    } else {
        open_remote_stream(front, owner, parsed, request).await
    };
    match opened {
        Ok(response) => response,
        Err(response) => response.into_http(),
    }
}

fn preflight(request_headers: Option<&str>) -> RestResponse {
    let allowed_headers = request_headers
        .filter(|headers| HeaderValue::from_str(headers).is_ok())
        .unwrap_or("Authorization, Content-Type, X-Firebase-ETag, If-Match, If-None-Match, X-HTTP-Method-Override");
    RestResponse::empty(204)
        .with_header(
            "access-control-allow-methods",
            hearth_ground::rest::DATA_METHODS.to_owned(),
        )
        .with_header("access-control-allow-headers", allowed_headers.to_owned())
        .with_header("access-control-max-age", "3600")
}

/// A socket whose first bytes were already read: they are returned first, then reading goes
/// on from the socket.
/// Its writes go through a [`WriteGuard`]: they give counted answer bytes back, and fail
/// when the client read nothing for the write timeout.
pub struct Rewind<S> {
    prefix: Bytes,
    inner: S,
    guard: WriteGuard,
    /// The shard's counters, which count the bytes written.
    counters: Rc<ShardCounters>,
}

impl<S> Rewind<S> {
    pub fn new(
        prefix: Vec<u8>,
        inner: S,
        guard: WriteGuard,
        counters: Rc<ShardCounters>,
    ) -> Rewind<S> {
        Rewind {
            prefix: Bytes::from(prefix),
            inner,
            guard,
            counters,
        }
    }

    fn count(&self, result: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(written)) = &result {
            self.counters.bytes_out(Channel::Http, *written);
        }
        result
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.guard.check_open()?;
        if !self.prefix.is_empty() {
            let count = self.prefix.len().min(buf.remaining());
            let chunk = self.prefix.split_to(count);
            buf.put_slice(&chunk);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.guard.check_open()?;
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        let result = this.guard.wrote(cx, result);
        this.count(result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.guard.check_open()?;
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        let result = this.guard.wrote(cx, result);
        this.count(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    #[tokio::test]
    async fn rewind_returns_the_prefix_first() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let client = tokio::spawn(async move {
            let mut socket = TcpStream::connect(address).await.expect("connect");
            socket.write_all(b" world").await.expect("write");
        });
        let (socket, _) = listener.accept().await.expect("accept");
        let unsent = ConnUnsent::new(Default::default());
        let guard = WriteGuard::new(unsent);
        let mut rewind = Rewind::new(b"hello".to_vec(), socket, guard, Default::default());
        let mut text = String::new();
        rewind.read_to_string(&mut text).await.expect("read");
        assert_eq!(text, "hello world");
        client.await.expect("client");
    }
}
