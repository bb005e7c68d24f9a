//! Answers that a client has not read yet. Every REST answer is counted from the moment it is
//! produced until its bytes are written into the socket (or the connection ends), per
//! connection and against the server's answer budget ([`hearth_net::budget`]); the socket wrapper
//! closes a connection whose answer makes no progress for the write timeout. Without this a
//! client that sends GETs of a large value and never reads holds the answers in memory forever.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::time::Sleep;

use hearth_net::budget::SharedBudgets;

/// The most answer bytes one HTTP connection may hold unsent beyond its current answer. hyper
/// answers one request at a time but reads the next as soon as an answer is handed over, so a
/// client that pipelines requests without reading piles answers up; past this (the WebSocket
/// limit, `outbound::MAX_OUTBOUND_BYTES`) the connection is closed. One answer on its own may be
/// as large as `rest::MAX_REST_RESPONSE_BYTES`.
pub const MAX_CONN_UNSENT_BYTES: usize = hearth_ground::close::MAX_OUTBOUND_BYTES;

/// What a client is told when the server's answer budget is spent.
pub const ANSWERS_BUSY: &str =
    "The server holds too many answers that their clients have not read yet; retry later.";

/// The unsent answer bytes of one HTTP connection.
pub struct ConnUnsent {
    budgets: SharedBudgets,
    pending: Cell<usize>,
    /// Set when the connection went over its own budget: its socket then fails every call.
    closed: Cell<bool>,
}

impl ConnUnsent {
    pub fn new(budgets: SharedBudgets) -> Rc<ConnUnsent> {
        Rc::new(ConnUnsent {
            budgets,
            pending: Cell::new(0),
            closed: Cell::new(false),
        })
    }

    /// Whether the server can take no more answers at all (checked before one is computed).
    pub fn server_is_full(&self) -> bool {
        self.budgets.answers.is_exhausted()
    }

    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.pending.get()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Counts a produced answer of `bytes`; `None` when it must not be sent (the connection
    /// is then marked closed, or the server's budget is spent).
    pub fn take(self: &Rc<Self>, bytes: usize) -> Result<Unsent, Refused> {
        let pending = self.pending.get();
        if pending > 0 && pending + bytes > MAX_CONN_UNSENT_BYTES {
            self.closed.set(true);
            return Err(Refused::Connection);
        }
        if !self.budgets.answers.try_take(bytes) {
            return Err(Refused::Server);
        }
        self.pending.set(pending + bytes);
        Ok(Unsent {
            conn: self.clone(),
            unyielded: bytes,
        })
    }

    /// Counts `bytes` that were already taken from the server's budget (an event stream's
    /// chunk handed to hyper) until the socket has written them.
    pub fn adopt(&self, bytes: usize) {
        self.pending.set(self.pending.get() + bytes);
    }

    /// `bytes` left for the socket, or will never be sent.
    pub fn release(&self, bytes: usize) {
        // The socket also writes heads, which were never counted: saturate, and give back to
        // the server exactly what this connection still held.
        let pending = self.pending.get();
        let released = bytes.min(pending);
        self.pending.set(pending - released);
        self.budgets.answers.give_back(released);
    }
}

impl Drop for ConnUnsent {
    fn drop(&mut self) {
        self.budgets.answers.give_back(self.pending.get());
    }
}

pub enum Refused {
    Connection,
    Server,
}

/// An answer's bytes not yet handed to hyper; kept in the response body. Once handed over
/// they stay counted on the connection until the socket has taken them.
pub struct Unsent {
    conn: Rc<ConnUnsent>,
    unyielded: usize,
}

impl Unsent {
    pub fn handed_over(&mut self) {
        self.unyielded = 0;
    }
}

impl Drop for Unsent {
    fn drop(&mut self) {
        self.conn.release(self.unyielded);
    }
}

/// The write side of a connection's socket: gives counted bytes back as they are written,
/// fails a write that made no progress for the write timeout, and fails everything once the
/// connection went over its own budget.
pub struct WriteGuard {
    conn: Rc<ConnUnsent>,
    stall: Option<Pin<Box<Sleep>>>,
}

impl WriteGuard {
    pub fn new(conn: Rc<ConnUnsent>) -> WriteGuard {
        WriteGuard { conn, stall: None }
    }

