//! The links follow the etcd placement (`--cluster-etcd` with `--cluster-secret-file`): on
//! every new view, each live node gets an index and a link to its `--advertise` address; a
//! node whose lease ended has its link dropped (the sessions it carried end on both sides,
//! `node_link.rs`), and one that comes back is dialed again. Then every connection whose
//! session is on another node while its database is now served elsewhere (its claim went with
//! a lease, or another node claimed it) is told so: it moves its session to the new owner and
//! keeps its socket (`edge::rehome`), or, where it cannot, closes, so that its client
//! reconnects and reaches the new owner; either way its session on the old owner ends.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hearth_sync::ConnId;
use rustc_hash::{FxHashMap, FxHashSet};
use tracing::{info, warn};

use crate::links::Links;
use crate::nodes::Nodes;
use crate::placement::{NodeRoute, MAX_NODES};
use hearth_ground::cross_core::MoveCause;

/// Connections of this process whose database's owner changed (moved, or closed where they
/// could not move).
pub static OWNER_MOVED_CLOSES: AtomicU64 = AtomicU64::new(0);

/// Follows `placement`'s views for as long as the link thread runs.
pub async fn follow(
    placement: hearth_cluster::Placement,
    nodes: Arc<Nodes>,
    links: Rc<RefCell<Links>>,
) {
    let mut changes = placement.changes();
    // Ids that got no index, each logged once.
    let mut refused: FxHashSet<Arc<str>> = FxHashSet::default();
    loop {
        changes.borrow_and_update();
        let view = placement.view();
        let directory = nodes.directory();
        let mut live = FxHashSet::default();
        {
            let mut links = links.borrow_mut();
            for (id, info) in &view.nodes {
                if **id == *placement.node_id() {
                    continue;
                }
                let Some(index) = directory.index_of(id) else {
                    if refused.insert(id.clone()) {
                        warn!(
                            node = &**id,
                            max = MAX_NODES,
                            "more nodes than one node links to: this node does not link to \
                             it and serves its databases' clients itself (writes refused)"
                        );
                    }
                    continue;
                };
                links.ensure(index, id, Some(info.advertise));
                links.set_address(index, Some(info.advertise));
                live.insert(index);
            }
            // Nodes seen before (or only in a claim) that are not alive now.
            for index in (0..directory.len()).filter(|index| !live.contains(index)) {
                if index == directory.me() {
                    continue;
                }
                if let Some(id) = directory.id(index) {
                    links.ensure(index, &id, None);
                    links.set_address(index, None);
                }
            }
        }
        close_moved(&nodes, &links.borrow());
        if changes.changed().await.is_err() {
            return;
        }
    }
}

/// Moves (or closes) the connections whose session is on a node that no longer serves their
/// database.
fn close_moved(nodes: &Nodes, links: &Links) {
    for ctx in links.contexts() {
        let moved: Vec<ConnId> = {
            let state = ctx.state.borrow();
            // Each database's route once, however many connections it has.
            let mut routes: FxHashMap<&str, bool> = FxHashMap::default();
            state
                .opened
                .iter()
                .filter(|(_, namespace)| {
                    let namespace: &str = namespace;
                    let there = routes.entry(namespace).or_insert_with(|| {
                        nodes.owner_node(namespace) == NodeRoute::Remote(ctx.node)
                    });
                    !*there
                })
                .map(|(conn, _)| *conn)
                .collect()
        };
        if moved.is_empty() {
            continue;
        }
        // Each moves its session to the new owner, telling the old one to end it without
        // its onDisconnect queue, or closes, and the old owner ends it as a lost client's.
        let closed = moved.len() as u64;
        ctx.move_locally(moved, MoveCause::Moved);
        let total = OWNER_MOVED_CLOSES.fetch_add(closed, Ordering::Relaxed) + closed;
        info!(
            peer = &*ctx.peer,
            connections = closed,
            in_all = total,
            "databases moved away from node: their connections follow them or reconnect"
        );
    }
}
