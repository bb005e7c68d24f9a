//! One WebTransport session, from its request to its end, on the shard that serves the
//! endpoint (its edge).
//!
//! The owner writes to it through an `EdgeConn` like to any connection: WebSocket frames,
//! encoded once per push for all its listeners. The session's [`Outlet`] is that connection's
//! transport: it reads the frames back into messages as they are written and sends each push
//! as a datagram at once (`codec::sort_message`), everything else on the stream. The owner
//! writes a tick's pushes in one loop turn, so quinn's connection task finds them all queued
//! when it next runs: it packs several datagrams into one QUIC packet and hands the packets
//! to the kernel together (with UDP segmentation offload where the kernel has it), not one
//! syscall per update.

use std::cell::{Cell, RefCell};
use std::io::{self, IoSlice};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{debug, info};
use wtransport::endpoint::IncomingSession;
use wtransport::{Connection, RecvStream, SendStream, VarInt};

use crate::close::{
    CloseReason, MAX_OUTBOUND_BYTES, SHUTDOWN_CLOSE, SLOW_READER_CLOSE, UNWRITABLE_DROP,
};
use crate::edge::attach::{attach, detach_session, send_to_owner};
use crate::edge::side::OwnerSide;
use crate::edge::socket::Transport;
use crate::edge::websocket::{handshake, write_stalled};
use crate::edge::EdgeConn;
use crate::link::ToOwner;
use crate::metrics::labels::{CloseCause, SessionTransport};
use crate::metrics::ShardCounters;
use crate::namespace::resolve;
use crate::owner::dispatch::{expire_auth, finish_deferred, on_large_decoded, on_message, Handled};
use crate::owner::outbound::encode_frames;
use crate::query_string::QueryString;
use crate::session::new_session_id;
use crate::shard::Shard;
use crate::time::now_ms;
use crate::webtransport::codec::{
    classify, listen_request, push_path, related, reply_number, sort_message, Bucket, FrameReader,
    LineReader, Outbound, Request,
};
use crate::webtransport::spread::Slot;
use crate::webtransport::{
    MAX_DATAGRAMS_PER_SECOND, MAX_DATAGRAM_BURST, MAX_DATAGRAM_BYTES, MAX_LISTENS_PER_SESSION,
    MAX_STREAM_BACKLOG_BYTES, MAX_STREAM_MESSAGE_BYTES, MAX_WEBTRANSPORT_SESSIONS,
    STREAM_OPEN_TIMEOUT,
};

/// The close reason of a session that asked for more than [`MAX_LISTENS_PER_SESSION`].
const TOO_MANY_LISTENS: &str = "too many listens on one WebTransport session";

/// Counts a session in its shard's `webtransport_sessions` while it lives.
struct Counted(Rc<ShardCounters>);

impl Counted {
    fn new(counters: Rc<ShardCounters>) -> Counted {
        counters.webtransport_session(true);
        Counted(counters)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.webtransport_session(false);
    }
}

