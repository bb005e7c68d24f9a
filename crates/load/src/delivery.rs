//! Whether every message reached every member of its room (chat): the writes acknowledged
//! and the events received are counted by the write's send stamp, in every tester process,
//! and compared over the stamps that every process measured. Latency histograms cannot tell
//! a lost push from a slow one; this can.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::scenario::{Kind, Scenario};

/// A write sent this long before the end of the measured time still counts only if its
/// events arrived before the end: later writes are left out of the check.
pub const GRACE_US: u64 = 2_000_000;

/// The most examples of writes delivered wrongly that a report keeps.
const MAX_SAMPLES: usize = 5;

/// What one process counted, from the end of its warm-up until its connections closed.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// The send stamps this process measured (µs since the epoch), both ends included: from
    /// the end of its warm-up to [`GRACE_US`] before the end of its measured time.
    pub window: Option<(u64, u64)>,
    /// Acknowledged writes by send stamp (two writers may share a microsecond).
    pub acked: BTreeMap<u64, u32>,
    /// Events received by send stamp, over all of the process's connections.
    pub received: BTreeMap<u64, u32>,
}

/// The check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// Acknowledged writes whose send stamp every process measured.
    pub writes: u64,
    /// The events each of them must cause: one at each member of its room.
    pub per_write: u32,
    /// Writes that reached fewer members than that, and more.
    pub short: u64,
    pub extra: u64,
    /// Examples: (send stamp, events received, events due).
    pub samples: Vec<(u64, u32, u32)>,
}

impl Ledger {
    pub fn is_empty(&self) -> bool {
        self.window.is_none() && self.acked.is_empty() && self.received.is_empty()
    }

    pub fn ack(&mut self, stamp: u64) {
        *self.acked.entry(stamp).or_default() += 1;
    }

    pub fn receive(&mut self, stamp: u64) {
        *self.received.entry(stamp).or_default() += 1;
    }

    /// The ledgers of several processes as one: counts summed, the window the one they all
    /// measured (none if one of them measured nothing).
    pub fn merge(ledgers: &[Ledger]) -> Ledger {
        let mut merged = Ledger {
            window: ledgers.first().and_then(|ledger| ledger.window),
            ..Ledger::default()
        };
        for ledger in ledgers {
            merged.window = match (merged.window, ledger.window) {
                (Some((a, b)), Some((c, d))) => Some((a.max(c), b.min(d))),
                _ => None,
            };
            for (stamp, count) in &ledger.acked {
                *merged.acked.entry(*stamp).or_default() += count;
            }
            for (stamp, count) in &ledger.received {
                *merged.received.entry(*stamp).or_default() += count;
            }
        }
        merged
    }

    /// Compares, for every acknowledged write in the window, the events received with the
    /// events due. `None` where the scenario does not say how many are due.
    pub fn check(&self, scenario: &Scenario) -> Option<Delivery> {
        let per_write = per_write(scenario)?;
        let (start, end) = self.window?;
        let mut delivery = Delivery {
            writes: 0,
            per_write,
            short: 0,
            extra: 0,
            samples: Vec::new(),
        };
        if start > end {
            return Some(delivery);
        }
        for (stamp, writes) in self.acked.range(start..=end) {
            delivery.writes += u64::from(*writes);
            let due = writes * per_write;
            let got = self.received.get(stamp).copied().unwrap_or(0);
            if got == due {
                continue;
            }
            if got < due {
                delivery.short += 1;
            } else {
                delivery.extra += 1;
            }
            if delivery.samples.len() < MAX_SAMPLES {
                delivery.samples.push((*stamp, got, due));
            }
        }
        Some(delivery)
    }
}

/// The events a write must cause: chat with every room full (each member listens to its
/// room, the writer included).
fn per_write(scenario: &Scenario) -> Option<u32> {
    let full = scenario.connections.is_multiple_of(scenario.room_size);
    (scenario.kind == Kind::Chat && full)
        .then(|| u32::try_from(scenario.room_size).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(connections: usize) -> Scenario {
        Scenario {
            kind: Kind::Chat,
            connections,
            room_size: 3,
            ..Scenario::default()
        }
    }

    #[test]
    fn every_write_in_the_window_must_reach_each_member() {
        let mut one = Ledger {
            window: Some((100, 200)),
            ..Ledger::default()
        };
        let mut two = Ledger {
            window: Some((110, 300)),
            ..Ledger::default()
        };
        // Stamp 150: two writers in the same microsecond, six events over both processes.
        one.ack(150);
        two.ack(150);
        for _ in 0..4 {
            one.receive(150);
        }
        two.receive(150);
        two.receive(150);
        // Stamp 160: one member missed it. Stamps 105 and 250 lie outside the shared window.
        one.ack(160);
        one.receive(160);
        two.receive(160);
        one.ack(105);
        two.ack(250);
        let merged = Ledger::merge(&[one, two]);
        assert_eq!(merged.window, Some((110, 200)));
        let delivery = merged.check(&chat(9));
        assert_eq!(
            delivery,
            Some(Delivery {
                writes: 3,
                per_write: 3,
                short: 1,
                extra: 0,
                samples: vec![(160, 2, 3)],
            })
        );
    }

    #[test]
    fn no_check_without_full_rooms_or_a_window() {
        let mut ledger = Ledger {
            window: Some((0, 10)),
            ..Ledger::default()
        };
        ledger.ack(5);
        assert_eq!(ledger.check(&chat(10)), None, "a room of one member");
        ledger.receive(5);
        ledger.receive(5);
        ledger.receive(5);
        ledger.receive(5);
        assert_eq!(
            ledger.check(&chat(9)).map(|d| (d.short, d.extra)),
            Some((0, 1))
        );
        ledger.window = None;
        assert_eq!(ledger.check(&chat(9)), None);
        assert_eq!(Ledger::merge(&[ledger, Ledger::default()]).window, None);
    }
}
