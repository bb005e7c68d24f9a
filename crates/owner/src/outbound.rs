//! A connection's outbound side on the core that owns its database. Each message, encoded once
//! as WebSocket frames, carries its durability tag (see `hearth_persist::Gate`): it waits in the held
//! queue until its write is on disk, then goes to the socket at once when the socket is on
//! this core, or into this core's next batch for the core that holds the socket (`link`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::IpAddr;

use hearth_ground::cross_core::RealtimeTransport;
use std::rc::Rc;

use bytes::Bytes;
use hearth_sync::ConnId;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use hearth_edge::frames::encode_frames;
use hearth_edge::EdgeConn;
use hearth_ground::app_check::AppCheckSeen;
use hearth_ground::close::{CloseReason, SLOW_READER_CLOSE};
use hearth_ground::cross_core::{EdgeItem, MessageBatch, MoveCause, Outgoing};
use hearth_persist::{HeldQueue, Pushed, Tagger};

/// Where a connection's messages go once they may leave.
pub enum Route {
    /// The connection's socket is on this core: written at once.
    Local(Rc<EdgeConn>),
    /// The socket is on another core (its edge): the messages leave with this core's next
    /// batch for that edge.
    Remote { edge: usize, outgoing: Rc<Outgoing> },
}

/// The owner's handle on one session of its database: a WebSocket connection, on this core or
/// on another.
pub struct ConnHandle {
    pub id: ConnId,
    pub namespace: String,
    pub session_id: String,
    /// Encoded messages with their durability tags, until their writes are durable. They are
    /// not counted in the server's answer budget: they wait for the server's own disk, not for
    /// the client, leave at the next log sync whatever the client does, and are mostly one
    /// copy shared by every listener; counting them per connection would close readers that
    /// keep up whenever a large push fans out in strict durability. Once they leave, what the
    /// socket refuses is counted (by the edge's outbox).
    queue: HeldQueue<Bytes>,
    route: Route,
    /// Set once the owner asked the connection to close: nothing more is queued.
    closing: Cell<bool>,
    /// Set once the owner stopped handling the connection's requests for a move
    /// ([`ConnHandle::stop_for_move`]): nothing more is queued either, but it may still be
    /// closed instead.
    stopped: Cell<bool>,
    /// When the connection's credential expires (seconds since the epoch), as the owner set it.
    auth_expires_at: Cell<Option<u64>>,
    /// What its App Check token was found to be (`app_check`).
    app_check: Cell<AppCheckSeen>,
    /// The client's address as its edge saw it (`Opening::address`); `None` where unknown.
    address: Option<IpAddr>,
    /// What carries the session (for its audit entries).
    transport: Cell<RealtimeTransport>,
    /// A read was refused (`owner::dispatch::refuse_read`): the session is to close once its
    /// replies have left.
    refused_reads: Cell<bool>,
    /// While one of the connection's messages from another core waits to be finished (for
    /// its database's claim, or its decoding off the thread: `owner::intake`), the batches
    /// that arrive after it, to be handled after it in order. `None` while nothing waits.
    held_batches: RefCell<Option<VecDeque<MessageBatch>>>,
}

impl ConnHandle {
    pub fn new(
        id: ConnId,
        namespace: String,
        session_id: String,
        tagger: Tagger,
        route: Route,
    ) -> ConnHandle {
        ConnHandle {
            id,
            namespace,
            session_id,
            queue: HeldQueue::new(id, tagger),
            route,
            closing: Cell::new(false),
            stopped: Cell::new(false),
            auth_expires_at: Cell::new(None),
            app_check: Cell::new(AppCheckSeen::Missing),
            address: None,
            transport: Cell::new(RealtimeTransport::WebSocket),
            refused_reads: Cell::new(false),
            held_batches: RefCell::new(None),
        }
    }

    /// The handle, with the client's address as its edge saw it.
    pub fn with_address(mut self, address: Option<IpAddr>) -> ConnHandle {
        self.address = address;
        self
    }

