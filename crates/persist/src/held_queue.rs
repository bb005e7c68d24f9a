//! A client's outbound queue under the durability gate, shared by WebSocket connections and
//! event streams: items carry their tags, leave in order once their writes are durable, and
//! the queue registers itself with the gate to be woken when it holds something back.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use bytes::Bytes;
use hearth_sync::ConnId;
use tungstenite::Message;

use super::gate::Tagger;

/// The most bytes that may wait in one client's queue. A client that reads slower than its
/// data arrives is disconnected rather than allowed to grow the server's memory (the server
/// closes a WebSocket connection with 1008 and ends an event stream, `close.rs` there); the
/// server's own answer budget may end it sooner.
pub const MAX_OUTBOUND_BYTES: usize = 64 * 1024 * 1024;

/// What a queue holds: anything with a size, for the [`MAX_OUTBOUND_BYTES`] limit.
pub trait Outbound: Clone {
    fn byte_len(&self) -> usize;
}

impl Outbound for Message {
    fn byte_len(&self) -> usize {
        self.len()
    }
}

impl Outbound for Bytes {
    fn byte_len(&self) -> usize {
        self.len()
    }
}

/// What [`HeldQueue::push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Queued and sendable now: wake the writer.
    Ready,
    /// Queued behind a write that is not durable yet; the gate wakes the queue later.
    Held,
    /// The client reads too slowly: the queue was emptied, and the client must be closed.
    Overflow,
}

pub struct HeldQueue<T> {
    /// The connection or stream, as the gate knows it.
    id: ConnId,
    tagger: Tagger,
    items: RefCell<VecDeque<(u64, T)>>,
    bytes: Cell<usize>,
    /// Whether the queue is registered with the gate to be woken.
    waiting: Cell<bool>,
}

impl<T: Outbound> HeldQueue<T> {
    pub fn new(id: ConnId, tagger: Tagger) -> HeldQueue<T> {
        HeldQueue {
            id,
            tagger,
            items: RefCell::new(VecDeque::new()),
            bytes: Cell::new(0),
            waiting: Cell::new(false),
        }
    }

    /// Queues `items`, tagged with their database's last log record.
    pub fn push(&self, items: &[T]) -> Pushed {
        let bytes: usize = items.iter().map(Outbound::byte_len).sum();
        let total = self.bytes.get() + bytes;
        if total > MAX_OUTBOUND_BYTES {
            self.clear();
            return Pushed::Overflow;
        }
        self.bytes.set(total);
        let tag = self.tagger.tag();
        self.items
            .borrow_mut()
            .extend(items.iter().map(|item| (tag, item.clone())));
        if self.tagger.gate.passes(tag) {
            Pushed::Ready
        } else {
            self.wait_for_disk();
            Pushed::Held
        }
    }

    /// The next item, if its write is durable.
    pub fn pop_ready(&self) -> Option<T> {
        let mut items = self.items.borrow_mut();
        let &(tag, _) = items.front()?;
        if !self.tagger.gate.passes(tag) {
            drop(items);
            self.wait_for_disk();
            return None;
        }
        let (_, item) = items.pop_front()?;
        drop(items);
        self.forget(item.byte_len());
        Some(item)
    }

    /// The gate woke the queue: it may register again.
    pub fn woken(&self) {
        self.waiting.set(false);
    }

    /// Drops every item: the client is being closed.
    pub fn clear(&self) {
        self.items.borrow_mut().clear();
        self.bytes.set(0);
    }

    /// Drops the items that wait for writes that will never be durable (the log failed).
    pub fn discard_held(&self) {
        let gate = &self.tagger.gate;
        let mut items = self.items.borrow_mut();
        items.retain(|(tag, _)| gate.passes(*tag));
        self.bytes
            .set(items.iter().map(|(_, item)| item.byte_len()).sum());
    }

    /// Drops the items that depend on a write from sequence number `first` on, whose
    /// acknowledgement must never be sent (replication gave it up: `replica::sync_set`).
    /// Whether any was dropped.
    pub fn discard_from(&self, first: u64) -> bool {
        self.replace_from(first, |_| None)
    }

    /// Replaces each item that depends on a write from `first` on with what `instead` makes
    /// of it (`None` drops it); whether anything changed.
    pub fn replace_from(&self, first: u64, mut instead: impl FnMut(&T) -> Option<T>) -> bool {
        let mut items = self.items.borrow_mut();
        let mut changed = false;
        let kept: VecDeque<(u64, T)> = std::mem::take(&mut *items)
            .into_iter()
            .filter_map(|(tag, item)| {
                if tag < first {
                    return Some((tag, item));
                }
                changed = true;
                instead(&item).map(|item| (tag, item))
            })
            .collect();
        *items = kept;
        self.bytes
            .set(items.iter().map(|(_, item)| item.byte_len()).sum());
        changed
    }

    pub fn is_empty(&self) -> bool {
        self.items.borrow().is_empty()
    }

    /// The bytes queued.
    pub fn bytes(&self) -> usize {
        self.bytes.get()
    }

    /// A copy of the item at `index` (the server's tests look at shared buffers).
    pub fn peek(&self, index: usize) -> Option<T> {
        self.items.borrow().get(index).map(|(_, item)| item.clone())
    }

    fn forget(&self, bytes: usize) {
        self.bytes.set(self.bytes.get().saturating_sub(bytes));
    }

    fn wait_for_disk(&self) {
        if !self.waiting.replace(true) {
            self.tagger.gate.wait(self.id);
        }
    }
}
