//! Whether the server can take traffic, shared by every shard and the metrics listener: the
//! shards that are running, the shards whose log failed, and whether the server is stopping.
//! Written on rare events only (a shard starting, a disk failure, shutdown), so it is a few
//! atomics and a mutex, never touched on the hot path. A node of a cluster is also not ready
//! until it has joined: a load balancer that sent it clients before its links to the other
//! nodes were up would see their databases' requests fail.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Why the server is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// Shards are still recovering their logs (or starting).
    Recovering { started: usize, shards: usize },
    /// A shard's log failed: its databases are read-only until a restart.
    ReadOnly { shard: usize, failure: String },
    /// A node of a cluster has not joined it yet (the reason says what it waits for).
    Joining { reason: String },
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
            NotReady::Joining { reason } => serde_json::json!({
                "status": "joining",
                "reason": reason,
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

/// What a node of a cluster still waits for before it can take clients; `None` once joined.
pub type JoinCheck = Box<dyn Fn() -> Option<String> + Send + Sync>;

#[derive(Default)]
pub struct Health {
    /// Shards the server runs; 0 until the data directory told how many.
    shards: AtomicUsize,
    started: AtomicUsize,
    stopping: AtomicBool,
    /// The first failure of each failed shard's log.
    failures: Mutex<Vec<(usize, String)>>,
    /// In a cluster: whether this node has joined it yet.
    join: OnceLock<JoinCheck>,
    /// Set the first time the join check passed: readiness then no longer follows the other
    /// nodes, so that the loss of one (its links down until its lease expires) does not make
    /// every other node unready at once and empty the load balancer.
    joined: AtomicBool,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("shards", &self.shards)
            .field("started", &self.started)
            .field("stopping", &self.stopping)
            .field("failures", &self.failures)
            .field("joined", &self.joined)
            .finish_non_exhaustive()
    }
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

    /// This server is a node of a cluster: not ready until `check` passes once.
    pub fn wait_to_join(&self, check: JoinCheck) {
        let _ = self.join.set(check);
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
        if !self.joined.load(Ordering::Acquire) {
            if let Some(reason) = self.join.get().and_then(|check| check()) {
                return Err(NotReady::Joining { reason });
            }
            self.joined.store(true, Ordering::Release);
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

    #[test]
    fn a_node_is_ready_once_it_joined_and_stays_so_when_a_peer_goes() {
        use std::sync::Arc;
        let health = Health::default();
        health.expect_shards(1);
        health.shard_started();
        let links_up = Arc::new(AtomicBool::new(false));
        let up = links_up.clone();
        health.wait_to_join(Box::new(move || {
            (!up.load(Ordering::Acquire)).then(|| "the link to node b is not up".to_owned())
        }));
        let not_ready = health.ready().expect_err("joining");
        assert_eq!(
            not_ready,
            NotReady::Joining {
                reason: "the link to node b is not up".to_owned()
            }
        );
        let body: serde_json::Value = serde_json::from_str(&not_ready.json()).expect("JSON");
        assert_eq!(body["status"], "joining");
        links_up.store(true, Ordering::Release);
        assert_eq!(health.ready(), Ok(()));
        links_up.store(false, Ordering::Release);
        assert_eq!(health.ready(), Ok(()), "a peer lost later: still ready");
    }
}
