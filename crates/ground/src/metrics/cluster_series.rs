//! The series of a node in a cluster: its claims and lease, and the replication toward its
//! follower nodes.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::series::{counter, family, gauge, level, Result2, Value};
use hearth_triggers::outbox::TriggerMetrics;

use super::snapshot::{AuditSnapshot, ClusterSnapshot, FollowerSnapshot, TriggerSnapshot};

/// Replication lag toward each follower node (`replica`).
pub(super) fn replication(
    encoder: &mut DescriptorEncoder,
    followers: &[FollowerSnapshot],
) -> Result2 {
    let series = |value: fn(&FollowerSnapshot) -> Value| {
        followers
            .iter()
            .map(move |follower| ([("follower", follower.node.clone())], value(follower)))
    };
    family(
        encoder,
        "replication_lag_records",
        "Log records shipped to the follower node and not yet acknowledged as on its disk.",
        MetricType::Gauge,
        series(|f| Value::Level(f.records as i64)),
    )?;
    family(
        encoder,
        "replication_lag_bytes",
        "Bytes of log records shipped to the follower node and not yet acknowledged.",
        MetricType::Gauge,
        series(|f| Value::Level(f.bytes as i64)),
    )?;
    family(
        encoder,
        "replication_degraded",
        "Shards acknowledging writes without the follower node now (it is down, or was too slow, until it catches up).",
        MetricType::Gauge,
        series(|f| Value::Level(f.degraded as i64)),
    )?;
    family(
        encoder,
        "replication_degradations",
        "Times a shard stopped waiting for the follower node.",
        MetricType::Counter,
        series(|f| Value::Count(f.degradations)),
    )?;
    family(
        encoder,
        "replication_copies",
        "Full copies of a database shipped to the follower node (the first record of a database over a new link connection, or a catch-up when the node became its follower).",
        MetricType::Counter,
        series(|f| Value::Count(f.copies)),
    )
}

/// This node's claims and lease, and the writes it gave up or replaced.
pub(super) fn cluster_node(e: &mut DescriptorEncoder, cluster: &ClusterSnapshot) -> Result2 {
    gauge(
        e,
        "cluster_claims",
        "Databases this node holds the etcd claim on (it acknowledges writes only to them).",
        level(cluster.claims),
    )?;
    let metric = e.encode_descriptor(
        "cluster_lease_age_seconds",
        "Seconds since etcd last confirmed this node's lease (writes are refused past two thirds of its TTL); -1 without a lease.",
        None,
        MetricType::Gauge,
    )?;
    let age = cluster.lease_age.map_or(-1.0, |age| age.as_secs_f64());
    ConstGauge::new(age).encode(metric)?;
    gauge(
        e,
        "cluster_claims_alone",
        "Databases this node holds the claim on whose sync set names this node alone (--replication sync): no other node may take them over, and each waits for this node if it fails.",
        level(cluster.claims_alone),
    )?;
    counter(
        e,
        "replication_writes_given_up",
        "Writes never acknowledged because this node lost the right to acknowledge them before they reached a copy that may take the database over (their clients were disconnected and send them again).",
        cluster.writes_given_up,
    )?;
    counter(
        e,
        "replication_divergent_copies",
        "Copies of a database this node held that a copy from a newer owner replaced while they differed (kept under the data directory's divergent/ folder).",
        cluster.divergent_copies,
    )
}

/// What databases' quotas refused, by quota.
pub(super) fn quotas(
    e: &mut DescriptorEncoder,
    [connections, writes, bytes, stored]: [u64; 4],
) -> Result2 {
    family(
        e,
        "quota_refused",
        "Requests refused by their database's quotas (docs/quotas.md): connections (sessions past the quota of connections), writes (past writesPerSecond), write_bytes (past writeBytesPerMinute), stored_bytes (writes to a database at its storedBytes).",
        MetricType::Counter,
        [
            ([("quota", "connections")], Value::Count(connections)),
            ([("quota", "writes")], Value::Count(writes)),
            ([("quota", "write_bytes")], Value::Count(bytes)),
            ([("quota", "stored_bytes")], Value::Count(stored)),
        ],
    )
}

/// What the rules' limits per caller refused, by limit.
pub(super) fn rule_limits(
    e: &mut DescriptorEncoder,
    [writes, bytes, listens, connections]: [u64; 4],
) -> Result2 {
    family(
        e,
        "rule_limit_refused",
        "Requests refused by the limits per caller their database's rules declare (.limits, docs/limits.md): writes, bytes (written), listens, connections (held at once).",
        MetricType::Counter,
        [
            ([("limit", "writes")], Value::Count(writes)),
            ([("limit", "bytes")], Value::Count(bytes)),
            ([("limit", "listens")], Value::Count(listens)),
            ([("limit", "connections")], Value::Count(connections)),
        ],
    )
}

