//! One run of the scenario in this process (a worker's share of it, under a coordinator):
//! the users start, the measured time waits for the warm-up and the connections, and what
//! was measured becomes the report.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::metrics::Metrics;
use crate::scenario::{Kind, Scenario};
use crate::{compare, delivery, feed, plan, procstat, report, user, wire, workers};

/// The longest wait for all connections to open, in warm-ups.
const MAX_WARMUPS: u32 = 3;

/// Runs the scenario (this process's share of it, for a worker) to its end or to Ctrl-C.
pub async fn run(
    scenario: &Scenario,
    target: &compare::Target,
    certificate: Option<[u8; 32]>,
    share: Option<workers::Share>,
) -> anyhow::Result<report::Report> {
    let addresses = wire::addresses(&target.url)?;
    let address = &addresses[0];
    let protocol = protocol(scenario, target, certificate)?;
    let metrics = Rc::new(Metrics::new());
    let started = Instant::now();
    let stop = Rc::new(tokio::sync::Notify::new());
    let stopping = Rc::new(Cell::new(false));
    let launched = launch(scenario, &addresses, protocol, share, &metrics, &stopping).await?;
    let mut sampler = procstat::Sampler::new(target.server_pid);
    let clock = Clock {
        started,
        warmup: Duration::from_secs(scenario.warmup_secs),
        duration: Duration::from_secs(scenario.duration_secs),
    };
    let (since, interrupted) = measure(&clock, launched, share, &metrics, &mut sampler).await;
    let measured = since.map_or(Duration::ZERO, |since| {
        started.elapsed().saturating_sub(since)
    });
    metrics.stop_measuring();
    stopping.set(true);
    stop.notify_waiters();
    // Let the connections close before reporting (nothing counts any more).
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(report::Report::new(
        scenario,
        address,
        &metrics,
        measured,
        sampler.finish(),
        interrupted,
        share.is_some(),
    ))
}

/// The protocol the target's URL names, refused where the scenario needs what that
/// protocol lacks, so that a mismatch fails before any connection opens.
fn protocol(
    scenario: &Scenario,
    target: &compare::Target,
    certificate: Option<[u8; 32]>,
) -> anyhow::Result<user::Protocol> {
    let url = target.url.as_str();
    if url.starts_with("redis://") {
        anyhow::ensure!(
            scenario.kind == Kind::Chat,
            "a redis:// target runs the chat scenario only (pub/sub has no queries or REST)"
        );
        Ok(user::Protocol::Redis)
    } else if url.starts_with("broadcast://") {
        anyhow::ensure!(
            scenario.kind == Kind::Chat,
            "a broadcast:// target runs the chat scenario only (it has rooms, nothing else)"
        );
        Ok(user::Protocol::Broadcast)
    } else if url.starts_with("https://") {
        anyhow::ensure!(
            scenario.kind != Kind::Feed,
            "an https:// (WebTransport) target runs the realtime scenarios, not feed (REST)"
        );
        Ok(user::Protocol::WebTransport(certificate.context(
            "an https:// (WebTransport) target needs --cert-sha256",
        )?))
    } else if target.whole_values {
        Ok(user::Protocol::FirebaseWholeValues)
    } else {
        Ok(user::Protocol::Firebase)
    }
}

/// What the started users leave for the measuring loop to watch.
struct Launched {
    /// Connections that should be open when the warm-up ends (feed: none are waited for).
    expected_open: usize,
    /// When the metrics move on to their next phase, since the start, earliest first.
    phases: Vec<Duration>,
}

/// Starts this process's users: the feed scenario's REST clients, or one realtime user per
/// connection plan this process owns.
async fn launch(
    scenario: &Scenario,
    addresses: &[String],
    protocol: user::Protocol,
    share: Option<workers::Share>,
    metrics: &Rc<Metrics>,
    stopping: &Rc<Cell<bool>>,
) -> anyhow::Result<Launched> {
    let warmup = Duration::from_secs(scenario.warmup_secs);
    let duration = Duration::from_secs(scenario.duration_secs);
    let source = share.map(|share| share.source_ip());
    let mut launched = Launched {
        expected_open: 0,
        phases: Vec::new(),
    };
    if scenario.kind == Kind::Feed {
        let mut mine = scenario.clone();
        if let Some(share) = share {
            mine.connections = (0..scenario.connections)
                .filter(|index| share.owns(*index))
                .count();
        }
        // Only one process seeds the feeds, so that the shared data is written once.
        let seed = share.is_none_or(|share| share.index == 0);
        feed::start(&mine, &addresses[0], source, seed, metrics, stopping).await?;
        return Ok(launched);
    }
    for plan in plan::plans(scenario) {
        if share.is_some_and(|share| !share.owns(plan.index)) {
            continue;
        }
        if plan.start_after < warmup {
            launched.expected_open += 1;
        }
        let delayed = plan.start_after;
        let to = addresses[plan.index % addresses.len()].clone();
        user::spawn(
            plan,
            protocol,
            to,
            source,
            metrics.clone(),
            stopping.clone(),
            delayed,
        );
    }
    if scenario.kind == Kind::HotDb {
        launched.phases.push(warmup + duration / 2);
    }
    Ok(launched)
}

/// The run's timetable: when it started, and how long it warms up and then measures.
struct Clock {
    started: Instant,
    warmup: Duration,
    duration: Duration,
}

/// Ticks once a second until the measured duration has passed or Ctrl-C: starts measuring,
/// moves the metrics through their phases, samples the server and prints progress. Returns
/// when the measured time started (since the run's start; `None` if it never did) and
/// whether Ctrl-C ended the run.
async fn measure(
    clock: &Clock,
    mut launched: Launched,
    share: Option<workers::Share>,
    metrics: &Metrics,
    sampler: &mut procstat::Sampler,
) -> (Option<Duration>, bool) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let mut measuring_since: Option<Duration> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => return (measuring_since, true),
        }
        let elapsed = clock.started.elapsed();
        // The measured time starts once the warm-up is over and every connection is open
        // (a slow ramp would otherwise put connection storms and the writes that queued
        // behind them into the numbers), but after three warm-ups at the latest.
        let ready =
            metrics.open.get() >= launched.expected_open || elapsed >= clock.warmup * MAX_WARMUPS;
        if measuring_since.is_none() && elapsed >= clock.warmup && ready {
            measuring_since = Some(elapsed);
            start_measuring(metrics, clock.duration, sampler);
        }
        if let Some(&phase) = launched.phases.first() {
            if elapsed >= phase {
                launched.phases.remove(0);
                metrics.next_phase();
            }
        }
        sampler.sample();
        if share.is_none() {
            report::progress(metrics, elapsed);
        }
        if measuring_since.is_some_and(|since| elapsed >= since + clock.duration) {
            return (measuring_since, false);
        }
    }
}

/// Starts the measured time of `duration` from now, for the metrics and the server sampler.
fn start_measuring(metrics: &Metrics, duration: Duration, sampler: &mut procstat::Sampler) {
    metrics.start_measuring();
    // The delivery check covers the writes sent from now until a grace before the end, so
    // that their events have time to arrive.
    let now = wire::now_us();
    let measured_us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
    let grace = delivery::GRACE_US.min(measured_us / 2);
    metrics.set_delivery_window(now, now + measured_us - grace);
    sampler.start();
}
