//! The socket side of a WebSocket connection, on the core that accepted it (its edge): the
//! outbox of bytes not yet taken by the kernel, and what the connection's task must react to
//! (a close asked for, a socket that filled up, a credential's expiry). Whatever core owns
//! the connection's database decides what is written; this is where it is written.

use std::cell::{Cell, RefCell, RefMut};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use hearth_sync::ConnId;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::socket::{Deferred, Outbox, Sent, Transport};
use crate::upstream::Upstream;
use crate::uring::{Batched, SendRing};
use hearth_ground::close::{CloseReason, MAX_OUTBOUND_BYTES, SLOW_READER_CLOSE};
use hearth_ground::cross_core::MoveCause;
use hearth_ground::metrics::labels::Channel;
use hearth_ground::metrics::ShardCounters;
use hearth_net::budget::ShardBudget;

pub struct EdgeConn {
    /// The connection's id on its owner; a new one each time its session moves to another
    /// owner (`edge::rehome`), so that a late message of the old one finds nothing here.
    id: Cell<ConnId>,
    /// Encoded messages that may leave, until the kernel takes them.
    outbox: Rc<Outbox>,
    /// The edge shard's counters, which count the bytes sent.
    counters: Rc<ShardCounters>,
    /// Wakes the connection's task: to close, to wait for a full socket, or to rearm a timer.
    notify: Notify,
    closing: RefCell<Option<CloseReason>>,
    /// When the connection's credential expires (seconds since the epoch).
    auth_expires_at: Cell<Option<u64>>,
    /// The edge's batched sends, when the socket takes part in them.
    ring: RefCell<Option<Rc<SendRing>>>,
    /// What its session needs upstream, for a connection whose session can move to another
    /// owner while its socket stays (a WebSocket of another node's database, with etcd).
    upstream: RefCell<Option<Box<Upstream>>>,
    /// Its session must move: why (the connection's task acts on it).
    moving: Cell<Option<MoveCause>>,
}

impl EdgeConn {
    pub fn new(
        id: ConnId,
        transport: Rc<dyn Transport>,
        budget: Rc<ShardBudget>,
        counters: Rc<ShardCounters>,
    ) -> EdgeConn {
        EdgeConn {
            id: Cell::new(id),
            outbox: Rc::new(Outbox::new(transport, Some(budget))),
            counters,
            notify: Notify::new(),
            closing: RefCell::new(None),
            auth_expires_at: Cell::new(None),
            ring: RefCell::new(None),
            upstream: RefCell::new(None),
            moving: Cell::new(None),
        }
    }

    pub fn id(&self) -> ConnId {
        self.id.get()
    }

    /// The connection's session moved to another owner under id `id`.
    pub fn set_id(&self, id: ConnId) {
        self.id.set(id);
    }

    /// From now on the connection's session can move (`edge::rehome`): what it sends and is
    /// sent is followed in `upstream`.
    pub fn follow_upstream(&self, upstream: Upstream) {
        *self.upstream.borrow_mut() = Some(Box::new(upstream));
    }

