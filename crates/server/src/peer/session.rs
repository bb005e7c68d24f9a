//! One live connection of a node link: a reader task and a writer loop, so that neither side
//! waits on its own writes to read (two nodes that both send much would otherwise stall each
//! other with full buffers). The writer gathers whatever is ready into one buffer per write;
//! a message's room (`ToOwner::Messages`) and a batch's credit (`ToEdge`) are let go once
//! the bytes are in the kernel, from where TCP's flow control takes over, and the reader of
//! the other side takes the next frame only when its own room and credits allow.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use rustc_hash::FxHashMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::close::CloseReason;
use crate::inbox::ShardMessage;
use crate::link::{EdgeItem, MoveCause, ToEdge, ToOwner, MAX_LINK_BYTES};
use crate::namespace::owner_shard;
use crate::peer::codec::{split_frame, LinkMessage, WireItem, MAX_FRAME_BYTES};
use crate::peer::context::{unreachable_owner, Context, Forward, RemoteAnswer, Reply};
use crate::peer::forward::{self, Outbox};
use crate::peer::link_tls::LinkStream;
use crate::peer::{remote_conn, wire_conn};
use crate::replica_messages::{ReplicaIn, ReplicaOut};

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
    queues: Queues<'_>,
    generation: u64,
) -> Ended {
    let Queues {
        to_owner,
        to_edge,
        to_replica,
        forwards,
        accepted,
    } = queues;
    // One lock shared by the halves (a TLS session is one state for both directions).
    let (read, mut write) = tokio::io::split(stream);
    let (replies_tx, mut replies_rx) = mpsc::unbounded_channel();
    let mut reader = tokio::task::spawn_local(read_loop(ctx.clone(), read, replies_tx));
    let mut address = ctx.address.subscribe();
    address.mark_unchanged();
    let ended = async {
        let mut out = BytesMut::new();
        let mut rooms = Vec::new();
        let mut batches = Vec::new();
        let mut outbox = Outbox::default();
        loop {
            tokio::select! {
                biased;
                read = &mut reader => {
                    return Ended::Lost(match read {
                        Ok(Err(why)) => why,
                        Ok(Ok(())) => "the reader ended".into(),
                        Err(error) => error.to_string(),
                    });
                }
                Some(stream) = accepted.recv() => return Ended::Replaced(stream),
                Ok(()) = address.changed() => return Ended::Departed,
                Some(reply) = replies_rx.recv() => encode_reply(reply, &mut out, &mut outbox),
                message = to_owner.recv() => match message {
                    Some(message) => encode_to_owner(ctx, message, &mut out, &mut rooms),
                    None => return Ended::Closed,
                },
                batch = to_edge.recv() => match batch {
                    Some(batch) => {
                        encode_batch(&batch, &mut out);
                        batches.push(batch);
                    }
                    None => return Ended::Closed,
                },
                forward = forwards.recv() => match forward {
                    Some(forward) => forward::send(ctx, forward, &mut out, &mut outbox),
                    None => return Ended::Closed,
                },
                replica = to_replica.recv() => match replica {
                    Some(replica) => encode_replica(replica, generation, &mut out),
                    None => return Ended::Closed,
                },
                // A frame of a REST request or answer on its way (below).
                _ = std::future::ready(()), if !outbox.is_empty() => {}
            }
            // Everything else that is ready leaves with it.
            while out.len() < GATHER_BYTES {
                if let Ok(reply) = replies_rx.try_recv() {
                    encode_reply(reply, &mut out, &mut outbox);
                } else if let Ok(message) = to_owner.try_recv() {
                    encode_to_owner(ctx, message, &mut out, &mut rooms);
                } else if let Ok(batch) = to_edge.try_recv() {
                    encode_batch(&batch, &mut out);
                    batches.push(batch);
                } else if let Ok(forward) = forwards.try_recv() {
                    forward::send(ctx, forward, &mut out, &mut outbox);
                } else if let Ok(replica) = to_replica.try_recv() {
                    encode_replica(replica, generation, &mut out);
                } else {
                    break;
                }
            }
            // One frame of the REST transfers each turn: a large one never holds up the rest.
            if outbox.encode_next(&mut out) {
                let mut state = ctx.state.borrow_mut();
                state.serving = state.serving.saturating_sub(1);
            }
            if !out.is_empty() {
                // The flush sends what TLS still holds of it (a no-op on plain TCP).
                if let Err(error) = write.write_all(&out).await {
                    return Ended::Lost(error.to_string());
                }
                if let Err(error) = write.flush().await {
                    return Ended::Lost(error.to_string());
                }
                out.clear();
            }
            rooms.clear();
            for batch in batches.drain(..) {
                batch.written();
            }
        }
    };
    let ended = ended.await;
    reader.abort();
    ended
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
        ToOwner::Open {
            conn,
            namespace,
            session_id,
            previous,
            edge: _,
        } => {
            state.opened.insert(conn, namespace.as_str().into());
            LinkMessage::Open {
                conn,
                namespace,
                session_id,
                previous,
            }
        }
        // A connection not opened on this connection of the link was opened on one that is
        // lost, and is being closed: nothing of it crosses (dropping `done` lets it read on).
        ToOwner::Messages {
            conn,
            texts,
            done,
            room,
        } => {
            if !state.opened.contains_key(&conn) {
                return;
            }
            let large = done.is_some();
            if let Some(done) = done {
                state.waiting.insert(conn, done);
            }
            rooms.push(room);
            LinkMessage::Messages { conn, texts, large }
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
        // Event streams cross with their request's head (`forward`), not parsed.
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
            LinkMessage::Replicate {
                shard: records.shard,
                seq: records.seq,
                namespace: records.namespace,
                reset: records.reset,
                records: records.records,
            }
            .encode(out)
        }
        ReplicaOut::Records(_) => {}
        ReplicaOut::Ack(ack) => LinkMessage::ReplicaAck {
            shard: ack.shard,
            seqs: ack.seqs,
        }
        .encode(out),
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
        let item = match item {
            EdgeItem::Frames { conn, frames: run } => {
                let conn = wire_conn(*conn);
                if run.len() > BATCH_FRAME_BYTES {
                    WireItem::Close {
                        conn,
                        code: CloseCode::Size.into(),
                        text: TOO_LARGE_CLOSE.to_owned(),
                        shed: true,
                    }
                } else {
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
                    WireItem::Frames { conn, frame }
                }
            }
            EdgeItem::Close { conn, reason, shed } => WireItem::Close {
                conn: wire_conn(*conn),
                code: reason.code.into(),
                text: reason.text.clone(),
                shed: *shed,
            },
            EdgeItem::AuthExpiry { conn, expires_at } => WireItem::AuthExpiry {
                conn: wire_conn(*conn),
                expires_at: *expires_at,
            },
            // Only a stopping owner asks a remote edge to move a session.
            EdgeItem::Moved { conn, .. } => WireItem::Moved {
                conn: wire_conn(*conn),
            },
        };
        items.push(item);
    }
    if !items.is_empty() {
        LinkMessage::Batch { frames, items }.encode(out);
    }
}

