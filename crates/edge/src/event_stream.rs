//! An event stream's queue: on the core that owns its database, its events with their
//! durability tags; on the core that holds its HTTP connection when that is another one, the
//! events that core's owner released, until hyper takes them. And the fan-out that gives every
//! stream of one push the same bytes.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

use bytes::Bytes;
use hearth_sync::{ConnId, Push};
use hearth_tree::Path;
use hearth_wire::{encode_sse_payload, SSE_AUTH_REVOKED, SSE_CANCEL, SSE_EVENT_END};
use tracing::info;

use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use hearth_ground::close::CloseReason;
use hearth_ground::cross_core::{EdgeItem, Outgoing};
use hearth_ground::metrics::labels::StreamEnd;
use hearth_ground::metrics::ShardCounters;
use hearth_net::budget::SharedBudgets;
use hearth_persist::{HeldQueue, Pushed, Tagger};

/// The shard's handle on one open event stream.
pub struct StreamHandle {
    pub id: ConnId,
    pub namespace: String,
    /// The stream's location: event paths are relative to it.
    pub path: Path,
    /// `format=export`: data keeps its priorities.
    pub export: bool,
    /// Chunks with their durability tags (see `hearth_persist::Gate`).
    queue: HeldQueue<Bytes>,
    /// The server's answer budget, which the queued chunks are counted in (see
    /// `http_unsent`); `None` in tests of the queue alone.
    pub(super) budgets: Option<SharedBudgets>,
    pub(super) waker: RefCell<Option<Waker>>,
    closing: Cell<bool>,
    /// Set when the stream's HTTP connection is on another core (its edge): released chunks
    /// and the close go there, where a stream handle without a gate queues them for the body.
    remote: Option<(usize, Rc<Outgoing>)>,
    /// Whether the edge was told to end the stream.
    close_sent: Cell<bool>,
    /// Where the ends the server decides are counted; `None` in tests of the queue alone.
    counters: Option<Rc<ShardCounters>>,
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
            remote: None,
            close_sent: Cell::new(false),
            counters: None,
        }
    }

    /// Counts the ends of the stream that the server decides in `counters`.
    pub fn counted_by(mut self, counters: Rc<ShardCounters>) -> StreamHandle {
        self.counters = Some(counters);
        self
    }

    /// Ends the stream for `end`, said in the log and counted (once: later causes of a stream
    /// already closing are not counted).
    fn end_by_server(&self, end: StreamEnd) {
        if self.closing.get() {
            return;
        }
        info!(
            conn = self.id,
            namespace = %self.namespace,
            cause = end.label(),
            "ending event stream"
        );
        if let Some(counters) = &self.counters {
            counters.stream_ended(end);
        }
        self.close();
    }

    /// Sends the released chunks and the close to the stream's HTTP connection on core `edge`.
    pub fn held_by(mut self, edge: usize, outgoing: Rc<Outgoing>) -> StreamHandle {
        self.remote = Some((edge, outgoing));
        self
    }

    /// Counts the stream's unsent chunks in the server's answer budget, like REST answers.
    pub fn counted_in(mut self, budgets: SharedBudgets) -> StreamHandle {
        self.budgets = Some(budgets);
        self
    }

    /// Queues the chunks of one event. A client that reads slower than its events arrive is
    /// cut off at [`hearth_ground::close::MAX_OUTBOUND_BYTES`], as WebSocket clients are, and a
    /// stream whose event does not fit in the server's answer budget is ended; the client
    /// reconnects and starts again from a fresh `put`.
    pub fn send(&self, chunks: &[Bytes]) {
        if self.closing.get() {
            return;
        }
        let bytes: usize = chunks.iter().map(Bytes::len).sum();
        if let Some(budgets) = &self.budgets {
            if !budgets.answers.try_take(bytes) {
                self.end_by_server(StreamEnd::AnswersBusy);
                return;
            }
        }
        let queued = self.queue.bytes();
        match self.queue.push(chunks) {
            Pushed::Ready if self.remote.is_some() => self.forward(),
            Pushed::Ready => self.wake(),
            Pushed::Held => {}
            Pushed::Overflow => {
                self.give_back(queued + bytes);
                self.end_by_server(StreamEnd::SlowReader);
            }
        }
    }

    pub(super) fn give_back(&self, bytes: usize) {
        if let Some(budgets) = &self.budgets {
            budgets.answers.give_back(bytes);
        }
    }

    /// The disk caught up: held events may be ready.
    pub fn wake_after_disk(&self) {
        self.queue.woken();
        match self.remote {
            Some(_) => self.forward(),
            None => self.wake(),
        }
    }

    /// Moves the durable front of the queue into the batch for the stream's edge.
    fn forward(&self) {
        let Some((edge, outgoing)) = &self.remote else {
            return;
        };
        while let Some(frames) = self.queue.pop_ready() {
            outgoing.push(
                *edge,
                EdgeItem::Frames {
                    conn: self.id,
                    frames,
                },
            );
        }
        // A closing stream ends once what it may still send has left (events held for the
        // disk are waited for, as on this core).
        if self.closing.get() && self.queue.is_empty() && !self.close_sent.replace(true) {
            outgoing.push(
                *edge,
                EdgeItem::Close {
                    conn: self.id,
                    reason: CloseReason::new(CloseCode::Normal, "the stream ended"),
                    shed: false,
                },
            );
        }
    }

    /// Drops the events that depend on a write from `first` on, which replication gave up
    /// (`HeldQueue::discard_from`); whether any was dropped.
    pub fn discard_from(&self, first: u64) -> bool {
        let queued = self.queue.bytes();
        let dropped = self.queue.discard_from(first);
        self.give_back(queued - self.queue.bytes());
        dropped
    }

    /// Drops the events that wait for writes that will never be durable (the log failed).
    pub fn discard_held(&self) {
        let queued = self.queue.bytes();
        self.queue.discard_held();
        self.give_back(queued - self.queue.bytes());
    }

    /// Whether nothing is left to send.
    pub(super) fn is_drained(&self) -> bool {
        self.queue.is_empty()
    }

    /// RULES HOOK target: the stream's read permission was withdrawn. Sends `cancel` and ends
    /// the stream. (`route_effects` calls this for an `Effect::Cancel` aimed at the stream.)
    pub fn cancel(&self) {
        self.send(&[Bytes::from_static(SSE_CANCEL)]);
        self.end_by_server(StreamEnd::Cancel);
    }

    /// The stream's credential expired or was revoked: sends `auth_revoked` and ends the
    /// stream; the client reconnects with a fresh credential.
    pub fn revoke_auth(&self) {
        self.send(&[Bytes::from_static(SSE_AUTH_REVOKED)]);
        self.end_by_server(StreamEnd::AuthRevoked);
    }

    /// Ends the stream once what is queued has been sent.
    pub fn close(&self) {
        self.closing.set(true);
        match self.remote {
            Some(_) => self.forward(),
            None => self.wake(),
        }
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
    pub(super) fn pop(&self) -> Option<Bytes> {
        self.queue.pop_ready()
    }
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        self.give_back(self.queue.bytes());
    }
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
    fn the_ends_the_server_decides_are_counted_once_by_cause() {
        let counters = Rc::new(ShardCounters::default());
        let open = || {
            StreamHandle::new(1, "ns".into(), Path::root(), false, Tagger::open())
                .counted_by(counters.clone())
        };
        let cancelled = open();
        cancelled.cancel();
        cancelled.cancel();
        cancelled.revoke_auth();
        open().revoke_auth();
        let slow = open();
        slow.send(&[Bytes::from(vec![
            b'x';
            hearth_ground::close::MAX_OUTBOUND_BYTES
                + 1
        ])]);
        let closed_by_client = open();
        closed_by_client.close();
        let ends = counters.snapshot().stream_ends;
        assert_eq!(ends[StreamEnd::Cancel as usize], 1);
        assert_eq!(ends[StreamEnd::AuthRevoked as usize], 1);
        assert_eq!(ends[StreamEnd::SlowReader as usize], 1);
        assert_eq!(ends[StreamEnd::AnswersBusy as usize], 0);
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
        let budgets = hearth_net::budget::HttpBudgets::for_answers(100);
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
        let roomy = hearth_net::budget::HttpBudgets::for_answers(usize::MAX);
        let overflowing = StreamHandle::new(2, "ns".into(), Path::root(), false, Tagger::open())
            .counted_in(roomy.clone());
        let big = Bytes::from(vec![b'x'; hearth_ground::close::MAX_OUTBOUND_BYTES]);
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
        for _ in 0..=(hearth_ground::close::MAX_OUTBOUND_BYTES / big.len()) {
            handle.send(std::slice::from_ref(&big));
        }
        assert!(handle.is_closing());
        assert_eq!(drain(&handle), "");
    }
}
