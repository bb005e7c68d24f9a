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

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Incoming};
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tracing::debug;

use crate::budget::{ByteBudget, Held};
use crate::console;
use crate::edge::http_body::HearthBody;
use crate::edge::http_unsent::{ConnUnsent, Refused, WriteGuard, ANSWERS_BUSY};
use crate::metrics::answer_on_main_port;
use crate::metrics::labels::{Channel, HttpRefusal, Outcome, RequestKind};
use crate::metrics::ShardCounters;
use crate::namespace::owner_shard;
use crate::offload::OFF_THREAD_PARSE_BYTES;
use crate::owner::rest_precheck::refuse_early;
use crate::rest::execute::execute_durable;
use crate::rest::precheck::write_check;
use crate::rest::{
    make_call, parse_request, prepare_large_put, DataMethod, DataRequest, Endpoint, RestCall,
    RestRequest, RestResponse,
};
use crate::shard::Shard;
use crate::sse::{open_remote_stream, open_stream};

/// How long a kept-alive connection may stay idle, or a client may take to send a request
/// head, before the connection is closed.
pub const HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a client may pause while sending a request body.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// hyper's read buffer per connection; request heads (after the first, which is limited by
/// `http_head::MAX_HEAD_BYTES`) must fit in it.
pub const MAX_HTTP_BUFFER_BYTES: usize = 64 * 1024;

/// The most headers one request may carry.
pub const MAX_HEADERS: usize = 64;

