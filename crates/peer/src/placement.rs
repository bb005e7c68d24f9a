//! Which node owns a database, in the static placement of `--cluster-peers`: every node is
//! given the same list of `ID=ADDR`, and a database belongs to the listed node whose id
//! scores highest for its name (rendezvous hashing), so every node reaches the same answer
//! without talking. The etcd placement (issue #21) replaces [`Placement::owner_node`] and
//! keeps its signature.

use std::net::SocketAddr;

/// The longest node id: it crosses the link in the handshake.
pub const MAX_NODE_ID_BYTES: usize = 64;

/// The most nodes in a static placement: the edge indexes of remote nodes follow an owner's
/// local shards, and a remote connection's id carries its node's index in 15 bits.
pub const MAX_NODES: usize = 256;

/// Where a database's requests are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRoute {
    /// On this node (then by the shard its name hashes to).
    Local,
    /// On the node at this index of the placement, over the link to it.
    Remote(usize),
}

/// One node of the placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    /// Where its node-to-node link listens.
    pub address: SocketAddr,
}

/// Every node of the cluster, and which of them this one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Sorted by id, so that every node numbers them alike.
    pub nodes: Vec<Node>,
    /// This node's index in `nodes`.
    pub me: usize,
}

/// Why `--cluster-peers` / `--node-id` cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    #[error("`{0}` is not ID=HOST:PORT")]
    Entry(String),
    #[error(
        "node id `{0}` must be 1 to {MAX_NODE_ID_BYTES} bytes of letters, digits, `-`, `_` or `.`"
    )]
    Id(String),
    #[error("node id `{0}` is listed twice")]
    Duplicate(String),
    #[error("--node-id `{0}` is not one of --cluster-peers")]
    NotListed(String),
    #[error("more than {MAX_NODES} nodes")]
    TooMany,
}

impl Placement {
    /// The placement of `entries` (`ID=ADDR`, addresses already resolved) as seen by `me`.
    pub fn new(entries: Vec<(String, SocketAddr)>, me: &str) -> Result<Placement, PlacementError> {
        if entries.len() > MAX_NODES {
            return Err(PlacementError::TooMany);
        }
        let mut nodes: Vec<Node> = Vec::with_capacity(entries.len());
        for (id, address) in entries {
            if !valid_id(&id) {
                return Err(PlacementError::Id(id));
            }
            if nodes.iter().any(|node| node.id == id) {
                return Err(PlacementError::Duplicate(id));
            }
            nodes.push(Node { id, address });
        }
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        let me = nodes
            .iter()
            .position(|node| node.id == me)
            .ok_or_else(|| PlacementError::NotListed(me.to_owned()))?;
        Ok(Placement { nodes, me })
    }

    /// The node that owns `namespace`: the highest score of (node id, name), the smaller id
    /// on a tie.
    pub fn owner_node(&self, namespace: &str) -> NodeRoute {
        match ranked(self.nodes.iter().map(|node| node.id.as_str()), namespace).0 {
            Some(index) if index != self.me => NodeRoute::Remote(index),
            _ => NodeRoute::Local,
        }
    }

    /// The node that follows `namespace` (keeps a replica of its log, `replica`): the
    /// second-highest score; `None` in a cluster of one.
    pub fn follower_node(&self, namespace: &str) -> Option<usize> {
        ranked(self.nodes.iter().map(|node| node.id.as_str()), namespace).1
    }

    /// This node's id.
    pub fn my_id(&self) -> &str {
        &self.nodes[self.me].id
    }
}

/// The indexes of the highest and the second-highest scores of `ids` for `namespace` (the
/// owner and the follower), the smaller index on a tie. Any placement over a list of node ids
/// (the static one here, the etcd one's live nodes) reaches the same two.
pub fn ranked<'a>(
    ids: impl Iterator<Item = &'a str>,
    namespace: &str,
) -> (Option<usize>, Option<usize>) {
    let mut first: Option<(u64, usize)> = None;
    let mut second: Option<(u64, usize)> = None;
    for (index, id) in ids.enumerate() {
        let score = score(id, namespace);
        if first.is_none_or(|(top, _)| score > top) {
            second = first;
            first = Some((score, index));
        } else if second.is_none_or(|(top, _)| score > top) {
            second = Some((score, index));
        }
    }
    (
        first.map(|(_, index)| index),
        second.map(|(_, index)| index),
    )
}

