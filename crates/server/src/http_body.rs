//! The body of an HTTP response: a complete buffer, or an event stream that ends only when the
//! stream is closed.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::sse::StreamBody;

pub enum HearthBody {
    Full(Option<Bytes>),
    Stream(StreamBody),
}

impl HearthBody {
    pub fn full(bytes: Bytes) -> HearthBody {
        HearthBody::Full((!bytes.is_empty()).then_some(bytes))
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
            HearthBody::Full(bytes) => {
                Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes))))
            }
            HearthBody::Stream(stream) => Pin::new(stream).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            HearthBody::Full(bytes) => bytes.is_none(),
            HearthBody::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            HearthBody::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |bytes| bytes.len() as u64))
            }
            HearthBody::Stream(_) => SizeHint::default(),
        }
    }
}
