//! The cluster as this node last read it from etcd ([`View`]): the live nodes, the claims,
//! moves and sync sets, and this node's lease as its own clock knows it ([`LeaseClock`]).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::keys::{MoveValue, SyncValue};
use crate::rendezvous;

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

    /// Whether the lease is known gone (a keep-alive answered without it).
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    pub(crate) fn valid(&self, now: Instant, window: Duration) -> bool {
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
    pub moves: HashMap<String, MoveValue>,
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
