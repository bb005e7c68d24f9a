//! `hearth-load`: simulated users against a Firebase-protocol server.
//!
//! ```text
//! hearth-load crates/load/scenarios/chat.json --url ws://127.0.0.1:9000 \
//!     [--connections N] [--duration S] [--ns NAME] [--server-pid PID] [--out result.json] [--check]
//! hearth-load crates/load/scenarios/chat.json \
//!     --target hearth=ws://127.0.0.1:9000 --target peer=ws://127.0.0.1:9100 --out chat.json
//! hearth-load crates/load/scenarios/cursors.json --url https://127.0.0.1:9443 \
//!     --cert-sha256 HEX          # over Hearth's WebTransport endpoint
//! ```
//!
//! A scenario file names the kind of users (`chat`, `game`, `leaderboard`, `feed`, `hot-db`,
//! `cursors`) and their rates. Writes follow a fixed timetable (open loop), so a slow server gets the same
//! load as a fast one. Every written value carries its send time in microseconds since the
//! epoch (`t`); every client that receives it records the difference in a histogram, as all
//! processes on one machine share the clock. Ctrl-C stops the run early with a report of what
//! was measured so far.

mod broadcast;
mod compare;
mod conn;
mod delivery;
mod feed;
mod incoming;
mod metrics;
mod plan;
mod plot;
mod procstat;
mod redis;
mod report;
mod run;
mod scenario;
mod schedule;
mod tcp;
mod user;
mod webtransport;
mod wire;
mod workers;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

use crate::run::run;
use crate::scenario::Scenario;

#[derive(Parser, Debug)]
#[command(
    name = "hearth-load",
    version,
    about = "Simulated users against a Firebase-protocol server"
)]
struct Args {
    /// The scenario file (JSON; see crates/load/scenarios/).
    scenario: PathBuf,
    /// The server, as ws://HOST:PORT (REST scenarios use http on the same address),
    /// redis://HOST:PORT for the pub/sub baseline of the chat scenario, broadcast://HOST:PORT
    /// for the bare WebSocket broadcast server's (bench/uws-broadcast), or https://HOST:PORT
    /// for Hearth's WebTransport endpoint (`serve --webtransport-listen`; needs
    /// `--cert-sha256`). Several URLs of one scheme, comma-separated, spread the connections
    /// over them (connection i to the (i mod n)-th: several load balancers of one cluster).
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
    /// A server to drive, as NAME=URL; give two or more to run the scenario against each in
    /// turn and print the ratios against the first. Without it, `--url` is the one target.
    /// `--compare NAME=URL` is the same flag.
    #[arg(long = "target", visible_alias = "compare")]
    targets: Vec<String>,
    /// The server's process id, for its memory and CPU use from /proc (repeat it for the
    /// targets, in order).
    #[arg(long)]
    server_pid: Vec<u32>,
    /// Write the result as JSON here (several targets: `{"targets": [{name, report}]}`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Draw latency over time and the percentile curve here (SVG); by default beside
    /// `--out`, with the extension `.svg`.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// The named target (`target` for `--url` alone) pushes the whole value at a listened
    /// path on every change, old writes and all, as the `firebase-server` npm package does:
    /// its connections time each send stamp only the first time they see it. Repeatable.
    #[arg(long = "whole-values", value_name = "NAME")]
    whole_values: Vec<String>,
    /// The SHA-256 of the WebTransport endpoint's certificate, in hex (`hearth serve` logs
    /// it at start): https:// targets accept only the certificate with this hash.
    #[arg(long, value_name = "HEX")]
    cert_sha256: Option<String>,
    /// Exit non-zero unless events were delivered and nothing failed (for CI smoke runs).
    #[arg(long)]
    check: bool,
    /// Spread the connections over this many tester processes, each with its own loopback
    /// source address (127.0.0.2, ...), and merge their results.
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// Internal: run as worker INDEX/COUNT of a coordinator.
    #[arg(long, hide = true)]
    worker: Option<String>,
    /// Internal: where a worker writes its result.
    #[arg(long, hide = true)]
    worker_out: Option<PathBuf>,
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
    let processes = match &args.worker {
        Some(worker) => parse_share(worker)?.count,
        None => args.processes,
    };
    scenario.check_connections(processes)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let local = tokio::task::LocalSet::new();
    let certificate = args
        .cert_sha256
        .as_deref()
        .map(webtransport::parse_certificate_hash)
        .transpose()?;
    if let Some(worker) = &args.worker {
        let share = parse_share(worker)?;
        let target = compare::targets(&[], &args.url, &[], &args.whole_values)?.remove(0);
        let result = local.block_on(&runtime, run(&scenario, &target, certificate, Some(share)))?;
        let out = args
            .worker_out
            .as_ref()
            .context("a worker needs --worker-out")?;
        std::fs::write(out, serde_json::to_vec(&result)?)?;
        return Ok(());
    }
    let targets = compare::targets(
        &args.targets,
        &args.url,
        &args.server_pid,
        &args.whole_values,
    )?;
    let mut runs = Vec::new();
    for (position, target) in targets.iter().enumerate() {
        if position > 0 {
            // Let the previous target's connections close before the next run starts.
            std::thread::sleep(Duration::from_secs(2));
        }
        if targets.len() > 1 {
            eprintln!("== {} ({}) ==", target.name, target.url);
        }
        let result = if args.processes > 1 {
            local.block_on(&runtime, coordinate(&args, &scenario, target))?
        } else {
            local.block_on(&runtime, run(&scenario, target, certificate, None))?
        };
        report::print(&result);
        let interrupted = result.interrupted;
        runs.push((target.name.clone(), result));
        if interrupted {
            break;
        }
    }
    compare::print(&runs);
    write_outputs(&args, &runs)?;
    if args.check {
        for (_, result) in &runs {
            report::check(result)?;
        }
    }
    Ok(())
}