/// Reads the peer's frames until the connection ends; the error says why.
async fn read_loop(
    ctx: Rc<Context>,
    mut read: ReadHalf<LinkStream>,
    replies: mpsc::UnboundedSender<Reply>,
) -> Result<(), String> {
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        while let Some(body) = split_frame(&mut buffer).map_err(|error| error.to_string())? {
            let message = LinkMessage::decode(body).map_err(|error| error.to_string())?;
            on_message(&ctx, message, &replies).await?;
        }
        if buffer.capacity() - buffer.len() < 16 * 1024 {
            buffer.reserve(64 * 1024);
        }
        match read.read_buf(&mut buffer).await {
            Ok(0) => return Err("the peer closed the link".into()),
            Ok(_) => {}
            Err(error) => return Err(error.to_string()),
        }
    }
}

/// Carries out one message of the peer: as the owner of a session of its connection, or as
/// the edge of a connection of ours. The error says how the peer broke the protocol.
async fn on_message(
    ctx: &Rc<Context>,
    message: LinkMessage,
    replies: &mpsc::UnboundedSender<Reply>,
) -> Result<(), String> {
    let shards = ctx.owners.len();
    let to_owner = |shard: usize, message: ToOwner| {
        if let Some(owner) = ctx.owners.get(shard) {
            let _ = owner.send(ShardMessage::Owner(message));
        }
    };
    match message {
        LinkMessage::Open {
            conn,
            namespace,
            session_id,
            previous,
        } => {
            let shard = owner_shard(&namespace, shards);
            ctx.state.borrow_mut().sessions.insert(conn, shard);
            let open = ToOwner::Open {
                conn: remote_conn(ctx.node, conn),
                // The peer is one more edge of every local owner, after the local shards.
                edge: shards + ctx.node,
                namespace,
                session_id,
                previous,
            };
            to_owner(shard, open);
        }
        LinkMessage::Messages { conn, texts, large } => {
            let Some(shard) = ctx.state.borrow().sessions.get(&conn).copied() else {
                return Ok(());
            };
            let bytes: usize = texts.iter().map(String::len).sum();
            let bytes = bytes.clamp(1, MAX_LINK_BYTES) as u32;
            // Nothing more is read from the peer until the local owners have room.
            let Ok(room) = ctx.owner_room.clone().acquire_many_owned(bytes).await else {
                return Ok(());
            };
            let done = large.then(|| {
                let (done, finished) = oneshot::channel::<()>();
                let replies = replies.clone();
                tokio::task::spawn_local(async move {
                    // Dropped, unsent, once the owner handled the message.
                    let _ = finished.await;
                    let _ = replies.send(Reply::Handled(conn));
                });
                done
            });
            let conn = remote_conn(ctx.node, conn);
            to_owner(
                shard,
                ToOwner::Messages {
                    conn,
                    texts,
                    done,
                    room,
                },
            );
        }
        LinkMessage::AuthExpired { conn } => {
            if let Some(shard) = ctx.state.borrow().sessions.get(&conn).copied() {
                let conn = remote_conn(ctx.node, conn);
                to_owner(shard, ToOwner::AuthExpired { conn });
            }
        }
        LinkMessage::Closed { conn } => {
            if let Some(shard) = ctx.state.borrow_mut().sessions.remove(&conn) {
                let conn = remote_conn(ctx.node, conn);
                to_owner(shard, ToOwner::Closed { conn });
            }
        }
        LinkMessage::Moved { conn } => {
            if let Some(shard) = ctx.state.borrow_mut().sessions.remove(&conn) {
                let conn = remote_conn(ctx.node, conn);
                to_owner(shard, ToOwner::Moved { conn });
            }
        }
        LinkMessage::Handled { conn } => {
            ctx.state.borrow_mut().waiting.remove(&conn);
        }
        LinkMessage::Batch { frames, items } => on_batch(ctx, &frames, items).await,
        LinkMessage::Request {
            id,
            head,
            body,
            more,
        } => return forward::on_request(ctx, id, head, body, more, replies),
        LinkMessage::RequestMore { id, body, more } => {
            return forward::on_request_more(ctx, id, body, more, replies)
        }
        LinkMessage::Answer {
            id,
            head,
            body,
            more,
        } => return forward::on_answer(ctx, id, Some(head), body, more),
        LinkMessage::AnswerMore { id, body, more } => {
            return forward::on_answer(ctx, id, None, body, more)
        }
        LinkMessage::OpenStream { conn, head } => forward::on_open_stream(ctx, conn, head, replies),
        LinkMessage::StreamOpened { conn, refusal } => {
            let refusal = refusal.map(|(head, body)| RemoteAnswer { head, body });
            forward::on_stream_opened(ctx, conn, refusal);
        }
        LinkMessage::Replicate {
            shard,
            seq,
            namespace,
            reset,
            records,
        } => {
            let local = owner_shard(&namespace, shards);
            let message = ReplicaIn::Records {
                from: ctx.node,
                shard,
                seq,
                namespace,
                reset,
                records,
            };
            if let Some(owner) = ctx.owners.get(local) {
                let _ = owner.send(ShardMessage::Replica(message));
            }
        }
        LinkMessage::ReplicaAck { shard, seqs } => {
            if let Some(owner) = ctx.owners.get(shard as usize) {
                let message = ReplicaIn::Ack {
                    from: ctx.node,
                    seqs,
                };
                let _ = owner.send(ShardMessage::Replica(message));
            }
        }
    }
    Ok(())
}

