//! Several tester processes: the coordinator starts `--processes` copies of itself, each with
//! its share of the connections and its own source address (127.0.0.2, 127.0.0.3, ...: every
//! source address has its own ~28k ephemeral ports, and every process its own 20,000 file
//! descriptors), then merges their results, histograms included.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use anyhow::Context;
use hdrhistogram::Histogram;

use crate::report::{decode, Report};

/// The most worker processes: one per loopback source address we hand out.
pub const MAX_PROCESSES: usize = 64;

/// A worker's share of the run.
#[derive(Debug, Clone, Copy)]
pub struct Share {
    pub index: usize,
    pub count: usize,
}

impl Share {
    pub fn owns(&self, connection: usize) -> bool {
        connection % self.count == self.index
    }

    /// The loopback source address of this worker.
    pub fn source_ip(&self) -> IpAddr {
        IpAddr::from([127, 0, 0, 2 + self.index as u8])
    }
}

/// Starts the workers with the coordinator's own arguments plus their share.
pub fn spawn(count: usize, args: &[String], dir: &Path) -> anyhow::Result<Vec<(Child, PathBuf)>> {
    anyhow::ensure!(
        (1..=MAX_PROCESSES).contains(&count),
        "--processes must be 1 to {MAX_PROCESSES}"
    );
    let exe = std::env::current_exe().context("finding the tester's own executable")?;
    (0..count)
        .map(|index| {
            let out = dir.join(format!("worker-{index}.json"));
            let child = Command::new(&exe)
                .args(args)
                .arg("--worker")
                .arg(format!("{index}/{count}"))
                .arg("--worker-out")
                .arg(&out)
                .spawn()
                .context("starting a worker")?;
            Ok((child, out))
        })
        .collect()
}

/// Merges the workers' reports into one: counters summed, histograms merged.
pub fn merge(reports: Vec<Report>) -> anyhow::Result<Report> {
    let first = reports.first().context("no worker reported")?;
    let mut merged = Report::empty(first);
    merged.scenario.connections = 0;
    let mut events: BTreeMap<(String, usize), Histogram<u64>> = BTreeMap::new();
    let mut acks: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    let mut series: BTreeMap<String, Vec<Histogram<u64>>> = BTreeMap::new();
    let seconds = reports
        .iter()
        .map(|report| report.measured_secs)
        .fold(0.0, f64::max);
    for report in &reports {
        for ((group, phase), text) in &report.raw_events {
            let histogram = decode(text)?;
            match events.entry((group.clone(), *phase)) {
                std::collections::btree_map::Entry::Occupied(mut entry) => {
                    entry.get_mut().add(&histogram)?
                }
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(histogram);
                }
            }
        }
        for (name, second, text) in &report.raw_series {
            let histogram = decode(text)?;
            let seconds = series.entry(name.clone()).or_default();
            while seconds.len() <= *second {
                seconds.push(crate::metrics::interval_histogram());
            }
            seconds[*second].add(&histogram)?;
        }
        for (kind, text) in &report.raw_acks {
            let histogram = decode(text)?;
            match acks.entry(kind.clone()) {
                std::collections::btree_map::Entry::Occupied(mut entry) => {
                    entry.get_mut().add(&histogram)?
                }
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(histogram);
                }
            }
        }
        merged.writes_sent += report.writes_sent;
        merged.errors += report.errors;
        merged.reconnects += report.reconnects;
        merged.connect_failures += report.connect_failures;
        for sample in &report.failure_samples {
            if merged.failure_samples.len() < 8 && !merged.failure_samples.contains(sample) {
                merged.failure_samples.push(sample.clone());
            }
        }
        merged.writes_missed += report.writes_missed;
        if let Some(quic) = &report.quic {
            merged.quic.get_or_insert_with(Default::default).add(quic);
        }
        merged.interrupted |= report.interrupted;
        merged
            .error_samples
            .extend(report.error_samples.iter().take(2).cloned());
        merged.scenario.connections += report.scenario.connections;
    }
    merged.raw_ledger = crate::delivery::Ledger::merge(
        &reports
            .iter()
            .map(|report| report.raw_ledger.clone())
            .collect::<Vec<_>>(),
    );
    merged.measured_secs = seconds;
    merged.set_histograms(&events, &acks, &series, seconds);
    Ok(merged)
}

/// Reads a worker's report.
pub fn read(path: &Path) -> anyhow::Result<Report> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::encode;

    #[test]
    fn histograms_survive_the_trip() -> anyhow::Result<()> {
        let mut histogram = crate::metrics::histogram();
        for value in [5, 50, 500, 5_000] {
            histogram.record(value)?;
        }
        let back = decode(&encode(&histogram))?;
        assert_eq!(back.len(), 4);
        assert_eq!(back.max(), histogram.max());
        Ok(())
    }

    #[test]
    fn shares_split_connections_and_addresses() {
        let share = Share { index: 1, count: 3 };
        assert!(share.owns(4) && !share.owns(5));
        assert_eq!(share.source_ip(), IpAddr::from([127, 0, 0, 3]));
    }
}
