//! A [`ServerSnapshot`] in the Prometheus text exposition format (0.0.4), through the
//! `prometheus-client` crate's encoder: every metric is described, typed and escaped by it.
//! The numbers are gathered from the shards at the scrape, so they are encoded by a custom
//! collector rather than kept in the crate's atomic metric types.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::histogram::HistogramSnapshot;
use super::labels::{
    Channel, CloseCause, HttpRefusal, Outcome, RequestKind, SessionTransport, StreamEnd,
};
use super::snapshot::{DatabaseLoad, ServerSnapshot};

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

type Result2 = Result<(), std::fmt::Error>;

fn counter(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> Result2 {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(metric)
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: i64) -> Result2 {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// A metric with one labelled series per entry.
fn family<'a, L: prometheus_client::encoding::EncodeLabelSet + 'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    series: impl IntoIterator<Item = (L, Value)>,
) -> Result2 {
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, value) in series {
        let encoder = metric.encode_family(&labels)?;
        match value {
            Value::Count(count) => ConstCounter::new(count).encode(encoder)?,
            Value::Seconds(seconds) => ConstCounter::new(seconds).encode(encoder)?,
            Value::Level(level) => ConstGauge::new(level).encode(encoder)?,
        }
    }
    Ok(())
}

/// A counter with one series per value of one label, `counts` in the order of `values`.
fn counters_by(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &'static str,
    values: impl IntoIterator<Item = &'static str>,
    counts: &[u64],
) -> Result2 {
    let series = values.into_iter().enumerate().map(|(index, value)| {
        let count = counts.get(index).copied().unwrap_or(0);
        ([(label, value)], Value::Count(count))
    });
    family(encoder, name, help, MetricType::Counter, series)
}

/// Replication lag toward each follower node (`replica`).
fn replication(
    encoder: &mut DescriptorEncoder,
    followers: &[super::snapshot::FollowerSnapshot],
) -> Result2 {
    let series = |value: fn(&super::snapshot::FollowerSnapshot) -> Value| {
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

enum Value {
    Count(u64),
    Seconds(f64),
    Level(i64),
}

fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    snapshot: &HistogramSnapshot,
) -> Result2 {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    metric.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
        snapshot.sum_seconds(),
        snapshot.count(),
        &snapshot.buckets(),
        None,
    )
}

fn level(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

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

impl Collector for Scraped {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result2 {
        let snapshot = &self.0;
        let total = &snapshot.total;
        let e = &mut encoder;
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
        )?;
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
        )?;
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
        )?;
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
        )?;
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
        )?;
        if !snapshot.followers.is_empty() {
            replication(e, &snapshot.followers)?;
        }
        if let Some(cluster) = &snapshot.cluster {
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
            )?;
        }
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
        )?;
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
        )?;
        let shards = &snapshot.shards;
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
        )?;
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
        )?;
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
