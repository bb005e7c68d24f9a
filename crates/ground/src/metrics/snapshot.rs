//! What a scrape gathers: each shard's copy of its counters and gauges, taken on its own
//! thread when its queue reaches the request, and the sum over shards.

use std::time::Duration;

use super::counters::CounterSnapshot;

/// How many databases the top lists name (by clients, and by writes): each list is a bounded
/// set of `database` label values, whatever the number of databases.
pub const TOP_DATABASES: usize = 10;

/// A database of a top list and its count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseLoad {
    pub database: String,
    pub count: u64,
}

/// One shard's numbers at the moment it answered the scrape.
#[derive(Debug, Clone, Default)]
pub struct ShardSnapshot {
    pub shard: usize,
    pub counters: CounterSnapshot,
    /// Open WebSocket sessions of this core's databases (wherever their sockets are).
    pub websocket_sessions: usize,
    /// Open event streams of this core's databases.
    pub event_streams: usize,
    pub databases_loaded: usize,
    /// Time the shard's thread spent running tasks (tokio's count), since it started.
    pub busy: Duration,
    /// Messages waiting in the shard's inbox (requests and messages from other cores).
    pub inbox_messages: usize,
    /// Tasks waiting in the shard runtime's queue for the thread.
    pub runtime_queue: usize,
    /// Bytes this core's connections handed to other cores' databases, not handled yet.
    pub link_bytes_to_owners: usize,
    /// Bytes this core's databases sent to other cores' connections, not written yet.
    pub link_bytes_to_edges: usize,
    /// Whether the shard's log failed (its databases are read-only).
    pub read_only: bool,
    /// This shard's busiest databases by open clients, at most [`TOP_DATABASES`].
    pub top_clients: Vec<DatabaseLoad>,
    /// This shard's busiest databases by writes since they were loaded.
    pub top_writes: Vec<DatabaseLoad>,
}

/// The `TOP_DATABASES` largest of `loads`, largest first (names break ties, so that a scrape
/// is stable).
pub fn top(mut loads: Vec<DatabaseLoad>) -> Vec<DatabaseLoad> {
    loads.retain(|load| load.count > 0);
    loads.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.database.cmp(&b.database))
    });
    loads.truncate(TOP_DATABASES);
    loads
}

/// The whole server: the shards that answered, and their sums.
#[derive(Debug, Default)]
pub struct ServerSnapshot {
    pub shards: Vec<ShardSnapshot>,
    /// Shards that did not answer within the scrape's time (a thread stuck or gone).
    pub missing: Vec<usize>,
    pub total: CounterSnapshot,
    pub top_clients: Vec<DatabaseLoad>,
    pub top_writes: Vec<DatabaseLoad>,
    /// Request body bytes being received, server-wide.
    pub body_bytes_in_flight: usize,
    /// Answer bytes produced and not yet taken by a socket, server-wide.
    pub answer_bytes_unsent: usize,
    pub ready: bool,
    /// This node's part of a cluster, when it is in one.
    pub cluster: Option<ClusterSnapshot>,
    /// Replication toward each other node of a static cluster (`replica`).
    pub followers: Vec<FollowerSnapshot>,
    /// Database triggers, when the server delivers them (`--functions-emulator`).
    pub triggers: Option<TriggerSnapshot>,
    /// Each declared trigger's outbox (`--triggers FILE`).
    pub declared_triggers: Vec<hearth_triggers::outbox::TriggerMetrics>,
    /// The audit trail, when the server keeps one (a data directory).
    pub audit: Option<AuditSnapshot>,
    /// App Check tokens by outcome, when the server verifies them
    /// (`--app-check-project-number`): verified, missing, invalid, refused.
    pub app_check: Option<[u64; 4]>,
    /// What databases' quotas refused: connections, writes, write bytes, stored bytes.
    pub quota_refused: [u64; 4],
    /// What the rules' limits per caller refused: writes, bytes, listens, connections.
    pub rule_limit_refused: [u64; 4],
}

