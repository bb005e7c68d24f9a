//! What the shards read: the cluster as this node last saw it ([`View`]), swapped whole by
//! the agent thread, and the write permit of fencing ([`Placement::write_refusal`]).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::etcd::EtcdError;
use crate::keys::SyncValue;
use crate::rendezvous;

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

/// A live node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub advertise: SocketAddr,
    pub lease: i64,
}

/// A database's owner as etcd records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub node_id: Arc<str>,
    pub advertise: SocketAddr,
    /// The fencing epoch: one more than the previous claim of the database, ever.
    pub epoch: u64,
    /// The lease the claim is attached to: it ends with that lease.
    pub lease: i64,
}

/// This node's lease as its own monotonic clock knows it.
#[derive(Debug)]
pub(crate) struct LeaseClock {
    pub(crate) id: i64,
    base: Instant,
    /// When the last request that etcd answered with the lease alive was *sent*
    /// (nanoseconds after `base`): etcd's countdown restarted later than that, so the lease
    /// is alive at least until this plus the TTL.
    confirmed: AtomicU64,
    /// The lease is known gone (a keep-alive answered without it).
    lost: AtomicBool,
}

impl LeaseClock {
    pub(crate) fn new(id: i64, sent: Instant) -> LeaseClock {
        let clock = LeaseClock {
            id,
            base: sent,
            confirmed: AtomicU64::new(0),
            lost: AtomicBool::new(false),
        };
        clock.confirm(sent);
        clock
    }

    pub(crate) fn confirm(&self, sent: Instant) {
        let nanos = sent.saturating_duration_since(self.base).as_nanos();
        self.confirmed
            .fetch_max(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Release);
    }

    pub(crate) fn lose(&self) {
        self.lost.store(true, Ordering::Release);
    }

    /// How long ago the lease was last confirmed.
    pub(crate) fn age(&self, now: Instant) -> Duration {
        let confirmed = self.base + Duration::from_nanos(self.confirmed.load(Ordering::Acquire));
        now.saturating_duration_since(confirmed)
    }

    fn valid(&self, now: Instant, window: Duration) -> bool {
        !self.lost.load(Ordering::Acquire) && self.age(now) < window
    }
}

/// The cluster as this node last read it from etcd. Immutable: a change is a new `View`.
#[derive(Debug, Default)]
pub struct View {
    /// Counts the views published; a change of anything makes a new version.
    pub version: u64,
    /// The live nodes (those whose key under `/hearth/nodes/` exists), by id.
    pub nodes: BTreeMap<Arc<str>, NodeInfo>,
    /// Every claimed database's owner, by namespace.
    pub claims: HashMap<String, Claim>,
    /// The moves operators asked for (`hearth cluster move`), by namespace.
    pub moves: HashMap<String, crate::keys::MoveValue>,
    /// Each database's sync set (`--replication sync`): the nodes that may claim it next.
    pub sync: HashMap<String, SyncValue>,
    pub(crate) lease: Option<Arc<LeaseClock>>,
}

impl View {
    /// The live node that rendezvous hashing places `namespace` on: among the members of its
    /// sync set that are alive when it has one (only they may claim it, so requests must
    /// reach one of them), else among all the live nodes (the database then waits for a
    /// member, and the node it is placed on says so).
    pub fn placed_on(&self, namespace: &str) -> Option<&str> {
        let live = || self.nodes.keys().map(|id| &**id);
        if let Some(set) = self.sync.get(namespace) {
            if let Some(member) = rendezvous::place(live().filter(|id| set.has(id)), namespace) {
                return Some(member);
            }
        }
        rendezvous::place(live(), namespace)
    }

    /// The live node that follows `namespace` (keeps a copy of its log): of the live nodes
    /// other than its owner (its claim's node, else the one it is placed on), the one
    /// rendezvous hashing places it on; the same runner-up on every node.
    pub fn follower_of(&self, namespace: &str) -> Option<&str> {
        let owner = match self.claims.get(namespace) {
            Some(claim) => Some(&*claim.node_id),
            None => self.placed_on(namespace),
        };
        let others = self
            .nodes
            .keys()
            .map(|id| &**id)
            .filter(|id| Some(*id) != owner);
        rendezvous::place(others, namespace)
    }

