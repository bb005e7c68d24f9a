//! Encoding [`LinkMessage`]s into frames (`codec`).

use std::net::IpAddr;

use bytes::{BufMut, Bytes, BytesMut};
use hearth_sync::ConnId;

use super::{
    cause_byte, AnswerHead, ConnMessages, EdgeItem, LinkItem, LinkMessage, Opening, RequestHead,
    Shipped, ToOwnerNode, ADDRESS_NONE, ADDRESS_V4, ADDRESS_V6, ANSWER, ANSWER_MORE, AUTH_EXPIRED,
    BATCH, CLOSED, HANDLED, ITEM_CLOSE, ITEM_EXPIRY, ITEM_FRAMES, ITEM_MOVED, MESSAGES, MOVED,
    OPEN, REPLICATE, REPLICA_ACK, REQUEST, REQUEST_MORE, STREAM_OPENED, STREAM_REQUEST,
};

impl LinkMessage {
    /// Appends the message as one frame (length prefix included) to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let start = out.len();
        out.put_u32(0);
        match self {
            LinkMessage::Open(opening) => put_open(out, opening),
            LinkMessage::Messages { messages, large } => put_messages(out, messages, *large),
            LinkMessage::AuthExpired { conn } => put_conn(out, AUTH_EXPIRED, *conn),
            LinkMessage::Closed { conn } => put_conn(out, CLOSED, *conn),
            LinkMessage::Moved { conn } => put_conn(out, MOVED, *conn),
            LinkMessage::Handled { conn } => put_conn(out, HANDLED, *conn),
            LinkMessage::Batch { frames, items } => put_batch(out, frames, items),
            LinkMessage::Request {
                id,
                head,
                body,
                more,
            } => {
                put_id(out, REQUEST, *id);
                put_request_head(out, head);
                put_chunk(out, body, *more);
            }
            LinkMessage::RequestMore { id, body, more } => {
                put_id(out, REQUEST_MORE, *id);
                put_chunk(out, body, *more);
            }
            LinkMessage::Answer {
                id,
                head,
                body,
                more,
            } => {
                put_id(out, ANSWER, *id);
                put_answer_head(out, head);
                put_chunk(out, body, *more);
            }
            LinkMessage::AnswerMore { id, body, more } => {
                put_id(out, ANSWER_MORE, *id);
                put_chunk(out, body, *more);
            }
            LinkMessage::StreamRequest { conn, head } => {
                put_conn(out, STREAM_REQUEST, *conn);
                put_request_head(out, head);
            }
            LinkMessage::StreamOpened { conn, refusal } => {
                put_stream_opened(out, *conn, refusal.as_ref());
            }
            LinkMessage::Replicate(shipped) => put_replicate(out, shipped),
            LinkMessage::ReplicaAck(ack) => put_replica_ack(out, ack),
        }
        let length = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&length.to_be_bytes());
    }
}

/// The fields of [`LinkMessage::Open`].
fn put_open(out: &mut BytesMut, opening: &Opening) {
    out.put_u8(OPEN);
    out.put_u64_le(opening.conn);
    put_str(out, &opening.namespace);
    put_str(out, &opening.session_id);
    for text in [&opening.previous, &opening.app_check] {
        match text {
            Some(text) => {
                out.put_u8(1);
                put_str(out, text);
            }
            None => out.put_u8(0),
        }
    }
    put_address(out, opening.address);
    out.put_u8(opening.transport.code());
}

/// The fields of [`LinkMessage::Messages`].
fn put_messages(out: &mut BytesMut, messages: &ConnMessages, large: bool) {
    out.put_u8(MESSAGES);
    out.put_u64_le(messages.conn);
    out.put_u8(u8::from(large));
    out.put_u32_le(messages.texts.len() as u32);
    for text in &messages.texts {
        put_str(out, text);
    }
}

/// The fields of [`LinkMessage::Batch`]: each frame, then the items that name them.
fn put_batch(out: &mut BytesMut, frames: &[Bytes], items: &[LinkItem]) {
    out.put_u8(BATCH);
    out.put_u32_le(frames.len() as u32);
    for frame in frames {
        out.put_u32_le(frame.len() as u32);
        out.put_slice(frame);
    }
    out.put_u32_le(items.len() as u32);
    for item in items {
        encode_item(item, out);
    }
}

