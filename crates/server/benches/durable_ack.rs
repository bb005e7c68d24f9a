//! Durable-ack latency: how long a client waits for the `ok` of a write, under each
//! `--durability` mode, at fixed open-loop write rates.
//!
//! `cargo bench -p hearth-server --bench durable_ack`. The server runs in this process (one
//! shard, a temporary data directory under /tmp) and is driven over loopback WebSockets by
//! `CONNECTIONS` clients on another thread, each sending `p` writes of a small object on a
//! fixed timetable (open loop: replies never slow the sender, so a stalled server cannot hide
//! its stall by slowing the client down). Latency runs from the send to the `ok`. `HEARTH_BENCH_SCALE` (a fraction, default 1) scales the measured
//! time per run (5 s), for CI smoke runs (`cargo test --benches`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use hearth_server::persist::{Durability, PersistConfig};
use hearth_server::{ServeConfig, Server};
use tokio_tungstenite::tungstenite::Message;

/// Client connections sharing the write rate.
const CONNECTIONS: usize = 50;
/// Measured seconds per run at scale 1.
const MEASURE: Duration = Duration::from_secs(5);
/// Unmeasured seconds before each run's measurement starts: long enough for a fresh data
/// directory's first segment and its spare to be made, which a running server has behind it.
const WARM_UP: Duration = Duration::from_secs(3);
/// Write rates (writes per second over all connections).
const RATES: [u32; 3] = [1_000, 5_000, 20_000];

fn scale() -> f64 {
    std::env::var("HEARTH_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0)
}

/// Appends of a small record followed by fdatasync, on the benchmark's file system: the
/// baseline that the strict mode's numbers must be read against, measured in the same run
/// (this machine's disk is shared, and its sync latency varies from minute to minute).
fn fdatasync_baseline(duration: Duration) -> Vec<u64> {
    use std::os::unix::fs::FileExt;
    let path = std::env::temp_dir().join(format!("hearth-bench-sync-{}", std::process::id()));
    let file = std::fs::File::create(&path).expect("a baseline file");
    file.set_len(8 << 20).expect("the baseline file is sized");
    file.sync_all().expect("the baseline file is synced");
    let record = [7u8; 200];
    let end = Instant::now() + duration;
    let mut latencies = Vec::new();
    let mut index = 0u64;
    while Instant::now() < end {
        let started = Instant::now();
        file.write_at(&record, (index * 256) % (8 << 20))
            .expect("a baseline write");
        file.sync_data().expect("a baseline sync");
        latencies.push(started.elapsed().as_micros() as u64);
        index += 1;
    }
    let _ = std::fs::remove_file(&path);
    latencies.sort_unstable();
    latencies
}

fn print_row(name: &str, rate: &str, achieved: f64, result: &RunResult) {
    println!(
        "{:<8} {:>7} {:>9.0} {:>9} {:>9} {:>9} {:>9} {:>9}",
        name,
        rate,
        achieved,
        result.percentile(0.50),
        result.percentile(0.99),
        result.percentile(0.999),
        result.percentile(1.0),
        result.latencies_us.len()
    );
}

fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let measure = MEASURE.mul_f64(scale()).max(Duration::from_millis(200));
    let warm_up = WARM_UP
        .mul_f64(scale().min(1.0))
        .max(Duration::from_millis(100));
    println!(
        "durable-ack latency, {CONNECTIONS} connections, {} s measured per run",
        measure.as_secs_f64()
    );
    println!(
        "{:<8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "mode", "rate/s", "achieved", "p50 µs", "p99 µs", "p999 µs", "max µs", "writes"
    );
    for (name, durability) in [
        ("strict", Durability::Strict),
        ("batch", Durability::Batch),
        ("none", Durability::None),
    ] {
        for rate in RATES {
            let dir = temp_dir(name, rate);
            let server = start(durability, &dir);
            let result = run(server.address, rate, warm_up, measure);
            server.stop();
            let _ = std::fs::remove_dir_all(&dir);
            let Some(result) = result else {
                println!("{name:<8} {rate:>7} (no replies)");
                continue;
            };
            print_row(name, &rate.to_string(), result.achieved, &result);
        }
        if durability == Durability::Strict {
            let baseline = RunResult {
                latencies_us: fdatasync_baseline(measure),
                achieved: 0.0,
            };
            print_row("fsync", "-", 0.0, &baseline);
        }
    }
}