    /// An error when the connection must end now.
    pub fn check_open(&self) -> io::Result<()> {
        if self.conn.is_closed() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "too many unread answers on one connection",
            ));
        }
        Ok(())
    }

    /// Passes on the result of a write, after accounting for it.
    pub fn wrote(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match result {
            Poll::Ready(Ok(written)) => {
                self.stall = None;
                self.conn.release(written);
                Poll::Ready(Ok(written))
            }
            Poll::Pending => {
                let timeout = self.conn.budgets.write_timeout;
                let stall = self
                    .stall
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match stall.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client read nothing of its answer within the write timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_body::{admit, HearthBody};
    use bytes::Bytes;
    use hearth_ground::rest::RestResponse;
    use hearth_net::budget::HttpBudgets;
    use hyper::Response;

    fn budgets(answers: usize) -> SharedBudgets {
        HttpBudgets::for_answers(answers)
    }

    fn answer(bytes: usize) -> Response<HearthBody> {
        RestResponse::json(200, Bytes::from(vec![b'1'; bytes])).into_http()
    }

    #[test]
    fn answers_past_the_server_budget_are_refused_until_bytes_are_written() {
        let budgets = budgets(1000);
        let first = ConnUnsent::new(budgets.clone());
        let second = ConnUnsent::new(budgets.clone());
        let mut kept = admit(&first, answer(700));
        assert_eq!(kept.status(), 200);
        kept.body_mut().hand_over_for_tests();
        assert_eq!(budgets.answers.used(), 700);
        let refused = admit(&second, answer(400));
        assert_eq!(refused.status(), 503);
        assert!(!second.is_closed());
        first.release(300);
        let also_kept = admit(&second, answer(400));
        assert_eq!(also_kept.status(), 200);
        assert_eq!(budgets.answers.used(), 800);
        drop(also_kept);
        drop(second);
        assert_eq!(
            budgets.answers.used(),
            400,
            "a connection's end gives back all it held"
        );
        drop(kept);
        assert_eq!(
            budgets.answers.used(),
            400,
            "what hyper took stays counted until written"
        );
        drop(first);
        assert_eq!(budgets.answers.used(), 0);
    }

    #[test]
    fn an_answer_dropped_before_hyper_took_it_is_given_back() {
        let budgets = budgets(1000);
        let conn = ConnUnsent::new(budgets.clone());
        let kept = admit(&conn, answer(700));
        drop(kept);
        assert_eq!(conn.pending(), 0);
        assert_eq!(budgets.answers.used(), 0);
    }

    #[test]
    fn a_connection_piling_up_unread_answers_is_closed() {
        let budgets = budgets(usize::MAX);
        let conn = ConnUnsent::new(budgets);
        let big = MAX_CONN_UNSENT_BYTES / 2 + 1;
        let mut first = admit(&conn, answer(big));
        first.body_mut().hand_over_for_tests();
        assert_eq!(admit(&conn, answer(big)).status(), 503);
        assert!(conn.is_closed());
        assert!(WriteGuard::new(conn).check_open().is_err());
    }

    #[test]
    fn one_answer_may_exceed_the_connection_budget() {
        let conn = ConnUnsent::new(budgets(usize::MAX));
        let response = admit(&conn, answer(MAX_CONN_UNSENT_BYTES + 1));
        assert_eq!(response.status(), 200);
        assert!(!conn.is_closed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_without_progress_fails_after_the_timeout() {
        let conn = ConnUnsent::new(budgets(1000));
        let mut guard = WriteGuard::new(conn);
        let failed = std::future::poll_fn(|cx| guard.wrote(cx, Poll::Pending)).await;
        assert_eq!(
            failed.map_err(|error| error.kind()).err(),
            Some(io::ErrorKind::TimedOut)
        );
    }
}
