//! One live connection of a node link: a reader task (`reader`) and a writer loop, so that
//! neither side waits on its own writes to read (two nodes that both send much would
//! otherwise stall each other with full buffers). The writer gathers whatever is ready into
//! one buffer per write; a message's room (`ToOwner::Messages`) and a batch's credit
//! (`ToEdge`) are let go once the bytes are in the kernel, from where TCP's flow control
//! takes over, and the reader of the other side takes the next frame only when its own room
//! and credits allow.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use rustc_hash::FxHashMap;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::codec::{LinkItem, LinkMessage, MAX_FRAME_BYTES};
use crate::context::{unreachable_owner, Context, Forward, Reply};
use crate::forward::{self, Outbox};
use crate::link_tls::LinkStream;
use crate::nodes::wire_conn;
use crate::reader::read_loop;
use hearth_ground::close::CloseReason;
use hearth_ground::cross_core::{EdgeItem, ToEdge, ToOwner};
use hearth_ground::replica_messages::ReplicaOut;

/// The bytes the writer gathers before it writes them.
const GATHER_BYTES: usize = 1024 * 1024;

/// The frame bytes one batch message carries at most; a larger batch leaves as several.
const BATCH_FRAME_BYTES: usize = MAX_FRAME_BYTES / 4;

/// Why a push does not cross: its connection is closed instead.
const TOO_LARGE_CLOSE: &str = "a message is too large for the link between nodes";

/// How a live connection of the link ended.
pub enum Ended {
    /// It failed or the peer closed it.
    Lost(String),
    /// The peer dialed again: this one is stale.
    Replaced(LinkStream),
    /// The peer left the cluster's live nodes, or moved: its link must be dropped.
    Departed,
    /// The local shards are gone.
    Closed,
}

/// What a live connection takes from the local shards, and the next connection the peer
/// dials.
pub struct Queues<'a> {
    pub to_owner: &'a mut mpsc::UnboundedReceiver<ToOwner>,
    pub to_edge: &'a mut mpsc::UnboundedReceiver<ToEdge>,
    pub to_replica: &'a mut mpsc::UnboundedReceiver<ReplicaOut>,
    /// REST requests and event streams (`forward.rs`).
    pub forwards: &'a mut mpsc::UnboundedReceiver<Forward>,
    pub accepted: &'a mut mpsc::Receiver<LinkStream>,
}

/// Serves the link over `stream`, the link's connection number `generation`, until it ends.
pub async fn run(
    ctx: &Rc<Context>,
    stream: LinkStream,
    mut queues: Queues<'_>,
    generation: u64,
) -> Ended {
    // One lock shared by the halves (a TLS session is one state for both directions).
    let (read, mut write) = tokio::io::split(stream);
    let (replies_tx, mut replies_rx) = mpsc::unbounded_channel();
    let mut reader = tokio::task::spawn_local(read_loop(ctx.clone(), read, replies_tx));
    let mut address = ctx.address.subscribe();
    // Where this connection found the peer: `None` when the peer dialed before this node's
    // etcd view had it (the accept checks the latest view, the links learn it a moment later).
    let mut reached = *address.borrow_and_update();
    let ended = async {
        let mut writer = Writer::default();
        loop {
            let Writer {
                out,
                rooms,
                batches,
                outbox,
            } = &mut writer;
            tokio::select! {
                biased;
                read = &mut reader => return reader_ended(read),
                Some(stream) = queues.accepted.recv() => return Ended::Replaced(stream),
                Ok(()) = address.changed() => {
                    // A peer that left, or moved from where it was reached, is gone; one whose
                    // address this node only learns now is the same peer on this connection
                    // (ending it would read as a follower lost while the cluster starts).
                    let now = *address.borrow_and_update();
                    if now.is_none() || reached.is_some_and(|at| Some(at) != now) {
                        return Ended::Departed;
                    }
                    reached = now;
                }
                Some(reply) = replies_rx.recv() => encode_reply(reply, out, outbox),
                message = queues.to_owner.recv() => match message {
                    Some(message) => encode_to_owner(ctx, message, out, rooms),
                    None => return Ended::Closed,
                },
                batch = queues.to_edge.recv() => match batch {
                    Some(batch) => {
                        encode_batch(&batch, out);
                        batches.push(batch);
                    }
                    None => return Ended::Closed,
                },
                forward = queues.forwards.recv() => match forward {
                    Some(forward) => forward::send(ctx, forward, out, outbox),
                    None => return Ended::Closed,
                },
                replica = queues.to_replica.recv() => match replica {
                    Some(replica) => encode_replica(replica, generation, out),
                    None => return Ended::Closed,
                },
                // A frame of a REST request or answer on its way (below).
                _ = std::future::ready(()), if !outbox.is_empty() => {}
            }
            // Everything else that is ready leaves with it.
            writer.gather(ctx, &mut queues, &mut replies_rx, generation);
            // One frame of the REST transfers each turn: a large one never holds up the rest.
            if writer.outbox.encode_next(&mut writer.out) {
                let mut state = ctx.state.borrow_mut();
                state.serving = state.serving.saturating_sub(1);
            }
            if !writer.out.is_empty() {
                // The flush sends what TLS still holds of it (a no-op on plain TCP).
                if let Err(error) = write.write_all(&writer.out).await {
                    return Ended::Lost(error.to_string());
                }
                if let Err(error) = write.flush().await {
                    return Ended::Lost(error.to_string());
                }
                writer.out.clear();
            }
            writer.let_go();
        }
    };
    let ended = ended.await;
    reader.abort();
    ended
}

