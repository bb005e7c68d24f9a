//! What the accept loop does when accepting fails. The usual cause is running out of file
//! descriptors (EMFILE, ENFILE): the pending connection stays in the queue, so retrying at once
//! fails again at once. A fixed short pause once wrote about 40 log lines a second for as long
//! as the shortage lasted; the pause now grows, and the log says so once, then at most every
//! [`ACCEPT_FAILURE_LOG_INTERVAL`] with the number of failures in between.
//!
//! Pure: the caller passes the time and does the sleeping and the logging.

use std::time::{Duration, Instant};

/// The pause after the first failure in a row.
pub const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(10);

/// The longest pause between attempts: a freed descriptor is used within this time.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How often a lasting failure is logged again.
pub const ACCEPT_FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The back-off state of one accept loop.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    /// The pause after the next failure; `None` after a success.
    next_pause: Option<Duration>,
    /// When a failure was last logged.
    logged_at: Option<Instant>,
    /// Failures since then.
    unlogged: u64,
}

/// What to do after a failed accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterFailure {
    /// How long to wait before accepting again.
    pub pause: Duration,
    /// `Some(n)`: log this failure now, saying that `n` others were not logged since the
    /// last line.
    pub log: Option<u64>,
}

impl AcceptBackoff {
    /// An accept failed at `now`.
    pub fn failed(&mut self, now: Instant) -> AfterFailure {
        let pause = self.next_pause.unwrap_or(ACCEPT_BACKOFF_FIRST);
        self.next_pause = Some((pause * 2).min(ACCEPT_BACKOFF_MAX));
        let due = self
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= ACCEPT_FAILURE_LOG_INTERVAL);
        let log = if due {
            self.logged_at = Some(now);
            Some(std::mem::take(&mut self.unlogged))
        } else {
            self.unlogged += 1;
            None
        };
        AfterFailure { pause, log }
    }

    /// A connection was accepted: the next failure starts with a short pause again. The log
    /// interval is kept, so failures between successes are not logged more often.
    pub fn succeeded(&mut self) {
        self.next_pause = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_up_to_the_maximum_and_resets_on_success() {
        let start = Instant::now();
        let mut backoff = AcceptBackoff::default();
        let pauses: Vec<u64> = (0..10)
            .map(|_| backoff.failed(start).pause.as_millis() as u64)
            .collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        backoff.succeeded();
        assert_eq!(backoff.failed(start).pause, ACCEPT_BACKOFF_FIRST);
    }

    #[test]
    fn a_lasting_failure_is_logged_once_per_interval() {
        let start = Instant::now();
        let mut backoff = AcceptBackoff::default();
        let mut now = start;
        let mut logged = Vec::new();
        // A minute of failures with the pauses the policy asks for.
        while now < start + Duration::from_secs(60) {
            let after = backoff.failed(now);
            if let Some(unlogged) = after.log {
                logged.push((now.duration_since(start).as_secs(), unlogged));
            }
            now += after.pause;
        }
        // Failures at 0, 0.01, 0.03, ..., 0.63, 1.27, 2.27, ...: the first is logged at once,
        // then one line every ten seconds counts the failures in between (6 + 9, then 9).
        assert_eq!(
            logged,
            [(0, 0), (10, 15), (20, 9), (30, 9), (40, 9), (50, 9)]
        );
    }

    #[test]
    fn a_success_does_not_make_the_log_chattier() {
        let start = Instant::now();
        let mut backoff = AcceptBackoff::default();
        assert_eq!(backoff.failed(start).log, Some(0));
        backoff.succeeded();
        let soon = start + Duration::from_millis(50);
        assert_eq!(backoff.failed(soon).log, None);
        assert_eq!(
            backoff.failed(start + ACCEPT_FAILURE_LOG_INTERVAL).log,
            Some(1)
        );
    }
}
