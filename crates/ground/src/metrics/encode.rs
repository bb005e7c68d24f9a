//! A [`ServerSnapshot`] in the Prometheus text exposition format (0.0.4), through the
//! `prometheus-client` crate's encoder: every metric is described, typed and escaped by it.
//! The numbers are gathered from the shards at the scrape, so they are encoded by a custom
//! collector rather than kept in the crate's atomic metric types.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::cluster_series::{
    app_check, audit, cluster_node, declared_triggers, quotas, replication, rule_limits, triggers,
};
use super::counters::CounterSnapshot;
use super::labels::{
    Channel, CloseCause, HttpRefusal, Outcome, RequestKind, SessionTransport, StreamEnd,
};
use super::series::{counter, counters_by, family, gauge, histogram, level, Result2, Value};
use super::snapshot::{DatabaseLoad, ServerSnapshot, ShardSnapshot};

/// The `Content-Type` of the answer.
pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Every metric's name starts with this (and `_`).
pub const PREFIX: &str = "hearth";

/// The snapshot as exposition text.
pub fn encode(snapshot: ServerSnapshot) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(Scraped(snapshot)));
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

#[derive(Debug)]
struct Scraped(ServerSnapshot);

fn shard_label(shard: usize) -> [(&'static str, String); 1] {
    [("shard", shard.to_string())]
}

fn top(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    loads: &[DatabaseLoad],
) -> Result2 {
    let value = |count: u64| match metric_type {
        MetricType::Counter => Value::Count(count),
        _ => Value::Level(i64::try_from(count).unwrap_or(i64::MAX)),
    };
    let series = loads
        .iter()
        .map(|load| ([("database", load.database.as_str())], value(load.count)));
    family(encoder, name, help, metric_type, series)
}

/// The server's state: whether it is ready, and its shards.
fn health(e: &mut DescriptorEncoder, snapshot: &ServerSnapshot) -> Result2 {
    gauge(
        e,
        "ready",
        "1 when every shard recovered and its log is writable (as /readyz says).",
        i64::from(snapshot.ready),
    )?;
    gauge(
        e,
        "shards",
        "Shards that answered this scrape.",
        level(snapshot.shards.len()),
    )?;
    gauge(
        e,
        "shards_unanswered",
        "Shards that did not answer this scrape in time (a shard thread stuck or gone).",
        level(snapshot.missing.len()),
    )
}

/// Open connections and streams, and how many opened and ended.
fn connections(e: &mut DescriptorEncoder, snapshot: &ServerSnapshot) -> Result2 {
    let total = &snapshot.total;
    let sum = |get: fn(&super::snapshot::ShardSnapshot) -> usize| {
        level(snapshot.shards.iter().map(get).sum())
    };
    let open_websockets = total
        .websockets_opened
        .saturating_sub(total.websockets_closed());
    gauge(
        e,
        "websocket_connections",
        "Open WebSocket connections.",
        i64::try_from(open_websockets).unwrap_or(i64::MAX),
    )?;
    gauge(
        e,
        "event_streams",
        "Open REST event streams (server-sent events).",
        sum(|shard| shard.event_streams),
    )?;
    gauge(
        e,
        "databases_loaded",
        "Databases held in memory.",
        sum(|shard| shard.databases_loaded),
    )?;
    counter(
        e,
        "websocket_connections_opened",
        "WebSocket connections accepted.",
        total.websockets_opened,
    )?;
    counters_by(
        e,
        "websocket_connections_closed",
        "WebSocket connections that ended, by cause (client: the client closed or its socket failed; the others are the server's close reasons).",
        "cause",
        CloseCause::ALL.map(CloseCause::label),
        &total.closes,
    )?;
    let session_closes = SessionTransport::ALL.iter().flat_map(|&transport| {
        let counts = total.session_closes.get(transport as usize);
        CloseCause::ALL.map(move |cause| {
            let count = counts
                .and_then(|row| row.get(cause as usize))
                .copied()
                .unwrap_or(0);
            (
                [("transport", transport.label()), ("cause", cause.label())],
                Value::Count(count),
            )
        })
    });
    family(
        e,
        "sessions_closed",
        "Long-polling and WebTransport sessions that ended, by transport and cause (as websocket_connections_closed).",
        MetricType::Counter,
        session_closes,
    )?;
    counters_by(
        e,
        "event_streams_ended_by_server",
        "REST event streams the server ended, by cause (cancel: read permission withdrawn; auth_revoked: the credential expired; slow_reader: the queue limit; answers_busy: the answer budget).",
        "cause",
        StreamEnd::ALL.map(StreamEnd::label),
        &total.stream_ends,
    )?;
    counter(
        e,
        "event_streams_opened",
        "REST event streams opened.",
        total.streams_opened,
    )
}

/// Requests, writes and the messages and bytes they made, by transport.
fn requests(e: &mut DescriptorEncoder, total: &CounterSnapshot) -> Result2 {
    family(
        e,
        "requests",
        "Requests answered, by transport (websocket, rest), kind and outcome.",
        MetricType::Counter,
        RequestKind::ALL.iter().flat_map(|kind| {
            Outcome::ALL.iter().filter_map(move |outcome| {
                let count = total.requests(*kind, *outcome);
                // Kinds and outcomes that never happened are left out, as most pairs
                // cannot happen; a series appears with its first request.
                (count > 0).then(|| {
                    let (transport, kind) = kind.labels();
                    (
                        [
                            ("transport", transport),
                            ("kind", kind),
                            ("outcome", outcome.label()),
                        ],
                        Value::Count(count),
                    )
                })
            })
        }),
    )?;
    counter(
        e,
        "writes",
        "Writes applied to databases (sets, updates, pushes, deletes; from every transport and onDisconnect).",
        total.writes,
    )?;
    counter(
        e,
        "realtime_messages_received",
        "Realtime protocol messages received from clients.",
        total.messages_in,
    )?;
    counters_by(
        e,
        "pushes",
        "Change events queued to listeners (one per listener of each change), by transport.",
        "transport",
        Channel::ALL.map(Channel::label),
        &total.pushes,
    )?;
    counters_by(
        e,
        "sent_bytes",
        "Bytes handed to client sockets, by transport (websocket: frames; http: REST answers and event streams).",
        "transport",
        Channel::ALL.map(Channel::label),
        &total.bytes_out,
    )
}

/// The write-ahead log and snapshots.
fn storage(e: &mut DescriptorEncoder, total: &CounterSnapshot) -> Result2 {
    histogram(
        e,
        "write_ack_seconds",
        "From a write's application on its database's shard to the moment its acknowledgement may leave: its log record synced (--durability strict only).",
        &total.ack_latency,
    )?;
    histogram(
        e,
        "log_sync_seconds",
        "Time to write and fdatasync one batch of log records.",
        &total.log_sync,
    )?;
    counter(
        e,
        "log_written_bytes",
        "Bytes written to the write-ahead log and synced.",
        total.log_bytes,
    )?;
    counter(
        e,
        "snapshots",
        "Database snapshots written.",
        total.snapshots,
    )
}

/// The HTTP limits: refusals, and the server-wide budgets in use.
fn limits(e: &mut DescriptorEncoder, snapshot: &ServerSnapshot) -> Result2 {
    let total = &snapshot.total;
    counters_by(
        e,
        "http_refused",
        "HTTP requests refused by a server limit, by reason (budgets: 503; body too large: 413; body too slow: 408; first head too large or malformed: 431, 400).",
        "reason",
        HttpRefusal::ALL.map(HttpRefusal::label),
        &total.http_refused,
    )?;
    gauge(
        e,
        "http_body_bytes_in_flight",
        "Request body bytes being received, server-wide (the --body-budget-mib budget in use).",
        level(snapshot.body_bytes_in_flight),
    )?;
    gauge(
        e,
        "answer_bytes_unsent",
        "Answer bytes produced and not yet taken by a socket, server-wide (the --answer-budget-mib budget in use, including shards' reserved grains).",
        level(snapshot.answer_bytes_unsent),
    )
}

/// The cache of serialized REST answers.
fn rest_cache(e: &mut DescriptorEncoder, total: &CounterSnapshot) -> Result2 {
    counter(
        e,
        "rest_cache_hits",
        "REST reads answered from the cache of serialized answers (--rest-cache-mib).",
        total.rest_cache_hits,
    )?;
    counter(
        e,
        "rest_cache_hit_bytes",
        "Answer bytes served from the cache of serialized REST answers.",
        total.rest_cache_hit_bytes,
    )?;
    counter(
        e,
        "rest_cache_misses",
        "REST reads of a cacheable form whose answer the cache did not hold, or held for data since changed.",
        total.rest_cache_misses,
    )?;
    gauge(
        e,
        "rest_cache_bytes",
        "Bytes of serialized REST answers the shards' caches hold, entries' overhead included.",
        level(total.rest_cache_bytes as usize),
    )
}

/// Requests and connections served for a database another core owns.
fn routing(e: &mut DescriptorEncoder, total: &CounterSnapshot) -> Result2 {
    counter(
        e,
        "rest_requests_forwarded",
        "REST requests read on one core for a database another core owns.",
        total.rest_forwarded,
    )?;
    counter(
        e,
        "websocket_connections_held_for_other_shards",
        "WebSocket connections accepted by a core for a database another core owns.",
        total.held_for_others,
    )?;
    counter(
        e,
        "websocket_sessions_moved",
        "WebSocket sessions moved to their database's next owner with the socket kept.",
        total.sessions_moved,
    )
}

/// Each shard's work, queues and sessions.
fn shards(e: &mut DescriptorEncoder, shards: &[ShardSnapshot]) -> Result2 {
    family(
        e,
        "shard_busy_seconds",
        "Time each shard's thread spent running tasks.",
        MetricType::Counter,
        shards.iter().map(|shard| {
            (
                shard_label(shard.shard),
                Value::Seconds(shard.busy.as_secs_f64()),
            )
        }),
    )?;
    let per_shard = |get: fn(&super::snapshot::ShardSnapshot) -> usize| {
        shards
            .iter()
            .map(move |shard| (shard_label(shard.shard), Value::Level(level(get(shard)))))
    };
    family(
        e,
        "shard_inbox_messages",
        "Messages waiting in each shard's inbox (requests and messages from other shards).",
        MetricType::Gauge,
        per_shard(|shard| shard.inbox_messages),
    )?;
    family(
        e,
        "shard_runtime_queue_tasks",
        "Tasks woken from other threads and waiting for each shard's thread.",
        MetricType::Gauge,
        per_shard(|shard| shard.runtime_queue),
    )?;
    family(
        e,
        "shard_link_to_owners_bytes",
        "Bytes of connections' messages each shard handed to other shards' databases, not yet handled there.",
        MetricType::Gauge,
        per_shard(|shard| shard.link_bytes_to_owners),
    )?;
    family(
        e,
        "shard_link_to_edges_bytes",
        "Bytes each shard's databases sent to connections held by other shards, not yet written there.",
        MetricType::Gauge,
        per_shard(|shard| shard.link_bytes_to_edges),
    )?;
    family(
        e,
        "shard_websocket_sessions",
        "Open WebSocket sessions of each shard's databases (wherever their sockets are).",
        MetricType::Gauge,
        per_shard(|shard| shard.websocket_sessions),
    )?;
    family(
        e,
        "shard_webtransport_sessions",
        "Open WebTransport sessions each shard serves as their edge (the first shard accepts them all and hands each to the shard with the fewest).",
        MetricType::Gauge,
        per_shard(|shard| shard.counters.webtransport_sessions as usize),
    )?;
    family(
        e,
        "shard_read_only",
        "1 when the shard's log failed and its databases are read-only.",
        MetricType::Gauge,
        per_shard(|shard| usize::from(shard.read_only)),
    )
}

/// The databases with the most clients and writes.
fn top_databases(e: &mut DescriptorEncoder, snapshot: &ServerSnapshot) -> Result2 {
    top(
        e,
        "top_database_clients",
        "The databases with the most open clients (WebSocket sessions and event streams), at most 10.",
        MetricType::Gauge,
        &snapshot.top_clients,
    )?;
    top(
        e,
        "top_database_writes",
        "The databases with the most writes since they were loaded, at most 10 (a database leaves the list when it is evicted).",
        MetricType::Counter,
        &snapshot.top_writes,
    )
}

impl Collector for Scraped {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result2 {
        let snapshot = &self.0;
        let total = &snapshot.total;
        let e = &mut encoder;
        health(e, snapshot)?;
        connections(e, snapshot)?;
        requests(e, total)?;
        storage(e, total)?;
        limits(e, snapshot)?;
        if !snapshot.followers.is_empty() {
            replication(e, &snapshot.followers)?;
        }
        if let Some(cluster) = &snapshot.cluster {
            cluster_node(e, cluster)?;
        }
        if let Some(snapshot) = &snapshot.triggers {
            triggers(e, snapshot)?;
        }
        if !snapshot.declared_triggers.is_empty() {
            declared_triggers(e, &snapshot.declared_triggers)?;
        }
        if let Some(snapshot) = &snapshot.audit {
            audit(e, snapshot)?;
        }
        if let Some(counts) = snapshot.app_check {
            app_check(e, counts)?;
        }
        quotas(e, snapshot.quota_refused)?;
        rule_limits(e, snapshot.rule_limit_refused)?;
        rest_cache(e, total)?;
        routing(e, total)?;
        shards(e, &snapshot.shards)?;
        top_databases(e, snapshot)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::counters::ShardCounters;
    use super::super::snapshot::ShardSnapshot;
    use super::*;

    #[test]
    fn a_snapshot_encodes_as_prometheus_text() {
        let counters = ShardCounters::default();
        counters.request(RequestKind::Put, Outcome::Ok);
        counters.request(RequestKind::RestPut, Outcome::Denied);
        counters.websocket_opened();
        counters.log_synced(10, std::time::Duration::from_micros(70));
        let shard = ShardSnapshot {
            shard: 0,
            counters: counters.snapshot(),
            top_clients: vec![DatabaseLoad {
                database: "a\"b".to_owned(),
                count: 2,
            }],
            ..ShardSnapshot::default()
        };
        let mut server = ServerSnapshot::new(vec![shard], Vec::new());
        server.body_bytes_in_flight = 5;
        let text = encode(server).expect("encodes");
        for line in [
            "# TYPE hearth_requests_total counter",
            "hearth_requests_total{transport=\"websocket\",kind=\"put\",outcome=\"ok\"} 1",
            "hearth_requests_total{transport=\"rest\",kind=\"put\",outcome=\"denied\"} 1",
            "hearth_websocket_connections 1",
            "hearth_http_body_bytes_in_flight 5",
            "hearth_log_sync_seconds_bucket{le=\"5e-05\"} 0",
            "hearth_log_sync_seconds_bucket{le=\"0.0001\"} 1",
            "hearth_log_sync_seconds_bucket{le=\"+Inf\"} 1",
            "hearth_log_sync_seconds_count 1",
            "hearth_top_database_clients{database=\"a\\\"b\"} 2",
            "hearth_shard_busy_seconds_total{shard=\"0\"} 0.0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(
            !text.contains("outcome=\"stale\""),
            "empty series are left out"
        );
    }
}