/// Database triggers: what is registered and what became of their events (`hearth-triggers`).
#[derive(Debug, Default, Clone)]
pub struct TriggerSnapshot {
    pub registered: usize,
    pub delivered: u64,
    pub failed: u64,
    pub dropped: u64,
}

/// The audit trail (`hearth-audit`): its entries and failures.
#[derive(Debug, Default, Clone)]
pub struct AuditSnapshot {
    /// Entries handed to the trail's thread.
    pub handed: u64,
    /// Entries written to the files.
    pub written: u64,
    /// Appends, syncs or prunes that failed.
    pub failures: u64,
    /// Entries erased.
    pub erased: u64,
}

/// Replication toward one follower node, summed over the shards.
#[derive(Debug, Default, Clone)]
pub struct FollowerSnapshot {
    pub node: String,
    pub records: u64,
    pub bytes: u64,
    /// Shards acknowledging writes without it now.
    pub degraded: u64,
    pub degradations: u64,
    pub copies: u64,
}

impl FollowerSnapshot {
    pub fn read(node: &str, lag: &crate::replica_messages::FollowerLag) -> FollowerSnapshot {
        use std::sync::atomic::Ordering::Relaxed;
        FollowerSnapshot {
            node: node.to_owned(),
            records: lag.records.load(Relaxed),
            bytes: lag.bytes.load(Relaxed),
            degraded: lag.degraded.load(Relaxed),
            degradations: lag.degradations.load(Relaxed),
            copies: lag.copies.load(Relaxed),
        }
    }
}

/// A cluster node's claims and lease (`hearth-cluster`).
#[derive(Debug, Default, Clone)]
pub struct ClusterSnapshot {
    /// Databases this node holds a claim on.
    pub claims: usize,
    /// Since etcd last confirmed the node's lease; `None` while it has none.
    pub lease_age: Option<std::time::Duration>,
    /// Claims whose sync set names this node alone.
    pub claims_alone: usize,
    /// Writes whose held acknowledgements were given up (`replica::sync_set`).
    pub writes_given_up: u64,
    /// Copies replaced while they differed (`replica::divergent`).
    pub divergent_copies: u64,
}

impl ServerSnapshot {
    pub fn new(shards: Vec<ShardSnapshot>, missing: Vec<usize>) -> ServerSnapshot {
        let mut total = CounterSnapshot::default();
        let mut clients = Vec::new();
        let mut writes = Vec::new();
        for shard in &shards {
            total.merge(&shard.counters);
            clients.extend(shard.top_clients.iter().cloned());
            writes.extend(shard.top_writes.iter().cloned());
        }
        ServerSnapshot {
            shards,
            missing,
            total,
            top_clients: top(clients),
            top_writes: top(writes),
            ..ServerSnapshot::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(database: &str, count: u64) -> DatabaseLoad {
        DatabaseLoad {
            database: database.to_owned(),
            count,
        }
    }

    #[test]
    fn the_top_list_is_bounded_and_ordered() {
        let loads = (0..30)
            .map(|n| load(&format!("db{n:02}"), n % 15))
            .collect();
        let top = top(loads);
        assert_eq!(top.len(), TOP_DATABASES);
        assert_eq!(top[0], load("db14", 14));
        assert_eq!(top[1], load("db29", 14));
        assert!(top.windows(2).all(|pair| pair[0].count >= pair[1].count));
        assert!(super::top(vec![load("idle", 0)]).is_empty());
    }

    #[test]
    fn shards_are_summed_and_their_tops_merged() {
        let counters = super::super::counters::ShardCounters::default();
        counters.write_applied();
        let shard = |index: usize, name: &str, clients: u64| ShardSnapshot {
            shard: index,
            counters: counters.snapshot(),
            top_clients: vec![load(name, clients)],
            ..ShardSnapshot::default()
        };
        let server = ServerSnapshot::new(vec![shard(0, "a", 1), shard(1, "b", 5)], vec![2]);
        assert_eq!(server.total.writes, 2);
        assert_eq!(server.top_clients, vec![load("b", 5), load("a", 1)]);
        assert_eq!(server.missing, vec![2]);
    }
}
