//! The response body of an event stream, which hyper polls on the core that serves the HTTP
//! connection.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hearth_wire::SSE_KEEP_ALIVE;
use hyper::body::{Body, Frame};
use tokio::time::Sleep;

use crate::event_stream::StreamHandle;
use crate::http_body::unsent::ConnUnsent;

/// What ends a stream's session once its body is dropped (the owner's side).
pub type OnEnd = Box<dyn FnOnce(&StreamHandle)>;

/// The response body of a stream: the queued events, and a keep-alive event every period.
/// Dropping it (the client went away, or the stream ended) ends the session.
pub struct StreamBody {
    handle: Rc<StreamHandle>,
    /// Ends the stream's session (the owner's side).
    on_end: Option<OnEnd>,
    keep_alive: Pin<Box<Sleep>>,
    period: Duration,
    /// Fires when the stream's credential expires.
    expiry: Option<Pin<Box<Sleep>>>,
    /// The connection that counts the chunks handed to hyper until the socket takes them.
    unsent: Option<Rc<ConnUnsent>>,
}

impl StreamBody {
    pub fn new(
        handle: Rc<StreamHandle>,
        on_end: OnEnd,
        period: Duration,
        expires_in: Option<Duration>,
    ) -> StreamBody {
        StreamBody {
            handle,
            on_end: Some(on_end),
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
        if let Some(on_end) = self.on_end.take() {
            on_end(&self.handle);
        }
    }
}
