//! `hearth-load`: simulated users against a Firebase-protocol server.
//!
//! ```text
//! hearth-load crates/load/scenarios/chat.json --url ws://127.0.0.1:9000 \
//!     [--connections N] [--duration S] [--ns NAME] [--server-pid PID] [--out result.json] [--check]
//! ```
//!
//! A scenario file names the kind of users (`chat`, `game`, `leaderboard`, `feed`, `hot-db`)
//! and their rates. Writes follow a fixed timetable (open loop), so a slow server gets the same
//! load as a fast one. Every written value carries its send time in microseconds since the
//! epoch (`t`); every client that receives it records the difference in a histogram, as all
//! processes on one machine share the clock. Ctrl-C stops the run early with a report of what
//! was measured so far.

mod conn;
mod feed;
mod metrics;
mod plan;
mod procstat;
mod report;
mod scenario;
mod wire;

use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

use crate::metrics::Metrics;
use crate::scenario::{Kind, Scenario};

#[derive(Parser, Debug)]
#[command(
    name = "hearth-load",
    version,
    about = "Simulated users against a Firebase-protocol server"
)]
struct Args {
    /// The scenario file (JSON; see crates/load/scenarios/).
    scenario: PathBuf,
    /// The server, as ws://HOST:PORT (REST scenarios use http on the same address).
    #[arg(long, default_value = "ws://127.0.0.1:9000")]
    url: String,
    /// Overrides the scenario's connection count.
    #[arg(long)]
    connections: Option<usize>,
    /// Overrides the scenario's measured duration, in seconds.
    #[arg(long)]
    duration: Option<u64>,
    /// Overrides the scenario's warm-up, in seconds (not measured).
    #[arg(long)]
    warmup: Option<u64>,
    /// Overrides the namespace prefix.
    #[arg(long)]
    ns: Option<String>,
    /// The server's process id, for its memory and CPU use from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Write the result as JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Exit non-zero unless events were delivered and nothing failed (for CI smoke runs).
    #[arg(long)]
    check: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut scenario = Scenario::load(&args.scenario)?;
    if let Some(connections) = args.connections {
        scenario.connections = connections;
    }
    if let Some(duration) = args.duration {
        scenario.duration_secs = duration;
    }
    if let Some(warmup) = args.warmup {
        scenario.warmup_secs = warmup;
    }
    if let Some(ns) = &args.ns {
        scenario.ns = ns.clone();
    }
    let address = wire::address(&args.url)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&runtime, run(&scenario, &address, args.server_pid))?;
    report::print(&result);
    if let Some(path) = &args.out {
        std::fs::write(path, serde_json::to_vec_pretty(&result)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.check {
        report::check(&result)?;
    }
    Ok(())
}

/// Runs the scenario to its end (or to Ctrl-C) and returns the report.
async fn run(
    scenario: &Scenario,
    address: &str,
    server_pid: Option<u32>,
) -> anyhow::Result<report::Report> {
    let metrics = Rc::new(Metrics::new());
    let started = Instant::now();
    let warmup = Duration::from_secs(scenario.warmup_secs);
    let duration = Duration::from_secs(scenario.duration_secs);
    let stop = Rc::new(tokio::sync::Notify::new());
    let stopping = Rc::new(std::cell::Cell::new(false));
    let mut phases = Vec::new();
    match scenario.kind {
        Kind::Feed => feed::start(scenario, address, &metrics, &stopping).await?,
        _ => {
            for plan in plan::plans(scenario) {
                let delayed = plan.start_after;
                conn::spawn(
                    plan,
                    address.to_owned(),
                    metrics.clone(),
                    stopping.clone(),
                    delayed,
                );
            }
            if scenario.kind == Kind::HotDb {
                phases.push(warmup + duration / 2);
            }
        }
    }
    let mut sampler = procstat::Sampler::new(server_pid);
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let mut interrupted = false;
    let end = warmup + duration;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => {
                interrupted = true;
                break;
            }
        }
        let elapsed = started.elapsed();
        if elapsed >= warmup && !metrics.is_measuring() {
            metrics.start_measuring();
            sampler.start();
        }
        if let Some(&phase) = phases.first() {
            if elapsed >= phase {
                phases.remove(0);
                metrics.next_phase();
            }
        }
        sampler.sample();
        report::progress(&metrics, elapsed);
        if elapsed >= end {
            break;
        }
    }
    stopping.set(true);
    stop.notify_waiters();
    let measured = started.elapsed().saturating_sub(warmup);
    // Give replies in flight a moment, then report.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(report::Report::new(
        scenario,
        address,
        &metrics,
        measured,
        sampler.finish(),
        interrupted,
    ))
}
