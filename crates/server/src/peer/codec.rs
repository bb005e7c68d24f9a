//! The bytes of the node-to-node link. Each message is one frame: a 4-byte big-endian length,
//! then a tag byte and the message's fields (integers little-endian, strings and byte runs
//! with a 4-byte length). Hand-written rather than a serde format, because the batch of
//! pushes for a node must carry each frame once however many of its connections get it, and
//! the receiving node must hand those frames to its sockets without copying them: decoded
//! frames are slices of the received buffer ([`Bytes`]). Decoding trusts nothing: every
//! length is checked against what is left, and nothing is allocated beyond the frame.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hearth_sync::ConnId;

/// The largest frame either side accepts: a batch leaves in frames of about
/// `link::MAX_LINK_BYTES / 8`, but one push alone may be larger (a listen's first data). A
/// push larger than this closes its connection instead of crossing.
pub const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// The most room made ahead of a frame's announced bytes before they arrive.
const READ_AHEAD_BYTES: usize = 64 * 1024;

/// Connection ids a node sends are below this: an owner node keeps the bits above for the
/// sending node's index (`peer::ids`).
pub const MAX_WIRE_CONN: ConnId = 1 << 48;

/// One message over the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkMessage {
    /// Edge to owner: a connection opened (`ToOwner::Open`).
    Open {
        conn: ConnId,
        namespace: String,
        session_id: String,
        previous: Option<String>,
    },
    /// Edge to owner: whole messages of a connection; `large` asks for [`LinkMessage::Handled`]
    /// once the last is handled (the edge reads nothing more of it until then).
    Messages {
        conn: ConnId,
        texts: Vec<String>,
        large: bool,
    },
    /// Edge to owner: the connection's credential expired by the edge's clock.
    AuthExpired { conn: ConnId },
    /// Edge to owner: the connection is gone.
    Closed { conn: ConnId },
    /// Edge to owner: the connection stays, but its session moves to another owner: it ends
    /// here without running its onDisconnect queue (the edge replays that queue there).
    Moved { conn: ConnId },
    /// Owner to edge: the large message of `conn` is handled.
    Handled { conn: ConnId },
    /// Owner to edge: what the owner's shards released for the node's connections, in order;
    /// every frame once, the items naming it by index.
    Batch {
        frames: Vec<Bytes>,
        items: Vec<WireItem>,
    },
    /// Edge to owner: a REST request for a database the owner holds (`peer::forward`), its
    /// head as received and the first [`MAX_CHUNK_BYTES`] of its body; `more` says that
    /// [`LinkMessage::RequestMore`] frames follow with the rest.
    Request {
        id: u64,
        head: RequestHead,
        body: Bytes,
        more: bool,
    },
    /// Edge to owner: more of request `id`'s body.
    RequestMore { id: u64, body: Bytes, more: bool },
    /// Owner to edge: the answer to request `id`, with the first part of its body.
    Answer {
        id: u64,
        head: AnswerHead,
        body: Bytes,
        more: bool,
    },
    /// Owner to edge: more of answer `id`'s body.
    AnswerMore { id: u64, body: Bytes, more: bool },
    /// Edge to owner: an event stream opened on connection `conn` (`Accept:
    /// text/event-stream`); its events come back in batches, and it ends with
    /// [`LinkMessage::Closed`] or a batch's close, like a WebSocket session.
    OpenStream { conn: ConnId, head: RequestHead },
    /// Owner to edge: the stream of `conn` is open, or the answer that refused it.
    StreamOpened {
        conn: ConnId,
        refusal: Option<(AnswerHead, Bytes)>,
    },
    /// Owner to follower (`replica`): log records of database `namespace` from owner shard
    /// `shard`, in the byte form of the log (`hearth_store::encode_record`, checksummed);
    /// `seq` is the owner shard's sequence number the follower acknowledges. `reset`: the
    /// records are a full copy (rules, then the whole tree) that replaces the follower's.
    Replicate {
        shard: u32,
        seq: u64,
        namespace: String,
        reset: bool,
        records: Bytes,
    },
    /// Follower to owner: these records of owner shard `shard` are on the follower's disk.
    ReplicaAck { shard: u32, seqs: Vec<u64> },
}

