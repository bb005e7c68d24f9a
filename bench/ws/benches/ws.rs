//! tokio-tungstenite against fastwebsockets: N small text messages over loopback TCP.
//!
//! `cargo bench -p hearth-bench-ws --bench ws`. `HEARTH_BENCH_SCALE` (a fraction, default 1)
//! scales N = 10,000 messages per run, for CI smoke runs (`cargo test --benches`).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hearth_bench_ws::{runtime, small_message, EndToEnd, Inbound, Lib, Push};

const MESSAGES: usize = 10_000;

fn messages() -> usize {
    let scale = std::env::var("HEARTH_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0);
    ((MESSAGES as f64 * scale).round() as usize).clamp(64, MESSAGES * 100)
}

fn bench_ws(c: &mut Criterion) {
    let rt = runtime();
    let n = messages();
    let text = small_message();
    let expected = n * text.len();

    let mut group = c.benchmark_group("ws_push");
    group.throughput(Throughput::Elements(n as u64));
    for lib in Lib::ALL {
        let mut scenario = rt.block_on(Push::new(lib, &text)).expect("loopback pair");
        group.bench_function(BenchmarkId::new(lib.name(), n), |b| {
            b.iter(|| {
                let bytes = rt.block_on(scenario.run(n)).expect("push run");
                assert_eq!(bytes, expected);
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("ws_end_to_end");
    group.throughput(Throughput::Elements(n as u64));
    for lib in Lib::ALL {
        let mut scenario = rt
            .block_on(EndToEnd::new(lib, &text))
            .expect("loopback pair");
        group.bench_function(BenchmarkId::new(lib.name(), n), |b| {
            b.iter(|| {
                let bytes = rt.block_on(scenario.run(n)).expect("end-to-end run");
                assert_eq!(bytes, expected);
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("ws_inbound");
    group.throughput(Throughput::Elements(n as u64));
    // The write mode does not matter when the server only reads.
    for lib in [Lib::ALL[0], Lib::ALL[1]] {
        let mut scenario = rt
            .block_on(Inbound::new(lib, &text, n))
            .expect("loopback pair");
        group.bench_function(BenchmarkId::new(lib.name(), n), |b| {
            b.iter(|| {
                let bytes = rt.block_on(scenario.run()).expect("inbound run");
                assert_eq!(bytes, expected);
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_ws
}
criterion_main!(benches);
