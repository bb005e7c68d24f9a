//! Process-wide budgets of HTTP bytes held in memory: request bodies being received and
//! answers not yet written to their sockets. The shards are threads of one process, so each
//! budget is one atomic counter shared by all of them; nothing waits on a budget, a request
//! that does not fit is refused at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Default of `--body-budget-mib`: the most bytes of request bodies the whole server holds
/// while they arrive. Two bodies of the largest size a write may have fit at once
/// (`rest::MAX_REST_BODY_BYTES`); a body that would pass the budget is refused with 503, one
/// that can never fit with 413.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 512 * 1024 * 1024;

/// Default of `--answer-budget-mib`: the most bytes of REST answers the whole server holds
/// that were produced but not yet written to their sockets (clients that read slowly or not
/// at all). Past it, new answers are refused with 503.
pub const DEFAULT_ANSWER_BUDGET_BYTES: usize = 512 * 1024 * 1024;

/// Default of `--http-write-timeout-secs`: an HTTP connection whose answer has not moved a
/// single byte into the socket for this long is closed, with whatever it still held.
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

#[cfg(test)]
mod tests {
    use super::*;

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