/// Parses one `ID=HOST:PORT` entry's shape; the caller resolves the address.
pub fn split_entry(entry: &str) -> Result<(&str, &str), PlacementError> {
    match entry.split_once('=') {
        Some((id, address)) if !id.is_empty() && !address.is_empty() => Ok((id, address)),
        _ => Err(PlacementError::Entry(entry.to_owned())),
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_NODE_ID_BYTES
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

/// The score of `node` for `namespace`: the same on every node and every version, since data
/// directories follow it.
fn score(node: &str, namespace: &str) -> u64 {
    let bytes = node.bytes().chain([0xff]).chain(namespace.bytes());
    hearth_ground::namespace::stable_hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(me: &str) -> Placement {
        let entries = ["b", "a", "c"]
            .iter()
            .enumerate()
            .map(|(port, id)| {
                let address = SocketAddr::from(([127, 0, 0, 2], 9000 + port as u16));
                (id.to_string(), address)
            })
            .collect();
        Placement::new(entries, me).expect("placement")
    }

    #[test]
    fn every_node_agrees_and_names_spread() {
        let views: Vec<Placement> = ["a", "b", "c"].iter().map(|me| placement(me)).collect();
        let mut owned = [0; 3];
        for n in 0..300 {
            let name = format!("db-{n}");
            let owners: Vec<usize> = views
                .iter()
                .map(|view| match view.owner_node(&name) {
                    NodeRoute::Local => view.me,
                    NodeRoute::Remote(index) => index,
                })
                .collect();
            assert!(owners.iter().all(|owner| *owner == owners[0]), "{name}");
            owned[owners[0]] += 1;
        }
        assert!(
            owned.iter().all(|count| (60..=140).contains(count)),
            "{owned:?}"
        );
    }

    #[test]
    fn the_choice_is_pinned() {
        // Data directories follow the placement: it must not change between versions. The
        // compat suite has a JavaScript copy (`compat/lib/cluster.mjs`).
        let view = placement("a");
        let owners: Vec<&str> = ["demo", "chat", "x", "y"]
            .iter()
            .map(|name| match view.owner_node(name) {
                NodeRoute::Local => "a",
                NodeRoute::Remote(index) => view.nodes[index].id.as_str(),
            })
            .collect();
        assert_eq!(owners, PINNED);
    }

    const PINNED: [&str; 4] = ["b", "b", "a", "a"];

    #[test]
    fn the_follower_is_the_runner_up_and_never_the_owner() {
        let view = placement("a");
        let followers: Vec<&str> = ["demo", "chat", "x", "y"]
            .iter()
            .map(|name| {
                let follower = view.follower_node(name).expect("three nodes");
                assert_ne!(view.owner_node(name), NodeRoute::Remote(follower));
                view.nodes[follower].id.as_str()
            })
            .collect();
        // Pinned like the owners: a follower's data directory follows it too.
        assert_eq!(followers, ["a", "a", "c", "b"]);
        let alone = Placement::new(vec![("a".into(), view.nodes[0].address)], "a").expect("one");
        assert_eq!(alone.follower_node("demo"), None);
    }

    #[test]
    fn bad_lists_are_refused() {
        let address = SocketAddr::from(([127, 0, 0, 1], 1));
        let twice = vec![("a".to_owned(), address), ("a".to_owned(), address)];
        assert_eq!(
            Placement::new(twice, "a"),
            Err(PlacementError::Duplicate("a".into()))
        );
        let one = vec![("a".to_owned(), address)];
        assert_eq!(
            Placement::new(one.clone(), "b"),
            Err(PlacementError::NotListed("b".into()))
        );
        let bad = vec![("a b".to_owned(), address)];
        assert!(matches!(
            Placement::new(bad, "a b"),
            Err(PlacementError::Id(_))
        ));
        assert!(split_entry("a").is_err());
        assert_eq!(split_entry("a=h:1"), Ok(("a", "h:1")));
    }
}