/// An HTTP request's head as the edge node received it (UTF-8 header values only: the REST
/// parser ignores the others): the owner node parses it exactly as one of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHead {
    pub method: String,
    /// The path and query.
    pub target: String,
    pub headers: Vec<(String, String)>,
}

/// An answer's status and every header the owner would have sent itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AnswerHead {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

/// The most bytes of a forwarded head (the target, or the status, and every header name and
/// value): above hyper's 64 KiB read buffer, which bounds a request head the edge accepts.
pub const MAX_HEAD_BYTES: usize = 96 * 1024;

/// The most header fields of a forwarded head (the edge accepts 64).
pub const MAX_HEAD_FIELDS: usize = 128;

/// The most body bytes one REST frame carries: a large request or answer crosses in frames
/// of this size, taking turns with the link's other messages, so that it delays them by at
/// most one such frame.
pub const MAX_CHUNK_BYTES: usize = 256 * 1024;

impl RequestHead {
    /// Whether the head is within the decoder's limits.
    pub fn fits(&self) -> bool {
        fits(self.method.len() + self.target.len(), &self.headers)
    }
}

impl AnswerHead {
    /// Whether the head is within the decoder's limits.
    pub fn fits(&self) -> bool {
        fits(2, &self.headers)
    }
}

fn fits(fixed: usize, headers: &[(String, String)]) -> bool {
    let bytes: usize = headers.iter().map(|(n, v)| n.len() + v.len()).sum();
    headers.len() <= MAX_HEAD_FIELDS && fixed + bytes <= MAX_HEAD_BYTES
}

/// The most sequence numbers one acknowledgement carries; a follower sends more as several.
pub const MAX_ACKS_PER_MESSAGE: usize = 64 * 1024;

/// One thing the edge node must do for one of its connections (`link::EdgeItem`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireItem {
    Frames {
        conn: ConnId,
        frame: u32,
    },
    Close {
        conn: ConnId,
        code: u16,
        text: String,
        shed: bool,
    },
    AuthExpiry {
        conn: ConnId,
        expires_at: Option<u64>,
    },
    /// The owner's node is stopping: the edge moves the connection's session to the next
    /// owner (or closes it).
    Moved {
        conn: ConnId,
    },
}

/// Why a frame could not be decoded: the peer is broken or hostile, and the link is dropped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("the frame ends early")]
    Truncated,
    #[error("unknown message tag {0}")]
    Tag(u8),
    #[error("a string is not UTF-8")]
    Utf8,
    #[error("a connection id is out of range")]
    Conn,
    #[error("an item names a frame the batch does not hold")]
    FrameIndex,
    #[error("{0} bytes left over after the message")]
    Trailing(usize),
    #[error("a frame of {0} bytes is larger than the limit")]
    TooLarge(usize),
    #[error("a forwarded head is larger than the limit")]
    Head,
    #[error("a body chunk of {0} bytes is larger than the limit")]
    Chunk(usize),
    #[error("a replicated database name is too long")]
    Namespace,
    #[error("an acknowledgement carries more than {MAX_ACKS_PER_MESSAGE} records")]
    TooManyAcks,
}

const OPEN: u8 = 1;
const MESSAGES: u8 = 2;
const AUTH_EXPIRED: u8 = 3;
const CLOSED: u8 = 4;
const HANDLED: u8 = 5;
const BATCH: u8 = 6;
// Forwarded REST and event streams: a range of their own, apart from other kinds.
const REQUEST: u8 = 20;
const REQUEST_MORE: u8 = 21;
const ANSWER: u8 = 22;
const ANSWER_MORE: u8 = 23;
const OPEN_STREAM: u8 = 24;
const STREAM_OPENED: u8 = 25;
const REPLICATE: u8 = 7;
const REPLICA_ACK: u8 = 8;
const MOVED: u8 = 9;

