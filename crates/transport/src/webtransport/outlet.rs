//! A WebTransport session's transport: the [`Outlet`] sorts what the owner writes to the
//! session's `EdgeConn` into datagrams, sent at once, and stream lines, which
//! [`write_lines`] writes.

use std::cell::{Cell, RefCell};
use std::io::{self, IoSlice};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use wtransport::{Connection, SendStream};

use crate::webtransport::codec::{
    push_path, related, reply_number, sort_message, FrameReader, Outbound,
};
use crate::webtransport::MAX_STREAM_BACKLOG_BYTES;
use hearth_edge::socket::Transport;
use hearth_edge::EdgeConn;
use hearth_ground::close::{CloseReason, MAX_OUTBOUND_BYTES, SLOW_READER_CLOSE};

/// Writes the outlet's stream lines as they come, until the session ends.
pub(super) async fn write_lines(outlet: Rc<Outlet>, edge: Rc<EdgeConn>, mut send: SendStream) {
    loop {
        let lines = outlet.take_lines();
        if lines.is_empty() {
            if outlet.finished.get() {
                return;
            }
            outlet.wake.notified().await;
            continue;
        }
        if send.write_all(&lines).await.is_err() {
            outlet.failed.set(true);
            outlet.wake_writable();
            edge.close(CloseReason::new(CloseCode::Away, "stream closed"));
            return;
        }
        outlet.written.notify_waiters();
        outlet.wake_writable();
    }
}

/// Where a session's datagrams go: its QUIC connection (a recorder in tests).
pub(super) trait DatagramSink {
    /// Queues one datagram; an error when the peer takes none (or not this large).
    fn send(&self, datagram: Bytes) -> Result<(), ()>;
}

impl DatagramSink for Connection {
    fn send(&self, datagram: Bytes) -> Result<(), ()> {
        self.send_datagram(datagram).map_err(|_| ())
    }
}

/// The transport of a session's `EdgeConn`: sorts the owner's messages into datagrams, sent at
/// once, and stream lines, which [`write_lines`] writes.
pub(super) struct Outlet {
    datagrams: Box<dyn DatagramSink>,
    max_datagram: usize,
    frames: RefCell<FrameReader>,
    lines: RefCell<Vec<u8>>,
    wake: Notify,
    written: Notify,
    /// The connection's task, waiting for the backlog to fall below its limit.
    writable: RefCell<Option<Waker>>,
    failed: Cell<bool>,
    finished: Cell<bool>,
    /// Listens not answered yet (request number, path). A listen's first data must arrive,
    /// and before its `ok`: pushes to their paths take the stream until the `ok` has passed.
    pub(super) pending_listens: RefCell<Vec<(u64, String)>>,
}

impl Outlet {
    pub(super) fn new(datagrams: Box<dyn DatagramSink>, max_datagram: usize) -> Outlet {
        Outlet {
            datagrams,
            max_datagram,
            frames: RefCell::new(FrameReader::default()),
            lines: RefCell::new(Vec::new()),
            wake: Notify::new(),
            written: Notify::new(),
            writable: RefCell::new(None),
            failed: Cell::new(false),
            finished: Cell::new(false),
            pending_listens: RefCell::new(Vec::new()),
        }
    }

    /// Wakes the connection's task if it waits for room in the backlog.
    fn wake_writable(&self) {
        if let Some(waker) = self.writable.borrow_mut().take() {
            waker.wake();
        }
    }

    /// Whether the stream's backlog has reached its limit.
    fn backlog_full(&self) -> bool {
        self.lines.borrow().len() >= MAX_STREAM_BACKLOG_BYTES
    }

    fn take_lines(&self) -> Vec<u8> {
        std::mem::take(&mut *self.lines.borrow_mut())
    }

    /// Completes when no line waits (written, or the writer gave up).
    pub(super) async fn drained(&self) {
        while !self.lines.borrow().is_empty() && !self.failed.get() {
            self.written.notified().await;
        }
    }

