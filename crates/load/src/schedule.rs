//! A connection's timetable of writes: when each of its writers is due next, open loop.

use serde_json::Value;
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::plan::Plan;
use crate::wire;

/// A writer more than this many intervals behind its timetable skips ahead (counted).
const MAX_BEHIND_INTERVALS: u32 = 10;

/// When each writer's next write is due.
pub struct Schedule {
    due: Vec<Instant>,
    sent: u64,
}

impl Schedule {
    pub fn new(plan: &Plan) -> Schedule {
        let start = Instant::now();
        Schedule {
            due: plan.writers.iter().map(|w| start + w.offset).collect(),
            sent: 0,
        }
    }

    pub fn next(&self) -> Option<Instant> {
        self.due.iter().min().copied()
    }

    /// When the next write is due, or an hour from now for a connection that never writes.
    pub fn next_or_idle(&self) -> Instant {
        self.next()
            .unwrap_or_else(|| Instant::now() + std::time::Duration::from_secs(3600))
    }

    /// When the next write is due once the connection is `ready` to write (subscribed to its
    /// room), or an hour from now before then.
    pub fn next_when(&self, ready: bool) -> Instant {
        if ready {
            self.next_or_idle()
        } else {
            Instant::now() + std::time::Duration::from_secs(3600)
        }
    }

    /// The writes (action and body) due now, oldest first, counted as sent. Open loop: every
    /// write that is due is sent, however slow the server; only a writer far behind skips
    /// ahead, and counts what it skipped.
    pub fn due_writes(&mut self, plan: &Plan, metrics: &Metrics) -> Vec<(&'static str, Value)> {
        let now = Instant::now();
        let mut writes = Vec::new();
        for (writer, next) in plan.writers.iter().zip(self.due.iter_mut()) {
            if *next > now {
                continue;
            }
            if now.duration_since(*next) > writer.interval * MAX_BEHIND_INTERVALS {
                let behind = (now.duration_since(*next).as_nanos()
                    / writer.interval.as_nanos().max(1)) as u64;
                metrics.count(|c| c.writes_missed += behind);
                *next = now;
            }
            while *next <= now {
                self.sent += 1;
                let random = self.sent.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ plan.index as u64;
                writes.push(writer.write.request(self.sent, wire::now_us(), random));
                metrics.count(|c| c.writes_sent += 1);
                *next += writer.interval;
            }
        }
        writes
    }
}