    /// Whether `node` may claim `namespace`: always without a sync set for it, else only as
    /// one of its members (they hold every write acknowledged so far).
    pub fn may_claim(&self, namespace: &str, node: &str) -> bool {
        self.sync.get(namespace).is_none_or(|set| set.has(node))
    }
}

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
        view.lease.as_ref().is_none_or(|lease| {
            lease.lost.load(Ordering::Acquire) || lease.age(Instant::now()) > self.lease_ttl()
        })
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

    /// `None` when this node may acknowledge a write to `namespace` now: it holds the
    /// database's claim, under its current lease, and that lease was confirmed within
    /// [`Placement::write_window`]. Otherwise why not, for the client; when placement
    /// says the database is this node's and nobody holds it, a claim is asked for, so that
    /// a retry succeeds.
    pub fn write_refusal(&self, namespace: &str) -> Option<String> {
        let view = self.shared.view.load();
        let me = &*self.shared.node_id;
        match view.claims.get(namespace) {
            Some(claim) if &*claim.node_id == me => {
                let held = view.lease.as_ref().is_some_and(|lease| {
                    lease.id == claim.lease && lease.valid(Instant::now(), self.write_window())
                });
                (!held).then(|| {
                    format!(
                        "writes are refused: node {me} cannot confirm its claim on the \
                         database (epoch {}) with etcd; retry",
                        claim.epoch
                    )
                })
            }
            Some(claim) => Some(format!(
                "writes are refused here: the database is owned by node {} ({}), epoch {}",
                claim.node_id, claim.advertise, claim.epoch
            )),
            None => match view.placed_on(namespace) {
                Some(placed) if placed == me && !view.may_claim(namespace, me) => {
                    let members = view
                        .sync
                        .get(namespace)
                        .map(|set| set.members.join(", "))
                        .unwrap_or_default();
                    Some(format!(
                        "writes are refused: node {me} may not take the database over, since \
                         it may lack acknowledged writes; it waits for one of the nodes that \
                         hold them all ({members}) to return"
                    ))
                }
                Some(placed) if placed == me => {
                    self.ask_claim(namespace);
                    Some(format!(
                        "writes are refused for now: node {me} is claiming the database; retry"
                    ))
                }
                Some(placed) => Some(format!(
                    "writes are refused here: the database is placed on node {placed}, which \
                     has not claimed it yet"
                )),
                None => Some("writes are refused: no cluster node is known alive".to_owned()),
            },
        }
    }

    /// `None` when this node may answer reads of `namespace` from its copy: it holds the
    /// claim under a lease confirmed within [`Placement::write_window`] (no other node can
    /// have taken the database over and acknowledged a write since), or nobody holds it and
    /// placement gives it to this node, which may claim it (its copy then has every
    /// acknowledged write). Otherwise why not: another node may hold newer data.
    pub fn read_refusal(&self, namespace: &str) -> Option<String> {
        let view = self.shared.view.load();
        let me = &*self.shared.node_id;
        let valid = view
            .lease
            .as_ref()
            .is_some_and(|lease| lease.valid(Instant::now(), self.write_window()));
        match view.claims.get(namespace) {
            Some(claim) if &*claim.node_id == me => {
                let held = valid && view.lease.as_ref().is_some_and(|l| l.id == claim.lease);
                (!held).then(|| {
                    format!(
                        "reads are refused: node {me} cannot confirm its claim on the database \
                         with etcd, and another node may hold newer data; retry"
                    )
                })
            }
            Some(claim) => Some(format!(
                "reads are refused here: the database is owned by node {}",
                claim.node_id
            )),
            None if valid
                && view.placed_on(namespace) == Some(me)
                && view.may_claim(namespace, me) =>
            {
                None
            }
            None => Some(
                "reads are refused here: this node may lack acknowledged writes of the database"
                    .to_owned(),
            ),
        }
    }

    /// True while a write to `namespace` here waits only for this node's claim: nobody holds
    /// the database, placement gives it to this node, and this node's lease is valid. A
    /// request then waits for the claim ([`Placement::claim_settled`]) rather than being
    /// refused, so that the first write to a new database succeeds.
    pub fn claim_pending(&self, namespace: &str) -> bool {
        let view = self.shared.view.load();
        let me = &*self.shared.node_id;
        !view.claims.contains_key(namespace)
            && view.placed_on(namespace) == Some(me)
            && view.may_claim(namespace, me)
            && view
                .lease
                .as_ref()
                .is_some_and(|lease| lease.valid(Instant::now(), self.write_window()))
    }

    /// Whether this node's view names another node as `namespace`'s owner.
    pub fn claimed_elsewhere(&self, namespace: &str) -> bool {
        let view = self.shared.view.load();
        view.claims
            .get(namespace)
            .is_some_and(|claim| *claim.node_id != *self.shared.node_id)
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

    /// Asks for the claim on `namespace` and waits until it is no longer pending (this node
    /// or another holds it, or placement moved it) or `limit` passes; the caller then checks
    /// the claim as for any request.
    pub async fn claim_settled(&self, namespace: &str, limit: Duration) {
        let mut changes = self.changes();
        let wait = async {
            while self.claim_pending(namespace) {
                self.ask_claim(namespace);
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unclaimed_database_is_placed_on_a_live_member_of_its_sync_set() {
        let info = NodeInfo {
            advertise: "127.0.0.1:1".parse().expect("address"),
            lease: 1,
        };
        let mut view = View::default();
        for id in ["a", "b", "c"] {
            view.nodes.insert(Arc::from(id), info.clone());
        }
        let ns = "db";
        let top = view.placed_on(ns).expect("a node").to_owned();
        let other = ["a", "b", "c"]
            .into_iter()
            .find(|id| *id != top)
            .expect("another node");
        // Only `other` holds every acknowledged write: requests must reach it, so that it
        // claims the database, rather than the top node, which may not.
        let set = SyncValue {
            epoch: 2,
            members: vec![other.to_owned(), "gone".to_owned()],
        };
        view.sync.insert(ns.to_owned(), set);
        assert_eq!(view.placed_on(ns), Some(other));
        assert!(view.may_claim(ns, other));
        assert!(!view.may_claim(ns, &top));
        // No member alive: placed as without a set, and nobody may claim it.
        view.nodes.remove(other);
        assert!(view.placed_on(ns).is_some_and(|node| node != other));
        assert!(!view.may_claim(ns, view.placed_on(ns).expect("a node")));
    }

    #[test]
    fn a_lease_is_valid_only_within_the_window_after_its_last_confirmation() {
        let start = Instant::now();
        let clock = LeaseClock::new(7, start);
        let window = Duration::from_secs(2);
        assert!(clock.valid(start + Duration::from_millis(1999), window));
        assert!(!clock.valid(start + Duration::from_secs(2), window));
        clock.confirm(start + Duration::from_secs(1));
        assert!(clock.valid(start + Duration::from_millis(2999), window));
        // A confirmation sent earlier than the last one counts for nothing.
        clock.confirm(start);
        assert!(!clock.valid(start + Duration::from_secs(3), window));
        clock.lose();
        assert!(!clock.valid(start + Duration::from_millis(1001), window));
    }
}
