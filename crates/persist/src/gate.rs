//! The durability gate: what a connection may be sent, given what is on disk.
//!
//! Every message queued for a client is tagged with the sequence number of the last log
//! record of the client's database at the moment it was produced. The message may leave only
//! once the shard's durable sequence number has reached its tag. That one rule gives both
//! promises of `--durability strict`: an acknowledgement is sent only after its write is on
//! disk, and no client ever sees data (a push, a read, a REST answer) that a crash could still
//! take away. It also keeps each connection's messages in order, since tags never decrease
//! along a queue.
//!
//! Messages about a database with no write in flight carry a tag that is already durable, so
//! they pass at once; other databases on the shard never wait for one that is writing.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use hearth_sync::ConnId;

/// The shard's durable position and the connections waiting for it to advance.
#[derive(Debug)]
pub struct Gate {
    /// Whether messages wait for durability at all (`strict`); `batch` and `none` acknowledge
    /// at once and document that.
    enforced: bool,
    durable: Cell<u64>,
    /// Connections and streams holding messages that are not yet durable. Each appears at
    /// most once: it registers when its first held message is queued and is taken off when
    /// the position advances.
    waiting: RefCell<Vec<ConnId>>,
    /// Woken when the position advances, for REST answers that wait for it.
    advanced: tokio::sync::Notify,
    /// Records whose acknowledgements replication gave up (`replica::sync_set`), with when:
    /// a REST answer that waited for one is an error, not a success. Kept for
    /// [`ABANDONED_KEPT_MS`], long enough for every waiter to have woken.
    abandoned: RefCell<Vec<(u64, Vec<u64>)>>,
}

/// How long the gate remembers records whose acknowledgements were given up.
pub const ABANDONED_KEPT_MS: u64 = 10_000;

impl Gate {
    pub fn new(enforced: bool, durable: u64) -> Gate {
        Gate {
            enforced,
            durable: Cell::new(durable),
            waiting: RefCell::new(Vec::new()),
            advanced: tokio::sync::Notify::new(),
            abandoned: RefCell::new(Vec::new()),
        }
    }

    /// A gate that lets everything through (tests, `--durability none`).
    pub fn open() -> Gate {
        Gate::new(false, 0)
    }

    /// The tag of a message produced now for a client of a database whose last log record is
    /// `database_seq`.
    pub fn tag(&self, database_seq: u64) -> u64 {
        if self.enforced {
            database_seq
        } else {
            0
        }
    }

    /// Whether messages wait for their writes to be durable (`--durability strict`).
    pub fn is_strict(&self) -> bool {
        self.enforced
    }

    /// Whether a message with `tag` may be sent.
    pub fn passes(&self, tag: u64) -> bool {
        tag <= self.durable.get()
    }

    pub fn durable(&self) -> u64 {
        self.durable.get()
    }

    /// Waits until a message with `tag` may be sent. Only for a tag the caller knows will be
    /// reached (a write on the local disk whose followers acknowledge it or are given up).
    pub async fn reached(&self, tag: u64) {
        loop {
            let advanced = self.advanced.notified();
            if self.passes(tag) {
                return;
            }
            advanced.await;
        }
    }

    /// Notes, at `now` (ms since the epoch), that the acknowledgements of records `seqs`
    /// (sorted) will never be sent.
    pub fn abandon(&self, seqs: &[u64], now: u64) {
        let mut abandoned = self.abandoned.borrow_mut();
        abandoned.retain(|(at, _)| now.saturating_sub(*at) < ABANDONED_KEPT_MS);
        abandoned.push((now, seqs.to_vec()));
    }

    /// Whether the acknowledgement of record `seq` was given up (`Gate::abandon`).
    pub fn was_abandoned(&self, seq: u64) -> bool {
        self.abandoned
            .borrow()
            .iter()
            .any(|(_, seqs)| seqs.binary_search(&seq).is_ok())
    }

    /// Registers `conn` to be woken when the durable position advances.
    pub fn wait(&self, conn: ConnId) {
        self.waiting.borrow_mut().push(conn);
    }

    /// Moves the durable position to `seq` and returns the connections to wake.
    pub fn advance(&self, seq: u64) -> Vec<ConnId> {
        if seq > self.durable.get() {
            self.durable.set(seq);
            self.advanced.notify_waiters();
        }
        std::mem::take(&mut *self.waiting.borrow_mut())
    }
}

/// What a client's outbound queue needs to tag its messages: the shard's gate and the last
/// log record of the client's database.
#[derive(Debug, Clone)]
pub struct Tagger {
    pub gate: Rc<Gate>,
    pub database_seq: Rc<Cell<u64>>,
}

impl Tagger {
    /// A tagger whose messages always pass (tests).
    pub fn open() -> Tagger {
        Tagger {
            gate: Rc::new(Gate::open()),
            database_seq: Rc::new(Cell::new(0)),
        }
    }

    /// The tag for a message produced now.
    pub fn tag(&self) -> u64 {
        self.gate.tag(self.database_seq.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_enforced_gate_holds_messages_until_their_write_is_durable() {
        let gate = Gate::new(true, 4);
        assert!(gate.passes(gate.tag(4)));
        assert!(!gate.passes(gate.tag(5)));
        gate.wait(7);
        assert_eq!(gate.advance(5), vec![7]);
        assert!(gate.passes(gate.tag(5)));
        assert!(gate.advance(6).is_empty());
    }

    #[test]
    fn an_open_gate_holds_nothing() {
        let gate = Gate::open();
        assert!(gate.passes(gate.tag(1_000)));
    }

    #[test]
    fn the_position_never_moves_back() {
        let gate = Gate::new(true, 9);
        gate.advance(3);
        assert_eq!(gate.durable(), 9);
    }
}
