//! Which node serves a database: the static list's rendezvous choice (`placement.rs`), or
//! the etcd placement's (decision 47) — its owner when a live node has claimed it, else the
//! node rendezvous hashing places it on, which claims it on first use.

use std::net::SocketAddr;

use crate::peer::directory::Directory;
use crate::peer::placement::{NodeRoute, Placement};

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
    fn with_no_live_node_known_a_database_is_served_here() {
        let lonely = hearth_cluster::Placement::fixed("a", ADDRESS, &[], Vec::new(), None);
        let membership = Membership::Etcd(lonely);
        let directory = membership.directory();
        assert_eq!(membership.route(&directory, "x"), NodeRoute::Local);
    }
}