const ITEM_FRAMES: u8 = 1;
const ITEM_CLOSE: u8 = 2;
const ITEM_EXPIRY: u8 = 3;
const ITEM_MOVED: u8 = 4;

impl LinkMessage {
    /// Appends the message as one frame (length prefix included) to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let start = out.len();
        out.put_u32(0);
        match self {
            LinkMessage::Open {
                conn,
                namespace,
                session_id,
                previous,
            } => {
                out.put_u8(OPEN);
                out.put_u64_le(*conn);
                put_str(out, namespace);
                put_str(out, session_id);
                match previous {
                    Some(previous) => {
                        out.put_u8(1);
                        put_str(out, previous);
                    }
                    None => out.put_u8(0),
                }
            }
            LinkMessage::Messages { conn, texts, large } => {
                out.put_u8(MESSAGES);
                out.put_u64_le(*conn);
                out.put_u8(u8::from(*large));
                out.put_u32_le(texts.len() as u32);
                for text in texts {
                    put_str(out, text);
                }
            }
            LinkMessage::AuthExpired { conn } => put_conn(out, AUTH_EXPIRED, *conn),
            LinkMessage::Closed { conn } => put_conn(out, CLOSED, *conn),
            LinkMessage::Moved { conn } => put_conn(out, MOVED, *conn),
            LinkMessage::Handled { conn } => put_conn(out, HANDLED, *conn),
            LinkMessage::Batch { frames, items } => {
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
            LinkMessage::OpenStream { conn, head } => {
                put_conn(out, OPEN_STREAM, *conn);
                put_request_head(out, head);
            }
            LinkMessage::StreamOpened { conn, refusal } => {
                put_conn(out, STREAM_OPENED, *conn);
                match refusal {
                    Some((head, body)) => {
                        out.put_u8(1);
                        put_answer_head(out, head);
                        put_chunk(out, body, false);
                    }
                    None => out.put_u8(0),
                }
            }
            LinkMessage::Replicate {
                shard,
                seq,
                namespace,
                reset,
                records,
            } => {
                out.put_u8(REPLICATE);
                out.put_u32_le(*shard);
                out.put_u64_le(*seq);
                put_str(out, namespace);
                out.put_u8(u8::from(*reset));
                out.put_u32_le(records.len() as u32);
                out.put_slice(records);
            }
            LinkMessage::ReplicaAck { shard, seqs } => {
                out.put_u8(REPLICA_ACK);
                out.put_u32_le(*shard);
                out.put_u32_le(seqs.len() as u32);
                for seq in seqs {
                    out.put_u64_le(*seq);
                }
            }
        }
        let length = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&length.to_be_bytes());
    }

    /// Decodes one frame's body (without its length prefix).
    pub fn decode(mut body: Bytes) -> Result<LinkMessage, DecodeError> {
        let body = &mut body;
        let message = match get_u8(body)? {
            OPEN => LinkMessage::Open {
                conn: get_conn(body)?,
                namespace: get_str(body)?,
                session_id: get_str(body)?,
                previous: match get_u8(body)? {
                    0 => None,
                    _ => Some(get_str(body)?),
                },
            },
            MESSAGES => {
                let conn = get_conn(body)?;
                let large = get_u8(body)? != 0;
                let count = get_u32(body)? as usize;
                // Each text takes at least its 4-byte length.
                let mut texts = Vec::with_capacity(count.min(body.remaining() / 4));
                for _ in 0..count {
                    texts.push(get_str(body)?);
                }
                LinkMessage::Messages { conn, texts, large }
            }
            AUTH_EXPIRED => LinkMessage::AuthExpired {
                conn: get_conn(body)?,
            },
            CLOSED => LinkMessage::Closed {
                conn: get_conn(body)?,
            },
            MOVED => LinkMessage::Moved {
                conn: get_conn(body)?,
            },
            HANDLED => LinkMessage::Handled {
                conn: get_conn(body)?,
            },
            BATCH => {
                let count = get_u32(body)? as usize;
                let mut frames = Vec::with_capacity(count.min(body.remaining() / 4));
                for _ in 0..count {
                    frames.push(get_bytes(body)?);
                }
                let count = get_u32(body)? as usize;
                // Each item takes at least a tag and a connection id.
                let mut items = Vec::with_capacity(count.min(body.remaining() / 9));
                for _ in 0..count {
                    items.push(decode_item(body, frames.len())?);
                }
                LinkMessage::Batch { frames, items }
            }
            REQUEST => {
                let id = get_u64(body)?;
                let head = get_request_head(body)?;
                let (body, more) = get_chunk(body)?;
                LinkMessage::Request {
                    id,
                    head,
                    body,
                    more,
                }
            }
            REQUEST_MORE => {
                let id = get_u64(body)?;
                let (body, more) = get_chunk(body)?;
                LinkMessage::RequestMore { id, body, more }
            }
            ANSWER => {
                let id = get_u64(body)?;
                let head = get_answer_head(body)?;
                let (body, more) = get_chunk(body)?;
                LinkMessage::Answer {
                    id,
                    head,
                    body,
                    more,
                }
            }
            ANSWER_MORE => {
                let id = get_u64(body)?;
                let (body, more) = get_chunk(body)?;
                LinkMessage::AnswerMore { id, body, more }
            }
            OPEN_STREAM => LinkMessage::OpenStream {
                conn: get_conn(body)?,
                head: get_request_head(body)?,
            },
            STREAM_OPENED => {
                let conn = get_conn(body)?;
                let refusal = match get_u8(body)? {
                    0 => None,
                    _ => {
                        let head = get_answer_head(body)?;
                        Some((head, get_chunk(body)?.0))
                    }
                };
                LinkMessage::StreamOpened { conn, refusal }
            }
            REPLICATE => {
                let shard = get_u32(body)?;
                let seq = get_u64(body)?;
                let namespace = get_str(body)?;
                if namespace.len() > hearth_store::MAX_DATABASE_NAME_BYTES {
                    return Err(DecodeError::Namespace);
                }
                LinkMessage::Replicate {
                    shard,
                    seq,
                    namespace,
                    reset: get_u8(body)? != 0,
                    records: get_bytes(body)?,
                }
            }
            REPLICA_ACK => {
                let shard = get_u32(body)?;
                let count = get_u32(body)? as usize;
                if count > MAX_ACKS_PER_MESSAGE {
                    return Err(DecodeError::TooManyAcks);
                }
                let mut seqs = Vec::with_capacity(count.min(body.remaining() / 8));
                for _ in 0..count {
                    seqs.push(get_u64(body)?);
                }
                LinkMessage::ReplicaAck { shard, seqs }
            }
            tag => return Err(DecodeError::Tag(tag)),
        };
        match body.remaining() {
            0 => Ok(message),
            left => Err(DecodeError::Trailing(left)),
        }
    }
}

