//! A latency histogram of one shard: fixed buckets counted in plain cells (the shard's thread
//! is its only writer), copied out on a scrape and merged across shards there.

use std::cell::Cell;
use std::time::Duration;

/// The bucket bounds of every latency histogram, in seconds: from 50 µs (a log sync of a fast
/// disk) to 10 s (a stalled one), a few per decade.
pub const LATENCY_BOUNDS_SECONDS: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

const BUCKETS: usize = LATENCY_BOUNDS_SECONDS.len() + 1;

/// The bounds in nanoseconds, so that an observation is integer compares.
const BOUNDS_NS: [u64; LATENCY_BOUNDS_SECONDS.len()] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// One shard's histogram. Not `Sync`: only its shard observes into it.
#[derive(Debug, Default)]
pub struct LocalHistogram {
    /// Observations per bucket (not cumulative); the last is above every bound.
    counts: [Cell<u64>; BUCKETS],
    sum_ns: Cell<u64>,
}

impl LocalHistogram {
    pub fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_NS.partition_point(|bound| *bound < nanos);
        let cell = &self.counts[bucket];
        cell.set(cell.get() + 1);
        self.sum_ns.set(self.sum_ns.get().saturating_add(nanos));
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: std::array::from_fn(|bucket| self.counts[bucket].get()),
            sum_ns: self.sum_ns.get(),
        }
    }
}

/// A copy of a histogram, to send across threads and merge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    counts: [u64; BUCKETS],
    sum_ns: u64,
}

impl HistogramSnapshot {
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        for (count, more) in self.counts.iter_mut().zip(other.counts) {
            *count += more;
        }
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn sum_seconds(&self) -> f64 {
        self.sum_ns as f64 / 1e9
    }

    /// The buckets as the encoder takes them: (upper bound, observations above the previous
    /// bound and at or below this one), the last bound infinite. The encoder makes them
    /// cumulative.
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        let bounds = LATENCY_BOUNDS_SECONDS
            .iter()
            .copied()
            .chain([f64::INFINITY]);
        bounds.zip(self.counts).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_agree() {
        for (seconds, nanos) in LATENCY_BOUNDS_SECONDS.iter().zip(BOUNDS_NS) {
            assert_eq!(
                Duration::from_secs_f64(*seconds).as_nanos(),
                u128::from(nanos)
            );
        }
    }

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let histogram = LocalHistogram::default();
        histogram.observe(Duration::ZERO);
        histogram.observe(Duration::from_micros(50));
        histogram.observe(Duration::from_micros(51));
        histogram.observe(Duration::from_secs(60));
        let snapshot = histogram.snapshot();
        let buckets = snapshot.buckets();
        assert_eq!(buckets[0], (0.000_05, 2), "bounds are inclusive");
        assert_eq!(buckets[1], (0.000_1, 1));
        assert_eq!(buckets[BUCKETS - 2], (10.0, 0));
        assert_eq!(buckets[BUCKETS - 1], (f64::INFINITY, 1));
        assert_eq!(snapshot.count(), 4);
        assert!((snapshot.sum_seconds() - 60.000_101).abs() < 1e-9);
    }

    #[test]
    fn merged_snapshots_add_up() {
        let a = LocalHistogram::default();
        let b = LocalHistogram::default();
        a.observe(Duration::from_millis(1));
        b.observe(Duration::from_millis(1));
        b.observe(Duration::from_millis(30));
        let mut merged = a.snapshot();
        merged.merge(&b.snapshot());
        assert_eq!(merged.count(), 3);
        let buckets = merged.buckets();
        assert_eq!(buckets[4], (0.001, 2));
        assert_eq!(buckets[8], (0.025, 0));
        assert_eq!(buckets[9], (0.05, 1));
        assert!((merged.sum_seconds() - 0.032).abs() < 1e-9);
    }
}
