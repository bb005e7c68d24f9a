//! Answering a scrape: `GET /metrics` in the Prometheus text format, `GET /healthz` and
//! `GET /readyz`, on the main port (`endpoint`) and, with `--metrics-listen`, on an address of
//! their own (`listener`). The [`Observer`] asks every shard for its numbers through its inbox
//! and sums them (`hearth_ground::metrics` counts and encodes).

mod endpoint;
mod listener;

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;

pub(crate) use endpoint::{answer_on_main_port, is_served_here};
pub(crate) use listener::{bind_metrics_listener, serve_metrics};

use hearth_ground::inbox::{ask_every_shard, ShardMessage};
use hearth_ground::metrics::snapshot;
use hearth_ground::metrics::{Health, ServerSnapshot};
use hearth_net::budget::SharedBudgets;

/// How long a scrape waits for the shards' answers; a shard that has not answered by then is
/// reported in `hearth_shards_unanswered` instead of holding the scrape.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the shards, the scrapes and the health checks share: the shards' inboxes, the HTTP
/// budgets and the server's health.
pub struct Observer {
    pub health: Arc<Health>,
    http: SharedBudgets,
    shards: OnceLock<Vec<mpsc::UnboundedSender<ShardMessage>>>,
    /// This node's placement, in a cluster: its claims and lease age are scraped from it.
    cluster: OnceLock<hearth_cluster::Placement>,
    /// The follower nodes of this node's databases and the replication lag toward each, as
    /// the cluster knows them at the scrape (etcd's nodes come and go).
    followers: OnceLock<Followers>,
    /// The database triggers, when the server delivers them (`--functions-emulator`).
    triggers: OnceLock<hearth_config::ServerTriggers>,
    /// Set when the server verifies App Check tokens: their counts are scraped.
    app_check: OnceLock<()>,
    /// The audit trail, when the server keeps one.
    audit: OnceLock<hearth_audit::AuditTrail>,
}

/// The other nodes' ids and the replication lag toward each, read at every scrape.
pub type Followers =
    Box<dyn Fn() -> Vec<(String, Arc<hearth_ground::replica_messages::FollowerLag>)> + Send + Sync>;

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("health", &self.health)
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}

impl Observer {
    pub fn new(http: SharedBudgets) -> Arc<Observer> {
        Arc::new(Observer {
            health: Arc::new(Health::default()),
            http,
            shards: OnceLock::new(),
            cluster: OnceLock::new(),
            followers: OnceLock::new(),
            triggers: OnceLock::new(),
            app_check: OnceLock::new(),
            audit: OnceLock::new(),
        })
    }

    /// The shards' inboxes, once they exist.
    pub fn connect(&self, shards: Vec<mpsc::UnboundedSender<ShardMessage>>) {
        self.health.expect_shards(shards.len());
        let _ = self.shards.set(shards);
    }

    /// The cluster this node joined.
    pub fn join_cluster(&self, placement: hearth_cluster::Placement) {
        let _ = self.cluster.set(placement);
    }

    /// The other nodes of the cluster, whose replication lag is scraped.
    pub fn follow(&self, followers: Followers) {
        let _ = self.followers.set(followers);
    }

    /// Scrapes the database triggers from now on.
    pub fn watch_triggers(&self, triggers: hearth_config::ServerTriggers) {
        let _ = self.triggers.set(triggers);
    }

    /// Scrapes the audit trail's counts from now on.
    pub fn watch_audit(&self, trail: hearth_audit::AuditTrail) {
        let _ = self.audit.set(trail);
    }

    /// Scrapes the App Check counts from now on.
    pub fn watch_app_check(&self) {
        let _ = self.app_check.set(());
    }

    /// Every shard's numbers, summed.
    pub async fn scrape(&self) -> ServerSnapshot {
        let shards = self.shards.get().map_or(&[][..], Vec::as_slice);
        let answers = ask_every_shard(shards, ShardMessage::Metrics, Some(SCRAPE_TIMEOUT)).await;
        let mut answered = Vec::with_capacity(answers.len());
        let mut missing = Vec::new();
        for (shard, answer) in answers.into_iter().enumerate() {
            match answer {
                Some(snapshot) => answered.push(snapshot),
                None => missing.push(shard),
            }
        }
        let mut server = ServerSnapshot::new(answered, missing);
        server.body_bytes_in_flight = self.http.bodies.used();
        server.answer_bytes_unsent = self.http.answers.used();
        server.ready = self.health.ready().is_ok();
        server.cluster = self
            .cluster
            .get()
            .map(|placement| snapshot::ClusterSnapshot {
                claims: placement.own_claims(),
                lease_age: placement.lease_age(),
                claims_alone: placement.own_claims_alone(),
                writes_given_up: hearth_ground::replica_messages::WRITES_GIVEN_UP
                    .load(Ordering::Relaxed),
                divergent_copies: hearth_ground::replica_messages::DIVERGENT_COPIES
                    .load(Ordering::Relaxed),
            });
        server.triggers = self.triggers.get().and_then(|triggers| {
            let counters = triggers.sink.as_ref()?.counters();
            Some(snapshot::TriggerSnapshot {
                registered: triggers.registry.all().len(),
                delivered: counters.delivered.load(Ordering::Relaxed),
                failed: counters.failed.load(Ordering::Relaxed),
                dropped: counters.dropped.load(Ordering::Relaxed),
            })
        });
        server.declared_triggers = self
            .triggers
            .get()
            .and_then(|triggers| triggers.outbox.as_ref())
            .map(|outbox| outbox.metrics(hearth_net::time::now_ms()))
            .unwrap_or_default();
        server.audit = self.audit.get().map(|trail| {
            let stats = trail.stats();
            snapshot::AuditSnapshot {
                handed: stats.handed.load(Ordering::Relaxed),
                written: stats.written.load(Ordering::Relaxed),
                failures: stats.failures.load(Ordering::Relaxed),
                erased: stats.erased.load(Ordering::Relaxed),
            }
        });
        server.app_check = self.app_check.get().map(|()| {
            use hearth_auth::app_check::{INVALID, MISSING, REFUSED, VERIFIED};
            [&VERIFIED, &MISSING, &INVALID, &REFUSED].map(|counter| counter.load(Ordering::Relaxed))
        });
        server.quota_refused = hearth_owner::quotas::REFUSED
            .each_ref()
            .map(|counter| counter.load(Ordering::Relaxed));
        server.rule_limit_refused = hearth_owner::caller_limits::REFUSED
            .each_ref()
            .map(|counter| counter.load(Ordering::Relaxed));
        server.followers = self.followers.get().map_or_else(Vec::new, |followers| {
            followers()
                .iter()
                .map(|(node, lag)| snapshot::FollowerSnapshot::read(node, lag))
                .collect()
        });
        server
    }
}