/// Takes one whole frame's body off the front of `buffer`, if it holds one.
pub fn split_frame(buffer: &mut BytesMut) -> Result<Option<Bytes>, DecodeError> {
    let Some(prefix) = buffer.get(..4) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if length > MAX_FRAME_BYTES {
        return Err(DecodeError::TooLarge(length));
    }
    if buffer.len() < 4 + length {
        // Room grows with the bytes that arrive, never ahead of them on the peer's word.
        buffer.reserve((4 + length - buffer.len()).min(READ_AHEAD_BYTES));
        return Ok(None);
    }
    buffer.advance(4);
    Ok(Some(buffer.split_to(length).freeze()))
}

fn encode_item(item: &WireItem, out: &mut BytesMut) {
    match item {
        WireItem::Frames { conn, frame } => {
            put_conn(out, ITEM_FRAMES, *conn);
            out.put_u32_le(*frame);
        }
        WireItem::Close {
            conn,
            code,
            text,
            shed,
        } => {
            put_conn(out, ITEM_CLOSE, *conn);
            out.put_u16_le(*code);
            put_str(out, text);
            out.put_u8(u8::from(*shed));
        }
        WireItem::AuthExpiry { conn, expires_at } => {
            put_conn(out, ITEM_EXPIRY, *conn);
            match expires_at {
                Some(at) => {
                    out.put_u8(1);
                    out.put_u64_le(*at);
                }
                None => out.put_u8(0),
            }
        }
        WireItem::Moved { conn } => put_conn(out, ITEM_MOVED, *conn),
    }
}