/// The fields of [`LinkMessage::StreamOpened`].
fn put_stream_opened(out: &mut BytesMut, conn: ConnId, refusal: Option<&(AnswerHead, Bytes)>) {
    put_conn(out, STREAM_OPENED, conn);
    match refusal {
        Some((head, body)) => {
            out.put_u8(1);
            put_answer_head(out, head);
            put_chunk(out, body, false);
        }
        None => out.put_u8(0),
    }
}

/// The fields of [`LinkMessage::Replicate`].
fn put_replicate(out: &mut BytesMut, shipped: &Shipped) {
    out.put_u8(REPLICATE);
    out.put_u32_le(shipped.shard);
    out.put_u64_le(shipped.seq);
    put_str(out, &shipped.namespace);
    out.put_u8(u8::from(shipped.reset));
    out.put_u32_le(shipped.records.len() as u32);
    out.put_slice(&shipped.records);
}

/// The fields of [`LinkMessage::ReplicaAck`].
fn put_replica_ack(out: &mut BytesMut, ack: &ToOwnerNode) {
    out.put_u8(REPLICA_ACK);
    out.put_u32_le(ack.shard);
    out.put_u32_le(ack.seqs.len() as u32);
    for seq in &ack.seqs {
        out.put_u64_le(*seq);
    }
}

fn encode_item(item: &LinkItem, out: &mut BytesMut) {
    match item {
        EdgeItem::Frames { conn, frames } => {
            put_conn(out, ITEM_FRAMES, *conn);
            out.put_u32_le(*frames);
        }
        EdgeItem::Close { conn, reason, shed } => {
            put_conn(out, ITEM_CLOSE, *conn);
            out.put_u16_le(reason.code.into());
            put_str(out, &reason.text);
            out.put_u8(u8::from(*shed));
        }
        EdgeItem::AuthExpiry { conn, expires_at } => {
            put_conn(out, ITEM_EXPIRY, *conn);
            match expires_at {
                Some(at) => {
                    out.put_u8(1);
                    out.put_u64_le(*at);
                }
                None => out.put_u8(0),
            }
        }
        EdgeItem::Moved { conn, cause } => {
            put_conn(out, ITEM_MOVED, *conn);
            out.put_u8(cause_byte(*cause));
        }
    }
}

fn put_conn(out: &mut BytesMut, tag: u8, conn: ConnId) {
    out.put_u8(tag);
    out.put_u64_le(conn);
}

fn put_id(out: &mut BytesMut, tag: u8, id: u64) {
    out.put_u8(tag);
    out.put_u64_le(id);
}

fn put_headers(out: &mut BytesMut, headers: &[(String, String)]) {
    out.put_u32_le(headers.len() as u32);
    for (name, value) in headers {
        put_str(out, name);
        put_str(out, value);
    }
}

fn put_request_head(out: &mut BytesMut, head: &RequestHead) {
    put_str(out, &head.method);
    put_str(out, &head.target);
    put_headers(out, &head.headers);
    put_address(out, head.address);
}

fn put_answer_head(out: &mut BytesMut, head: &AnswerHead) {
    out.put_u16_le(head.status);
    put_headers(out, &head.headers);
}

fn put_chunk(out: &mut BytesMut, body: &Bytes, more: bool) {
    out.put_u32_le(body.len() as u32);
    out.put_slice(body);
    out.put_u8(u8::from(more));
}

/// A client's address: its form's byte ([`ADDRESS_NONE`], [`ADDRESS_V4`] or [`ADDRESS_V6`]),
/// then its 0, 4 or 16 bytes in network order.
fn put_address(out: &mut BytesMut, address: Option<IpAddr>) {
    match address {
        None => out.put_u8(ADDRESS_NONE),
        Some(IpAddr::V4(v4)) => {
            out.put_u8(ADDRESS_V4);
            out.put_slice(&v4.octets());
        }
        Some(IpAddr::V6(v6)) => {
            out.put_u8(ADDRESS_V6);
            out.put_slice(&v6.octets());
        }
    }
}

fn put_str(out: &mut BytesMut, text: &str) {
    out.put_u32_le(text.len() as u32);
    out.put_slice(text.as_bytes());
}
