//! The progress line, the final table and the JSON result.

use std::time::Duration;

use std::collections::BTreeMap;

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::delivery::{Delivery, Ledger};
use crate::metrics::{ack_series, event_series, Metrics, QuicUse};
use crate::procstat::ServerUse;
use crate::scenario::Scenario;

/// A histogram as base64 text (HdrHistogram V2 encoding), to travel in a worker's result.
pub fn encode(histogram: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    // Serializing into memory cannot fail for a valid histogram.
    let _ = V2Serializer::new().serialize(histogram, &mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn decode(text: &str) -> anyhow::Result<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text)?;
    Ok(Deserializer::new().deserialize(&mut bytes.as_slice())?)
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub per_second: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Latency {
    pub fn of(histogram: &Histogram<u64>, seconds: f64) -> Latency {
        Latency {
            count: histogram.len(),
            per_second: histogram.len() as f64 / seconds.max(0.001),
            p50_us: histogram.value_at_quantile(0.50),
            p90_us: histogram.value_at_quantile(0.90),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Group {
    pub group: String,
    pub phase: usize,
    pub events: Latency,
}

/// One measured second of a series (`event <group>` or `ack <kind>`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeriesPoint {
    pub series: String,
    pub second: usize,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// A percentile curve: latency at increasing quantiles, for the plot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Curve {
    /// `event <group>#<phase>` or `ack <kind>`.
    pub name: String,
    /// (quantile, µs) pairs.
    pub points: Vec<(f64, u64)>,
}

/// The quantiles of a [`Curve`]: dense up to five nines.
const CURVE_QUANTILES: [f64; 16] = [
    0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9999, 0.99995,
    0.99999, 1.0,
];

fn curve(name: String, histogram: &Histogram<u64>) -> Curve {
    Curve {
        name,
        points: CURVE_QUANTILES
            .iter()
            .map(|&q| (q, histogram.value_at_quantile(q)))
            .collect(),
    }
}

fn series_points(series: &BTreeMap<String, Vec<Histogram<u64>>>) -> Vec<SeriesPoint> {
    series
        .iter()
        .flat_map(|(name, seconds)| {
            seconds
                .iter()
                .enumerate()
                .filter(|(_, histogram)| !histogram.is_empty())
                .map(|(second, histogram)| SeriesPoint {
                    series: name.clone(),
                    second,
                    count: histogram.len(),
                    p50_us: histogram.value_at_quantile(0.5),
                    p99_us: histogram.value_at_quantile(0.99),
                    max_us: histogram.max(),
                })
        })
        .collect()
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    pub scenario: Scenario,
    pub address: String,
    pub measured_secs: f64,
    pub interrupted: bool,
    /// Write-to-event latency by group and phase (hot-db: phase 0 is the quiet databases
    /// alone, phase 1 with the hot one running).
    pub events: Vec<Group>,
    /// Send-to-ok latency of writes (feed: of each kind of request).
    pub acks: Vec<(String, Latency)>,
    pub writes_sent: u64,
    pub errors: u64,
    pub error_samples: Vec<String>,
    pub reconnects: u64,
    pub connect_failures: u64,
    /// How some failed sessions ended (`Counters::failure_samples`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_samples: Vec<String>,
    pub writes_missed: u64,
    pub server: Option<ServerUse>,
    /// The tester's QUIC traffic (WebTransport targets), over whole sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicUse>,
    /// Per-second latency of each series, from the end of the warm-up.
    #[serde(default)]
    pub series: Vec<SeriesPoint>,
    /// Percentile curves of the whole run.
    #[serde(default)]
    pub curves: Vec<Curve>,
    /// A worker's per-second histograms (series, second, base64 HdrHistogram V2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw_series: Vec<(String, usize, String)>,
    /// A worker's histograms (base64 HdrHistogram V2), for the coordinator to merge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw_events: Vec<((String, usize), String)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw_acks: Vec<(String, String)>,
    /// Whether every acknowledged write reached every member of its room (chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    /// A worker's delivery ledger, for the coordinator to merge.
    #[serde(default, skip_serializing_if = "Ledger::is_empty")]
    pub raw_ledger: Ledger,
}

impl Report {
    pub fn new(
        scenario: &Scenario,
        address: &str,
        metrics: &Metrics,
        measured: Duration,
        server: Option<ServerUse>,
        interrupted: bool,
        raw: bool,
    ) -> Report {
        let seconds = measured.as_secs_f64();
        let counters = metrics.counters.borrow();
        let raw_events = if raw {
            metrics
                .event_histograms()
                .iter()
                .map(|(key, histogram)| (key.clone(), encode(histogram)))
                .collect()
        } else {
            Vec::new()
        };
        let raw_acks = if raw {
            metrics
                .ack_histograms()
                .iter()
                .map(|(kind, histogram)| (kind.clone(), encode(histogram)))
                .collect()
        } else {
            Vec::new()
        };
        let series = metrics.series_histograms();
        let ledger = metrics.ledger.borrow();
        let (delivery, raw_ledger) = if raw {
            (None, ledger.clone())
        } else {
            (ledger.check(scenario), Ledger::default())
        };
        drop(ledger);
        let raw_series = if raw {
            series
                .iter()
                .flat_map(|(name, seconds)| {
                    seconds
                        .iter()
                        .enumerate()
                        .map(|(second, histogram)| (name.clone(), second, encode(histogram)))
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut report = Report {
            series: Vec::new(),
            curves: Vec::new(),
            raw_series,
            raw_events,
            raw_acks,
            delivery,
            raw_ledger,
            scenario: scenario.clone(),
            address: address.to_owned(),
            measured_secs: seconds,
            interrupted,
            events: Vec::new(),
            acks: Vec::new(),
            writes_sent: counters.writes_sent,
            errors: counters.errors,
            error_samples: counters.error_samples.clone(),
            reconnects: counters.reconnects,
            connect_failures: counters.connect_failures,
            failure_samples: counters.failure_samples.clone(),
            writes_missed: counters.writes_missed,
            server,
            quic: (counters.quic != QuicUse::default()).then_some(counters.quic),
        };
        report.set_histograms(
            &metrics.event_histograms(),
            &metrics.ack_histograms(),
            &series,
            seconds,
        );
        report
    }

    /// A report with the same scenario and nothing measured.
    pub fn empty(template: &Report) -> Report {
        Report {
            scenario: template.scenario.clone(),
            address: template.address.clone(),
            measured_secs: 0.0,
            interrupted: false,
            events: Vec::new(),
            acks: Vec::new(),
            writes_sent: 0,
            errors: 0,
            error_samples: Vec::new(),
            reconnects: 0,
            connect_failures: 0,
            failure_samples: Vec::new(),
            writes_missed: 0,
            server: None,
            quic: None,
            series: Vec::new(),
            curves: Vec::new(),
            raw_series: Vec::new(),
            raw_events: Vec::new(),
            raw_acks: Vec::new(),
            delivery: None,
            raw_ledger: Ledger::default(),
        }
    }

    /// Replaces the summaries, series and curves by those of (merged) histograms.
    pub fn set_histograms(
        &mut self,
        events: &BTreeMap<(String, usize), Histogram<u64>>,
        acks: &BTreeMap<String, Histogram<u64>>,
        series: &BTreeMap<String, Vec<Histogram<u64>>>,
        seconds: f64,
    ) {
        self.series = series_points(series);
        self.curves = events
            .iter()
            .map(|((group, phase), histogram)| {
                curve(format!("{} #{phase}", event_series(group)), histogram)
            })
            .chain(
                acks.iter()
                    .map(|(kind, histogram)| curve(ack_series(kind), histogram)),
            )
            .collect();
        self.events = events
            .iter()
            .map(|((group, phase), histogram)| Group {
                group: group.clone(),
                phase: *phase,
                events: Latency::of(histogram, seconds),
            })
            .collect();
        self.acks = acks
            .iter()
            .map(|(kind, histogram)| (kind.clone(), Latency::of(histogram, seconds)))
            .collect();
    }

    fn total_events(&self) -> u64 {
        self.events.iter().map(|group| group.events.count).sum()
    }
}

/// The live line, on stderr.
pub fn progress(metrics: &Metrics, elapsed: Duration) {
    let counters = metrics.counters.borrow();
    eprintln!(
        "[{:>5.1}s] open {:>6}  events {:>10}  writes {:>9}  errors {}  reconnects {}{}",
        elapsed.as_secs_f64(),
        metrics.open.get(),
        metrics.events_seen.get(),
        counters.writes_sent,
        counters.errors,
        counters.reconnects,
        if metrics.is_measuring() {
            ""
        } else {
            "  (warm-up)"
        }
    );
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

pub fn print(report: &Report) {
    println!(
        "\n{:?} against {}: {} connections, {:.1} s measured{}",
        report.scenario.kind,
        report.address,
        report.scenario.connections,
        report.measured_secs,
        if report.interrupted {
            " (interrupted: partial)"
        } else {
            ""
        }
    );
    println!(
        "{:<16} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "latency (ms)", "count", "per s", "p50", "p90", "p99", "p999", "max"
    );
    let rows = report
        .events
        .iter()
        .map(|group| {
            (
                format!("event {}#{}", group.group, group.phase),
                &group.events,
            )
        })
        .chain(
            report
                .acks
                .iter()
                .map(|(kind, latency)| (format!("ack {kind}"), latency)),
        );
    for (name, latency) in rows {
        println!(
            "{:<16} {:>10} {:>10.0} {:>9} {:>9} {:>9} {:>9} {:>9}",
            name,
            latency.count,
            latency.per_second,
            ms(latency.p50_us),
            ms(latency.p90_us),
            ms(latency.p99_us),
            ms(latency.p999_us),
            ms(latency.max_us)
        );
    }
    println!(
        "writes sent {}  errors {}  reconnects {}  connect failures {}  writes missed {}",
        report.writes_sent,
        report.errors,
        report.reconnects,
        report.connect_failures,
        report.writes_missed
    );
    for sample in &report.error_samples {
        println!("  error: {sample}");
    }
    for sample in &report.failure_samples {
        println!("  a failed session: {sample}");
    }
    if let Some(delivery) = report.delivery.as_ref().filter(|d| d.writes > 0) {
        println!(
            "delivery: {} acknowledged writes checked, each due at its room's {} members: \
             {} reached fewer, {} more{}",
            delivery.writes,
            delivery.per_write,
            delivery.short,
            delivery.extra,
            if delivery.samples.is_empty() {
                String::new()
            } else {
                format!(" (send stamp, events, due: {:?})", delivery.samples)
            }
        );
    }
    if let Some(quic) = &report.quic {
        let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        println!(
            "tester QUIC (whole sessions): received {} packets in {} receive calls ({:.2} per call), \
             {} push datagrams ({:.2} per packet); sent {} packets in {} send calls",
            quic.packets_received,
            quic.receive_ios,
            ratio(quic.packets_received, quic.receive_ios),
            quic.pushes_received,
            ratio(quic.pushes_received, quic.packets_received),
            quic.packets_sent,
            quic.send_ios
        );
    }
    if let Some(server) = &report.server {
        println!(
            "server: RSS max {:.1} MiB (end {:.1} MiB), CPU {:.0}% of one core",
            server.rss_max_mib, server.rss_end_mib, server.cpu_percent
        );
    }
}

/// The smoke check: events were delivered (feed: requests were answered) and nothing failed.
pub fn check(report: &Report) -> anyhow::Result<()> {
    let answered: u64 = report.acks.iter().map(|(_, latency)| latency.count).sum();
    if report.scenario.kind == crate::scenario::Kind::Feed {
        anyhow::ensure!(answered > 0, "no requests were answered");
    } else {
        anyhow::ensure!(report.total_events() > 0, "no events were delivered");
    }
    anyhow::ensure!(
        report.errors == 0,
        "{} errors, for example {:?}",
        report.errors,
        report.error_samples
    );
    // A reconnecting member misses what was sent while it was away: no delivery check then.
    if let Some(delivery) = report.delivery.as_ref().filter(|_| report.reconnects == 0) {
        anyhow::ensure!(
            delivery.short == 0 && delivery.extra == 0,
            "{} of {} acknowledged writes reached fewer than their room's {} members and {} more, \
             for example (send stamp, events, due) {:?}",
            delivery.short,
            delivery.writes,
            delivery.per_write,
            delivery.extra,
            delivery.samples
        );
    }
    Ok(())
}