/// How long shutdown waits for in-flight requests of one connection.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves HTTP on a connection whose first `buffered` bytes were already read.
pub async fn serve_http<S>(shard: Rc<Shard>, stream: S, buffered: Vec<u8>)
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let unsent = ConnUnsent::new(shard.config.http.clone());
    let io = TokioIo::new(Rewind::new(
        buffered,
        stream,
        WriteGuard::new(unsent.clone()),
        shard.counters.clone(),
    ));
    let service = {
        let shard = shard.clone();
        service_fn(move |request| {
            let shard = shard.clone();
            let unsent = unsent.clone();
            async move { Ok::<_, Infallible>(respond(shard, &unsent, request).await) }
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
    let mut shutdown = shard.shutdown.clone();
    if shard.is_shutting_down() {
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
    shard: Rc<Shard>,
    unsent: &Rc<ConnUnsent>,
    request: Request<Incoming>,
) -> Response<HearthBody> {
    let (parts, body) = request.into_parts();
    // Health and metrics answer even while the answer budget is spent: a probe that failed
    // then would restart a server that only has slow clients. Their size is bounded (a
    // fixed set of series per shard, and the top lists).
    if let Some(response) = answer_on_main_port(&shard, &parts).await {
        return response;
    }
    let mut body = Some(body);
    let mut kind = rest_kind(&parts.method);
    let counters = shard.counters.clone();
    let response = if unsent.server_is_full() {
        counters.http_refused(HttpRefusal::AnswersBusy);
        busy()
    } else {
        let answered = answer(shard, &parts, &mut body, &mut kind).await;
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
        Endpoint::RulesGet { .. } | Endpoint::RulesPut => RequestKind::RestRules,
        Endpoint::AdminDatabases | Endpoint::Backup => RequestKind::RestAdmin,
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
    shard: Rc<Shard>,
    parts: &hyper::http::request::Parts,
    body: &mut Option<Incoming>,
    kind: &mut RequestKind,
) -> Response<HearthBody> {
    let started = Instant::now();
    if let Some(response) = crate::longpoll::answer(&shard, parts).await {
        // Long polls are a realtime transport, not database requests.
        *kind = RequestKind::RestOther;
        return response.into_http();
    }
    if let Some(response) = console::answer(&shard, parts, body).await {
        // The console's files are not database requests.
        *kind = RequestKind::RestOther;
        return response;
    }
    let parsed = match parse_request(parts, &shard.config.auth, &shard.config.default_namespace) {
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
        Endpoint::AdminDatabases => return crate::admin::databases(&shard).await.into_http(),
        Endpoint::Backup => return crate::backup::respond(&shard).await,
        _ => {}
    }
    let owner = owner_shard(&parsed.namespace, shard.shard_count);
    if let Endpoint::Data(data) = &parsed.endpoint {
        if data.stream {
            return stream(&shard, owner, &parsed, data).await;
        }
    }
    // Before a byte of the body is read: a write no rule could allow costs nothing more.
    if let Some(check) = write_check(&parsed) {
        let refusal = if owner == shard.index {
            refuse_early(&shard, &check)
        } else {
            shard.precheck(owner, check).await
        };
        if let Some(refusal) = refusal {
            return refusal.into_http();
        }
    }
    let bytes = match (parsed.endpoint.body_limit(), body.as_mut()) {
        (Some(limit), Some(incoming)) => {
            match read_body(incoming, &parts.headers, limit, &shard.config.http.bodies).await {
                Ok(bytes) => {
                    *body = None;
                    Some(bytes)
                }
                Err(response) => {
                    if let Some(refusal) = body_refusal(response.status) {
                        shard.counters.http_refused(refusal);
                    }
                    return response.into_http();
                }
            }
        }
        _ => None,
    };
    let timeout = read_timeout(&parsed);
    let call = match parse_call(parsed, bytes, started).await {
        Ok(call) => call,
        Err(response) => return response.into_http(),
    };
    let response = if owner == shard.index {
        execute_durable(&shard, call).await
    } else {
        let answer = shard.forward(owner, call);
        let unavailable = || RestResponse::error(503, "the database's shard is unavailable");
        match timeout {
            Some(timeout) => match tokio::time::timeout(timeout, answer).await {
                Ok(answer) => answer.unwrap_or_else(|_| unavailable()),
                Err(_) => timed_out(timeout),
            },
            None => answer.await.unwrap_or_else(|_| unavailable()),
        }
    };
    response.into_http()
}

/// Builds the call of a request, parsing a large body off the shard's thread (and converting
/// a PUT's into the tree there too). The
/// connection's next request waits for this one (hyper serves a connection's requests one at
/// a time), so their order holds.
async fn parse_call(
    parsed: RestRequest,
    bytes: Option<Vec<u8>>,
    started: Instant,
) -> Result<RestCall, RestResponse> {
    if bytes
        .as_ref()
        .is_none_or(|b| b.len() <= OFF_THREAD_PARSE_BYTES)
    {
        return make_call(parsed, bytes, started);
    }
    tokio::task::spawn_blocking(move || make_call(parsed, bytes, started).map(prepare_large_put))
        .await
        .unwrap_or_else(|_| {
            Err(RestResponse::error(
                500,
                "the request body could not be parsed",
            ))
        })
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

fn read_timeout(request: &RestRequest) -> Option<Duration> {
    match &request.endpoint {
        Endpoint::Data(data) if !data.method.is_write() => data.timeout,
        _ => None,
    }
}

fn timed_out(timeout: Duration) -> RestResponse {
    RestResponse::error(
        400,
        format!("The read did not finish within the requested timeout of {timeout:?}."),
    )
}

/// An event stream: its session is opened by the shard that owns the namespace, and its
/// events are written here.
async fn stream(
    shard: &Rc<Shard>,
    owner: usize,
    parsed: &RestRequest,
    request: &DataRequest,
) -> Response<HearthBody> {
    let opened = if owner == shard.index {
        open_stream(
            shard,
            &parsed.namespace,
            parsed.auth.clone(),
            parsed.auth_expires_at,
            request,
        )
    } else {
        open_remote_stream(shard, owner, parsed, request).await
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
            crate::rest::DATA_METHODS.to_owned(),
        )
        .with_header("access-control-allow-headers", allowed_headers.to_owned())
        .with_header("access-control-max-age", "3600")
}

/// The time a request body may take before it must keep up [`MIN_BODY_BYTES_PER_SEC`].
pub const BODY_RATE_GRACE: Duration = Duration::from_secs(10);

/// The slowest average rate at which a request body may arrive after [`BODY_RATE_GRACE`]: a
/// body of `n` bytes must be complete within `BODY_RATE_GRACE + n / MIN_BODY_BYTES_PER_SEC`
/// seconds of its first wait (a 1 MiB body within 74 s), else the client gets 408. Without it
/// a body trickled a byte at a time holds its connection and buffer forever.
pub const MIN_BODY_BYTES_PER_SEC: u64 = 16 * 1024;

/// What a client whose body arrives too slowly is told.
pub const BODY_TOO_SLOW: &str = "The request body arrived too slowly.";

/// When a body of which `received` bytes arrived must have sent more, counted from `started`.
fn body_due(started: tokio::time::Instant, received: usize) -> tokio::time::Instant {
    let allowed_ms = (received as u64).saturating_mul(1000) / MIN_BODY_BYTES_PER_SEC;
    started + BODY_RATE_GRACE + Duration::from_millis(allowed_ms)
}

/// Reads a request body of at most `limit` bytes. A declared `Content-Length` above the limit
/// is refused before any of the body is read; a body without one (chunked) is counted while it
/// streams and refused as soon as it passes the limit, so an oversized body is never held in
/// memory. The buffer grows only as bytes arrive (a declared length costs nothing), and those
/// bytes are held against the server's body budget, `bodies`, while the body is read.
pub async fn read_body<B>(
    body: &mut B,
    headers: &HeaderMap,
    limit: usize,
    bodies: &ByteBudget,
) -> Result<Vec<u8>, RestResponse>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let too_large = |limit: usize| {
        RestResponse::error(
            413,
            format!("The request body is larger than the limit of {limit} bytes."),
        )
    };
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .or_else(|| body.size_hint().exact());
    // A body larger than the whole budget can never be taken: 413, not a 503 to retry.
    let limit = limit.min(bodies.limit());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large(limit));
    }
    let mut held = Held::new(bodies);
    let mut bytes = Vec::new();
    let started = tokio::time::Instant::now();
    loop {
        let due = body_due(started, bytes.len());
        let idle = tokio::time::Instant::now() + BODY_IDLE_TIMEOUT;
        let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx));
        let frame = match tokio::time::timeout_at(due.min(idle), frame).await {
            Err(_) if due < idle => return Err(RestResponse::error(408, BODY_TOO_SLOW)),
            Err(_) => {
                return Err(RestResponse::error(
                    408,
                    "The request body stopped arriving.",
                ))
            }
            Ok(None) => break,
            Ok(Some(Err(error))) => {
                return Err(RestResponse::error(
                    400,
                    format!("The request body could not be read: {error}"),
                ))
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                return Err(too_large(limit));
            }
            if !held.grow(data.len()) {
                return Err(RestResponse::error(503, BODIES_BUSY).with_header("retry-after", "1"));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// What a client is told while the server's body budget is spent.
pub const BODIES_BUSY: &str =
    "The server is receiving too many request bodies at once; retry later.";

/// The 503 of a spent answer budget.
pub fn busy() -> Response<HearthBody> {
    RestResponse::error(503, ANSWERS_BUSY)
        .with_header("retry-after", "1")
        .into_http()
}

/// Counts `response` on the connection, or replaces it with a 503 when it may not be sent.
pub fn admit(conn: &Rc<ConnUnsent>, mut response: Response<HearthBody>) -> Response<HearthBody> {
    if let HearthBody::Stream(stream) = response.body_mut() {
        stream.count_on(conn.clone());
        return response;
    }
    let bytes = response.body().unsent_len();
    if bytes == 0 {
        return response;
    }
    match conn.take(bytes) {
        Ok(unsent) => {
            response.body_mut().count(unsent);
            response
        }
        Err(Refused::Server) => busy(),
        Err(Refused::Connection) => {
            // The socket fails from now on; the answer only tells a log what happened.
            let mut refused = busy();
            refused
                .headers_mut()
                .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
            refused
        }
    }
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

    /// A request body that sends its chunks one per `every`.
    struct Trickle {
        chunks: std::collections::VecDeque<Bytes>,
        every: Duration,
        next: Pin<Box<tokio::time::Sleep>>,
    }

    impl Trickle {
        fn new(chunks: impl IntoIterator<Item = Bytes>, every: Duration) -> Trickle {
            Trickle {
                chunks: chunks.into_iter().collect(),
                every,
                next: Box::pin(tokio::time::sleep(every)),
            }
        }
    }

    impl Body for Trickle {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
            if self.chunks.is_empty() {
                return Poll::Ready(None);
            }
            std::task::ready!(self.next.as_mut().poll(cx));
            let deadline = tokio::time::Instant::now() + self.every;
            self.next.as_mut().reset(deadline);
            let chunk = self
                .chunks
                .pop_front()
                .map(|chunk| Ok(hyper::body::Frame::data(chunk)));
            Poll::Ready(chunk)
        }
    }

    use std::future::Future;

    fn declaring(length: usize) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(length));
        headers
    }

    fn chunks(count: usize, size: usize) -> Vec<Bytes> {
        vec![Bytes::from(vec![b'x'; size]); count]
    }

    const MIB: usize = 1024 * 1024;

    #[tokio::test(start_paused = true)]
    async fn an_announced_length_is_not_reserved_before_the_body_arrives() {
        let budget = ByteBudget::new(512 * MIB);
        let mut body = Trickle::new(chunks(1, 3), Duration::ZERO);
        let bytes = read_body(&mut body, &declaring(256 * MIB), 256 * MIB, &budget)
            .await
            .expect("the body");
        assert_eq!(bytes, b"xxx");
        assert!(bytes.capacity() < MIB, "capacity {}", bytes.capacity());
    }

    #[tokio::test(start_paused = true)]
    async fn bodies_past_the_server_budget_are_refused_and_bytes_given_back() {
        let budget = ByteBudget::new(10 * MIB);
        assert!(budget.try_take(8 * MIB), "another body in flight");
        let mut body = Trickle::new(chunks(3, MIB), Duration::ZERO);
        let refused = read_body(&mut body, &HeaderMap::new(), 256 * MIB, &budget)
            .await
            .expect_err("over the budget");
        assert_eq!(refused.status, 503);
        assert_eq!(refused.error_message().as_deref(), Some(BODIES_BUSY));
        assert_eq!(
            budget.used(),
            8 * MIB,
            "the refused body gave its bytes back"
        );
        budget.give_back(8 * MIB);
        let mut body = Trickle::new(chunks(3, MIB), Duration::ZERO);
        let bytes = read_body(&mut body, &HeaderMap::new(), 256 * MIB, &budget)
            .await
            .expect("fits now");
        assert_eq!(bytes.len(), 3 * MIB);
        assert_eq!(budget.used(), 0, "a body read is no longer in flight");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_larger_than_the_whole_budget_is_too_large() {
        let budget = ByteBudget::new(10 * MIB);
        let mut body = Trickle::new(chunks(11, MIB), Duration::ZERO);
        let refused = read_body(&mut body, &declaring(11 * MIB), 256 * MIB, &budget)
            .await
            .expect_err("can never fit");
        assert_eq!(refused.status, 413);
        let mut body = Trickle::new(chunks(11, MIB), Duration::ZERO);
        let refused = read_body(&mut body, &HeaderMap::new(), 256 * MIB, &budget)
            .await
            .expect_err("can never fit, chunked");
        assert_eq!(refused.status, 413);
        assert_eq!(budget.used(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickled_body_times_out_after_the_grace_period() {
        let budget = ByteBudget::new(10 * MIB);
        let started = tokio::time::Instant::now();
        let mut body = Trickle::new(chunks(1000, 1), Duration::from_secs(1));
        let refused = read_body(&mut body, &declaring(1000), 256 * MIB, &budget)
            .await
            .expect_err("too slow");
        assert_eq!(refused.status, 408);
        assert_eq!(refused.error_message().as_deref(), Some(BODY_TOO_SLOW));
        assert_eq!(started.elapsed().as_secs(), BODY_RATE_GRACE.as_secs());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_at_the_minimum_rate_is_read() {
        let budget = ByteBudget::new(10 * MIB);
        let chunk = MIN_BODY_BYTES_PER_SEC as usize;
        // Slower than the rate at first, within the grace period, then at the rate.
        let mut body = Trickle::new(chunks(30, chunk), Duration::from_millis(1200));
        let bytes = read_body(&mut body, &HeaderMap::new(), 256 * MIB, &budget)
            .await
            .expect("fast enough");
        assert_eq!(bytes.len(), 30 * chunk);
    }
}
