//! What the shards read: the cluster as this node last saw it ([`View`]), swapped whole by
//! the agent thread, and the write permit of fencing ([`Placement::write_refusal`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::etcd::EtcdError;
use crate::view::{Claim, LeaseClock, NodeInfo, View};

#[path = "placement_fencing.rs"]
mod fencing;

/// `hearth serve --cluster-etcd URL --node-id ID --advertise ADDR`.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The etcd client URL (`http://127.0.0.1:2379`): its JSON gateway.
    pub etcd: String,
    pub node_id: String,
    /// Where other nodes reach this one.
    pub advertise: SocketAddr,
    /// The lease's time to live (`--cluster-lease-ttl-secs`).
    pub lease_ttl: Duration,
    /// Whether claims follow each database's sync set (`keys::SYNC`): `--replication sync`
    /// with the node link. Without it a claim looks at no set and writes none.
    pub sync_set: bool,
}

/// The shortest lease etcd grants with its default timing (it raises shorter ones).
pub const MIN_LEASE_TTL: Duration = Duration::from_secs(2);

/// A change of a database's sync set asked by its owner (`Placement::set_members`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberChange {
    pub namespace: String,
    /// The epoch of the owner's claim: the change is made only while that claim stands.
    pub epoch: u64,
    /// The new members, the owner first.
    pub members: Vec<String>,
}

