//! The thread that talks to etcd for this node: it keeps the lease alive, reads the live
//! nodes and the claims every quarter of the TTL, claims the databases the shards ask for,
//! and publishes what it read as a new [`View`]. Nothing here runs on a shard.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::etcd::{Compare, Etcd, EtcdError, Put};
use crate::keys::{self, ClaimValue, MoveValue, NodeValue, SyncValue};
use crate::placement::{ClusterConfig, Command, MemberChange, Placement, StartError};
use crate::view::{Claim, LeaseClock, NodeInfo, View};

impl Placement {
    /// Grants this node's lease and registers it (an error if etcd cannot be reached), then
    /// keeps both alive on a thread of its own until [`Placement::stop`].
    pub fn start(config: ClusterConfig) -> Result<Placement, StartError> {
        let (placement, inbox) = Placement::new(&config);
        let agent = Agent::register(config, placement.clone())?;
        let (etcd, watcher) = (agent.etcd.clone(), placement.clone());
        let thread = std::thread::Builder::new()
            .name("hearth-cluster".into())
            .spawn(move || agent.run(inbox))?;
        placement.set_agent(thread);
        std::thread::Builder::new()
            .name("hearth-cluster-watch".into())
            .spawn(move || watch(&etcd, &watcher))?;
        Ok(placement)
    }
}

pub(crate) struct Agent {
    etcd: Etcd,
    config: ClusterConfig,
    placement: Placement,
    lease: Arc<LeaseClock>,
}

impl Agent {
    /// Grants the lease, registers the node and publishes the first view.
    pub(crate) fn register(
        config: ClusterConfig,
        placement: Placement,
    ) -> Result<Agent, EtcdError> {
        // A call may take a third of the TTL: the keep-alives (every quarter) then still
        // renew the lease when one call hangs.
        let etcd = Etcd::new(&config.etcd, placement.lease_ttl() / 3);
        let lease = grant_and_register(&etcd, &config, placement.lease_ttl())?;
        let agent = Agent {
            etcd,
            config,
            placement,
            lease,
        };
        if let Err(error) = agent.refresh() {
            warn!(%error, "reading the cluster from etcd");
        }
        info!(
            node = %agent.config.node_id,
            advertise = %agent.config.advertise,
            etcd = %agent.etcd.url(),
            lease = agent.lease.id,
            "joined the cluster"
        );
        Ok(agent)
    }

