//! What an edge does with a batch from an owner: write each connection's frames (corked, so
//! that one connection's frames of a batch leave with one `writev`), close the connections the
//! owner closed, and rearm credential timers.

use crate::edge::EdgeConn;
use crate::link::{EdgeItem, ToEdge};
use crate::shard::Shard;

/// Carries out `batch`, then tells its owner that the bytes are written (or queued in the
/// connections' outboxes, where the server's answer budget counts them).
pub fn on_batch(shard: &Shard, mut batch: ToEdge) {
    // Writing to a connection never calls back into the shard, so the map stays borrowed.
    let conns = shard.edge_conns();
    let mut corked: Vec<&EdgeConn> = Vec::new();
    for item in batch.items.drain(..) {
        match item {
            EdgeItem::Frames { conn, frames } => {
                let Some(edge) = conns.get(&conn) else {
                    continue;
                };
                if !edge.is_corked() {
                    edge.cork();
                    corked.push(edge);
                }
                edge.write([frames]);
            }
            EdgeItem::Close { conn, reason, shed } => {
                if let Some(edge) = conns.get(&conn) {
                    if shed {
                        edge.close_shedding(reason);
                    } else {
                        edge.close(reason);
                    }
                }
            }
            EdgeItem::AuthExpiry { conn, expires_at } => {
                if let Some(edge) = conns.get(&conn) {
                    edge.set_auth_expiry(expires_at);
                }
            }
        }
    }
    for edge in corked {
        edge.uncork();
    }
    drop(conns);
    batch.written();
}