/// Serves one connection handed to this shard; `slot` counts it there until it ends.
pub async fn serve_session(shard: Rc<Shard>, incoming: IncomingSession, slot: Slot) {
    let request = match incoming.await {
        Ok(request) => request,
        Err(error) => {
            debug!(%error, "WebTransport session request failed");
            return;
        }
    };
    // The slot counts this session too.
    if slot.total() > MAX_WEBTRANSPORT_SESSIONS {
        request.too_many_requests().await;
        return;
    }
    let query = request
        .path()
        .split_once('?')
        .map(|(_, query)| QueryString::parse(query));
    let namespace = resolve(
        query.as_ref().and_then(|query| query.get("ns")),
        Some(request.authority()),
        &shard.config.default_namespace,
    );
    let Ok(namespace) = namespace else {
        request.not_found().await;
        return;
    };
    let previous = query
        .as_ref()
        .and_then(|query| query.get("ls"))
        .map(str::to_owned);
    let host = request.authority().to_owned();
    let Ok(connection) = request.accept().await else {
        return;
    };
    let _counted = Counted::new(shard.counters.clone());
    let Ok(Ok((send, recv))) =
        tokio::time::timeout(STREAM_OPEN_TIMEOUT, connection.accept_bi()).await
    else {
        connection.close(VarInt::from_u32(1008), b"no stream opened");
        return;
    };
    let Ok(session_id) = new_session_id() else {
        return;
    };
    let max_datagram = connection
        .max_datagram_size()
        .unwrap_or(0)
        .min(MAX_DATAGRAM_BYTES);
    let outlet = Rc::new(Outlet::new(Box::new(connection.clone()), max_datagram));
    let transport: Rc<dyn Transport> = outlet.clone();
    let id = shard.next_conn_id();
    let edge = Rc::new(EdgeConn::new(
        id,
        transport,
        shard.edge.budget().clone(),
        shard.counters.clone(),
    ));
    // As on a WebSocket (the same time, a millisecond behind the clock), the handshake
    // goes first.
    edge.write([encode_frames(handshake(now_ms(), &host, &session_id))]);
    let side = attach(&shard, &edge, namespace, session_id, previous.as_deref());
    let writer = tokio::task::spawn_local(write_lines(outlet.clone(), edge.clone(), send));
    let ended = run(&shard, &edge, &outlet, &side, &connection, recv).await;
    detach_session(&shard, id, &side);
    let cause = ended.as_ref().map_or(CloseCause::Client, |reason| {
        CloseCause::of_reason(&reason.text)
    });
    shard
        .counters
        .session_closed(SessionTransport::WebTransport, cause);
    match ended {
        Some(reason) => {
            if reason.text == SHUTDOWN_CLOSE {
                debug!(conn = id, reason = %reason.text, "closing WebTransport session");
            } else {
                info!(conn = id, reason = %reason.text, "closing WebTransport session");
            }
            // What waits on the stream goes first, for a moment.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), outlet.drained()).await;
            connection.close(
                VarInt::from_u32(u32::from(u16::from(reason.code))),
                reason.text.as_bytes(),
            );
        }
        None => debug!(conn = id, "WebTransport session ended by the client"),
    }
    outlet.finish();
    writer.abort();
    edge.detach();
}

