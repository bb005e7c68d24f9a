//! The triggers of one owner (`triggers`): the server's registry its databases follow, and
//! the changes their writes made, each waiting for its write's log position to be released
//! (durable, and on the followers in a cluster) before it goes to the delivery thread.
//! Without a Functions emulator to deliver to (`--functions-emulator`), registrations are
//! kept but no database takes triggers, so writes pay nothing.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;

use hearth_triggers::{Delivery, DeliverySink, TriggerRegistry};

/// How often an owner logs how far its declared triggers' receivers confirmed: a follower
/// drops those events, so that a failover sends again about this much of them.
pub const CONFIRMATIONS_EVERY_MS: u64 = 1000;

/// The triggers of one owner: the server's registry, where durable changes go, and the
/// changes that wait for their write to be durable.
#[derive(Default)]
pub struct OwnerTriggers {
    registry: Arc<TriggerRegistry>,
    sink: Option<DeliverySink>,
    /// Changes in the order they were made, each with its write's log position.
    waiting: RefCell<VecDeque<(u64, Delivery)>>,
    /// Whether this node owns (`true`) or follows each database, as last told to the
    /// declared triggers' outbox.
    roles: RefCell<std::collections::HashMap<String, bool>>,
    /// When the owner last logged its receivers' confirmations for its followers (ms).
    confirmations_at: std::cell::Cell<u64>,
}

impl OwnerTriggers {
    pub fn new(registry: Arc<TriggerRegistry>, sink: Option<DeliverySink>) -> OwnerTriggers {
        OwnerTriggers {
            registry,
            sink,
            waiting: RefCell::new(VecDeque::new()),
            roles: RefCell::default(),
            confirmations_at: std::cell::Cell::new(0),
        }
    }

    /// Whether the receivers' confirmations are due to be logged again (at most once per
    /// [`CONFIRMATIONS_EVERY_MS`]); if so, the time is noted.
    pub fn confirmations_due(&self, now_ms: u64) -> bool {
        if now_ms.saturating_sub(self.confirmations_at.get()) < CONFIRMATIONS_EVERY_MS {
            return false;
        }
        self.confirmations_at.set(now_ms);
        true
    }

    /// Whether changes are delivered anywhere (to a Functions emulator, or the declared
    /// triggers' outbox): without, no database follows the registry, so writes pay nothing.
    pub fn delivers(&self) -> bool {
        self.sink.is_some() || self.registry.is_declarable()
    }

    /// Whether `database`'s role here changed since last noted (`owned`: this node takes
    /// its writes; else it follows an owner elsewhere).
    pub fn role_changed(&self, database: &str, owned: bool) -> bool {
        let mut roles = self.roles.borrow_mut();
        match roles.get_mut(database) {
            Some(role) if *role == owned => false,
            Some(role) => {
                *role = owned;
                true
            }
            None => {
                roles.insert(database.to_owned(), owned);
                true
            }
        }
    }

    pub fn registry(&self) -> &Arc<TriggerRegistry> {
        &self.registry
    }

    /// Where changes go; `None` without a Functions emulator.
    pub fn sink(&self) -> Option<&DeliverySink> {
        self.sink.as_ref()
    }

    /// Keeps `delivery` until the log position `seq` is released.
    pub fn hold(&self, seq: u64, delivery: Delivery) {
        self.waiting.borrow_mut().push_back((seq, delivery));
    }

    /// Sends what waited for the log position `released` (durable, and on the followers).
    pub fn release(&self, released: u64) {
        let Some(sink) = &self.sink else {
            return;
        };
        let mut waiting = self.waiting.borrow_mut();
        while waiting.front().is_some_and(|(seq, _)| *seq <= released) {
            if let Some((_, delivery)) = waiting.pop_front() {
                sink.send(delivery);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hearth_sync::triggers::TriggerChange;
    use hearth_triggers::deliver::queue;

    use super::*;

    #[test]
    fn changes_wait_for_their_write_to_be_released() {
        let (sink, deliveries) = queue(10);
        let triggers = OwnerTriggers::new(Arc::default(), Some(sink));
        let delivery = |seq: u64| Delivery {
            namespace: "db".into(),
            change: TriggerChange {
                trigger: "t".into(),
                path: hearth_tree::Path::root(),
                params: Vec::new(),
                before: hearth_tree::Node::empty(),
                after: hearth_tree::Node::empty(),
            },
            event_id: seq.to_string(),
            time_ms: 0,
            writer: Arc::default(),
        };
        for seq in [3, 5, 5, 8] {
            triggers
                .waiting
                .borrow_mut()
                .push_back((seq, delivery(seq)));
        }
        triggers.release(4);
        let ids: Vec<String> = deliveries.try_iter().map(|d| d.event_id).collect();
        assert_eq!(ids, vec!["3"]);
        triggers.release(5);
        let ids: Vec<String> = deliveries.try_iter().map(|d| d.event_id).collect();
        assert_eq!(ids, vec!["5", "5"]);
        triggers.release(100);
        assert_eq!(deliveries.try_iter().count(), 1);
    }
}