/// Writes the JSON result and the plot.
fn write_outputs(args: &Args, runs: &[(String, report::Report)]) -> anyhow::Result<()> {
    if let Some(path) = &args.out {
        let json = match runs {
            [(_, only)] => serde_json::to_vec_pretty(only)?,
            _ => serde_json::to_vec_pretty(&compare::Comparison {
                targets: runs
                    .iter()
                    .map(|(name, report)| compare::Named { name, report })
                    .collect(),
            })?,
        };
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    let plot = args
        .plot
        .clone()
        .or_else(|| args.out.as_ref().map(|out| out.with_extension("svg")));
    if let Some(path) = plot {
        let named: Vec<(String, &report::Report)> = runs
            .iter()
            .map(|(name, report)| (name.clone(), report))
            .collect();
        plot::write(&path, &named).with_context(|| format!("drawing {}", path.display()))?;
    }
    Ok(())
}

fn parse_share(text: &str) -> anyhow::Result<workers::Share> {
    let (index, count) = text.split_once('/').context("--worker is INDEX/COUNT")?;
    let share = workers::Share {
        index: index.parse()?,
        count: count.parse()?,
    };
    anyhow::ensure!(share.index < share.count && share.count <= workers::MAX_PROCESSES);
    Ok(share)
}

/// Starts the workers, samples the server meanwhile, and merges what they measured.
async fn coordinate(
    args: &Args,
    scenario: &Scenario,
    target: &compare::Target,
) -> anyhow::Result<report::Report> {
    let dir = std::env::temp_dir().join(format!("hearth-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // The workers get the same scenario and overrides, minus what only the coordinator does.
    let mut forwarded = vec![
        args.scenario.display().to_string(),
        "--url".to_owned(),
        target.url.clone(),
        "--connections".to_owned(),
        scenario.connections.to_string(),
        "--duration".to_owned(),
        scenario.duration_secs.to_string(),
        "--warmup".to_owned(),
        scenario.warmup_secs.to_string(),
        "--ns".to_owned(),
        scenario.ns.clone(),
    ];
    if target.whole_values {
        forwarded.extend(["--whole-values".to_owned(), "target".to_owned()]);
    }
    if let Some(hash) = &args.cert_sha256 {
        forwarded.extend(["--cert-sha256".to_owned(), hash.clone()]);
    }
    let mut children = workers::spawn(args.processes, &forwarded, &dir)?;
    let mut sampler = procstat::Sampler::new(target.server_pid);
    let started = Instant::now();
    let warmup = Duration::from_secs(scenario.warmup_secs);
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let mut interrupted = false;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c(), if !interrupted => {
                interrupted = true;
                // Workers in the same terminal got the signal too; others are told.
                for (child, _) in &children {
                    let _ = std::process::Command::new("kill")
                        .args(["-INT", &child.id().to_string()])
                        .status();
                }
            }
        }
        if started.elapsed() >= warmup {
            sampler.start_once();
        }
        sampler.sample();
        let mut running = 0;
        for (child, _) in &mut children {
            if child.try_wait()?.is_none() {
                running += 1;
            }
        }
        eprintln!(
            "[{:>5.1}s] {running} of {} tester processes running",
            started.elapsed().as_secs_f64(),
            args.processes
        );
        if running == 0 {
            break;
        }
    }
    let reports = children
        .iter()
        .map(|(_, out)| workers::read(out))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let _ = std::fs::remove_dir_all(&dir);
    let mut merged = workers::merge(reports)?;
    merged.server = sampler.finish();
    merged.interrupted |= interrupted;
    merged.scenario.connections = scenario.connections;
    merged.delivery = std::mem::take(&mut merged.raw_ledger).check(&merged.scenario);
    Ok(merged)
}