    pub(crate) fn run(mut self, inbox: Receiver<Command>) {
        let tick = self.placement.lease_ttl() / 4;
        let mut next = Instant::now() + tick;
        loop {
            // Checked before every receive, so that a stream of claim requests cannot put
            // the keep-alives off.
            if Instant::now() >= next {
                next = Instant::now() + tick;
                self.keep_alive();
                if let Err(error) = self.refresh() {
                    warn!(%error, "reading the cluster from etcd");
                }
            }
            let wait = next.saturating_duration_since(Instant::now());
            match inbox.recv_timeout(wait) {
                Ok(
                    first @ (Command::Refresh
                    | Command::Claim(_)
                    | Command::HandOver { .. }
                    | Command::SetMembers { .. }),
                ) => {
                    // A burst of requests is one read, and one pass of claims.
                    let mut wanted = Vec::new();
                    let mut stop = false;
                    let mut handed = false;
                    for command in std::iter::once(first).chain(inbox.try_iter()) {
                        match command {
                            Command::Claim(namespace) => wanted.push(namespace),
                            Command::Refresh => {}
                            Command::HandOver {
                                namespace,
                                epoch,
                                to,
                                done,
                            } => {
                                let result = self.hand_over(&namespace, epoch, &to);
                                // The view shows the new owner before the shard goes on.
                                if let Err(error) = self.refresh() {
                                    warn!(%error, "reading the cluster from etcd");
                                }
                                match &result {
                                    Ok(next) => {
                                        info!(namespace = %namespace, to = %to, epoch = next, "handed the database over")
                                    }
                                    Err(why) => {
                                        warn!(namespace = %namespace, to = %to, why = %why, "could not hand the database over")
                                    }
                                }
                                let _ = done.send(result);
                                handed = true;
                            }
                            Command::SetMembers { changes, done } => {
                                let result = self.set_members(&changes);
                                // The shard acts on the view: it shows the sets first.
                                if let Err(error) = self.refresh() {
                                    warn!(%error, "reading the cluster from etcd");
                                }
                                let _ = done.send(result);
                                handed = true;
                            }
                            Command::Stop => stop = true,
                        }
                    }
                    if stop {
                        break;
                    }
                    if handed && wanted.is_empty() {
                        if let Err(error) = self.refresh() {
                            warn!(%error, "reading the cluster from etcd");
                        }
                    } else if wanted.is_empty() {
                        if let Err(error) = self.refresh() {
                            warn!(%error, "reading the cluster from etcd");
                        }
                    } else {
                        wanted.sort();
                        wanted.dedup();
                        self.claim_all(&wanted);
                    }
                }
                Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        self.lease.lose();
        match self.etcd.revoke(self.lease.id) {
            Ok(()) => info!(node = %self.config.node_id, "left the cluster (lease revoked)"),
            Err(error) => warn!(%error, "revoking the lease; its claims end with its TTL"),
        }
    }

    fn keep_alive(&mut self) {
        let sent = Instant::now();
        match self.etcd.keep_alive(self.lease.id) {
            Ok(ttl) if ttl > 0 => self.lease.confirm(sent),
            Ok(_) => {
                // The lease expired (this node was cut off or paused past its TTL): its
                // claims are gone from etcd, and writes were refused since the window
                // passed. A new lease makes this node live again, owning nothing.
                self.lease.lose();
                warn!(
                    node = %self.config.node_id,
                    lease = self.lease.id,
                    "the lease expired: this node's claims are lost; registering again"
                );
                match grant_and_register(&self.etcd, &self.config, self.placement.lease_ttl()) {
                    Ok(lease) => self.lease = lease,
                    Err(error) => warn!(%error, "registering again with etcd"),
                }
            }
            Err(error) => warn!(%error, "keeping the lease alive"),
        }
    }

    /// Reads the live nodes and the claims, and publishes them.
    fn refresh(&self) -> Result<(), EtcdError> {
        let nodes: BTreeMap<Arc<str>, NodeInfo> = self
            .read_prefix::<NodeValue>(keys::NODES)?
            .map(|(id, lease, value)| {
                let info = NodeInfo {
                    advertise: value.advertise,
                    lease,
                };
                (Arc::from(id), info)
            })
            .collect();
        let claims: HashMap<String, Claim> = self
            .read_prefix::<ClaimValue>(keys::OWNERS)?
            .map(|(namespace, lease, value)| {
                let claim = Claim {
                    node_id: Arc::from(value.node.as_str()),
                    advertise: value.advertise,
                    epoch: value.epoch,
                    lease,
                };
                (namespace, claim)
            })
            .collect();
        let moves: HashMap<String, MoveValue> = self
            .read_prefix::<MoveValue>(keys::MOVES)?
            .map(|(namespace, _, value)| (namespace, value))
            .collect();
        let sync: HashMap<String, SyncValue> = if self.config.sync_set {
            self.read_prefix::<SyncValue>(keys::SYNC)?
                .map(|(namespace, _, value)| (namespace, value))
                .collect()
        } else {
            HashMap::new()
        };
        let current = self.placement.view();
        let changed = current.nodes != nodes
            || current.claims != claims
            || current.moves != moves
            || current.sync != sync
            || !current
                .lease
                .as_ref()
                .is_some_and(|lease| Arc::ptr_eq(lease, &self.lease));
        if changed {
            self.placement.publish(View {
                version: 0,
                nodes,
                claims,
                moves,
                sync,
                lease: Some(self.lease.clone()),
            });
        }
        Ok(())
    }

    /// The keys under `prefix` as (the rest of the key, lease, value); a value that is not
    /// Hearth's JSON is logged and skipped.
    fn read_prefix<T: serde::de::DeserializeOwned>(
        &self,
        prefix: &str,
    ) -> Result<impl Iterator<Item = (String, i64, T)>, EtcdError> {
        let kvs = self.etcd.range_prefix(prefix)?;
        let skip = prefix.len();
        Ok(kvs
            .into_iter()
            .filter_map(move |kv| match serde_json::from_slice::<T>(&kv.value) {
                Ok(value) => Some((kv.key[skip..].to_owned(), kv.lease, value)),
                Err(error) => {
                    warn!(key = %kv.key, %error, "a key that is not Hearth's");
                    None
                }
            }))
    }

    /// Claims those of `namespaces` that placement gives this node and nobody holds, in
    /// transactions of [`CLAIMS_PER_TXN`], and publishes the view after each, so that the
    /// first databases take writes while the others are still being claimed.
    fn claim_all(&self, namespaces: &[String]) {
        if let Err(error) = self.refresh() {
            warn!(%error, "reading the cluster from etcd before claiming");
            return;
        }
        let view = self.placement.view();
        let me = self.config.node_id.as_str();
        let wanted: Vec<&str> = namespaces
            .iter()
            .map(String::as_str)
            .filter(|namespace| {
                !view.claims.contains_key(*namespace)
                    && view.placed_on(namespace) == Some(me)
                    && view.may_claim(namespace, me)
            })
            .collect();
        for chunk in wanted.chunks(CLAIMS_PER_TXN) {
            match self.claim_together(chunk) {
                Ok(Some(epochs)) => {
                    for (namespace, epoch) in chunk.iter().zip(epochs) {
                        info!(namespace = %namespace, node = %me, epoch, "claimed the database");
                    }
                }
                // Another node claimed one of them first (or its epoch moved): one by one,
                // so that the others are still claimed.
                Ok(None) => {
                    for namespace in chunk {
                        self.claim_one(namespace);
                    }
                }
                Err(error) => warn!(%error, databases = chunk.len(), "claiming databases"),
            }
            if let Err(error) = self.refresh() {
                warn!(%error, "reading the cluster from etcd after claiming");
            }
        }
    }

    fn claim_one(&self, namespace: &str) {
        match self.claim_together(&[namespace]) {
            Ok(Some(epochs)) => info!(
                namespace = %namespace,
                node = %self.config.node_id,
                epoch = epochs.first().copied().unwrap_or_default(),
                "claimed the database"
            ),
            Ok(None) => debug!(namespace = %namespace, "another node claimed the database first"),
            Err(error) => warn!(namespace = %namespace, %error, "claiming the database"),
        }
    }

    /// Claims `namespaces` in one transaction: if nobody holds any of them (a dead owner's
    /// key went with its lease) and their epoch histories are as read, each owner key under
    /// this node's lease and each next epoch, all together. Returns the epochs, or `None` if
    /// another node was faster for one of them.
    ///
    /// With sync sets (`--replication sync`), a database whose set does not name this node
    /// is not claimed (it may lack acknowledged writes: the database waits for a member), and
    /// the claim makes this node the set's only member, in the same transaction, since
    /// nobody else is known to hold what it holds; the set must still be as read.
    fn claim_together(&self, namespaces: &[&str]) -> Result<Option<Vec<u64>>, EtcdError> {
        let sync_set = self.config.sync_set;
        let mut read_keys: Vec<String> = namespaces.iter().map(|ns| keys::epoch(ns)).collect();
        if sync_set {
            read_keys.extend(namespaces.iter().map(|ns| keys::sync(ns)));
        }
        let mut previous = self.etcd.get_many(&read_keys)?;
        let sets = previous.split_off(namespaces.len().min(previous.len()));
        let me = self.config.node_id.as_str();
        let mut compares = Vec::with_capacity(3 * namespaces.len());
        let mut puts = Vec::with_capacity(3 * namespaces.len());
        let mut epochs = Vec::with_capacity(namespaces.len());
        for (index, ((namespace, epoch_key), kv)) in
            namespaces.iter().zip(read_keys).zip(previous).enumerate()
        {
            let (last, revision) = last_epoch(kv.as_ref());
            if sync_set {
                let set = sets.get(index).and_then(Option::as_ref);
                let parsed = set.and_then(|kv| serde_json::from_slice::<SyncValue>(&kv.value).ok());
                if set.is_some() && !parsed.as_ref().is_some_and(|value| value.has(me)) {
                    // Another node may hold writes this one lacks.
                    return Ok(None);
                }
                let sync_key = keys::sync(namespace);
                compares.push(Compare::ModRevision(
                    sync_key.clone(),
                    set.map_or(0, |kv| kv.mod_revision),
                ));
                puts.push(Put {
                    key: sync_key,
                    value: sync_value(last + 1, vec![me.to_owned()]),
                    lease: 0,
                });
            }
            let epoch = last + 1;
            let value = ClaimValue {
                node: self.config.node_id.clone(),
                advertise: self.config.advertise,
                epoch,
            };
            let owner_key = keys::owner(namespace);
            compares.push(Compare::Absent(owner_key.clone()));
            compares.push(Compare::ModRevision(epoch_key.clone(), revision));
            puts.push(Put {
                key: owner_key,
                value: serde_json::to_vec(&value).unwrap_or_default(),
                lease: self.lease.id,
            });
            puts.push(Put {
                key: epoch_key,
                value: epoch.to_string().into_bytes(),
                lease: 0,
            });
            epochs.push(epoch);
        }
        let done = self.etcd.txn(&compares, &puts)?;
        Ok(done.then_some(epochs))
    }
}

impl Agent {
    /// Gives this node's claim on `namespace`, held at `epoch`, to the live node `to` with the
    /// next epoch: its owner key under `to`'s lease, in one transaction that holds only if
    /// the claim, the epoch history and `to`'s registration are as read.
    fn hand_over(&self, namespace: &str, epoch: u64, to: &str) -> Result<u64, String> {
        let (owner_key, epoch_key, node_key) = (
            keys::owner(namespace),
            keys::epoch(namespace),
            keys::node(to),
        );
        let read = self
            .etcd
            .get_many(&[owner_key.clone(), epoch_key.clone(), node_key.clone()])
            .map_err(|error| error.to_string())?;
        let [owner, last, target]: [Option<_>; 3] = read
            .try_into()
            .map_err(|_| "etcd answered another count of keys".to_owned())?;
        let owner = owner.ok_or("this node holds no claim on it")?;
        let claim: ClaimValue =
            serde_json::from_slice(&owner.value).map_err(|error| error.to_string())?;
        if claim.node != self.config.node_id || claim.epoch != epoch || owner.lease != self.lease.id
        {
            return Err(format!(
                "the claim changed (node {}, epoch {})",
                claim.node, claim.epoch
            ));
        }
        let target = target.ok_or_else(|| format!("node {to} is not live"))?;
        let node: NodeValue =
            serde_json::from_slice(&target.value).map_err(|error| error.to_string())?;
        let (last, revision) = last_epoch(last.as_ref());
        let next = last.max(epoch) + 1;
        let value = ClaimValue {
            node: to.to_owned(),
            advertise: node.advertise,
            epoch: next,
        };
        let compares = [
            Compare::ModRevision(owner_key.clone(), owner.mod_revision),
            Compare::ModRevision(epoch_key.clone(), revision),
            Compare::ModRevision(node_key, target.mod_revision),
        ];
        let mut puts = vec![
            Put {
                key: owner_key,
                value: serde_json::to_vec(&value).unwrap_or_default(),
                lease: target.lease,
            },
            Put {
                key: epoch_key,
                value: next.to_string().into_bytes(),
                lease: 0,
            },
        ];
        if self.config.sync_set {
            // The follower has every write (the caller waited for it): it alone may take
            // the database over until its own follower has caught up.
            puts.push(Put {
                key: keys::sync(namespace),
                value: sync_value(next, vec![to.to_owned()]),
                lease: 0,
            });
        }
        match self.etcd.txn(&compares, &puts) {
            Ok(true) => Ok(next),
            Ok(false) => Err("etcd changed between the read and the transaction".to_owned()),
            Err(error) => Err(error.to_string()),
        }
    }
}

/// A sync set's value in etcd.
fn sync_value(epoch: u64, members: Vec<String>) -> Vec<u8> {
    serde_json::to_vec(&SyncValue { epoch, members }).unwrap_or_default()
}

/// Sync sets changed in one transaction: a comparison and a put each.
const SETS_PER_TXN: usize = 60;

impl Agent {
    /// Sets the sync sets of `changes`, each only while this node's claim on the database
    /// stands at the change's epoch under its current lease: the claim key's revision as read
    /// is compared in the same transaction, so a set is never changed by a deposed owner.
    /// A change whose claim is not this node's is left out, and so reported.
    fn set_members(&self, changes: &[MemberChange]) -> Result<(), String> {
        let mut refused = Vec::new();
        for chunk in changes.chunks(SETS_PER_TXN) {
            let owner_keys: Vec<String> = chunk
                .iter()
                .map(|change| keys::owner(&change.namespace))
                .collect();
            let read = self
                .etcd
                .get_many(&owner_keys)
                .map_err(|error| error.to_string())?;
            let mut compares = Vec::with_capacity(chunk.len());
            let mut puts = Vec::with_capacity(chunk.len());
            for ((change, key), kv) in chunk.iter().zip(owner_keys).zip(read) {
                let held = kv.as_ref().is_some_and(|kv| {
                    kv.lease == self.lease.id
                        && serde_json::from_slice::<ClaimValue>(&kv.value).is_ok_and(|claim| {
                            claim.node == self.config.node_id && claim.epoch == change.epoch
                        })
                });
                match kv {
                    Some(kv) if held => {
                        compares.push(Compare::ModRevision(key, kv.mod_revision));
                        puts.push(Put {
                            key: keys::sync(&change.namespace),
                            value: sync_value(change.epoch, change.members.clone()),
                            lease: 0,
                        });
                    }
                    _ => refused.push(change.namespace.as_str()),
                }
            }
            if puts.is_empty() {
                continue;
            }
            match self.etcd.txn(&compares, &puts) {
                Ok(true) => {
                    for change in chunk {
                        debug!(namespace = %change.namespace, members = ?change.members, "sync set changed");
                    }
                }
                Ok(false) => {
                    return Err("a claim changed between the read and the transaction".to_owned())
                }
                Err(error) => return Err(error.to_string()),
            }
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "this node holds no claim on {}",
                refused.join(", ")
            ))
        }
    }
}