/// Hands the owner's batch to the local shards that hold its connections (a connection's id
/// names its shard), in order, each once it has room.
async fn on_batch(ctx: &Context, frames: &[Bytes], items: Vec<WireItem>) {
    let shards = ctx.edges.len().max(1);
    let mut groups: Vec<Vec<EdgeItem>> = (0..shards).map(|_| Vec::new()).collect();
    for item in items {
        let (conn, item) = match item {
            WireItem::Frames { conn, frame } => {
                // The decoder checked the index.
                let Some(frames) = frames.get(frame as usize) else {
                    continue;
                };
                let frames = frames.clone();
                (conn, EdgeItem::Frames { conn, frames })
            }
            WireItem::Close {
                conn,
                code,
                text,
                shed,
            } => {
                let reason = CloseReason::new(CloseCode::from(code), text);
                (conn, EdgeItem::Close { conn, reason, shed })
            }
            WireItem::AuthExpiry { conn, expires_at } => {
                (conn, EdgeItem::AuthExpiry { conn, expires_at })
            }
            WireItem::Moved { conn } => {
                let cause = MoveCause::OwnerStopping;
                (conn, EdgeItem::Moved { conn, cause })
            }
        };
        groups[(conn % shards as u64) as usize].push(item);
    }
    for (shard, items) in groups.into_iter().enumerate() {
        if items.is_empty() {
            continue;
        }
        let (Some(edge), Some(credit)) = (ctx.edges.get(shard), ctx.credits.get(shard)) else {
            continue;
        };
        credit.has_room().await;
        if let Err(unsent) = edge.send(ToEdge::new(items, credit)) {
            unsent.0.written();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::link::Credit;
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
                WireItem::Frames { conn, frame } => (*conn, *frame),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        // The edge node's own ids, in the owner's order.
        assert_eq!(sent, vec![(10, 0), (11, 0), (12, 1), (13, 0)]);
        batch.written();
    }
}
