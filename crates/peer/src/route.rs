//! Which node serves a database: the static list's rendezvous choice (`placement.rs`), or
//! the etcd placement's (decision 47) — its owner when a live node has claimed it, else the
//! node rendezvous hashing places it on, which claims it on first use.

use std::net::SocketAddr;

use crate::directory::Directory;
use crate::placement::{NodeRoute, Placement};

/// How the nodes of the cluster are known.
#[derive(Debug, Clone)]
pub enum Membership {
    /// `--cluster-peers`: a fixed list, the same on every node.
    Static(Placement),
    /// `--cluster-etcd` with `--cluster-secret-file`: the live nodes and the claims in etcd.
    Etcd(hearth_cluster::Placement),
}

impl Membership {
    /// This node's id.
    pub fn my_id(&self) -> &str {
        match self {
            Membership::Static(placement) => placement.my_id(),
            Membership::Etcd(placement) => placement.node_id(),
        }
    }

    /// Where this node's link listens: its entry of the list, or its `--advertise` address.
    pub fn link_address(&self) -> SocketAddr {
        match self {
            Membership::Static(placement) => placement.nodes[placement.me].address,
            Membership::Etcd(placement) => placement.advertise(),
        }
    }

    /// The directory of node indexes this membership starts with.
    pub fn directory(&self) -> Directory {
        match self {
            Membership::Static(placement) => {
                let ids: Vec<&str> = placement.nodes.iter().map(|node| &*node.id).collect();
                Directory::fixed(&ids, placement.me)
            }
            Membership::Etcd(placement) => Directory::growing(placement.node_id()),
        }
    }

    /// Where `namespace`'s requests are handled. With etcd: on its owner, or while it has
    /// none on the node placement names; here when that is this node, or a node that has no
    /// index (more than `MAX_NODES` were seen: fencing then refuses the writes here).
    pub fn route(&self, directory: &Directory, namespace: &str) -> NodeRoute {
        let placement = match self {
            Membership::Static(placement) => return placement.owner_node(namespace),
            Membership::Etcd(placement) => placement,
        };
        let view = placement.view();
        let node = match view.claims.get(namespace) {
            Some(claim) => &*claim.node_id,
            None => match view.placed_on(namespace) {
                Some(node) => node,
                None => return NodeRoute::Local,
            },
        };
        if node == placement.node_id() {
            return NodeRoute::Local;
        }
        match directory.index_of(node) {
            Some(index) if index != directory.me() => NodeRoute::Remote(index),
            _ => NodeRoute::Local,
        }
    }

    /// Whether this node may act as `namespace`'s owner toward its follower without a write
    /// (a catch-up copy): with etcd, only under a claim of its own; the static list has no
    /// claims, its owner is the one it places the database on.
    pub fn claimed_here(&self, namespace: &str) -> bool {
        match self {
            Membership::Static(placement) => placement.owner_node(namespace) == NodeRoute::Local,
            Membership::Etcd(placement) => placement
                .view()
                .claims
                .get(namespace)
                .is_some_and(|claim| *claim.node_id == *placement.node_id()),
        }
    }

    /// A number that changes whenever the live nodes or the claims may have: etcd's view
    /// version; the static list never changes.
    pub fn version(&self) -> u64 {
        match self {
            Membership::Static(_) => 0,
            Membership::Etcd(placement) => placement.view().version,
        }
    }