    /// What the session needs upstream, when it can move.
    pub fn upstream(&self) -> RefMut<'_, Option<Box<Upstream>>> {
        self.upstream.borrow_mut()
    }

    /// Takes note of a message the client sends to the owner.
    pub fn note_sent(&self, text: &str) {
        if let Some(upstream) = self.upstream.borrow_mut().as_mut() {
            upstream.note_sent(text);
        }
    }

    /// The connection's session must leave its owner: its task moves it, or, for a
    /// connection that cannot move, the connection closes as before.
    pub fn owner_moved(&self, cause: MoveCause) {
        if self.upstream.borrow().is_none() {
            self.close(cause.close_reason());
            return;
        }
        if self.moving.get().is_none() {
            self.moving.set(Some(cause));
        }
        self.notify.notify_one();
    }

    /// Why the session must move, once.
    pub fn take_moving(&self) -> Option<MoveCause> {
        self.moving.take()
    }

    /// Lets the connection's writes join the edge's batched sends (`edge::uring`).
    pub fn send_through(&self, ring: Rc<SendRing>) {
        *self.ring.borrow_mut() = Some(ring);
    }

    /// Writes `items` after whatever waits, as far as the kernel takes them: now, or when the
    /// edge's open batch of sends closes.
    pub fn write(self: &Rc<Self>, items: impl IntoIterator<Item = Bytes>) {
        if self.closing.borrow().is_some() {
            return;
        }
        let mut bytes = 0;
        let upstream = &self.upstream;
        let items = items
            .into_iter()
            .filter(|item| match upstream.borrow_mut().as_mut() {
                Some(upstream) => upstream.lets_through(item),
                None => true,
            })
            .inspect(|item| bytes += item.len());
        let ring = self.ring.borrow().clone().filter(|ring| ring.is_open());
        let sent = match ring {
            Some(ring) => match self.outbox.defer(items) {
                Deferred::Enlist => {
                    ring.join(self.clone());
                    None
                }
                Deferred::InBatch => None,
                Deferred::Now(sent) => Some(sent),
            },
            None => Some(self.outbox.send(items)),
        };
        self.counters.bytes_out(Channel::Websocket, bytes);
        if let Some(sent) = sent {
            self.after_send(sent);
        }
        let refused = match self.upstream.borrow_mut().as_mut() {
            Some(upstream) => upstream.take_refusal(),
            None => None,
        };
        if let Some(refused) = refused {
            self.close(CloseReason::new(CloseCode::Again, refused));
        }
    }

    fn after_send(&self, sent: Sent) {
        match sent {
            Sent::Written => {}
            // The task waits for the socket to take the rest (or lifts the cork itself).
            Sent::Pending
                if self.outbox.bytes() > MAX_OUTBOUND_BYTES || self.outbox.over_budget() =>
            {
                self.close_shedding(CloseReason::new(CloseCode::Policy, SLOW_READER_CLOSE));
            }
            Sent::Pending if self.outbox.is_corked() => {}
            Sent::Pending | Sent::Failed => self.notify.notify_one(),
        }
    }

    /// Closes a connection that holds too much, and lets go of the bytes that have not started
    /// to leave: the client cannot have them any more, it reconnects and resyncs.
    pub fn close_shedding(&self, reason: CloseReason) {
        // Shedding keeps what the socket has started to take: let the batch try first.
        if self.outbox.is_enlisted() {
            let ring = self.ring.borrow().clone();
            if let Some(ring) = ring {
                ring.flush();
            }
        }
        self.close(reason);
        self.outbox.shed();
    }

    /// The outbox, which the WebSocket library writes through too.
    pub fn outbox(&self) -> Rc<Outbox> {
        self.outbox.clone()
    }

    /// Moves the connection onto another socket (a long-polling session onto its WebSocket):
    /// what `first` holds for that socket leaves first, then what waits here, then the rest.
    pub fn move_onto(&self, transport: Rc<dyn Transport>, first: &Outbox) {
        let sent = self.outbox.move_onto(transport, first);
        self.after_send(sent);
    }

    /// While the task answers a burst of requests (or the edge writes a batch from another
    /// core), the connection's messages are written together.
    pub fn cork(&self) {
        self.outbox.cork();
    }

    /// Writes what was queued while corked; the task is woken if the socket is full.
    pub fn uncork(&self) {
        let sent = self.outbox.uncork();
        self.after_send(sent);
    }

    /// Whether bytes wait for the socket to become writable.
    pub fn has_pending(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Whether the socket failed on a write.
    pub fn write_failed(&self) -> bool {
        self.outbox.failed()
    }

    /// How long the client has not accepted data that waits for it.
    pub fn blocked_for(&self) -> Option<Duration> {
        self.outbox.blocked_for()
    }

    /// Completes when every pending byte is written.
    pub async fn drained(&self) -> std::io::Result<()> {
        std::future::poll_fn(|cx| self.outbox.poll_drain(cx)).await
    }

    /// The connection ended: nothing more is written, and the socket may close.
    pub fn detach(&self) {
        self.outbox.detach();
    }

    /// Asks the connection's task to close the socket; the first reason wins.
    pub fn close(&self, reason: CloseReason) {
        let mut closing = self.closing.borrow_mut();
        if closing.is_none() {
            *closing = Some(reason);
        }
        self.notify.notify_one();
    }

    pub fn closing(&self) -> Option<CloseReason> {
        self.closing.borrow().clone()
    }

    pub fn set_auth_expiry(&self, expires_at: Option<u64>) {
        self.auth_expires_at.set(expires_at);
        // Wake the connection's task so that it waits for the new deadline.
        self.notify.notify_one();
    }

    pub fn auth_expiry(&self) -> Option<u64> {
        self.auth_expires_at.get()
    }

    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

impl Batched for EdgeConn {
    fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    fn after_batch(&self, sent: Sent) {
        self.after_send(sent);
    }
}
