//! What an edge does with a batch from an owner: write each connection's frames (all of one
//! connection's frames of the batch with one `writev`) or queue an event stream's, close what
//! the owner closed, and rearm credential timers.

use bytes::Bytes;
use hearth_sync::ConnId;
use rustc_hash::FxHashMap;

use crate::edge::EdgeTarget;
use crate::link::{EdgeItem, ToEdge};
use crate::shard::Shard;

/// Carries out `batch`, then tells its owner that the bytes are written (or queued in the
/// connections' outboxes, where the server's answer budget counts them).
pub fn on_batch(shard: &Shard, mut batch: ToEdge) {
    // Writing to a connection never calls back into the shard, so the map stays borrowed.
    let conns = shard.edge_conns();
    let mut pending = Pending::default();
    for item in batch.items.drain(..) {
        match item {
            EdgeItem::Frames { conn, frames } => match conns.get(&conn) {
                Some(EdgeTarget::Socket(_)) => pending.add(conn, frames),
                // Durable already: the stream's own queue here has no gate.
                Some(EdgeTarget::Stream(stream)) => stream.send(&[frames]),
                None => {}
            },
            EdgeItem::Close { conn, reason, shed } => {
                pending.write(&conns, conn);
                match conns.get(&conn) {
                    Some(EdgeTarget::Socket(edge)) if shed => edge.close_shedding(reason),
                    Some(EdgeTarget::Socket(edge)) => edge.close(reason),
                    Some(EdgeTarget::Stream(stream)) => stream.close(),
                    None => {}
                }
            }
            EdgeItem::AuthExpiry { conn, expires_at } => {
                if let Some(EdgeTarget::Socket(edge)) = conns.get(&conn) {
                    edge.set_auth_expiry(expires_at);
                }
            }
        }
    }
    pending.write_all(&conns);
    drop(conns);
    batch.written();
}

/// The frames of a batch, per connection in the order they came, until they are written.
/// Gathering them (rather than corking the outbox) keeps what the kernel takes at once out of
/// the answer budget, as for frames written on the owner's core.
#[derive(Default)]
struct Pending {
    index: FxHashMap<ConnId, usize>,
    frames: Vec<(ConnId, Vec<Bytes>)>,
}

impl Pending {
    fn add(&mut self, conn: ConnId, frames: Bytes) {
        let slot = *self.index.entry(conn).or_insert_with(|| {
            self.frames.push((conn, Vec::new()));
            self.frames.len() - 1
        });
        self.frames[slot].1.push(frames);
    }

    /// Writes what waits for `conn` now (before its close).
    fn write(&mut self, conns: &FxHashMap<ConnId, EdgeTarget>, conn: ConnId) {
        if let Some(&slot) = self.index.get(&conn) {
            let frames = std::mem::take(&mut self.frames[slot].1);
            write_to(conns, conn, frames);
        }
    }

    fn write_all(self, conns: &FxHashMap<ConnId, EdgeTarget>) {
        for (conn, frames) in self.frames {
            write_to(conns, conn, frames);
        }
    }
}

fn write_to(conns: &FxHashMap<ConnId, EdgeTarget>, conn: ConnId, frames: Vec<Bytes>) {
    if frames.is_empty() {
        return;
    }
    if let Some(EdgeTarget::Socket(edge)) = conns.get(&conn) {
        edge.write(frames);
    }
}
