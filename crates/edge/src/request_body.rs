//! Reading a request body under its limits: a size limit, the server's budget of bytes held
//! by bodies being read, and a minimum rate, so that neither an oversized nor a trickled body
//! holds memory or a connection without bound. Used by the REST API and the console.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Body;
use hyper::HeaderMap;

use hearth_ground::rest::RestResponse;
use hearth_net::budget::{ByteBudget, Held};

/// How long a client may pause while sending a request body.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

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

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::task::{Context, Poll};

    use hyper::header::HeaderValue;

    use super::*;

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
