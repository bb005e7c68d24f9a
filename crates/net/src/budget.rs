//! Process-wide budgets of HTTP bytes held in memory: request bodies being received and
//! answers not yet written to their sockets. The shards are threads of one process, so each
//! budget is one atomic counter shared by all of them; nothing waits on a budget, a request
//! that does not fit is refused at once.
//!
//! WebSocket connections count the pushes their sockets refused in the same answer budget,
//! through their shard's [`ShardBudget`]: pushes are the hot path, so a shard takes the
//! budget's bytes in grains and counts within them without touching the shared counter.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Default of `--body-budget-mib`: the most bytes of request bodies the whole server holds
/// while they arrive. Two bodies of the largest size a write may have fit at once
/// (`rest::MAX_REST_BODY_BYTES`); a body that would pass the budget is refused with 503, one
/// that can never fit with 413.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 512 * 1024 * 1024;

/// Default of `--answer-budget-mib`: the most bytes of answers the whole server holds that
/// were produced but not yet written to their sockets (clients that read slowly or not at
/// all): REST answers and event-stream chunks, and WebSocket pushes that a connection's
/// socket refused (counted per connection, even when one push's bytes are shared by many;
/// pushes waiting only for the disk are not counted, see `outbound::ConnHandle`). Past it, new REST
/// answers are refused with 503, and a WebSocket connection whose push does not fit is closed
/// as a slow reader is (1008, see `outbound::MAX_OUTBOUND_BYTES`).
pub const DEFAULT_ANSWER_BUDGET_BYTES: usize = 512 * 1024 * 1024;

/// Default of `--http-write-timeout-secs`: an HTTP connection whose answer, or a WebSocket
/// connection whose queued pushes, have not moved a single byte into the socket for this long
/// is closed, with whatever it still held.
pub const DEFAULT_HTTP_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A count of bytes that may not pass its limit, shared by every shard.
#[derive(Debug)]
pub struct ByteBudget {
    used: AtomicUsize,
    limit: usize,
}

impl ByteBudget {
    pub fn new(limit: usize) -> ByteBudget {
        ByteBudget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether nothing more fits.
    pub fn is_exhausted(&self) -> bool {
        self.used() >= self.limit
    }

    /// Takes `bytes` from the budget, or nothing when they do not fit.
    pub fn try_take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    /// Gives back bytes taken earlier.
    pub fn give_back(&self, bytes: usize) {
        // Saturating: a miscount must never wrap around into a budget that is always full.
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }
}

/// The HTTP budgets and timeouts of a running server (`hearth serve` flags).
#[derive(Debug)]
pub struct HttpBudgets {
    /// Request body bytes being received.
    pub bodies: ByteBudget,
    /// Answer bytes produced but not yet written to a socket.
    pub answers: ByteBudget,
    /// How long an answer may make no progress into its socket.
    pub write_timeout: Duration,
}

impl HttpBudgets {
    pub fn new(body_bytes: usize, answer_bytes: usize, write_timeout: Duration) -> HttpBudgets {
        HttpBudgets {
            bodies: ByteBudget::new(body_bytes),
            answers: ByteBudget::new(answer_bytes),
            write_timeout,
        }
    }
}

impl HttpBudgets {
    /// Budgets for tests of answers (here and in the crates that hold answers): `answers` bytes, the default timeout, no room for bodies.
    pub fn for_answers(answers: usize) -> SharedBudgets {
        Arc::new(HttpBudgets::new(1, answers, DEFAULT_HTTP_WRITE_TIMEOUT))
    }
}

impl Default for HttpBudgets {
    fn default() -> HttpBudgets {
        HttpBudgets::new(
            DEFAULT_BODY_BUDGET_BYTES,
            DEFAULT_ANSWER_BUDGET_BYTES,
            DEFAULT_HTTP_WRITE_TIMEOUT,
        )
    }
}

/// Shared by all shards: every clone of the server's settings points at the same counters.
pub type SharedBudgets = Arc<HttpBudgets>;

/// The part of a budget one request body holds; given back when the body is dropped.
pub struct Held<'a> {
    budget: &'a ByteBudget,
    bytes: usize,
}