    /// Marks the session to be closed: a listen was left unanswered.
    pub fn refuse_reads(&self) {
        self.refused_reads.set(true);
    }

    /// Whether a read of the session was refused.
    pub fn reads_refused(&self) -> bool {
        self.refused_reads.get()
    }

    /// Keeps `batch` for later if a message of the connection waits (see
    /// [`ConnHandle::start_holding`]); otherwise gives it back, to be handled now.
    pub fn hold_if_waiting(&self, batch: MessageBatch) -> Option<MessageBatch> {
        match self.held_batches.borrow_mut().as_mut() {
            Some(held) => {
                held.push_back(batch);
                None
            }
            None => Some(batch),
        }
    }

    /// From now on, batches that arrive are held until [`ConnHandle::next_held`] has given
    /// them all back.
    pub fn start_holding(&self) {
        self.held_batches
            .borrow_mut()
            .get_or_insert_with(VecDeque::new);
    }

    /// The next held batch; when none is left, batches are handled on arrival again.
    pub fn next_held(&self) -> Option<MessageBatch> {
        let mut held = self.held_batches.borrow_mut();
        let next = held.as_mut().and_then(VecDeque::pop_front);
        if next.is_none() {
            *held = None;
        }
        next
    }

    /// Sends one message, split into frames when it is long.
    pub fn send_text(&self, text: String) {
        self.send_frames(&encode_frames(text));
    }

    /// Sends encoded frames that may be shared with other connections: now if their write is
    /// durable, else as soon as it is.
    pub fn send_frames(&self, frames: &Bytes) {
        if self.is_closing() {
            return;
        }
        match self.queue.push(std::slice::from_ref(frames)) {
            Pushed::Ready => self.deliver(),
            Pushed::Held => {}
            Pushed::Overflow => self.overflow(),
        }
    }

    /// The disk caught up: the held messages may leave.
    pub fn wake_after_disk(&self) {
        self.queue.woken();
        self.deliver();
    }

    /// Moves the durable front of the held queue to the socket, or to the edge's batch.
    fn deliver(&self) {
        let ready = std::iter::from_fn(|| self.queue.pop_ready());
        match &self.route {
            Route::Local(edge) => edge.write(ready),
            Route::Remote { edge, outgoing } => {
                for frames in ready {
                    outgoing.push(
                        *edge,
                        EdgeItem::Frames {
                            conn: self.id,
                            frames,
                        },
                    );
                }
            }
        }
    }

    /// Closes a connection whose held messages grew past the limit, and lets go of them.
    fn overflow(&self) {
        self.queue.clear();
        self.close_with(CloseReason::new(CloseCode::Policy, SLOW_READER_CLOSE), true);
    }

    /// Drops the messages that wait for writes that will never be durable (the log failed).
    pub fn discard_held(&self) {
        self.queue.discard_held();
    }