/// The last epoch granted for a database and the revision of its key, from the key under
/// `/hearth/epochs/` (`(0, 0)` when it does not exist yet).
fn last_epoch(kv: Option<&crate::etcd::KeyValue>) -> (u64, i64) {
    kv.map_or((0, 0), |kv| {
        let last = std::str::from_utf8(&kv.value)
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .unwrap_or(0);
        (last, kv.mod_revision)
    })
}

/// Databases claimed in one etcd transaction: up to three comparisons and three puts each
/// (the sync set's with `--replication sync`), within the 128 operations per transaction
/// etcd allows by default (`--max-txn-ops`).
const CLAIMS_PER_TXN: usize = 40;

fn grant_and_register(
    etcd: &Etcd,
    config: &ClusterConfig,
    ttl: Duration,
) -> Result<Arc<LeaseClock>, EtcdError> {
    let sent = Instant::now();
    let id = etcd.grant(ttl.as_secs().max(1))?;
    let value = NodeValue {
        advertise: config.advertise,
    };
    etcd.put(&Put {
        key: keys::node(&config.node_id),
        value: serde_json::to_vec(&value).unwrap_or_default(),
        lease: id,
    })?;
    Ok(Arc::new(LeaseClock::new(id, sent)))
}

/// Watches `/hearth/` and asks the agent to read again on every change, so that a claim or a
/// node leaving is seen at once rather than at the next quarter of the TTL (which still
/// reads, in case the watch is down). A failed watch is started again after that long.
fn watch(etcd: &Etcd, placement: &Placement) {
    let pause = placement.lease_ttl() / 4;
    loop {
        let mut running = true;
        let result = etcd.watch_prefix("/hearth/", WATCH_IDLE, || {
            running = placement.ask_refresh();
            running
        });
        if !running {
            return;
        }
        if let Err(error) = result {
            debug!(%error, "watching etcd; trying again");
        }
        // Also the way out once the agent has stopped and nothing changes any more.
        if !placement.ask_refresh() {
            return;
        }
        std::thread::sleep(pause);
    }
}

/// A watch on which nothing arrived for this long is started again.
const WATCH_IDLE: Duration = Duration::from_secs(60);