impl<'a> Held<'a> {
    pub fn new(budget: &'a ByteBudget) -> Held<'a> {
        Held { budget, bytes: 0 }
    }

    /// Holds `bytes` more, or nothing when they do not fit.
    pub fn grow(&mut self, bytes: usize) -> bool {
        let taken = self.budget.try_take(bytes);
        if taken {
            self.bytes += bytes;
        }
        taken
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// How many bytes of the answer budget a shard takes at a time for its WebSocket connections.
/// A shard keeps at most two grains unused, so the budget the server can really hand out is
/// smaller than the flag's by at most two grains per shard.
pub const SHARD_BUDGET_GRAIN_BYTES: usize = 256 * 1024;

/// One shard's share of the answer budget, for its WebSocket connections' queued bytes.
/// Counting a push is an add or a subtract on the shard's own credit; the shared counter is
/// touched only when the credit runs out or piles up.
pub struct ShardBudget {
    budgets: SharedBudgets,
    /// Bytes taken from the shared budget and not yet handed to a connection.
    credit: Cell<usize>,
}

impl ShardBudget {
    pub fn new(budgets: SharedBudgets) -> Rc<ShardBudget> {
        Rc::new(ShardBudget {
            budgets,
            credit: Cell::new(0),
        })
    }

    /// Takes `bytes`, or nothing when they do not fit in the server's budget.
    pub fn take(&self, bytes: usize) -> bool {
        let credit = self.credit.get();
        if bytes <= credit {
            self.credit.set(credit - bytes);
            return true;
        }
        let missing = bytes - credit;
        let answers = &self.budgets.answers;
        // A grain more when it fits, so that the next pushes count locally; near the limit,
        // only what is missing.
        if answers.try_take(missing + SHARD_BUDGET_GRAIN_BYTES) {
            self.credit.set(SHARD_BUDGET_GRAIN_BYTES);
            true
        } else if answers.try_take(missing) {
            self.credit.set(0);
            true
        } else {
            false
        }
    }

    /// Gives back bytes taken earlier; what piles up beyond a grain goes back to the server.
    pub fn give_back(&self, bytes: usize) {
        let credit = self.credit.get() + bytes;
        if credit > 2 * SHARD_BUDGET_GRAIN_BYTES {
            self.budgets
                .answers
                .give_back(credit - SHARD_BUDGET_GRAIN_BYTES);
            self.credit.set(SHARD_BUDGET_GRAIN_BYTES);
        } else {
            self.credit.set(credit);
        }
    }
}

impl Drop for ShardBudget {
    fn drop(&mut self) {
        self.budgets.answers.give_back(self.credit.get());
    }
}

/// The part of a [`ShardBudget`] one queue holds: reconciled with the queue's size after
/// each change, so that bytes written at once are never counted.
pub struct Charge {
    budget: Option<Rc<ShardBudget>>,
    held: Cell<usize>,
}

impl Charge {
    /// A charge on `budget`; `None` counts nothing (a connection refused before it opened).
    pub fn new(budget: Option<Rc<ShardBudget>>) -> Charge {
        Charge {
            budget,
            held: Cell::new(0),
        }
    }

    /// Makes the charge `bytes`. False when the growth does not fit in the server's budget;
    /// the charge then stays as it was, and the caller must shed its bytes.
    pub fn settle(&self, bytes: usize) -> bool {
        let held = self.held.get();
        let Some(budget) = &self.budget else {
            return true;
        };
        if bytes > held {
            if !budget.take(bytes - held) {
                return false;
            }
        } else if bytes < held {
            budget.give_back(held - bytes);
        }
        self.held.set(bytes);
        true
    }

    pub fn held(&self) -> usize {
        self.held.get()
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.settle(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard_budget(limit: usize) -> (SharedBudgets, Rc<ShardBudget>) {
        let budgets = HttpBudgets::for_answers(limit);
        (budgets.clone(), ShardBudget::new(budgets))
    }

    #[test]
    fn a_shard_counts_small_pushes_in_its_own_grain() {
        let (budgets, shard) = shard_budget(10 * SHARD_BUDGET_GRAIN_BYTES);
        assert!(shard.take(100));
        assert_eq!(budgets.answers.used(), 100 + SHARD_BUDGET_GRAIN_BYTES);
        for _ in 0..100 {
            assert!(shard.take(1000));
            shard.give_back(1000);
        }
        assert_eq!(
            budgets.answers.used(),
            100 + SHARD_BUDGET_GRAIN_BYTES,
            "pushes within the grain never touch the shared counter"
        );
        shard.give_back(100);
        drop(shard);
        assert_eq!(budgets.answers.used(), 0);
    }

    #[test]
    fn a_shard_takes_the_last_bytes_without_a_grain_and_refuses_past_them() {
        let (budgets, shard) = shard_budget(SHARD_BUDGET_GRAIN_BYTES);
        assert!(shard.take(SHARD_BUDGET_GRAIN_BYTES - 10));
        assert!(shard.take(10));
        assert!(!shard.take(1));
        assert_eq!(budgets.answers.used(), SHARD_BUDGET_GRAIN_BYTES);
        shard.give_back(3 * SHARD_BUDGET_GRAIN_BYTES / 4);
        assert!(shard.take(SHARD_BUDGET_GRAIN_BYTES / 2));
    }

    #[test]
    fn piled_up_credit_goes_back_to_the_server() {
        let (budgets, shard) = shard_budget(usize::MAX);
        assert!(shard.take(10 * SHARD_BUDGET_GRAIN_BYTES));
        shard.give_back(10 * SHARD_BUDGET_GRAIN_BYTES);
        assert_eq!(budgets.answers.used(), SHARD_BUDGET_GRAIN_BYTES);
    }

    #[test]
    fn a_charge_follows_its_queue_and_refuses_growth_past_the_budget() {
        let (budgets, shard) = shard_budget(1000);
        let first = Charge::new(Some(shard.clone()));
        let second = Charge::new(Some(shard.clone()));
        assert!(first.settle(600));
        assert!(!second.settle(500));
        assert_eq!(second.held(), 0);
        assert!(first.settle(100));
        assert!(second.settle(500));
        drop(first);
        drop(second);
        drop(shard);
        assert_eq!(budgets.answers.used(), 0);
    }

    #[test]
    fn a_budget_refuses_what_does_not_fit_and_takes_nothing_then() {
        let budget = ByteBudget::new(10);
        assert!(budget.try_take(6));
        assert!(!budget.try_take(5));
        assert_eq!(budget.used(), 6);
        assert!(budget.try_take(4));
        assert!(budget.is_exhausted());
        budget.give_back(10);
        assert_eq!(budget.used(), 0);
        budget.give_back(3);
        assert_eq!(budget.used(), 0, "giving back too much never wraps");
    }

    #[test]
    fn held_bytes_return_when_dropped() {
        let budget = ByteBudget::new(100);
        {
            let mut first = Held::new(&budget);
            assert!(first.grow(60));
            let mut second = Held::new(&budget);
            assert!(!second.grow(41));
            assert!(second.grow(40));
            assert_eq!(budget.used(), 100);
        }
        assert_eq!(budget.used(), 0);
    }
}