/// What the shards ask of the agent thread.
pub(crate) enum Command {
    Claim(String),
    /// Hand the claim on a database over to its follower (`Placement::hand_over`).
    HandOver {
        namespace: String,
        epoch: u64,
        to: String,
        done: tokio::sync::oneshot::Sender<Result<u64, String>>,
    },
    /// Set the sync sets of databases this node holds claims on (`Placement::set_members`).
    SetMembers {
        changes: Vec<MemberChange>,
        done: tokio::sync::oneshot::Sender<Result<(), String>>,
    },
    /// Something under `/hearth/` changed (the watch): read it again.
    Refresh,
    Stop,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("registering with etcd: {0}")]
    Etcd(#[from] EtcdError),
    #[error("starting the cluster thread: {0}")]
    Thread(#[from] std::io::Error),
}

struct Shared {
    node_id: Arc<str>,
    advertise: SocketAddr,
    lease_ttl: Duration,
    sync_set: bool,
    view: ArcSwap<View>,
    changes: watch::Sender<u64>,
    commands: mpsc::Sender<Command>,
    /// The agent thread, joined by [`Placement::stop`] so that the lease is revoked before
    /// the process exits.
    agent: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// The placement of databases on this cluster's nodes, readable from any thread: a load of
/// the current [`View`] is an atomic pointer read, no lock.
#[derive(Clone)]
pub struct Placement {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement")
            .field("node_id", &self.shared.node_id)
            .finish_non_exhaustive()
    }
}

impl Placement {
    /// A placement with an empty view, and the inbox of its agent (`agent.rs`, which starts
    /// it: [`Placement::start`]).
    pub(crate) fn new(config: &ClusterConfig) -> (Placement, mpsc::Receiver<Command>) {
        let (commands, inbox) = mpsc::channel();
        let (changes, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            node_id: Arc::from(config.node_id.as_str()),
            advertise: config.advertise,
            lease_ttl: config.lease_ttl.max(MIN_LEASE_TTL),
            sync_set: config.sync_set,
            view: ArcSwap::from_pointee(View::default()),
            changes,
            commands,
            agent: std::sync::Mutex::new(None),
        });
        (Placement { shared }, inbox)
    }

    /// A placement that never talks to etcd, with a view of `nodes` (all at `advertise`),
    /// `claims`, and a lease `lease` confirmed now: for the tests of its users.
    #[doc(hidden)]
    pub fn fixed(
        node_id: &str,
        advertise: SocketAddr,
        nodes: &[&str],
        claims: Vec<(String, Claim)>,
        lease: Option<i64>,
    ) -> Placement {
        let config = ClusterConfig {
            etcd: String::new(),
            node_id: node_id.to_owned(),
            advertise,
            lease_ttl: MIN_LEASE_TTL,
            sync_set: false,
        };
        let (placement, _) = Placement::new(&config);
        let info = |_| NodeInfo {
            advertise,
            lease: 0,
        };
        placement.publish(View {
            version: 0,
            nodes: nodes.iter().map(|id| (Arc::from(*id), info(id))).collect(),
            claims: claims.into_iter().collect(),
            moves: HashMap::new(),
            sync: HashMap::new(),
            lease: lease.map(|id| Arc::new(LeaseClock::new(id, Instant::now()))),
        });
        placement
    }

    pub fn node_id(&self) -> &str {
        &self.shared.node_id
    }

    pub fn advertise(&self) -> SocketAddr {
        self.shared.advertise
    }

    pub fn lease_ttl(&self) -> Duration {
        self.shared.lease_ttl
    }

    /// Whether claims follow the databases' sync sets (`ClusterConfig::sync_set`).
    pub fn sync_set(&self) -> bool {
        self.shared.sync_set
    }

    /// Whether this node's lease is surely gone from etcd: unconfirmed for longer than its
    /// TTL (etcd counts it from after the last confirmation was sent), or known lost. Its
    /// claims went with it.
    pub fn lease_expired(&self) -> bool {
        let view = self.shared.view.load();
        view.lease
            .as_ref()
            .is_none_or(|lease| lease.is_lost() || lease.age(Instant::now()) > self.lease_ttl())
    }

    /// Asks the agent to set the sync sets of `changes` (each only while this node's claim
    /// at its epoch stands), in as few etcd transactions as fit; resolves once the view
    /// shows them, or with why not.
    pub fn set_members(
        &self,
        changes: Vec<MemberChange>,
    ) -> tokio::sync::oneshot::Receiver<Result<(), String>> {
        let (done, result) = tokio::sync::oneshot::channel();
        if let Err(std::sync::mpsc::SendError(Command::SetMembers { done, .. })) = self
            .shared
            .commands
            .send(Command::SetMembers { changes, done })
        {
            let _ = done.send(Err("the cluster thread has stopped".to_owned()));
        }
        result
    }

    /// How long a confirmation of the lease lets this node acknowledge writes: the TTL less
    /// a third of it. The margin covers a write's way from the check to its acknowledgement
    /// (a log sync), and clocks whose rates differ (etcd counts the TTL from when it took the
    /// keep-alive, after this node sent it; only the rate of the two clocks matters).
    pub fn write_window(&self) -> Duration {
        self.shared.lease_ttl - self.shared.lease_ttl / 3
    }

    /// The current view.
    pub fn view(&self) -> Arc<View> {
        self.shared.view.load_full()
    }

    /// The owner of `namespace`, if a live node has claimed it.
    pub fn owner_of(&self, namespace: &str) -> Option<Claim> {
        self.shared.view.load().claims.get(namespace).cloned()
    }

    /// Tells of every new view: the value is its version.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// How long ago this node's lease was last confirmed by etcd (`None` while it has none).
    pub fn lease_age(&self) -> Option<Duration> {
        let view = self.shared.view.load();
        view.lease.as_ref().map(|lease| lease.age(Instant::now()))
    }

    /// The databases this node holds a claim on.
    pub fn own_claims(&self) -> usize {
        let view = self.shared.view.load();
        view.claims
            .values()
            .filter(|claim| *claim.node_id == *self.shared.node_id)
            .count()
    }

    /// The databases this node holds a claim on whose sync set names it alone (no other node
    /// may take them over).
    pub fn own_claims_alone(&self) -> usize {
        let view = self.shared.view.load();
        let me = &*self.shared.node_id;
        view.claims
            .iter()
            .filter(|(namespace, claim)| {
                &*claim.node_id == me
                    && view
                        .sync
                        .get(*namespace)
                        .is_some_and(|set| set.members.len() == 1 && set.has(me))
            })
            .count()
    }

    /// Asks the agent to read etcd again and waits until it publishes a new view, or
    /// `limit` passes (it publishes only what changed).
    pub async fn refreshed(&self, limit: Duration) {
        let mut changes = self.changes();
        changes.borrow_and_update();
        if !self.ask_refresh() {
            return;
        }
        let _ = tokio::time::timeout(limit, changes.changed()).await;
    }

    /// Asks the agent to claim `namespace` (it checks again that placement says so).
    pub fn ask_claim(&self, namespace: &str) {
        // A send fails only once the agent has stopped, when nothing is claimed any more.
        let _ = self
            .shared
            .commands
            .send(Command::Claim(namespace.to_owned()));
    }

    /// Asks the agent to give this node's claim on `namespace`, held at `epoch`, to node `to`
    /// (a live node, under its lease) with the next epoch, in one etcd transaction; resolves
    /// with that epoch, or why not. The caller stopped the writes first and made sure that
    /// `to` has every one (`hearth cluster move`, decision 57).
    pub fn hand_over(
        &self,
        namespace: &str,
        epoch: u64,
        to: &str,
    ) -> tokio::sync::oneshot::Receiver<Result<u64, String>> {
        let (done, result) = tokio::sync::oneshot::channel();
        let command = Command::HandOver {
            namespace: namespace.to_owned(),
            epoch,
            to: to.to_owned(),
            done,
        };
        if let Err(std::sync::mpsc::SendError(Command::HandOver { done, .. })) =
            self.shared.commands.send(command)
        {
            let _ = done.send(Err("the cluster thread has stopped".to_owned()));
        }
        result
    }

    /// Asks the agent to read etcd again; false once it has stopped.
    pub(crate) fn ask_refresh(&self) -> bool {
        self.shared.commands.send(Command::Refresh).is_ok()
    }

    /// Revokes this node's lease, so that its databases can be claimed at once instead of
    /// after the TTL, and stops the agent.
    pub fn stop(&self) {
        let _ = self.shared.commands.send(Command::Stop);
        let agent = match self.shared.agent.lock() {
            Ok(mut agent) => agent.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        // The agent ends after its call in progress and the revocation, each bounded by a
        // third of the TTL.
        if let Some(agent) = agent {
            let _ = agent.join();
        }
    }

    pub(crate) fn set_agent(&self, agent: std::thread::JoinHandle<()>) {
        match self.shared.agent.lock() {
            Ok(mut slot) => *slot = Some(agent),
            Err(poisoned) => *poisoned.into_inner() = Some(agent),
        }
    }

    pub(crate) fn publish(&self, mut view: View) {
        let version = self.shared.view.load().version + 1;
        view.version = version;
        self.shared.view.store(Arc::new(view));
        self.shared.changes.send_replace(version);
    }
}
