//! Batched socket sends through io_uring (`hearth serve --io-uring-sends`).
//!
//! While a batch is open (an owner's batch for this edge, a log sync's release, a burst of
//! requests), a connection's outbox does not write at once: it joins the batch. When the batch
//! closes, every joined outbox gets one send request (`IORING_OP_SEND`, or `SENDMSG` for
//! several buffers, with `MSG_DONTWAIT` so that a full socket answers `EAGAIN` at once rather
//! than waiting) and the whole batch leaves in one `io_uring_enter`, instead of one `write` per
//! connection. Each result is then accounted by the outbox exactly as the `writev` it replaces
//! (`Outbox::complete`): bytes taken, the rest waiting for the socket with the connection's
//! task woken, or a failed socket. A connection sees its bytes in the same order either way:
//! an outbox in the batch queues everything after what it already holds.
//!
//! One ring per shard thread, made and used only by it (`SINGLE_ISSUER`); the `unsafe` part,
//! handing buffers to the kernel, is the `hearth-uring` crate.

use std::cell::{Cell, RefCell};
use std::io::{self, IoSlice};
use std::rc::Rc;

use hearth_uring::{Send, Sender};

use crate::socket::{Outbox, Sent};

/// Submission queue entries of a ring: the most sends in one `io_uring_enter`. A larger batch
/// leaves in several.
pub const RING_ENTRIES: u32 = 1024;

/// A connection whose outbox may join a batch, and who reacts to the outcome.
pub trait Batched {
    fn outbox(&self) -> &Outbox;
    /// The batched send of the outbox ended with `sent` (as `Outbox::send` would have).
    fn after_batch(&self, sent: Sent);
}

/// The shard's ring and the connections of the open batch.
pub struct SendRing {
    sender: RefCell<Sender>,
    /// How many batches are open (they nest: a burst of requests may release a log sync).
    depth: Cell<u32>,
    joined: RefCell<Vec<Rc<dyn Batched>>>,
}

impl SendRing {
    /// A ring for this thread, or the reason the kernel refused one.
    pub fn new() -> io::Result<Rc<SendRing>> {
        Ok(Rc::new(SendRing {
            sender: RefCell::new(Sender::new(RING_ENTRIES)?),
            depth: Cell::new(0),
            joined: RefCell::new(Vec::new()),
        }))
    }

    /// Opens a batch, which sends what joined it when the last open batch is dropped.
    pub fn batch(self: &Rc<Self>) -> SendBatch {
        self.depth.set(self.depth.get() + 1);
        SendBatch { ring: self.clone() }
    }

    /// Whether a batch is open, so that writes may join it.
    pub fn is_open(&self) -> bool {
        self.depth.get() > 0
    }

    /// Adds a connection whose outbox just enlisted (`Deferred::Enlist`).
    pub fn join(&self, conn: Rc<dyn Batched>) {
        self.joined.borrow_mut().push(conn);
    }

    /// Sends what joined the open batch now (also before a connection sheds its queue, which
    /// must see what the socket took).
    pub fn flush(&self) {
        loop {
            let joined = std::mem::take(&mut *self.joined.borrow_mut());
            if joined.is_empty() {
                return;
            }
            let results = self.send(&joined);
            // Reactions may close connections, which may flush again: the ring is free.
            for (conn, result) in joined.iter().zip(results) {
                let sent = match result {
                    Some(result) => conn.outbox().complete(result),
                    None => conn.outbox().complete_unbatched(),
                };
                conn.after_batch(sent);
            }
        }
    }

    /// One send per connection of `joined` that has bytes for a socket, all submitted
    /// together. Per connection: the result, or `None` when it was not sent through the ring.
    fn send(&self, joined: &[Rc<dyn Batched>]) -> Vec<Option<io::Result<usize>>> {
        let views: Vec<_> = joined
            .iter()
            .map(|conn| conn.outbox().batch_view())
            .collect();
        let mut slices: Vec<IoSlice<'_>> = Vec::new();
        let mut ranges = Vec::with_capacity(views.len());
        for view in &views {
            let start = slices.len();
            if let Some(view) = view {
                slices.extend(view.slices());
            }
            ranges.push(start..slices.len());
        }
        let mut sends = Vec::with_capacity(views.len());
        let mut sent_index = Vec::with_capacity(views.len());
        for (index, (view, range)) in views.iter().zip(&ranges).enumerate() {
            let Some(fd) = view.as_ref().and_then(|view| view.fd()) else {
                continue;
            };
            sends.push(Send {
                fd,
                bufs: &slices[range.clone()],
            });
            sent_index.push(index);
        }
        let mut results: Vec<Option<io::Result<usize>>> = Vec::with_capacity(joined.len());
        results.resize_with(joined.len(), || None);
        let outcomes = self.sender.borrow_mut().send_all(&sends);
        for (index, outcome) in sent_index.into_iter().zip(outcomes) {
            results[index] = outcome;
        }
        results
    }
}

/// An open batch: dropping the last one sends what joined.
pub struct SendBatch {
    ring: Rc<SendRing>,
}

impl Drop for SendBatch {
    fn drop(&mut self) {
        let depth = self.ring.depth.get().saturating_sub(1);
        self.ring.depth.set(depth);
        if depth == 0 {
            self.ring.flush();
        }
    }
}