/// How the link's connection ended when its reader did.
fn reader_ended(read: Result<Result<(), String>, tokio::task::JoinError>) -> Ended {
    Ended::Lost(match read {
        Ok(Err(why)) => why,
        Ok(Ok(())) => "the reader ended".into(),
        Err(error) => error.to_string(),
    })
}

/// What the writer holds: the bytes it gathers for its next write, what is let go once they
/// are in the kernel (the messages' room, the batches' credit), and the REST transfers under
/// way.
#[derive(Default)]
struct Writer {
    out: BytesMut,
    rooms: Vec<tokio::sync::OwnedSemaphorePermit>,
    batches: Vec<ToEdge>,
    outbox: Outbox,
}

impl Writer {
    /// Encodes whatever else is ready, until [`GATHER_BYTES`] are gathered: it leaves in the
    /// same write.
    fn gather(
        &mut self,
        ctx: &Context,
        queues: &mut Queues<'_>,
        replies: &mut mpsc::UnboundedReceiver<Reply>,
        generation: u64,
    ) {
        let out = &mut self.out;
        while out.len() < GATHER_BYTES {
            if let Ok(reply) = replies.try_recv() {
                encode_reply(reply, out, &mut self.outbox);
            } else if let Ok(message) = queues.to_owner.try_recv() {
                encode_to_owner(ctx, message, out, &mut self.rooms);
            } else if let Ok(batch) = queues.to_edge.try_recv() {
                encode_batch(&batch, out);
                self.batches.push(batch);
            } else if let Ok(forward) = queues.forwards.try_recv() {
                forward::send(ctx, forward, out, &mut self.outbox);
            } else if let Ok(replica) = queues.to_replica.try_recv() {
                encode_replica(replica, generation, out);
            } else {
                break;
            }
        }
    }

    /// Lets go of the room and the credit of what the last write carried.
    fn let_go(&mut self) {
        self.rooms.clear();
        for batch in self.batches.drain(..) {
            batch.written();
        }
    }
}

/// Encodes what the reader has the writer send back.
fn encode_reply(reply: Reply, out: &mut BytesMut, outbox: &mut Outbox) {
    match reply {
        Reply::Handled(conn) => LinkMessage::Handled { conn }.encode(out),
        Reply::Answer { id, answer } => outbox.answer(id, answer),
        Reply::StreamOpened { conn, refusal } => {
            let refusal = refusal.map(|answer| (answer.head, answer.body));
            LinkMessage::StreamOpened { conn, refusal }.encode(out);
        }
    }
}

/// Encodes a local connection's message for its owner on the peer.
fn encode_to_owner(
    ctx: &Context,
    message: ToOwner,
    out: &mut BytesMut,
    rooms: &mut Vec<tokio::sync::OwnedSemaphorePermit>,
) {
    let mut state = ctx.state.borrow_mut();
    let wire = match message {
        ToOwner::Open { opening, edge: _ } => {
            state
                .opened
                .insert(opening.conn, opening.namespace.as_str().into());
            LinkMessage::Open(opening)
        }
        // A connection not opened on this connection of the link was opened on one that is
        // lost, and is being closed: nothing of it crosses (dropping `done` lets it read on).
        ToOwner::Messages {
            messages,
            done,
            room,
        } => {
            if !state.opened.contains_key(&messages.conn) {
                return;
            }
            let large = done.is_some();
            if let Some(done) = done {
                state.waiting.insert(messages.conn, done);
            }
            rooms.push(room);
            LinkMessage::Messages { messages, large }
        }
        ToOwner::AuthExpired { conn } => {
            if !state.opened.contains_key(&conn) {
                return;
            }
            LinkMessage::AuthExpired { conn }
        }
        ToOwner::Closed { conn } => {
            if state.opened.remove(&conn).is_none() {
                return;
            }
            state.waiting.remove(&conn);
            LinkMessage::Closed { conn }
        }
        ToOwner::Moved { conn } => {
            if state.opened.remove(&conn).is_none() {
                return;
            }
            state.waiting.remove(&conn);
            LinkMessage::Moved { conn }
        }
        // Event streams cross as their request, not parsed (`forward`, `StreamRequest`).
        ToOwner::OpenStream { opened, .. } => {
            let _ = opened.send(Err(unreachable_owner()));
            return;
        }
    };
    wire.encode(out);
}

/// Encodes replication's message for the peer: records shipped under an earlier connection
/// are dropped, since the follower may lack what came before them there.
fn encode_replica(message: ReplicaOut, generation: u64, out: &mut BytesMut) {
    match message {
        ReplicaOut::Records(records) if records.generation == generation => {
            LinkMessage::Replicate(records.shipped).encode(out)
        }
        ReplicaOut::Records(_) => {}
        ReplicaOut::Ack(ack) => LinkMessage::ReplicaAck(ack).encode(out),
    }
}

