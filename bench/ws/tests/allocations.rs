//! Checks that every scenario delivers its messages intact, and prints the heap allocations
//! per message of each (`cargo test -p hearth-bench-ws --release -- --nocapture`).
//!
//! One test function only: the counting allocator sees every thread of the process.

use std::alloc::System;

use hearth_bench_ws::{runtime, small_message, EndToEnd, Inbound, Lib, Push};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const N: usize = 2_048;

/// (allocations and reallocations, bytes allocated) over one run of `N` messages.
fn totals(stats: stats_alloc::Stats) -> (usize, usize) {
    (
        stats.allocations + stats.reallocations,
        stats.bytes_allocated + stats.bytes_reallocated.max(0) as usize,
    )
}

#[test]
fn scenarios_deliver_and_allocations_per_message() {
    let rt = runtime();
    let text = small_message();
    let expected = N * text.len();
    println!("allocations over one steady-state run of {N} messages (both ends):");
    println!(
        "{:<12} {:<26} {:>8} {:>10}",
        "scenario", "server library", "allocs", "bytes"
    );
    for lib in Lib::ALL {
        let mut push = rt.block_on(Push::new(lib, &text)).expect("loopback pair");
        // A first run grows the buffers; the second shows the steady state.
        assert_eq!(rt.block_on(push.run(N)).expect("push"), expected);
        let region = Region::new(GLOBAL);
        assert_eq!(rt.block_on(push.run(N)).expect("push"), expected);
        let (allocs, bytes) = totals(region.change());
        println!("{:<12} {:<26} {allocs:>8} {bytes:>10}", "push", lib.name());

        let mut e2e = rt
            .block_on(EndToEnd::new(lib, &text))
            .expect("loopback pair");
        assert_eq!(rt.block_on(e2e.run(N)).expect("e2e"), expected);
        let region = Region::new(GLOBAL);
        assert_eq!(rt.block_on(e2e.run(N)).expect("e2e"), expected);
        let (allocs, bytes) = totals(region.change());
        println!(
            "{:<12} {:<26} {allocs:>8} {bytes:>10}",
            "end_to_end",
            lib.name()
        );

        let mut inbound = rt
            .block_on(Inbound::new(lib, &text, N))
            .expect("loopback pair");
        assert_eq!(rt.block_on(inbound.run()).expect("inbound"), expected);
        let region = Region::new(GLOBAL);
        assert_eq!(rt.block_on(inbound.run()).expect("inbound"), expected);
        let (allocs, bytes) = totals(region.change());
        println!(
            "{:<12} {:<26} {allocs:>8} {bytes:>10}",
            "inbound",
            lib.name()
        );
    }
}
