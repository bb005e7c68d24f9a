//! The edge role's state: the connections and event streams this core holds for databases
//! other cores own, its room on the queues to those owners, and its share of the answer
//! budget. Only this thread touches it, through the methods below; the code that acts on it
//! is the rest of `edge/` (and `sse` for event streams).

use std::cell::{Ref, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use hearth_sync::ConnId;
use rustc_hash::FxHashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use crate::conn::EdgeConn;
use crate::event_stream::StreamHandle;
use crate::uring::{SendBatch, SendRing};
use hearth_ground::cross_core::MAX_LINK_BYTES;
use hearth_ground::metrics::ShardCounters;
use hearth_net::budget::ShardBudget;

/// What this core holds for a database another core owns.
pub enum EdgeTarget {
    /// A WebSocket connection.
    Socket(Rc<EdgeConn>),
    /// An event stream's queue, which its response body drains.
    Stream(Rc<StreamHandle>),
}

pub struct Edge {
    /// The connections and event streams this core holds whose database another core owns.
    held: RefCell<FxHashMap<ConnId, EdgeTarget>>,
    /// Per owner: the bytes of messages this core may have in flight to it.
    owner_room: Vec<Arc<Semaphore>>,
    /// The shard's share of the answer budget, which its connections' queued pushes count in.
    budget: Rc<ShardBudget>,
    counters: Rc<ShardCounters>,
    /// The ring of batched sends, with `--io-uring-sends`.
    ring: Option<Rc<SendRing>>,
}

impl Edge {
    /// An edge holding nothing yet, with room toward each of `owners` shards; its sockets'
    /// sends are batched through io_uring if `io_uring_sends` (and the kernel allows it).
    pub fn new(
        owners: usize,
        budget: Rc<ShardBudget>,
        counters: Rc<ShardCounters>,
        io_uring_sends: bool,
    ) -> Edge {
        let ring = io_uring_sends
            .then(|| {
                SendRing::new()
                    .inspect_err(|error| {
                        warn!(%error, "no io_uring for batched sends; writing sockets one by one");
                    })
                    .ok()
            })
            .flatten();
        Edge {
            ring,
            held: RefCell::new(FxHashMap::default()),
            owner_room: (0..owners)
                .map(|_| Arc::new(Semaphore::new(MAX_LINK_BYTES)))
                .collect(),
            budget,
            counters,
        }
    }

    /// Opens a batch of socket sends: the writes to this core's sockets until it is dropped
    /// leave together (`edge::uring`). `None` without `--io-uring-sends`: they leave at once.
    pub fn send_batch(&self) -> Option<SendBatch> {
        self.ring.as_ref().map(SendRing::batch)
    }

    /// The ring of batched sends, for the owner of this core to open batches on too.
    pub fn send_ring(&self) -> Option<Rc<SendRing>> {
        self.ring.clone()
    }

    /// Lets `conn`, a plain TCP socket of this core, join the batched sends.
    pub fn batch_sends_of(&self, conn: &EdgeConn) {
        if let Some(ring) = &self.ring {
            conn.send_through(ring.clone());
        }
    }

    /// The shard's share of the answer budget.
    pub fn budget(&self) -> &Rc<ShardBudget> {
        &self.budget
    }

    /// Registers a connection or event stream `id` this core holds for a database another
    /// core owns.
    pub fn hold(&self, id: ConnId, target: EdgeTarget) {
        self.counters.held_for_other();
        self.held.borrow_mut().insert(id, target);
    }

    /// The connections and streams this core holds for other cores' databases, by id.
    pub fn held(&self) -> Ref<'_, FxHashMap<ConnId, EdgeTarget>> {
        self.held.borrow()
    }

    /// Forgets the connection or stream `id`, which ended.
    pub fn forget(&self, id: ConnId) {
        self.held.borrow_mut().remove(&id);
    }

    /// The event streams this core holds for other cores' databases.
    pub fn held_streams(&self) -> Vec<Rc<StreamHandle>> {
        let held = self.held.borrow();
        let streams = held.values().filter_map(|target| match target {
            EdgeTarget::Stream(stream) => Some(stream.clone()),
            EdgeTarget::Socket(_) => None,
        });
        streams.collect()
    }

    /// Room for `bytes` of messages in flight to `owner`: waits while the owner is behind by
    /// [`MAX_LINK_BYTES`]. `None` when the owner is gone (shutdown).
    pub async fn owner_room(&self, owner: usize, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let room = self.owner_room.get(owner)?.clone();
        // Never more than the whole room, so that a message larger than it still passes alone.
        let bytes = bytes.clamp(1, MAX_LINK_BYTES) as u32;
        room.acquire_many_owned(bytes).await.ok()
    }

    /// The bytes of messages in flight to every owner, for the metrics.
    pub fn bytes_to_owners(&self) -> usize {
        self.owner_room
            .iter()
            .map(|room| MAX_LINK_BYTES.saturating_sub(room.available_permits()))
            .sum()
    }
}