/// Encodes a local owner's batch for the peer's connections: each frame once, however many
/// of them it goes to.
fn encode_batch(batch: &ToEdge, out: &mut BytesMut) {
    let mut frames: Vec<Bytes> = Vec::new();
    let mut index: FxHashMap<(usize, usize), u32> = FxHashMap::default();
    let mut items = Vec::new();
    let mut bytes = 0;
    for item in &batch.items {
        let item: LinkItem = match item {
            EdgeItem::Frames { conn, frames: run } if run.len() > BATCH_FRAME_BYTES => {
                EdgeItem::Close {
                    conn: wire_conn(*conn),
                    reason: CloseReason::new(CloseCode::Size, TOO_LARGE_CLOSE),
                    shed: true,
                }
            }
            EdgeItem::Frames { conn, frames: run } => {
                // Clones of one push share their buffer: the same pointer and length.
                let key = (run.as_ptr() as usize, run.len());
                let frame = match index.get(&key) {
                    Some(frame) => *frame,
                    None => {
                        if bytes + run.len() > BATCH_FRAME_BYTES {
                            let frames = std::mem::take(&mut frames);
                            let items = std::mem::take(&mut items);
                            LinkMessage::Batch { frames, items }.encode(out);
                            index.clear();
                            bytes = 0;
                        }
                        bytes += run.len();
                        frames.push(run.clone());
                        index.insert(key, frames.len() as u32 - 1);
                        frames.len() as u32 - 1
                    }
                };
                EdgeItem::Frames {
                    conn: wire_conn(*conn),
                    frames: frame,
                }
            }
            // An item without frames crosses as it is, for the peer's own connection id.
            other => match other.clone().map_frames(wire_conn, |_| None) {
                Some(item) => item,
                None => continue,
            },
        };
        items.push(item);
    }
    if !items.is_empty() {
        LinkMessage::Batch { frames, items }.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::codec::split_frame;
    use crate::nodes::remote_conn;
    use hearth_ground::cross_core::{Credit, MoveCause};
    use hearth_sync::ConnId;

    fn frames(conn: ConnId, frames: &Bytes) -> EdgeItem {
        EdgeItem::Frames {
            conn: remote_conn(1, conn),
            frames: frames.clone(),
        }
    }

    #[test]
    fn a_push_to_many_connections_of_a_node_crosses_once() {
        let push = Bytes::from(b"a push".to_vec());
        let other = Bytes::from(b"a reply".to_vec());
        let items = vec![
            frames(10, &push),
            frames(11, &push),
            frames(12, &other),
            frames(13, &push),
        ];
        let credit = Arc::new(Credit::default());
        let batch = ToEdge::new(items, &credit);
        let mut out = BytesMut::new();
        encode_batch(&batch, &mut out);
        let body = split_frame(&mut out).expect("frame").expect("whole");
        assert!(out.is_empty(), "one message");
        let LinkMessage::Batch { frames, items } = LinkMessage::decode(body).expect("decodes")
        else {
            panic!("not a batch");
        };
        assert_eq!(frames, vec![push, other], "each frame once");
        let sent: Vec<(ConnId, u32)> = items
            .iter()
            .map(|item| match item {
                EdgeItem::Frames { conn, frames } => (*conn, *frames),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        // The edge node's own ids, in the owner's order.
        assert_eq!(sent, vec![(10, 0), (11, 0), (12, 1), (13, 0)]);
        batch.written();
    }

    #[test]
    fn items_without_frames_cross_as_they_are_for_the_peers_ids() {
        let close = CloseReason::new(CloseCode::Policy, "slow");
        let items = vec![
            EdgeItem::Close {
                conn: remote_conn(1, 20),
                reason: close.clone(),
                shed: true,
            },
            EdgeItem::AuthExpiry {
                conn: remote_conn(1, 21),
                expires_at: Some(7),
            },
            EdgeItem::Moved {
                conn: remote_conn(1, 22),
                cause: MoveCause::OwnerStopping,
            },
        ];
        let credit = Arc::new(Credit::default());
        let batch = ToEdge::new(items, &credit);
        let mut out = BytesMut::new();
        encode_batch(&batch, &mut out);
        let body = split_frame(&mut out).expect("frame").expect("whole");
        let LinkMessage::Batch { frames, items } = LinkMessage::decode(body).expect("decodes")
        else {
            panic!("not a batch");
        };
        assert!(frames.is_empty());
        let expected: Vec<LinkItem> = vec![
            EdgeItem::Close {
                conn: 20,
                reason: close,
                shed: true,
            },
            EdgeItem::AuthExpiry {
                conn: 21,
                expires_at: Some(7),
            },
            EdgeItem::Moved {
                conn: 22,
                cause: MoveCause::OwnerStopping,
            },
        ];
        assert_eq!(items, expected);
        batch.written();
    }
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod address_tests;
