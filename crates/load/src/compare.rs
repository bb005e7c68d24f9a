//! Several targets in one invocation: the same scenario against each in turn, then a table
//! of ratios against the first.

use anyhow::Context;
use serde::Serialize;

use crate::report::{Latency, Report};

/// One server to drive.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub url: String,
    pub server_pid: Option<u32>,
    /// It pushes whole values again on every change (`--whole-values`).
    pub whole_values: bool,
}

/// The targets of a run: each `--target NAME=URL`, or `--url` alone as `target`. The
/// `--server-pid` values belong to the targets in order; `whole_values` names targets.
pub fn targets(
    named: &[String],
    url: &str,
    pids: &[u32],
    whole_values: &[String],
) -> anyhow::Result<Vec<Target>> {
    let mut targets = Vec::new();
    if named.is_empty() {
        targets.push(Target {
            name: "target".to_owned(),
            url: url.to_owned(),
            server_pid: None,
            whole_values: false,
        });
    }
    for text in named {
        let (name, url) = text
            .split_once('=')
            .with_context(|| format!("--target is NAME=URL; got {text:?}"))?;
        anyhow::ensure!(!name.is_empty(), "--target {text:?} has no name");
        anyhow::ensure!(
            !targets.iter().any(|target: &Target| target.name == name),
            "two targets are named {name:?}"
        );
        targets.push(Target {
            name: name.to_owned(),
            url: url.to_owned(),
            server_pid: None,
            whole_values: false,
        });
    }
    anyhow::ensure!(
        pids.len() <= targets.len(),
        "{} --server-pid values for {} targets",
        pids.len(),
        targets.len()
    );
    for (target, pid) in targets.iter_mut().zip(pids) {
        target.server_pid = Some(*pid);
    }
    for name in whole_values {
        let target = targets
            .iter_mut()
            .find(|target| &target.name == name)
            .with_context(|| format!("--whole-values {name:?} names no target"))?;
        target.whole_values = true;
    }
    Ok(targets)
}

/// The JSON result of a comparison.
#[derive(Serialize)]
pub struct Comparison<'a> {
    pub targets: Vec<Named<'a>>,
}

#[derive(Serialize)]
pub struct Named<'a> {
    pub name: &'a str,
    pub report: &'a Report,
}

/// The latency a comparison row is about: the first event group's of the last phase (for
/// hot-db, the quiet databases' while the hot one runs: isolation is what it measures), or
/// the first request kind's for a scenario without events.
fn headline(report: &Report) -> Option<(String, &Latency)> {
    let last_phase = report.events.iter().map(|group| group.phase).max();
    let in_last = |group: &&crate::report::Group| Some(group.phase) == last_phase;
    report
        .events
        .iter()
        .filter(in_last)
        .find(|group| group.group != "hot")
        .or_else(|| report.events.iter().find(in_last))
        .map(|group| {
            (
                format!("event {}#{}", group.group, group.phase),
                &group.events,
            )
        })
        .or_else(|| {
            report
                .acks
                .first()
                .map(|(kind, latency)| (format!("ack {kind}"), latency))
        })
}

fn ratio(value: f64, base: f64) -> String {
    if base <= 0.0 {
        "-".to_owned()
    } else {
        format!("{:.2}x", value / base)
    }
}

/// Prints each target's headline latency and its ratio to the first target's.
pub fn print(runs: &[(String, Report)]) {
    let Some((base_name, base)) = runs.first() else {
        return;
    };
    let Some((what, base_latency)) = headline(base) else {
        return;
    };
    println!("\ncomparison ({what}; ratios against {base_name}, lower is better for latency)");
    println!(
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>12} {:>8} {:>7} {:>7} {:>7}",
        "target", "p50 ms", "p99 ms", "p999 ms", "max ms", "per s", "errors", "p50", "p99", "p999"
    );
    for (name, report) in runs {
        let Some((_, latency)) = headline(report) else {
            println!("{name:<12} (nothing measured)");
            continue;
        };
        println!(
            "{:<12} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>12.0} {:>8} {:>7} {:>7} {:>7}",
            name,
            latency.p50_us as f64 / 1000.0,
            latency.p99_us as f64 / 1000.0,
            latency.p999_us as f64 / 1000.0,
            latency.max_us as f64 / 1000.0,
            latency.per_second,
            report.errors,
            ratio(latency.p50_us as f64, base_latency.p50_us as f64),
            ratio(latency.p99_us as f64, base_latency.p99_us as f64),
            ratio(latency.p999_us as f64, base_latency.p999_us as f64),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_named_urls_with_their_pids_in_order() -> anyhow::Result<()> {
        let named = [
            "hearth=ws://127.0.0.1:9000".to_owned(),
            "peer=ws://127.0.0.1:9100".to_owned(),
        ];
        let list = targets(&named, "ignored", &[11], &["peer".to_owned()])?;
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].name, "hearth");
        assert_eq!(list[0].server_pid, Some(11));
        assert_eq!(list[1].url, "ws://127.0.0.1:9100");
        assert_eq!(list[1].server_pid, None);
        assert!(!list[0].whole_values && list[1].whole_values);
        let single = targets(&[], "ws://127.0.0.1:1", &[5], &[])?;
        assert_eq!(single[0].url, "ws://127.0.0.1:1");
        assert!(targets(&["nameless".to_owned()], "", &[], &[]).is_err());
        assert!(targets(&["a=x".to_owned(), "a=y".to_owned()], "", &[], &[]).is_err());
        assert!(targets(&[], "x", &[1, 2], &[]).is_err());
        assert!(targets(&[], "x", &[], &["nobody".to_owned()]).is_err());
        Ok(())
    }

    #[test]
    fn ratios_are_against_the_base() {
        assert_eq!(ratio(300.0, 100.0), "3.00x");
        assert_eq!(ratio(1.0, 0.0), "-");
    }
}
