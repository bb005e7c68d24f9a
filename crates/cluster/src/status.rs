//! `hearth cluster status`: what etcd says of the cluster, read without being a node.

use serde::Serialize;

use crate::etcd::{Etcd, EtcdError};
use crate::keys::{self, ClaimValue, NodeValue, SyncValue};

#[derive(Debug, Serialize)]
pub struct Status {
    pub nodes: Vec<NodeStatus>,
    pub databases: Vec<DatabaseStatus>,
}

#[derive(Debug, Serialize)]
pub struct NodeStatus {
    pub id: String,
    pub advertise: String,
    pub lease: String,
    /// Seconds left of the node's lease (-1 when it is gone).
    pub ttl_secs: i64,
}

#[derive(Debug, Serialize)]
pub struct DatabaseStatus {
    pub namespace: String,
    /// The node holding the claim; `None` for a database whose owner's lease ended and that
    /// nobody has claimed since (only its epoch history is left).
    pub owner: Option<String>,
    /// The current claim's epoch, or the last one granted when unclaimed.
    pub epoch: u64,
    /// The live node its owner ships its log to (with the node-to-node link): of the live
    /// nodes other than the owner, the one rendezvous hashing places it on. `None` when
    /// unclaimed or when the owner is alone.
    pub follower: Option<String>,
    /// Under `--replication sync`: the nodes that hold every acknowledged write and so may
    /// take the database over (its sync set, decision 58); `None` where none was recorded.
    pub sync: Option<Vec<String>>,
}

/// Reads the nodes, their leases and every database's claim and epoch.
pub fn read(etcd: &Etcd) -> Result<Status, EtcdError> {
    let mut nodes = Vec::new();
    for kv in etcd.range_prefix(keys::NODES)? {
        let advertise = serde_json::from_slice::<NodeValue>(&kv.value)
            .map(|value| value.advertise.to_string())
            .unwrap_or_else(|_| "?".to_owned());
        nodes.push(NodeStatus {
            id: kv.key[keys::NODES.len()..].to_owned(),
            advertise,
            lease: format!("{:x}", kv.lease),
            ttl_secs: etcd.time_to_live(kv.lease)?,
        });
    }
    let mut databases: Vec<DatabaseStatus> = etcd
        .range_prefix(keys::EPOCHS)?
        .into_iter()
        .map(|kv| DatabaseStatus {
            namespace: kv.key[keys::EPOCHS.len()..].to_owned(),
            owner: None,
            follower: None,
            sync: None,
            epoch: std::str::from_utf8(&kv.value)
                .ok()
                .and_then(|text| text.parse().ok())
                .unwrap_or(0),
        })
        .collect();
    for kv in etcd.range_prefix(keys::OWNERS)? {
        let namespace = &kv.key[keys::OWNERS.len()..];
        let Ok(claim) = serde_json::from_slice::<ClaimValue>(&kv.value) else {
            continue;
        };
        match databases.iter_mut().find(|db| db.namespace == namespace) {
            Some(db) => {
                db.owner = Some(claim.node);
                db.epoch = claim.epoch;
            }
            None => databases.push(DatabaseStatus {
                namespace: namespace.to_owned(),
                owner: Some(claim.node),
                epoch: claim.epoch,
                follower: None,
                sync: None,
            }),
        }
    }
    for kv in etcd.range_prefix(keys::SYNC)? {
        let namespace = &kv.key[keys::SYNC.len()..];
        let Ok(set) = serde_json::from_slice::<SyncValue>(&kv.value) else {
            continue;
        };
        if let Some(db) = databases.iter_mut().find(|db| db.namespace == namespace) {
            db.sync = Some(set.members);
        }
    }
    for db in &mut databases {
        let Some(owner) = db.owner.as_deref() else {
            continue;
        };
        let others = nodes
            .iter()
            .map(|node| node.id.as_str())
            .filter(|id| *id != owner);
        db.follower = crate::rendezvous::place(others, &db.namespace).map(str::to_owned);
    }
    Ok(Status { nodes, databases })
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{:<16} {:<22} {:<18} TTL", "NODE", "ADVERTISE", "LEASE")?;
        for node in &self.nodes {
            writeln!(
                f,
                "{:<16} {:<22} {:<18} {}s",
                node.id, node.advertise, node.lease, node.ttl_secs
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<32} {:<16} {:<16} {:<6} MAY TAKE OVER",
            "DATABASE", "OWNER", "FOLLOWER", "EPOCH"
        )?;
        for db in &self.databases {
            let owner = db.owner.as_deref().unwrap_or("(unclaimed)");
            let follower = db.follower.as_deref().unwrap_or("-");
            let sync = db
                .sync
                .as_ref()
                .map_or_else(|| "any".to_owned(), |members| members.join(","));
            writeln!(
                f,
                "{:<32} {:<16} {:<16} {:<6} {}",
                db.namespace, owner, follower, db.epoch, sync
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "Replication lag: each owner's /metrics (hearth_replication_lag_records and _bytes, by follower)."
        )?;
        Ok(())
    }
}