fn temp_dir(mode: &str, rate: u32) -> PathBuf {
    std::env::temp_dir().join(format!(
        "hearth-bench-ack-{}-{mode}-{rate}",
        std::process::id()
    ))
}

fn start(durability: Durability, dir: &std::path::Path) -> Server {
    let mut config = ServeConfig::for_tests(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.data_dir = dir.to_owned();
    config.persist = PersistConfig {
        durability,
        ..PersistConfig::default()
    };
    Server::start(config).expect("the benchmark server starts")
}

struct RunResult {
    latencies_us: Vec<u64>,
    achieved: f64,
}

impl RunResult {
    fn percentile(&self, q: f64) -> u64 {
        if self.latencies_us.is_empty() {
            return 0;
        }
        let rank = ((self.latencies_us.len() as f64 * q).ceil() as usize)
            .clamp(1, self.latencies_us.len());
        self.latencies_us[rank - 1]
    }
}

/// Drives the server at `rate` writes per second and returns the measured latencies.
fn run(address: SocketAddr, rate: u32, warm_up: Duration, measure: Duration) -> Option<RunResult> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a client runtime");
    runtime.block_on(async move {
        let start = Instant::now() + Duration::from_millis(200);
        let measure_from = start + warm_up;
        let end = measure_from + measure;
        let per_connection = Duration::from_secs_f64(CONNECTIONS as f64 / f64::from(rate));
        let mut tasks = Vec::new();
        for index in 0..CONNECTIONS {
            // Spread the connections' timetables over one interval.
            let offset = per_connection.mul_f64(index as f64 / CONNECTIONS as f64);
            tasks.push(tokio::spawn(writer(
                address,
                index,
                start + offset,
                per_connection,
                measure_from,
                end,
            )));
        }
        let mut latencies_us = Vec::new();
        for task in tasks {
            latencies_us.extend(task.await.ok()??);
        }
        latencies_us.sort_unstable();
        let achieved = latencies_us.len() as f64 / measure.as_secs_f64();
        Some(RunResult {
            latencies_us,
            achieved,
        })
    })
}

/// One connection: sends a write whenever one is due and records, for the writes due inside
/// the measured window, the time from due to acknowledged.
async fn writer(
    address: SocketAddr,
    index: usize,
    first: Instant,
    interval: Duration,
    measure_from: Instant,
    end: Instant,
) -> Option<Vec<u64>> {
    let url = format!("ws://{address}/.ws?v=5&ns=bench");
    let (socket, _) = tokio_tungstenite::connect_async(url).await.ok()?;
    let (mut sink, mut stream) = socket.split();
    // Request id -> (when it was due, when it was sent).
    let mut due: HashMap<u64, (Instant, Instant)> = HashMap::new();
    let mut latencies = Vec::new();
    let mut next = first;
    let mut request = 0u64;
    let mut sending = true;
    loop {
        if !sending && due.is_empty() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()), if sending => {
                request += 1;
                let text = format!(
                    "{{\"t\":\"d\",\"d\":{{\"r\":{request},\"a\":\"p\",\"b\":{{\"p\":\"/bench/c{index}/{}\",\"d\":{{\"n\":{request},\"text\":\"hello from a benchmark client\"}}}}}}}}",
                    request % 64
                );
                // Measured from the send: tokio's timers fire up to a millisecond late, and
                // that lateness is the client's, not the server's. The timetable stays
                // fixed, so a slow server still meets the full rate (open loop).
                due.insert(request, (next, Instant::now()));
                if sink.send(Message::text(text)).await.is_err() {
                    return None;
                }
                next += interval;
                if next >= end {
                    sending = false;
                }
            }
            message = stream.next() => {
                let Ok(Message::Text(text)) = message? else {
                    continue;
                };
                let Some(id) = reply_id(text.as_str()) else { continue };
                if let Some((at, sent)) = due.remove(&id) {
                    if at >= measure_from && at < end {
                        latencies.push(sent.elapsed().as_micros() as u64);
                    }
                }
            }
            _ = tokio::time::sleep_until((end + Duration::from_secs(10)).into()) => break,
        }
    }
    Some(latencies)
}

/// The request id of a `{"t":"d","d":{"r":N,"b":{"s":"ok",...}}}` reply.
fn reply_id(text: &str) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let data = value.get("d")?;
    if data.get("b")?.get("s")?.as_str()? != "ok" {
        return None;
    }
    data.get("r")?.as_u64()
}