fn decode_item(body: &mut Bytes, frames: usize) -> Result<WireItem, DecodeError> {
    let tag = get_u8(body)?;
    let conn = get_conn(body)?;
    Ok(match tag {
        ITEM_FRAMES => {
            let frame = get_u32(body)?;
            if frame as usize >= frames {
                return Err(DecodeError::FrameIndex);
            }
            WireItem::Frames { conn, frame }
        }
        ITEM_CLOSE => WireItem::Close {
            conn,
            code: get_u16(body)?,
            text: get_str(body)?,
            shed: get_u8(body)? != 0,
        },
        ITEM_EXPIRY => WireItem::AuthExpiry {
            conn,
            expires_at: match get_u8(body)? {
                0 => None,
                _ => Some(get_u64(body)?),
            },
        },
        ITEM_MOVED => WireItem::Moved { conn },
        tag => return Err(DecodeError::Tag(tag)),
    })
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

fn put_str(out: &mut BytesMut, text: &str) {
    out.put_u32_le(text.len() as u32);
    out.put_slice(text.as_bytes());
}

fn need(body: &Bytes, bytes: usize) -> Result<(), DecodeError> {
    if body.remaining() < bytes {
        return Err(DecodeError::Truncated);
    }
    Ok(())
}

fn get_u8(body: &mut Bytes) -> Result<u8, DecodeError> {
    need(body, 1)?;
    Ok(body.get_u8())
}

fn get_u16(body: &mut Bytes) -> Result<u16, DecodeError> {
    need(body, 2)?;
    Ok(body.get_u16_le())
}

fn get_u32(body: &mut Bytes) -> Result<u32, DecodeError> {
    need(body, 4)?;
    Ok(body.get_u32_le())
}

fn get_u64(body: &mut Bytes) -> Result<u64, DecodeError> {
    need(body, 8)?;
    Ok(body.get_u64_le())
}

fn get_conn(body: &mut Bytes) -> Result<ConnId, DecodeError> {
    let conn = get_u64(body)?;
    if conn >= MAX_WIRE_CONN {
        return Err(DecodeError::Conn);
    }
    Ok(conn)
}

fn get_bytes(body: &mut Bytes) -> Result<Bytes, DecodeError> {
    let length = get_u32(body)? as usize;
    need(body, length)?;
    Ok(body.split_to(length))
}

/// Header fields within [`MAX_HEAD_FIELDS`] and, with `fixed` bytes already in the head,
/// [`MAX_HEAD_BYTES`].
fn get_headers(body: &mut Bytes, fixed: usize) -> Result<Vec<(String, String)>, DecodeError> {
    let count = get_u32(body)? as usize;
    if count > MAX_HEAD_FIELDS {
        return Err(DecodeError::Head);
    }
    let mut bytes = fixed;
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let name = get_str(body)?;
        let value = get_str(body)?;
        bytes += name.len() + value.len();
        if bytes > MAX_HEAD_BYTES {
            return Err(DecodeError::Head);
        }
        headers.push((name, value));
    }
    Ok(headers)
}

