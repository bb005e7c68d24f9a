//! What waits for an owner's next volatile tick: the databases with volatile changes not yet
//! pushed and the replies those changes hold back. Plain state of the owner; the tick that
//! flushes it is `owner::volatile`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};

use hearth_sync::ConnId;
use tokio::sync::Notify;

/// What waits for the owner's next tick.
#[derive(Default)]
pub struct VolatileTicks {
    /// Databases with volatile changes not yet pushed.
    dirty: RefCell<BTreeSet<String>>,
    /// Encoded replies of volatile writes, per database, in the order they were made.
    held: RefCell<HashMap<String, Vec<(ConnId, String)>>>,
    wake: Notify,
    /// Flushes done, for the tests and the logs.
    ticks: Cell<u64>,
}

impl VolatileTicks {
    /// `namespace`'s database has volatile changes: a tick is due.
    pub fn mark(&self, namespace: &str) {
        let was_idle = {
            let mut dirty = self.dirty.borrow_mut();
            let was_idle = dirty.is_empty();
            dirty.insert(namespace.to_owned());
            was_idle
        };
        if was_idle {
            self.wake.notify_one();
        }
    }

    /// Holds `reply`, the encoded reply of a volatile write of `conn`, until the next tick.
    pub fn hold_reply(&self, namespace: &str, conn: ConnId, reply: String) {
        self.held
            .borrow_mut()
            .entry(namespace.to_owned())
            .or_default()
            .push((conn, reply));
        self.mark(namespace);
    }

    pub fn ticks(&self) -> u64 {
        self.ticks.get()
    }

    /// The databases marked since the last flush, which starts a new tick.
    pub fn take_dirty(&self) -> BTreeSet<String> {
        let dirty = std::mem::take(&mut *self.dirty.borrow_mut());
        if !dirty.is_empty() {
            self.ticks.set(self.ticks.get() + 1);
        }
        dirty
    }

    /// The replies held for `namespace`'s volatile writes, in the order they were made.
    pub fn take_held(&self, namespace: &str) -> Vec<(ConnId, String)> {
        self.held.borrow_mut().remove(namespace).unwrap_or_default()
    }

    /// Whether no database waits for a tick.
    pub fn is_idle(&self) -> bool {
        self.dirty.borrow().is_empty()
    }

    /// Resolves when a database is marked while the ticks were idle.
    pub async fn woken(&self) {
        self.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marking_wakes_the_tick_once() {
        let ticks = VolatileTicks::default();
        ticks.mark("a");
        ticks.mark("a");
        ticks.mark("b");
        assert_eq!(ticks.dirty.borrow().len(), 2);
        ticks.hold_reply("c", 7, "ok".to_owned());
        assert_eq!(ticks.held.borrow()["c"], vec![(7, "ok".to_owned())]);
    }
}
