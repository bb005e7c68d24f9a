//! The reader of one live connection of a node link (`session`): it takes the peer's frames
//! one at a time and carries each out, as the owner of the sessions of the peer's
//! connections or as the edge of connections of ours. It takes the next frame only once the
//! local owners have room for a frame's messages and the edges credit for its batch.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use hearth_sync::ConnId;
use tokio::io::{AsyncReadExt, ReadHalf};
use tokio::sync::{mpsc, oneshot};

use crate::codec::{split_frame, LinkItem, LinkMessage};
use crate::context::{Context, RemoteAnswer, Reply};
use crate::forward;
use crate::link_tls::LinkStream;
use crate::nodes::remote_conn;
use hearth_ground::cross_core::{ConnMessages, EdgeItem, Opening, ToEdge, ToOwner, MAX_LINK_BYTES};
use hearth_ground::inbox::ShardMessage;
use hearth_ground::namespace::owner_shard;
use hearth_ground::replica_messages::ReplicaIn;

/// Reads the peer's frames until the connection ends; the error says why.
pub(super) async fn read_loop(
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
    match message {
        LinkMessage::Open(opening) => open(ctx, opening),
        LinkMessage::Messages { messages, large } => {
            on_messages(ctx, messages, large, replies).await;
        }
        LinkMessage::AuthExpired { conn } => {
            if let Some(shard) = ctx.state.borrow().sessions.get(&conn).copied() {
                let conn = remote_conn(ctx.node, conn);
                to_owner(ctx, shard, ToOwner::AuthExpired { conn });
            }
        }
        LinkMessage::Closed { conn } => end_session(ctx, conn, |conn| ToOwner::Closed { conn }),
        LinkMessage::Moved { conn } => end_session(ctx, conn, |conn| ToOwner::Moved { conn }),
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
        LinkMessage::StreamRequest { conn, head } => {
            forward::on_stream_request(ctx, conn, head, replies)
        }
        LinkMessage::StreamOpened { conn, refusal } => {
            let refusal = refusal.map(|(head, body)| RemoteAnswer { head, body });
            forward::on_stream_opened(ctx, conn, refusal);
        }
        LinkMessage::Replicate(shipped) => {
            let local = owner_shard(&shipped.namespace, ctx.owners.len());
            let message = ReplicaIn::Records {
                from: ctx.node,
                shipped,
            };
            to_replica(ctx, local, message);
        }
        LinkMessage::ReplicaAck(ack) => {
            let message = ReplicaIn::Ack {
                from: ctx.node,
                seqs: ack.seqs,
            };
            to_replica(ctx, ack.shard as usize, message);
        }
    }
    Ok(())
}

/// Hands a message of the peer's connections to the local owner `shard`.
fn to_owner(ctx: &Context, shard: usize, message: ToOwner) {
    if let Some(owner) = ctx.owners.get(shard) {
        let _ = owner.send(ShardMessage::Owner(message));
    }
}

/// Hands replication's message to the local shard `shard`.
fn to_replica(ctx: &Context, shard: usize, message: ReplicaIn) {
    if let Some(owner) = ctx.owners.get(shard) {
        let _ = owner.send(ShardMessage::Replica(message));
    }
}

/// Opens a session of the peer's connection on the local owner of its database, under the
/// id that tells it from the connections of other nodes.
fn open(ctx: &Context, mut opening: Opening) {
    let shards = ctx.owners.len();
    let shard = owner_shard(&opening.namespace, shards);
    ctx.state.borrow_mut().sessions.insert(opening.conn, shard);
    opening.conn = remote_conn(ctx.node, opening.conn);
    let open = ToOwner::Open {
        // The peer is one more edge of every local owner, after the local shards.
        edge: shards + ctx.node,
        opening,
    };
    to_owner(ctx, shard, open);
}

/// Hands whole messages of the peer's connection `conn` to its session's owner, once the
/// local owners have room for them.
async fn on_messages(
    ctx: &Context,
    messages: ConnMessages,
    large: bool,
    replies: &mpsc::UnboundedSender<Reply>,
) {
    let Some(shard) = ctx.state.borrow().sessions.get(&messages.conn).copied() else {
        return;
    };
    let bytes: usize = messages.texts.iter().map(String::len).sum();
    let bytes = bytes.clamp(1, MAX_LINK_BYTES) as u32;
    // Nothing more is read from the peer until the local owners have room.
    let Ok(room) = ctx.owner_room.clone().acquire_many_owned(bytes).await else {
        return;
    };
    let done = large.then(|| handled_signal(replies, messages.conn));
    let messages = ConnMessages {
        conn: remote_conn(ctx.node, messages.conn),
        texts: messages.texts,
    };
    to_owner(
        ctx,
        shard,
        ToOwner::Messages {
            messages,
            done,
            room,
        },
    );
}

/// Ends the session of the peer's connection `conn` on its owner with the message `end`
/// makes (the connection closed, or its session moves).
fn end_session(ctx: &Context, conn: ConnId, end: fn(ConnId) -> ToOwner) {
    if let Some(shard) = ctx.state.borrow_mut().sessions.remove(&conn) {
        let conn = remote_conn(ctx.node, conn);
        to_owner(ctx, shard, end(conn));
    }
}

/// What the owner drops, unsent, once it handled the large message of the peer's connection
/// `conn`: the peer is told, and reads that connection on.
fn handled_signal(replies: &mpsc::UnboundedSender<Reply>, conn: ConnId) -> oneshot::Sender<()> {
    let (done, finished) = oneshot::channel::<()>();
    let replies = replies.clone();
    tokio::task::spawn_local(async move {
        // Dropped, unsent, once the owner handled the message.
        let _ = finished.await;
        let _ = replies.send(Reply::Handled(conn));
    });
    done
}

/// Hands the owner's batch to the local shards that hold its connections (a connection's id
/// names its shard), in order, each once it has room.
async fn on_batch(ctx: &Context, frames: &[Bytes], items: Vec<LinkItem>) {
    let shards = ctx.edges.len().max(1);
    let mut groups: Vec<Vec<EdgeItem>> = (0..shards).map(|_| Vec::new()).collect();
    for item in items {
        // The decoder checked each frame's index.
        let Some(item) = item.map_frames(|conn| conn, |frame| frames.get(frame as usize).cloned())
        else {
            continue;
        };
        let conn = item.conn();
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