fn get_request_head(body: &mut Bytes) -> Result<RequestHead, DecodeError> {
    let method = get_str(body)?;
    let target = get_str(body)?;
    let headers = get_headers(body, method.len() + target.len())?;
    if method.len() + target.len() > MAX_HEAD_BYTES {
        return Err(DecodeError::Head);
    }
    Ok(RequestHead {
        method,
        target,
        headers,
    })
}

fn get_answer_head(body: &mut Bytes) -> Result<AnswerHead, DecodeError> {
    let status = get_u16(body)?;
    let headers = get_headers(body, 2)?;
    Ok(AnswerHead { status, headers })
}

fn get_chunk(body: &mut Bytes) -> Result<(Bytes, bool), DecodeError> {
    let chunk = get_bytes(body)?;
    if chunk.len() > MAX_CHUNK_BYTES {
        return Err(DecodeError::Chunk(chunk.len()));
    }
    Ok((chunk, get_u8(body)? != 0))
}

fn get_str(body: &mut Bytes) -> Result<String, DecodeError> {
    let bytes = get_bytes(body)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Utf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_message() -> Vec<LinkMessage> {
        vec![
            LinkMessage::Open {
                conn: 7,
                namespace: "demo".into(),
                session_id: "s1".into(),
                previous: Some("s0".into()),
            },
            LinkMessage::Open {
                conn: MAX_WIRE_CONN - 1,
                namespace: "é".into(),
                session_id: String::new(),
                previous: None,
            },
            LinkMessage::Messages {
                conn: 1,
                texts: vec!["{\"t\":\"d\"}".into(), String::new()],
                large: true,
            },
            LinkMessage::Messages {
                conn: 2,
                texts: Vec::new(),
                large: false,
            },
            LinkMessage::AuthExpired { conn: 3 },
            LinkMessage::Closed { conn: 4 },
            LinkMessage::Moved { conn: 6 },
            LinkMessage::Handled { conn: 5 },
            LinkMessage::Batch {
                frames: vec![Bytes::from_static(b"push"), Bytes::new()],
                items: vec![
                    WireItem::Frames { conn: 1, frame: 0 },
                    WireItem::Frames { conn: 2, frame: 0 },
                    WireItem::Frames { conn: 2, frame: 1 },
                    WireItem::Close {
                        conn: 3,
                        code: 1008,
                        text: "slow".into(),
                        shed: true,
                    },
                    WireItem::AuthExpiry {
                        conn: 1,
                        expires_at: Some(1_800_000_000),
                    },
                    WireItem::AuthExpiry {
                        conn: 2,
                        expires_at: None,
                    },
                    WireItem::Moved { conn: 4 },
                ],
            },
            LinkMessage::Request {
                id: u64::MAX,
                head: RequestHead {
                    method: "PUT".into(),
                    target: "/a/b.json?ns=demo&print=silent".into(),
                    headers: vec![("if-match".into(), "\"abc\"".into())],
                },
                body: Bytes::from_static(b"{\"x\":1}"),
                more: true,
            },
            LinkMessage::RequestMore {
                id: 1,
                body: Bytes::new(),
                more: false,
            },
            LinkMessage::Answer {
                id: 2,
                head: AnswerHead {
                    status: 412,
                    headers: vec![("etag".into(), "x".into())],
                },
                body: Bytes::from_static(b"null"),
                more: false,
            },
            LinkMessage::AnswerMore {
                id: 3,
                body: Bytes::from_static(b"tail"),
                more: true,
            },
            LinkMessage::OpenStream {
                conn: 9,
                head: RequestHead::default(),
            },
            LinkMessage::StreamOpened {
                conn: 9,
                refusal: None,
            },
            LinkMessage::StreamOpened {
                conn: 10,
                refusal: Some((AnswerHead::default(), Bytes::from_static(b"no"))),
            },
            LinkMessage::Replicate {
                shard: 1,
                seq: 42,
                namespace: "demo".into(),
                reset: true,
                records: Bytes::from_static(b"records"),
            },
            LinkMessage::ReplicaAck {
                shard: 0,
                seqs: vec![3, 5, u64::MAX],
            },
        ]
    }

    #[test]
    fn every_message_round_trips_through_a_stream() {
        let messages = every_message();
        let mut out = BytesMut::new();
        for message in &messages {
            message.encode(&mut out);
        }
        // Fed a byte at a time, as a socket may deliver it.
        let mut buffer = BytesMut::new();
        let mut decoded = Vec::new();
        for byte in out.iter() {
            buffer.put_u8(*byte);
            while let Some(body) = split_frame(&mut buffer).expect("frame") {
                decoded.push(LinkMessage::decode(body).expect("decodes"));
            }
        }
        assert_eq!(decoded, messages);
        assert!(buffer.is_empty());
    }

    #[test]
    fn every_cut_short_message_is_refused() {
        for message in every_message() {
            let mut out = BytesMut::new();
            message.encode(&mut out);
            let body = out.split_off(4).freeze();
            for end in 0..body.len() {
                assert!(
                    LinkMessage::decode(body.slice(..end)).is_err(),
                    "{message:?} at {end}"
                );
            }
        }
    }

    #[test]
    fn hostile_frames_are_refused() {
        let mut buffer = BytesMut::from(&((MAX_FRAME_BYTES as u32 + 1).to_be_bytes())[..]);
        assert!(split_frame(&mut buffer).is_err());
        // The largest frame announced: room is made as its bytes come, not at once.
        let mut buffer = BytesMut::from(&((MAX_FRAME_BYTES as u32).to_be_bytes())[..]);
        assert_eq!(split_frame(&mut buffer), Ok(None));
        assert!(buffer.capacity() <= 1024 * 1024, "{}", buffer.capacity());
        let batch = LinkMessage::Batch {
            frames: Vec::new(),
            items: vec![WireItem::Frames { conn: 1, frame: 0 }],
        };
        let mut out = BytesMut::new();
        batch.encode(&mut out);
        let body = out.split_off(4).freeze();
        assert_eq!(LinkMessage::decode(body), Err(DecodeError::FrameIndex));
        let mut out = BytesMut::new();
        LinkMessage::Closed { conn: 1 }.encode(&mut out);
        out[5..13].copy_from_slice(&MAX_WIRE_CONN.to_le_bytes());
        assert_eq!(
            LinkMessage::decode(out.split_off(4).freeze()),
            Err(DecodeError::Conn)
        );
    }

    #[test]
    fn forwarded_heads_and_chunks_are_bounded() {
        let decode = |message: LinkMessage| {
            let mut out = BytesMut::new();
            message.encode(&mut out);
            LinkMessage::decode(out.split_off(4).freeze())
        };
        let field = ("x".to_owned(), String::new());
        let many = RequestHead {
            headers: vec![field; MAX_HEAD_FIELDS + 1],
            ..RequestHead::default()
        };
        assert!(!many.fits());
        let open = |head| LinkMessage::OpenStream { conn: 1, head };
        assert_eq!(decode(open(many)), Err(DecodeError::Head));
        let long = RequestHead {
            headers: vec![("v".into(), "x".repeat(MAX_HEAD_BYTES))],
            ..RequestHead::default()
        };
        assert!(!long.fits());
        assert_eq!(decode(open(long)), Err(DecodeError::Head));
        let body = Bytes::from(vec![0; MAX_CHUNK_BYTES + 1]);
        let more = LinkMessage::AnswerMore {
            id: 1,
            body,
            more: false,
        };
        assert_eq!(decode(more), Err(DecodeError::Chunk(MAX_CHUNK_BYTES + 1)));
    }
}