/// App Check: tokens by outcome, and what enforcement refused.
pub(super) fn app_check(
    e: &mut DescriptorEncoder,
    [verified, missing, invalid, refused]: [u64; 4],
) -> Result2 {
    family(
        e,
        "app_check_tokens",
        "App Check tokens by outcome: verified, missing (a connection or REST request without one), invalid (refused by the verification); counted whether or not the database enforces App Check.",
        MetricType::Counter,
        [
            ([("outcome", "verified")], Value::Count(verified)),
            ([("outcome", "missing")], Value::Count(missing)),
            ([("outcome", "invalid")], Value::Count(invalid)),
        ],
    )?;
    counter(
        e,
        "app_check_refused",
        "Requests refused because their database enforces App Check and they had no valid token.",
        refused,
    )
}

/// The audit trail: entries handed to its thread and written (their difference is what the
/// thread still has to write), failures, erasures.
pub(super) fn audit(e: &mut DescriptorEncoder, audit: &AuditSnapshot) -> Result2 {
    family(
        e,
        "audit_entries",
        "Audit trail entries: handed (durable, given to the trail's thread; recopied ones at a start included) and written (appended to the files; one already there is not written again).",
        MetricType::Counter,
        [
            ([("stage", "handed")], Value::Count(audit.handed)),
            ([("stage", "written")], Value::Count(audit.written)),
        ],
    )?;
    counter(
        e,
        "audit_failures",
        "Audit file appends, syncs or removals that failed (each logged; the log keeps the entries until the next start copies them).",
        audit.failures,
    )?;
    counter(
        e,
        "audit_erased",
        "Audit entries erased by uid (DELETE /.settings/auditTrail.json, hearth audit erase).",
        audit.erased,
    )
}

/// The declared triggers (`--triggers FILE`): their events by outcome, and how far each
/// receiver is behind.
pub(super) fn declared_triggers(e: &mut DescriptorEncoder, triggers: &[TriggerMetrics]) -> Result2 {
    family(
        e,
        "trigger_deliveries",
        "Events of the declared triggers by outcome: taken (in the outbox, durable), delivered (the receiver confirmed), failed (an attempt failed; retried with backoff), dead (moved to the dead letters after maxAttempts), dropped (the outbox was full).",
        MetricType::Counter,
        triggers.iter().flat_map(|t| {
            [
                ("taken", t.taken),
                ("delivered", t.delivered),
                ("failed", t.failed),
                ("dead", t.dead),
                ("dropped", t.dropped),
            ]
            .map(|(outcome, count)| {
                (
                    [("trigger", t.name.clone()), ("outcome", outcome.to_owned())],
                    Value::Count(count),
                )
            })
        }),
    )?;
    family(
        e,
        "trigger_lag_events",
        "Events of a declared trigger not yet confirmed by its receiver, in the databases this node delivers.",
        MetricType::Gauge,
        triggers.iter().map(|t| {
            (
                [("trigger", t.name.clone())],
                Value::Level(i64::try_from(t.pending).unwrap_or(i64::MAX)),
            )
        }),
    )?;
    family(
        e,
        "trigger_lag_seconds",
        "Age of the oldest event of a declared trigger not yet confirmed (0 when none).",
        MetricType::Gauge,
        triggers
            .iter()
            .map(|t| ([("trigger", t.name.clone())], Value::Gauge(t.lag_seconds))),
    )
}

/// Database triggers: how many are registered, and what became of their events.
pub(super) fn triggers(e: &mut DescriptorEncoder, triggers: &TriggerSnapshot) -> Result2 {
    gauge(
        e,
        "triggers_registered",
        "Database triggers registered (POST /.settings/functionTriggers.json), every database together.",
        level(triggers.registered),
    )?;
    family(
        e,
        "trigger_events",
        "Trigger events by outcome: delivered (the Functions emulator ran the function), failed (the post failed or the function threw; not retried), dropped (too many waiting, or past a write's limit of changes).",
        MetricType::Counter,
        [
            ([("outcome", "delivered")], Value::Count(triggers.delivered)),
            ([("outcome", "failed")], Value::Count(triggers.failed)),
            ([("outcome", "dropped")], Value::Count(triggers.dropped)),
        ],
    )
}
