//! Sessions over the shards: the first shard accepts every QUIC connection of the endpoint
//! and hands it, before its handshake, to the shard holding the fewest WebTransport
//! sessions, where the session runs as its edge (like a WebSocket connection on the shard
//! that accepted it).
//!
//! Handing over the `Incoming` before it is accepted moves the connection's QUIC work too:
//! quinn starts a connection's driver (handshake, decryption, packet assembly, encryption,
//! congestion control, timers) with `tokio::spawn` when the connection is accepted, so on
//! the runtime of whoever awaits it. What stays on the first shard is the endpoint's driver:
//! reading the one UDP socket (`recvmmsg`) and routing each packet to its connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use wtransport::endpoint::IncomingSession;

/// The WebTransport sessions each shard holds, opening or open, shared by all shards.
#[derive(Debug)]
pub struct Load {
    per_shard: Box<[AtomicUsize]>,
}

impl Load {
    pub fn new(shards: usize) -> Arc<Load> {
        Arc::new(Load {
            per_shard: (0..shards.max(1)).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// The shard with the fewest sessions (the lowest index among equals), counting the new
    /// one there until its [`Slot`] is dropped.
    pub fn take(self: &Arc<Load>) -> Slot {
        let shard = self
            .per_shard
            .iter()
            .enumerate()
            .min_by_key(|(index, count)| (count.load(Ordering::Relaxed), *index))
            .map_or(0, |(index, _)| index);
        self.per_shard[shard].fetch_add(1, Ordering::Relaxed);
        Slot {
            load: self.clone(),
            shard,
        }
    }

    /// Sessions on every shard together.
    pub fn total(&self) -> usize {
        self.per_shard
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
    }

    /// Sessions on `shard`.
    pub fn on(&self, shard: usize) -> usize {
        self.per_shard
            .get(shard)
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }
}

/// One session's place on a shard, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    load: Arc<Load>,
    pub shard: usize,
}

impl Slot {
    /// Sessions on every shard, this one included.
    pub fn total(&self) -> usize {
        self.load.total()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.load.per_shard[self.shard].fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection handed to a shard, with its place there.
pub struct Handed {
    pub incoming: IncomingSession,
    pub slot: Slot,
}

/// What the accepting shard needs to hand connections out.
pub struct Spread {
    pub load: Arc<Load>,
    /// Each shard's queue of handed connections, by shard index.
    pub shards: Vec<mpsc::UnboundedSender<Handed>>,
}

impl Spread {
    /// Hands `incoming` to the least loaded shard; dropped (and so refused) if that shard
    /// is gone.
    pub fn hand(&self, incoming: IncomingSession) {
        let slot = self.load.take();
        if let Some(queue) = self.shards.get(slot.shard) {
            let _ = queue.send(Handed { incoming, slot });
        }
    }
}

/// The queues of a server with `shards` shards: the spread for the accepting shard, and
/// each shard's receiving end.
pub fn queues(shards: usize) -> (Spread, Vec<mpsc::UnboundedReceiver<Handed>>) {
    let (senders, receivers) = (0..shards.max(1))
        .map(|_| mpsc::unbounded_channel())
        .unzip();
    (
        Spread {
            load: Load::new(shards),
            shards: senders,
        },
        receivers,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_go_to_the_shard_with_the_fewest() {
        let load = Load::new(3);
        let slots: Vec<Slot> = (0..6).map(|_| load.take()).collect();
        let shards: Vec<usize> = slots.iter().map(|slot| slot.shard).collect();
        assert_eq!(shards, vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(load.total(), 6);
        // Two sessions of shard 1 end: the next two go there.
        let mut slots = slots;
        slots.retain(|slot| slot.shard != 1);
        assert_eq!((load.on(1), load.total()), (0, 4));
        let next: Vec<usize> = (0..3).map(|_| load.take().shard).collect();
        // Each is dropped at once, so shard 1 stays the emptiest.
        assert_eq!(next, vec![1, 1, 1]);
        let kept = load.take();
        assert_eq!((kept.shard, kept.total()), (1, 5));
    }

    #[test]
    fn one_shard_takes_everything() {
        let load = Load::new(1);
        let a = load.take();
        let b = load.take();
        assert_eq!((a.shard, b.shard, load.total()), (0, 0, 2));
        drop(a);
        assert_eq!(b.total(), 1);
    }
}
