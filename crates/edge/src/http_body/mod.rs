//! The body of an HTTP response: a complete buffer, or an event stream that ends only when the
//! stream is closed; and an answer admitted into its connection's unsent bytes (`admit`).

pub mod stream_body;
pub mod unsent;

use std::convert::Infallible;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper::header::HeaderValue;
use hyper::Response;

use crate::http_body::stream_body::StreamBody;
use crate::http_body::unsent::{ConnUnsent, Refused, Unsent, ANSWERS_BUSY};
use hearth_ground::rest::RestResponse;

pub enum HearthBody {
    /// A complete answer, with its place in the unsent-answer budgets once counted.
    Full(Option<Bytes>, Option<Unsent>),
    Stream(StreamBody),
    /// Bytes a thread produces while the client reads (a backup archive), from a bounded
    /// queue; the second field is a guard that lives as long as the answer (the backup's
    /// turn), of a type the edge need not know.
    Queue(tokio::sync::mpsc::Receiver<Bytes>, Box<dyn std::any::Any>),
}

impl From<Bytes> for HearthBody {
    fn from(bytes: Bytes) -> HearthBody {
        HearthBody::full(bytes)
    }
}

impl HearthBody {
    pub fn full(bytes: Bytes) -> HearthBody {
        HearthBody::Full((!bytes.is_empty()).then_some(bytes), None)
    }

    /// The bytes of a complete answer not yet handed to hyper; event streams count their
    /// chunks themselves (`sse`).
    pub fn unsent_len(&self) -> usize {
        match self {
            HearthBody::Full(bytes, _) => bytes.as_ref().map_or(0, Bytes::len),
            HearthBody::Stream(_) | HearthBody::Queue(..) => 0,
        }
    }

    /// Keeps the answer counted while it exists.
    pub fn count(&mut self, unsent: Unsent) {
        if let HearthBody::Full(_, counted) = self {
            *counted = Some(unsent);
        }
    }

    #[cfg(test)]
    pub fn hand_over_for_tests(&mut self) {
        if let HearthBody::Full(bytes, Some(unsent)) = self {
            bytes.take();
            unsent.handed_over();
        }
    }
}

impl Body for HearthBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            HearthBody::Full(bytes, unsent) => {
                if let Some(unsent) = unsent {
                    // From here on the socket gives the bytes back as it writes them.
                    unsent.handed_over();
                }
                Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes))))
            }
            HearthBody::Stream(stream) => Pin::new(stream).poll_frame(cx),
            HearthBody::Queue(queue, _) => queue
                .poll_recv(cx)
                .map(|bytes| bytes.map(|bytes| Ok(Frame::data(bytes)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            HearthBody::Full(bytes, _) => bytes.is_none(),
            HearthBody::Stream(_) | HearthBody::Queue(..) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            HearthBody::Full(bytes, _) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |bytes| bytes.len() as u64))
            }
            HearthBody::Stream(_) | HearthBody::Queue(..) => SizeHint::default(),
        }
    }
}

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
