//! What an edge does with a batch from an owner: write each connection's frames (a
//! connection's consecutive frames of the batch with one `writev`) or queue an event stream's,
//! close what the owner closed, move what lost its owner, and rearm credential timers.

use bytes::Bytes;
use hearth_sync::ConnId;
use rustc_hash::FxHashMap;

use crate::front::Front;
use hearth_edge::{Edge, EdgeTarget};
use hearth_ground::cross_core::{EdgeItem, ToEdge};

/// Carries out `batch`, then tells its owner that the bytes are written (or queued in the
/// connections' outboxes, where the server's answer budget counts them).
pub fn on_batch(front: &Front, batch: ToEdge) {
    carry_out(front.edge(), batch);
}

/// [`on_batch`] on the edge's state alone.
fn carry_out(edge: &Edge, mut batch: ToEdge) {
    // With `--io-uring-sends` the batch's writes leave together when it closes, after the
    // loop below and before the owner is told.
    let sends = edge.send_batch();
    // Writing to a connection never calls back into the shard, so the map stays borrowed.
    let conns = edge.held();
    // A run of frames for one connection: an owner releases a connection's messages together
    // (after a log sync, its replies and pushes), so they are written together. Not corking
    // the outbox keeps what the kernel takes at once out of the answer budget, as for frames
    // written on the owner's core.
    let mut run: (ConnId, Vec<Bytes>) = (0, Vec::new());
    for item in batch.items.drain(..) {
        match item {
            EdgeItem::Frames { conn, frames } => match conns.get(&conn) {
                Some(EdgeTarget::Socket(_)) => {
                    if run.0 != conn {
                        write_run(&conns, &mut run);
                        run.0 = conn;
                    }
                    run.1.push(frames);
                }
                // Durable already: the stream's own queue here has no gate.
                Some(EdgeTarget::Stream(stream)) => stream.send(&[frames]),
                None => {}
            },
            EdgeItem::Close { conn, reason, shed } => {
                write_run(&conns, &mut run);
                match conns.get(&conn) {
                    Some(EdgeTarget::Socket(edge)) if shed => edge.close_shedding(reason),
                    Some(EdgeTarget::Socket(edge)) => edge.close(reason),
                    Some(EdgeTarget::Stream(stream)) => stream.close(),
                    None => {}
                }
            }
            EdgeItem::AuthExpiry { conn, expires_at } => {
                if let Some(EdgeTarget::Socket(edge)) = conns.get(&conn) {
                    edge.set_auth_expiry(expires_at);
                }
            }
            EdgeItem::Moved { conn, cause } => {
                write_run(&conns, &mut run);
                match conns.get(&conn) {
                    Some(EdgeTarget::Socket(edge)) => edge.owner_moved(cause),
                    // An event stream reconnects on its own (EventSource).
                    Some(EdgeTarget::Stream(stream)) => stream.close(),
                    None => {}
                }
            }
        }
    }
    write_run(&conns, &mut run);
    drop(conns);
    drop(sends);
    batch.written();
}

/// Writes the frames gathered for one connection, and empties the run.
fn write_run(conns: &FxHashMap<ConnId, EdgeTarget>, run: &mut (ConnId, Vec<Bytes>)) {
    if run.1.is_empty() {
        return;
    }
    match conns.get(&run.0) {
        Some(EdgeTarget::Socket(edge)) => edge.write(run.1.drain(..)),
        _ => run.1.clear(),
    }
}

#[cfg(test)]
#[path = "intake_tests.rs"]
mod tests;
