//! What the simulated users measured: latency histograms per group and phase, and counters.
//! Everything lives on the tester's one thread; only what happens after the warm-up counts.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::delivery::Ledger;

/// Latencies above this (µs) are recorded as this: a minute is "lost", not a number.
const MAX_LATENCY_US: u64 = 60_000_000;

/// Error messages kept for the report, and the length each is cut to.
const ERROR_SAMPLES: usize = 5;
const ERROR_SAMPLE_CHARS: usize = 200;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// A histogram for one second of a series: two significant digits are plenty for a plot and
/// keep sixty of them small.
pub fn interval_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 2).expect("valid histogram bounds")
}

/// The name of the series of event latencies of `group`.
pub fn event_series(group: &str) -> String {
    format!("event {group}")
}

/// The name of the series of ack (or request) latencies of `kind`.
pub fn ack_series(kind: &str) -> String {
    format!("ack {kind}")
}

#[derive(Default)]
pub struct Counters {
    pub writes_sent: u64,
    pub acks: u64,
    pub errors: u64,
    pub error_samples: Vec<String>,
    pub reconnects: u64,
    pub connect_failures: u64,
    /// How the first few failed sessions ended (distinct messages), to tell who ended them.
    pub failure_samples: Vec<String>,
    /// Writes that were due while the connection was down or far behind its timetable.
    pub writes_missed: u64,
    pub events: u64,
    /// What the tester's QUIC connections counted, over whole sessions (WebTransport only).
    pub quic: QuicUse,
}

/// UDP traffic of the tester's QUIC connections, as quinn counts it: a receive or send
/// "io" is one system call's worth, which carries several packets when the sender used UDP
/// segmentation offload (GSO) or the kernel coalesced them (GRO).
#[derive(Debug, Default, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QuicUse {
    /// UDP datagrams (QUIC packets) received, and in how many receive operations.
    pub packets_received: u64,
    pub receive_ios: u64,
    /// Push datagrams (WebTransport datagrams, one push each) received.
    pub pushes_received: u64,
    /// UDP datagrams sent, and in how many send operations.
    pub packets_sent: u64,
    pub send_ios: u64,
}

impl QuicUse {
    pub fn add(&mut self, other: &QuicUse) {
        self.packets_received += other.packets_received;
        self.receive_ios += other.receive_ios;
        self.pushes_received += other.pushes_received;
        self.packets_sent += other.packets_sent;
        self.send_ios += other.send_ios;
    }
}