/// The session's loop: the client's stream lines and datagrams go to the owner; ends with the
/// reason to close with, or `None` when the client went.
async fn run(
    shard: &Shard,
    edge: &EdgeConn,
    outlet: &Outlet,
    side: &OwnerSide,
    connection: &Connection,
    mut recv: RecvStream,
) -> Option<CloseReason> {
    let mut shutdown = shard.shutdown.clone();
    let mut lines = LineReader::new(MAX_STREAM_MESSAGE_BYTES);
    let mut bucket = Bucket::new(MAX_DATAGRAMS_PER_SECOND, MAX_DATAGRAM_BURST, now_ms());
    let mut listens = 0usize;
    let mut buffer = vec![0u8; 16 * 1024];
    let write_timeout = shard.config.http.write_timeout;
    loop {
        if let Some(reason) = edge.closing() {
            return Some(reason);
        }
        if edge.write_failed() {
            return Some(CloseReason::new(CloseCode::Policy, SLOW_READER_CLOSE));
        }
        let mut messages = Vec::new();
        tokio::select! {
            biased;
            _ = shutdown.changed() => {
                return Some(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
            }
            _ = edge.notified() => continue,
            // Bytes wait in the outbox for the stream's backlog to shrink.
            written = edge.drained(), if edge.has_pending() => {
                if written.is_err() {
                    return None;
                }
                continue;
            }
            _ = write_stalled(edge, write_timeout), if edge.has_pending() => {
                if edge.blocked_for().is_some_and(|blocked| blocked >= write_timeout) {
                    return Some(CloseReason::new(CloseCode::Policy, UNWRITABLE_DROP));
                }
                continue;
            }
            read = recv.read(&mut buffer) => match read {
                Ok(Some(read)) => {
                    if let Err(error) = lines.feed(&buffer[..read], |line| messages.push(line)) {
                        return Some(CloseReason::new(CloseCode::Size, error.to_string()));
                    }
                }
                Ok(None) | Err(_) => return None,
            },
            datagram = connection.receive_datagram() => match datagram {
                Ok(datagram) => {
                    // Only writes travel as datagrams; the rest needs the stream's order.
                    let payload = datagram.payload();
                    match std::str::from_utf8(&payload) {
                        Ok(text) if bucket.take(now_ms()) && classify(text) == Request::Write => {
                            messages.push(text.to_owned());
                        }
                        // Over the rate, or not a write: dropped, as the network may drop any.
                        _ => {}
                    }
                }
                Err(_) => return None,
            },
            _ = crate::edge::websocket::auth_expiry(edge.auth_expiry()) => match side {
                OwnerSide::Local(session) => expire_auth(shard, session),
                OwnerSide::Remote(owner) => {
                    edge.set_auth_expiry(None);
                    shard.send_to_owner(*owner, ToOwner::AuthExpired { conn: edge.id() });
                }
            },
        }
        for message in &messages {
            match classify(message) {
                Request::Listen if listens >= MAX_LISTENS_PER_SESSION => {
                    return Some(CloseReason::new(CloseCode::Policy, TOO_MANY_LISTENS));
                }
                Request::Listen => {
                    listens += 1;
                    if let Some(listen) = listen_request(message) {
                        outlet.pending_listens.borrow_mut().push(listen);
                    }
                }
                Request::Unlisten => listens = listens.saturating_sub(1),
                _ => {}
            }
        }
        if messages.is_empty() {
            continue;
        }
        match side {
            OwnerSide::Local(session) => {
                // This core's databases take no new request while an edge is far behind.
                shard.owner.outgoing().room().await;
                edge.cork();
                let mut refused = None;
                for message in messages {
                    let handled = match on_message(shard, session, message) {
                        Ok(Handled::Done) => Ok(()),
                        // A message waiting for the cluster's claim on its database (none is
                        // longer than the stream's limit): the next ones wait behind it.
                        Ok(Handled::ParseOffThread(deferred)) => {
                            edge.uncork();
                            let decoded = finish_deferred(deferred).await;
                            edge.cork();
                            match decoded {
                                Some(decoded) => on_large_decoded(shard, session, decoded),
                                None => Err(CloseReason::new(
                                    CloseCode::Error,
                                    "a message could not be decoded",
                                )),
                            }
                        }
                        Err(reason) => Err(reason),
                    };
                    if let Err(reason) = handled {
                        refused = Some(reason);
                        break;
                    }
                }
                edge.uncork();
                if refused.is_some() {
                    return refused;
                }
            }
            OwnerSide::Remote(owner) => {
                if !send_to_owner(shard, edge, *owner, messages, false).await {
                    return Some(CloseReason::new(CloseCode::Away, SHUTDOWN_CLOSE));
                }
            }
        }
    }
}

/// Writes the outlet's stream lines as they come, until the session ends.
async fn write_lines(outlet: Rc<Outlet>, edge: Rc<EdgeConn>, mut send: SendStream) {
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
trait DatagramSink {
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
struct Outlet {
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
    pending_listens: RefCell<Vec<(u64, String)>>,
}

impl Outlet {
    fn new(datagrams: Box<dyn DatagramSink>, max_datagram: usize) -> Outlet {
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
    async fn drained(&self) {
        while !self.lines.borrow().is_empty() && !self.failed.get() {
            self.written.notified().await;
        }
    }

    /// Nothing more will be written: the writer ends.
    fn finish(&self) {
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
    use crate::budget::{HttpBudgets, ShardBudget};
    use crate::owner::outbound::{ConnHandle, Route};
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
            crate::edge::socket::Sent::Pending
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
