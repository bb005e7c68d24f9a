//! The server's memory and CPU use, read from /proc for a local process.

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ServerUse {
    pub rss_max_mib: f64,
    pub rss_end_mib: f64,
    /// CPU time over wall time while measuring, in percent of one core.
    pub cpu_percent: f64,
}

pub struct Sampler {
    pid: Option<u32>,
    start: Option<(Instant, u64)>,
    rss_max_kib: u64,
    rss_last_kib: u64,
}

impl Sampler {
    pub fn new(pid: Option<u32>) -> Sampler {
        Sampler {
            pid,
            start: None,
            rss_max_kib: 0,
            rss_last_kib: 0,
        }
    }

    /// Marks the start of the measured time, once.
    pub fn start_once(&mut self) {
        if self.start.is_none() {
            self.start();
        }
    }

    /// Marks the start of the measured time.
    pub fn start(&mut self) {
        if let Some(ticks) = self.pid.and_then(cpu_ticks) {
            self.start = Some((Instant::now(), ticks));
        }
    }

    pub fn sample(&mut self) {
        if let Some(rss) = self.pid.and_then(rss_kib) {
            self.rss_last_kib = rss;
            self.rss_max_kib = self.rss_max_kib.max(rss);
        }
    }

    pub fn finish(mut self) -> Option<ServerUse> {
        self.sample();
        let pid = self.pid?;
        let (started, ticks) = self.start?;
        let used = cpu_ticks(pid)?.saturating_sub(ticks) as f64 / TICKS_PER_SECOND;
        Some(ServerUse {
            rss_max_mib: self.rss_max_kib as f64 / 1024.0,
            rss_end_mib: self.rss_last_kib as f64 / 1024.0,
            cpu_percent: 100.0 * used / started.elapsed().as_secs_f64().max(0.001),
        })
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_rss(&status)
}

fn parse_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_ticks(&stat)
}

/// utime + stime: fields 14 and 15, counted after the command name, which may hold spaces
/// but ends at the last `)`.
fn parse_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        assert_eq!(
            parse_rss("Name:\thearth\nVmRSS:\t  12345 kB\n"),
            Some(12345)
        );
        let stat = "42 (hearth shard) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0";
        assert_eq!(parse_ticks(stat), Some(300));
    }

    #[test]
    fn this_process_can_be_sampled() {
        let mut sampler = Sampler::new(Some(std::process::id()));
        sampler.start();
        sampler.sample();
        let usage = sampler.finish().expect("our own /proc entry");
        assert!(usage.rss_max_mib > 0.0);
    }
}