    /// Nothing more will be written: the writer ends.
    pub(super) fn finish(&self) {
        self.finished.set(true);
        self.wake.notify_one();
    }

    fn send(&self, message: String) {
        let max_datagram = if self.pending_listens.borrow().is_empty() {
            self.max_datagram
        } else if let Some(r) = reply_number(&message) {
            self.pending_listens
                .borrow_mut()
                .retain(|(pending, _)| *pending != r);
            self.max_datagram
        } else if let Some(path) = push_path(&message) {
            let pending = self.pending_listens.borrow();
            if pending.iter().any(|(_, listen)| related(listen, &path)) {
                0
            } else {
                self.max_datagram
            }
        } else {
            self.max_datagram
        };
        match sort_message(&message, max_datagram) {
            Outbound::Datagram(datagram) => {
                // Refused (the peer takes no datagrams after all): the stream carries it.
                if self.datagrams.send(datagram).is_err() {
                    self.push_line(message.as_bytes());
                }
            }
            Outbound::Line(line) => self.push_line(&line[..line.len() - 1]),
        }
    }

    fn push_line(&self, text: &[u8]) {
        let mut lines = self.lines.borrow_mut();
        lines.extend_from_slice(text);
        lines.push(b'\n');
    }
}

impl Transport for Outlet {
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.failed.get() || self.finished.get() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if self.backlog_full() {
            // The rest waits in the outbox, counted in the budget, until the stream catches up.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut total = 0;
        let mut messages: Vec<String> = Vec::new();
        {
            let mut frames = self.frames.borrow_mut();
            for buf in bufs {
                frames
                    .feed(buf, |message| messages.push(message))
                    .map_err(io::Error::other)?;
                total += buf.len();
            }
        }
        for message in messages {
            self.send(message);
        }
        if !self.lines.borrow().is_empty() {
            // The stream's reader is behind by more than any connection may be.
            if self.lines.borrow().len() > MAX_OUTBOUND_BYTES {
                self.failed.set(true);
                return Err(io::Error::other(SLOW_READER_CLOSE));
            }
            self.wake.notify_one();
        }
        Ok(total)
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.failed.get() || self.finished.get() {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if self.backlog_full() {
            *self.writable.borrow_mut() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::sync::Arc;

    use super::*;
    use hearth_edge::frames::encode_frames;
    use hearth_net::budget::{HttpBudgets, ShardBudget};
    use hearth_owner::outbound::{ConnHandle, Route};
    use hearth_persist::Tagger;

    #[derive(Default)]
    struct Recorder(Rc<RefCell<Vec<Bytes>>>);

    impl DatagramSink for Recorder {
        fn send(&self, datagram: Bytes) -> Result<(), ()> {
            self.0.borrow_mut().push(datagram);
            Ok(())
        }
    }

    /// A session's owner side over an outlet whose datagrams are recorded.
    fn session() -> (ConnHandle, Rc<Outlet>, Rc<RefCell<Vec<Bytes>>>) {
        let sent = Rc::new(RefCell::new(Vec::new()));
        let outlet = Rc::new(Outlet::new(Box::new(Recorder(sent.clone())), 1_150));
        let transport: Rc<dyn Transport> = outlet.clone();
        let budget = ShardBudget::new(Arc::new(HttpBudgets::default()));
        let edge = Rc::new(EdgeConn::new(1, transport, budget, Default::default()));
        let handle = ConnHandle::new(
            1,
            "ns".into(),
            "s".into(),
            Tagger::open(),
            Route::Local(edge),
        );
        (handle, outlet, sent)
    }

    #[test]
    fn a_full_stream_backlog_leaves_the_rest_in_the_outbox_counted_in_the_budget() {
        let budgets = Arc::new(HttpBudgets::default());
        let outlet = Rc::new(Outlet::new(Box::new(Recorder::default()), 1_150));
        let transport: Rc<dyn Transport> = outlet.clone();
        let edge = Rc::new(EdgeConn::new(
            1,
            transport,
            ShardBudget::new(budgets.clone()),
            Default::default(),
        ));
        let handle = ConnHandle::new(
            1,
            "ns".into(),
            "s".into(),
            Tagger::open(),
            Route::Local(edge.clone()),
        );
        // Replies go on the stream; the stream's writer does not run here (a slow reader).
        let reply = format!(
            r#"{{"t":"d","d":{{"r":1,"b":{{"s":"ok","d":"{}"}}}}}}"#,
            "x".repeat(1_000)
        );
        for _ in 0..600 {
            handle.send_text(reply.clone());
        }
        let held = outlet.lines.borrow().len();
        assert!(
            (MAX_STREAM_BACKLOG_BYTES..MAX_STREAM_BACKLOG_BYTES + 2 * reply.len()).contains(&held),
            "the outlet holds its limit and at most one more write: {held}"
        );
        assert!(edge.has_pending(), "the rest waits in the outbox");
        assert!(
            budgets.answers.used() >= 600 * reply.len() - held - 2 * reply.len(),
            "what waits is counted in the answer budget"
        );
        // The stream catches up: the outbox hands the outlet more.
        drop(outlet.take_lines());
        assert_eq!(
            edge.outbox().write_now(),
            hearth_edge::socket::Sent::Pending
        );
        assert!(outlet.lines.borrow().len() >= MAX_STREAM_BACKLOG_BYTES);
    }

    fn cursor(uid: &str, x: u32) -> String {
        format!(
            r#"{{"t":"d","d":{{"a":"d","b":{{"p":"rooms/r1/cursors/{uid}","d":{{"x":{x}}}}}}}}}"#
        )
    }

    #[test]
    fn a_ticks_pushes_leave_as_datagrams_at_once_and_replies_on_the_stream() {
        let (handle, outlet, sent) = session();
        // What a tick delivers to one session: its pushes, then the held replies.
        let frames = encode_frames(cursor("a", 1));
        handle.send_frames(&frames);
        handle.send_text(cursor("b", 2));
        handle.send_text(r#"{"t":"d","d":{"r":9,"b":{"s":"ok","d":""}}}"#.into());
        assert_eq!(
            sent.borrow().clone(),
            vec![
                Bytes::from_static(br#"d{"p":"rooms/r1/cursors/a","d":{"x":1}}"#),
                Bytes::from_static(br#"d{"p":"rooms/r1/cursors/b","d":{"x":2}}"#),
            ],
            "both pushes handed to QUIC in the same turn, without waiting for a task"
        );
        assert_eq!(
            outlet.take_lines(),
            b"{\"t\":\"d\",\"d\":{\"r\":9,\"b\":{\"s\":\"ok\",\"d\":\"\"}}}\n".to_vec()
        );
    }

    #[test]
    fn a_listens_first_data_takes_the_stream_until_its_ok() {
        let (handle, outlet, sent) = session();
        outlet
            .pending_listens
            .borrow_mut()
            .push((4, "rooms/r1".to_owned()));
        handle.send_text(cursor("a", 1));
        handle.send_text(r#"{"t":"d","d":{"a":"d","b":{"p":"rooms/r2","d":1}}}"#.into());
        handle.send_text(r#"{"t":"d","d":{"r":4,"b":{"s":"ok","d":{}}}}"#.into());
        handle.send_text(cursor("a", 2));
        let lines = String::from_utf8(outlet.take_lines()).expect("text");
        assert_eq!(
            lines,
            format!(
                "{}\n{}\n",
                cursor("a", 1),
                r#"{"t":"d","d":{"r":4,"b":{"s":"ok","d":{}}}}"#
            )
        );
        assert_eq!(
            sent.borrow().clone(),
            vec![
                Bytes::from_static(br#"d{"p":"rooms/r2","d":1}"#),
                Bytes::from_static(br#"d{"p":"rooms/r1/cursors/a","d":{"x":2}}"#),
            ]
        );
        assert!(outlet.pending_listens.borrow().is_empty());
    }
}