pub struct Metrics {
    /// When the warm-up ended; `None` before.
    measure_start: Cell<Option<Instant>>,
    /// Set when the measured time is over: what happens while connections close (the
    /// server's onDisconnect work, for one) is not part of the run.
    measure_ended: Cell<bool>,
    phase: Cell<usize>,
    /// Event (write-to-receive) latencies by (group, phase). Keys are static names, so that
    /// recording allocates nothing.
    events: RefCell<BTreeMap<(&'static str, usize), Histogram<u64>>>,
    /// Ack (send-to-`ok`) or request latencies by kind.
    acks: RefCell<BTreeMap<&'static str, Histogram<u64>>>,
    /// One histogram per measured second, by event group and by ack kind.
    event_seconds: RefCell<BTreeMap<&'static str, Vec<Histogram<u64>>>>,
    ack_seconds: RefCell<BTreeMap<&'static str, Vec<Histogram<u64>>>>,
    pub counters: RefCell<Counters>,
    /// Counted from the start, for the progress line.
    pub events_seen: Cell<u64>,
    pub open: Cell<usize>,
    /// Writes acknowledged and events received by send stamp, for the delivery check.
    pub ledger: RefCell<Ledger>,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            measure_start: Cell::new(None),
            measure_ended: Cell::new(false),
            phase: Cell::new(0),
            events: RefCell::new(BTreeMap::new()),
            acks: RefCell::new(BTreeMap::new()),
            event_seconds: RefCell::new(BTreeMap::new()),
            ack_seconds: RefCell::new(BTreeMap::new()),
            counters: RefCell::new(Counters::default()),
            events_seen: Cell::new(0),
            open: Cell::new(0),
            ledger: RefCell::new(Ledger::default()),
        }
    }

    /// Runs a session's open part, counted among the open connections meanwhile.
    pub async fn while_open<T>(&self, session: impl std::future::Future<Output = T>) -> T {
        self.open.set(self.open.get() + 1);
        let result = session.await;
        self.open.set(self.open.get().saturating_sub(1));
        result
    }

    pub fn is_measuring(&self) -> bool {
        self.measure_start.get().is_some() && !self.measure_ended.get()
    }

    pub fn stop_measuring(&self) {
        self.measure_ended.set(true);
    }

    pub fn start_measuring(&self) {
        self.measure_start.set(Some(Instant::now()));
    }

    /// The send stamps the delivery check covers (see [`Ledger::window`]).
    pub fn set_delivery_window(&self, start_us: u64, end_us: u64) {
        self.ledger.borrow_mut().window = Some((start_us, end_us));
    }

    /// Whether a write or event with send stamp `stamp` belongs in the ledger: sent once the
    /// window opened (it may be received after the measured time).
    fn in_ledger(&self, stamp: u64) -> bool {
        self.ledger
            .borrow()
            .window
            .is_some_and(|(start, _)| stamp >= start)
    }

    /// A write with send stamp `stamp` was acknowledged.
    pub fn acked_stamp(&self, stamp: u64) {
        if self.in_ledger(stamp) {
            self.ledger.borrow_mut().ack(stamp);
        }
    }

    /// An event of the write with send stamp `stamp` arrived.
    pub fn received_stamp(&self, stamp: u64) {
        if self.in_ledger(stamp) {
            self.ledger.borrow_mut().receive(stamp);
        }
    }

    /// Adds `latency_us` to the current second of `name` in `series`.
    fn record_second(
        &self,
        series: &RefCell<BTreeMap<&'static str, Vec<Histogram<u64>>>>,
        name: &'static str,
        latency_us: u64,
    ) {
        let Some(start) = self.measure_start.get() else {
            return;
        };
        let second = start.elapsed().as_secs() as usize;
        let mut all = series.borrow_mut();
        let seconds = all.entry(name).or_default();
        while seconds.len() <= second {
            seconds.push(interval_histogram());
        }
        seconds[second].saturating_record(latency_us.clamp(1, MAX_LATENCY_US));
    }

    pub fn next_phase(&self) {
        self.phase.set(self.phase.get() + 1);
    }

    pub fn event(&self, group: &'static str, latency_us: u64) {
        self.events_seen.set(self.events_seen.get() + 1);
        if !self.is_measuring() {
            return;
        }
        self.counters.borrow_mut().events += 1;
        let key = (group, self.phase.get());
        let mut events = self.events.borrow_mut();
        let histogram = events.entry(key).or_insert_with(histogram);
        histogram.saturating_record(latency_us.clamp(1, MAX_LATENCY_US));
        drop(events);
        self.record_second(&self.event_seconds, group, latency_us);
    }

    pub fn ack(&self, kind: &'static str, latency_us: u64) {
        if !self.is_measuring() {
            return;
        }
        self.counters.borrow_mut().acks += 1;
        let mut acks = self.acks.borrow_mut();
        let histogram = acks.entry(kind).or_insert_with(histogram);
        histogram.saturating_record(latency_us.clamp(1, MAX_LATENCY_US));
        drop(acks);
        self.record_second(&self.ack_seconds, kind, latency_us);
    }

    pub fn error(&self, detail: String) {
        if !self.is_measuring() {
            return;
        }
        let mut counters = self.counters.borrow_mut();
        counters.errors += 1;
        if counters.error_samples.len() < ERROR_SAMPLES {
            counters
                .error_samples
                .push(detail.chars().take(ERROR_SAMPLE_CHARS).collect());
        }
    }

    /// A session that failed (to connect, or later): counted while measuring, and its error
    /// kept as a sample when it is new, during the warm-up too (where a run that keeps
    /// reconnecting shows it first).
    pub fn session_failed(&self, error: &anyhow::Error) {
        let mut counters = self.counters.borrow_mut();
        if self.is_measuring() {
            counters.connect_failures += 1;
        }
        let text: String = format!("{error:#}")
            .chars()
            .take(ERROR_SAMPLE_CHARS)
            .collect();
        if counters.failure_samples.len() < ERROR_SAMPLES
            && !counters.failure_samples.contains(&text)
        {
            counters.failure_samples.push(text);
        }
    }

    pub fn count(&self, update: impl FnOnce(&mut Counters)) {
        if self.is_measuring() {
            update(&mut self.counters.borrow_mut());
        }
    }

    /// Counted even during the warm-up: a run whose clients keep reconnecting is broken
    /// whenever it happens.
    pub fn reconnect(&self) {
        self.counters.borrow_mut().reconnects += 1;
    }

    pub fn event_histograms(&self) -> BTreeMap<(String, usize), Histogram<u64>> {
        let events = self.events.borrow();
        events
            .iter()
            .map(|((group, phase), histogram)| (((*group).to_owned(), *phase), histogram.clone()))
            .collect()
    }

    pub fn ack_histograms(&self) -> BTreeMap<String, Histogram<u64>> {
        let acks = self.acks.borrow();
        acks.iter()
            .map(|(kind, histogram)| ((*kind).to_owned(), histogram.clone()))
            .collect()
    }

    /// The per-second histograms by series name (see [`event_series`], [`ack_series`]).
    pub fn series_histograms(&self) -> BTreeMap<String, Vec<Histogram<u64>>> {
        let events = self.event_seconds.borrow();
        let acks = self.ack_seconds.borrow();
        events
            .iter()
            .map(|(group, seconds)| (event_series(group), seconds.clone()))
            .chain(
                acks.iter()
                    .map(|(kind, seconds)| (ack_series(kind), seconds.clone())),
            )
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_sessions_are_counted_with_each_distinct_ending_once() {
        let metrics = Metrics::new();
        metrics.start_measuring();
        metrics.session_failed(&anyhow::anyhow!("connection reset"));
        metrics.session_failed(&anyhow::anyhow!("connection reset"));
        metrics.session_failed(&anyhow::anyhow!("deadline has elapsed"));
        let counters = metrics.counters.borrow();
        assert_eq!(counters.connect_failures, 3);
        assert_eq!(
            counters.failure_samples,
            ["connection reset", "deadline has elapsed"]
        );
    }

    #[test]
    fn nothing_counts_before_the_warm_up_ends() {
        let metrics = Metrics::new();
        metrics.event("all", 10);
        metrics.error("early".into());
        assert!(metrics.event_histograms().is_empty());
        assert_eq!(metrics.counters.borrow().errors, 0);
        metrics.start_measuring();
        metrics.event("all", 10);
        metrics.next_phase();
        metrics.event("all", 20);
        let histograms = metrics.event_histograms();
        assert_eq!(histograms.len(), 2);
        assert_eq!(histograms[&("all".to_owned(), 1)].max(), 20);
        assert_eq!(metrics.events_seen.get(), 3);
        let series = metrics.series_histograms();
        let seconds = &series[&event_series("all")];
        assert_eq!(seconds.len(), 1, "both in the first measured second");
        assert_eq!(seconds[0].len(), 2);
        metrics.stop_measuring();
        metrics.event("all", 30);
        assert_eq!(
            metrics.counters.borrow().events,
            2,
            "nothing counts after the end"
        );
    }
}