    /// The node that follows `namespace`: the runner-up of the static placement, or the
    /// etcd placement's runner-up among the live nodes; `None` when there is none, or it has
    /// no index.
    pub fn follower(&self, directory: &Directory, namespace: &str) -> Option<usize> {
        match self {
            Membership::Static(placement) => placement.follower_node(namespace),
            Membership::Etcd(placement) => {
                let view = placement.view();
                let node = view.follower_of(namespace)?;
                directory
                    .index_of(node)
                    .filter(|index| *index != directory.me())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_cluster::Claim;
    use std::sync::Arc;

    const ADDRESS: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 1);

    fn claim(node: &str, epoch: u64) -> Claim {
        Claim {
            node_id: Arc::from(node),
            advertise: ADDRESS,
            epoch,
            lease: 1,
        }
    }

    #[test]
    fn a_claim_wins_over_placement_and_an_unclaimed_database_goes_where_it_is_placed() {
        let nodes = ["a", "b", "c"];
        let view = hearth_cluster::Placement::fixed("a", ADDRESS, &nodes, Vec::new(), None);
        // A database rendezvous places on c, claimed by b.
        let name = (0..)
            .map(|n| format!("db{n}"))
            .find(|name| view.view().placed_on(name) == Some("c"))
            .expect("a name placed on c");
        let claims = vec![(name.clone(), claim("b", 3))];
        let claimed = hearth_cluster::Placement::fixed("a", ADDRESS, &nodes, claims, None);
        let membership = Membership::Etcd(claimed);
        let directory = membership.directory();
        assert_eq!(
            membership.route(&directory, &name),
            NodeRoute::Remote(1),
            "b, the first node seen after a"
        );
        let unclaimed = Membership::Etcd(view);
        assert_eq!(unclaimed.route(&directory, &name), NodeRoute::Remote(2));
        assert_eq!(directory.id(2).as_deref(), Some("c"));
        // Claimed by this node: served here.
        let mine = vec![(name.clone(), claim("a", 4))];
        let mine = hearth_cluster::Placement::fixed("a", ADDRESS, &nodes, mine, None);
        assert_eq!(
            Membership::Etcd(mine).route(&directory, &name),
            NodeRoute::Local
        );
    }

    #[test]
    fn the_follower_is_the_runner_up_of_the_live_nodes_other_than_the_owner() {
        let nodes = ["a", "b", "c"];
        let view = hearth_cluster::Placement::fixed("a", ADDRESS, &nodes, Vec::new(), None);
        let name = (0..)
            .map(|n| format!("db{n}"))
            .find(|name| view.view().placed_on(name) == Some("c"))
            .expect("a name placed on c");
        let membership = Membership::Etcd(view);
        let directory = membership.directory();
        let follower = membership
            .follower(&directory, &name)
            .map(|i| directory.id(i));
        let runner_up = hearth_cluster::rendezvous::place(["a", "b"], &name);
        assert_eq!(
            follower.flatten().as_deref(),
            runner_up.filter(|id| *id != "a")
        );
        // Claimed by b: the follower is the best of a and c, and never b.
        let claims = vec![(name.clone(), claim("b", 2))];
        let claimed = hearth_cluster::Placement::fixed("b", ADDRESS, &nodes, claims, None);
        let expected = hearth_cluster::rendezvous::place(["a", "c"], &name).expect("two");
        assert_eq!(claimed.view().follower_of(&name), Some(expected));
        // Alone: nobody follows.
        let lonely = hearth_cluster::Placement::fixed("a", ADDRESS, &["a"], Vec::new(), None);
        let membership = Membership::Etcd(lonely);
        assert_eq!(membership.follower(&membership.directory(), &name), None);
    }

    #[test]
    fn with_no_live_node_known_a_database_is_served_here() {
        let lonely = hearth_cluster::Placement::fixed("a", ADDRESS, &[], Vec::new(), None);
        let membership = Membership::Etcd(lonely);
        let directory = membership.directory();
        assert_eq!(membership.route(&directory, "x"), NodeRoute::Local);
    }

    #[test]
    fn only_a_claim_of_this_node_lets_it_copy_without_a_write() {
        let nodes = ["a", "b"];
        let claims = vec![
            ("mine".to_owned(), claim("a", 1)),
            ("theirs".to_owned(), claim("b", 1)),
        ];
        let placement = hearth_cluster::Placement::fixed("a", ADDRESS, &nodes, claims, None);
        let membership = Membership::Etcd(placement);
        assert!(membership.claimed_here("mine"));
        assert!(!membership.claimed_here("theirs"));
        // Placed here but not claimed yet: nobody wrote it under a claim of this node.
        let unclaimed = (0..)
            .map(|n| format!("db{n}"))
            .find(|name| membership.route(&membership.directory(), name) == NodeRoute::Local)
            .expect("a name placed on a");
        assert!(!membership.claimed_here(&unclaimed));
    }
}
