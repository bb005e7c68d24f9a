//! Whether the server can take traffic, shared by every shard and the metrics listener: the
//! shards that are running, the shards whose log failed, and whether the server is stopping.
//! Written on rare events only (a shard starting, a disk failure, shutdown), so it is a few
//! atomics and a mutex, never touched on the hot path.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Why the server is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// Shards are still recovering their logs (or starting).
    Recovering { started: usize, shards: usize },
    /// A shard's log failed: its databases are read-only until a restart.
    ReadOnly { shard: usize, failure: String },
    /// The server is shutting down.
    Stopping,
}

impl NotReady {
    /// The JSON body of `/readyz`'s 503.
    pub fn json(&self) -> String {
        let body = match self {
            NotReady::Recovering { started, shards } => serde_json::json!({
                "status": "recovering",
                "reason": format!("{started} of {shards} shards are running; the others are recovering their logs"),
            }),
            NotReady::ReadOnly { shard, failure } => serde_json::json!({
                "status": "read_only",
                "reason": format!("shard {shard}'s write-ahead log failed ({failure}); its databases refuse writes until the server is restarted"),
            }),
            NotReady::Stopping => serde_json::json!({
                "status": "stopping",
                "reason": "the server is shutting down",
            }),
        };
        body.to_string()
    }
}

/// The body of `/readyz`'s 200 and `/healthz`'s.
pub const OK_BODY: &str = "{\"status\":\"ok\"}";

#[derive(Debug, Default)]
pub struct Health {
    /// Shards the server runs; 0 until the data directory told how many.
    shards: AtomicUsize,
    started: AtomicUsize,
    stopping: AtomicBool,
    /// The first failure of each failed shard's log.
    failures: Mutex<Vec<(usize, String)>>,
}

impl Health {
    pub fn expect_shards(&self, shards: usize) {
        self.shards.store(shards, Ordering::Release);
    }

    /// A shard recovered and runs.
    pub fn shard_started(&self) {
        self.started.fetch_add(1, Ordering::AcqRel);
    }

    /// A shard's log failed: writes are refused there until a restart.
    pub fn shard_failed(&self, shard: usize, failure: &str) {
        if let Ok(mut failures) = self.failures.lock() {
            if failures.iter().all(|(failed, _)| *failed != shard) {
                failures.push((shard, failure.to_owned()));
            }
        }
    }

    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    pub fn ready(&self) -> Result<(), NotReady> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(NotReady::Stopping);
        }
        if let Ok(failures) = self.failures.lock() {
            if let Some((shard, failure)) = failures.first() {
                return Err(NotReady::ReadOnly {
                    shard: *shard,
                    failure: failure.clone(),
                });
            }
        }
        let shards = self.shards.load(Ordering::Acquire);
        let started = self.started.load(Ordering::Acquire);
        if shards == 0 || started < shards {
            return Err(NotReady::Recovering { started, shards });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_every_shard_runs_and_until_a_failure() {
        let health = Health::default();
        assert!(matches!(health.ready(), Err(NotReady::Recovering { .. })));
        health.expect_shards(2);
        health.shard_started();
        assert_eq!(
            health.ready(),
            Err(NotReady::Recovering {
                started: 1,
                shards: 2
            })
        );
        health.shard_started();
        assert_eq!(health.ready(), Ok(()));
        health.shard_failed(1, "EIO");
        health.shard_failed(1, "later");
        let not_ready = health.ready().expect_err("read-only");
        assert_eq!(
            not_ready,
            NotReady::ReadOnly {
                shard: 1,
                failure: "EIO".to_owned()
            }
        );
        let body: serde_json::Value = serde_json::from_str(&not_ready.json()).expect("JSON");
        assert_eq!(body["status"], "read_only");
        health.stopping();
        assert_eq!(health.ready(), Err(NotReady::Stopping));
    }
}