    /// The messages that depend on a write from `first` on, which will never be
    /// acknowledged (`replica::sync_set`): the acknowledgement of a write becomes an
    /// `unavailable` reply that says it may or may not have been applied (so that the SDK
    /// does not send it again, as it would after a lost connection, to be refused there
    /// while this attempt survives on a copy), and everything else is dropped (pushes and
    /// answers that show the writes). Whether anything changed.
    pub fn give_up_from(&self, first: u64) -> bool {
        self.queue.replace_from(first, |frames| {
            let hearth_edge::reply_scan::FromOwner::Reply { request, status } =
                hearth_edge::reply_scan::read(frames)
            else {
                return None;
            };
            // A write's acknowledgement is `ok` with an empty text (`ReplyData::EmptyText`).
            let write_ack = status == "ok" && frames.ends_with(br#","d":""}}}"#);
            write_ack.then(|| {
                encode_frames(hearth_wire::encode_reply_status(
                    request,
                    "unavailable",
                    GIVEN_UP_REPLY,
                ))
            })
        })
    }

    /// Asks the connection's edge to close it.
    pub fn close(&self, reason: CloseReason) {
        self.close_with(reason, false);
    }

    fn close_with(&self, reason: CloseReason, shed: bool) {
        if self.closing.replace(true) {
            return;
        }
        match &self.route {
            Route::Local(edge) if shed => edge.close_shedding(reason),
            Route::Local(edge) => edge.close(reason),
            Route::Remote { edge, outgoing } => outgoing.push(
                *edge,
                EdgeItem::Close {
                    conn: self.id,
                    reason,
                    shed,
                },
            ),
        }
    }

    /// Nothing more is sent to the connection from here: its session moved to another
    /// owner (`sessions::move_connection`), and its edge carries on with that one.
    pub fn detach(&self) {
        self.closing.set(true);
        self.queue.clear();
    }

    /// Stops handling the requests of a connection held by another node, whose session is to
    /// move to the database's next owner (this node is stopping: `Shard::drain`); the replies
    /// to what it handled still leave as their writes become durable
    /// ([`ConnHandle::replies_sent`]), then [`ConnHandle::move_away`]. `false`, and nothing
    /// done, for a connection held by this node, whose socket closes with it.
    pub fn stop_for_move(&self, local_edges: usize) -> bool {
        let Route::Remote { edge, .. } = &self.route else {
            return false;
        };
        *edge >= local_edges && !self.closing.get() && !self.stopped.replace(true)
    }

    /// Whether every reply the connection was sent has left (none waits for the disk).
    pub fn replies_sent(&self) -> bool {
        self.queue.is_empty()
    }

    /// Asks the edge of a connection stopped by [`ConnHandle::stop_for_move`] to move its
    /// session; it comes after every reply sent before.
    pub fn move_away(&self) {
        let Route::Remote { edge, outgoing } = &self.route else {
            return;
        };
        if self.closing.replace(true) {
            return;
        }
        let cause = MoveCause::OwnerStopping;
        outgoing.push(
            *edge,
            EdgeItem::Moved {
                conn: self.id,
                cause,
            },
        );
    }

    /// Whether the connection is closing: asked by the owner, or, on this core, by its
    /// socket's side.
    pub fn is_closing(&self) -> bool {
        self.closing.get()
            || self.stopped.get()
            || matches!(&self.route, Route::Local(edge) if edge.closing().is_some())
    }

    pub fn set_auth_expiry(&self, expires_at: Option<u64>) {
        self.auth_expires_at.set(expires_at);
        match &self.route {
            Route::Local(edge) => edge.set_auth_expiry(expires_at),
            Route::Remote { edge, outgoing } => outgoing.push(
                *edge,
                EdgeItem::AuthExpiry {
                    conn: self.id,
                    expires_at,
                },
            ),
        }
    }

    pub fn auth_expiry(&self) -> Option<u64> {
        self.auth_expires_at.get()
    }

    /// What its App Check token was found to be.
    pub fn app_check(&self) -> AppCheckSeen {
        self.app_check.get()
    }

    pub fn set_app_check(&self, seen: AppCheckSeen) {
        self.app_check.set(seen);
    }

    /// The client's address as its edge saw it (the socket's peer), for limits keyed by
    /// address; `None` where unknown.
    pub fn address(&self) -> Option<IpAddr> {
        self.address
    }

    /// What carries the session.
    pub fn transport(&self) -> RealtimeTransport {
        self.transport.get()
    }

    /// The session is carried by `transport` (set once it is opened).
    pub fn set_transport(&self, transport: RealtimeTransport) {
        self.transport.set(transport);
    }

    /// The socket's side, when it is on this core.
    pub fn local_edge(&self) -> Option<&EdgeConn> {
        match &self.route {
            Route::Local(edge) => Some(edge),
            Route::Remote { .. } => None,
        }
    }
}

/// What a client is told of a write whose acknowledgement was given up.
pub const GIVEN_UP_REPLY: &str = "this node lost the right to acknowledge the write before it \
     reached a copy that may take the database over; it may or may not have been applied";

#[cfg(test)]
#[path = "outbound_tests.rs"]
mod tests;
