//! The bytes of the node-to-node link. Each message is one frame: a 4-byte big-endian length,
//! then a tag byte and the message's fields (integers little-endian, strings and byte runs
//! with a 4-byte length). Hand-written rather than a serde format, because the batch of
//! pushes for a node must carry each frame once however many of its connections get it, and
//! the receiving node must hand those frames to its sockets without copying them: decoded
//! frames are slices of the received buffer ([`Bytes`]). Decoding trusts nothing: every
//! length is checked against what is left, and nothing is allocated beyond the frame.

use std::net::IpAddr;

use bytes::{Buf, Bytes, BytesMut};
pub use hearth_ground::cross_core::{
    ConnMessages, EdgeItem, MoveCause, Opening, RealtimeTransport,
};
pub use hearth_ground::replica_messages::{Shipped, ToOwnerNode};
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
    Open(Opening),
    /// Edge to owner: whole messages of a connection (`ToOwner::Messages`); `large` asks for
    /// [`LinkMessage::Handled`] once the last is handled (the edge reads nothing more of it
    /// until then): the wire form of the cross-core message's completion signal.
    Messages { messages: ConnMessages, large: bool },
    /// Edge to owner: the connection's credential expired by the edge's clock.
    AuthExpired { conn: ConnId },
    /// Edge to owner: the connection is gone.
    Closed { conn: ConnId },
    /// Edge to owner: the connection stays, but its session moves to another owner: it ends
    /// here without running its onDisconnect queue (the edge replays that queue there).
    Moved { conn: ConnId },
    /// Owner to edge: the large message of `conn` is handled.
    Handled { conn: ConnId },
    /// Owner to edge: what the owner's shards released for the node's connections, in order
    /// (`ToEdge`'s items); every frame once, the items naming it by index.
    Batch {
        frames: Vec<Bytes>,
        items: Vec<LinkItem>,
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
    /// Edge to owner: an event stream's request (`Accept: text/event-stream`) on connection
    /// `conn`, its head as received. Like [`LinkMessage::Request`], HTTP crosses nodes as
    /// received: the owner node parses and authenticates it as one of its own, and what that
    /// makes there is the cross-core `ToOwner::OpenStream`. Its events come back in batches,
    /// and it ends with [`LinkMessage::Closed`] or a batch's close, like a WebSocket session.
    StreamRequest { conn: ConnId, head: RequestHead },
    /// Owner to edge: the stream of `conn` is open, or the answer that refused it.
    StreamOpened {
        conn: ConnId,
        refusal: Option<(AnswerHead, Bytes)>,
    },
    /// Owner to follower (`replica`): log records of one database from one owner shard, in
    /// the byte form of the log (`hearth_store::encode_record`, checksummed); `seq` is the
    /// owner shard's sequence number the follower acknowledges. `reset`: the records are a
    /// full copy (rules, then the whole tree) that replaces the follower's.
    Replicate(Shipped),
    /// Follower to owner: these records of owner shard `shard` are on the follower's disk.
    ReplicaAck(ToOwnerNode),
}

/// An HTTP request's head as the edge node received it (UTF-8 header values only: the REST
/// parser ignores the others): the owner node parses it exactly as one of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHead {
    pub method: String,
    /// The path and query.
    pub target: String,
    pub headers: Vec<(String, String)>,
    /// The client's address as the edge node saw it (its socket's peer), which the owner node
    /// gives the parsed request as one of its own would have it; `None` where unknown.
    pub address: Option<IpAddr>,
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

/// One thing the edge node must do for one of its connections: the cross-core [`EdgeItem`],
/// its frames named by their index in the batch's list.
pub type LinkItem = EdgeItem<u32>;

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
    #[error("unknown cause {0} of a moved session")]
    MoveCause(u8),
    #[error("unknown transport {0} of an opening session")]
    Transport(u8),
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
    #[error("unknown address form {0}")]
    Address(u8),
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
const STREAM_REQUEST: u8 = 24;
const STREAM_OPENED: u8 = 25;
const REPLICATE: u8 = 7;
const REPLICA_ACK: u8 = 8;
const MOVED: u8 = 9;

const ITEM_FRAMES: u8 = 1;
const ITEM_CLOSE: u8 = 2;
const ITEM_EXPIRY: u8 = 3;
const ITEM_MOVED: u8 = 4;

// A client's address (`Opening::address`, `RequestHead::address`): the byte of its form, then
// its bytes (none, 4 or 16).
const ADDRESS_NONE: u8 = 0;
const ADDRESS_V4: u8 = 4;
const ADDRESS_V6: u8 = 6;

/// A moved session's cause, as a byte after its item's connection.
fn cause_byte(cause: MoveCause) -> u8 {
    match cause {
        MoveCause::Moved => 0,
        MoveCause::OwnerLost => 1,
        MoveCause::OwnerUnreachable => 2,
        MoveCause::OwnerStopping => 3,
    }
}

fn cause_of(byte: u8) -> Result<MoveCause, DecodeError> {
    Ok(match byte {
        0 => MoveCause::Moved,
        1 => MoveCause::OwnerLost,
        2 => MoveCause::OwnerUnreachable,
        3 => MoveCause::OwnerStopping,
        byte => return Err(DecodeError::MoveCause(byte)),
    })
}

#[path = "codec_decode.rs"]
mod decode;
#[path = "codec_encode.rs"]
mod encode;

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

#[cfg(test)]
mod tests {
    use bytes::BufMut;

    use super::*;
    use hearth_ground::close::CloseReason;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

    /// One of every link message, with edge values (the widest connection id, empty and
    /// non-ASCII strings, absent options), listed by family so that a new message has an
    /// obvious place; the tests below encode and decode each one.
    fn every_message() -> Vec<LinkMessage> {
        [
            connection_messages(),
            vec![batch()],
            rest_messages(),
            replication_messages(),
        ]
        .concat()
    }

    /// The messages of a connection's life, edge to owner, and the owner's reply to a large one.
    fn connection_messages() -> Vec<LinkMessage> {
        vec![
            LinkMessage::Open(Opening {
                conn: 7,
                namespace: "demo".into(),
                session_id: "s1".into(),
                previous: Some("s0".into()),
                app_check: Some("h.p.s".into()),
                address: Some(IpAddr::from([203, 0, 113, 7])),
                transport: RealtimeTransport::LongPolling,
            }),
            LinkMessage::Open(Opening {
                conn: MAX_WIRE_CONN - 1,
                namespace: "é".into(),
                session_id: String::new(),
                previous: None,
                app_check: None,
                address: None,
                transport: RealtimeTransport::WebTransport,
            }),
            LinkMessage::Open(Opening {
                conn: 8,
                namespace: "demo".into(),
                session_id: "s2".into(),
                previous: None,
                app_check: None,
                address: Some("2001:db8::1".parse().expect("an IPv6 address")),
                transport: RealtimeTransport::WebSocket,
            }),
            LinkMessage::Messages {
                messages: ConnMessages {
                    conn: 1,
                    texts: vec!["{\"t\":\"d\"}".into(), String::new()],
                },
                large: true,
            },
            LinkMessage::Messages {
                messages: ConnMessages {
                    conn: 2,
                    texts: Vec::new(),
                },
                large: false,
            },
            LinkMessage::AuthExpired { conn: 3 },
            LinkMessage::Closed { conn: 4 },
            LinkMessage::Moved { conn: 6 },
            LinkMessage::Handled { conn: 5 },
        ]
    }

    /// A batch holding every kind of item, with one frame shared by two connections.
    fn batch() -> LinkMessage {
        LinkMessage::Batch {
            frames: vec![Bytes::from_static(b"push"), Bytes::new()],
            items: vec![
                EdgeItem::Frames { conn: 1, frames: 0 },
                EdgeItem::Frames { conn: 2, frames: 0 },
                EdgeItem::Frames { conn: 2, frames: 1 },
                EdgeItem::Close {
                    conn: 3,
                    reason: CloseReason::new(CloseCode::Policy, "slow"),
                    shed: true,
                },
                EdgeItem::Close {
                    conn: 3,
                    reason: CloseReason::new(CloseCode::from(4321), String::new()),
                    shed: false,
                },
                EdgeItem::AuthExpiry {
                    conn: 1,
                    expires_at: Some(1_800_000_000),
                },
                EdgeItem::AuthExpiry {
                    conn: 2,
                    expires_at: None,
                },
                EdgeItem::Moved {
                    conn: 4,
                    cause: MoveCause::OwnerStopping,
                },
                EdgeItem::Moved {
                    conn: 5,
                    cause: MoveCause::Moved,
                },
                EdgeItem::Moved {
                    conn: 6,
                    cause: MoveCause::OwnerLost,
                },
                EdgeItem::Moved {
                    conn: 7,
                    cause: MoveCause::OwnerUnreachable,
                },
            ],
        }
    }

    /// Forwarded REST requests and answers, and event streams opened or refused.
    fn rest_messages() -> Vec<LinkMessage> {
        vec![
            LinkMessage::Request {
                id: u64::MAX,
                head: RequestHead {
                    method: "PUT".into(),
                    target: "/a/b.json?ns=demo&print=silent".into(),
                    headers: vec![("if-match".into(), "\"abc\"".into())],
                    address: Some("2001:db8::2".parse().expect("an IPv6 address")),
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
            LinkMessage::StreamRequest {
                conn: 9,
                head: RequestHead::default(),
            },
            LinkMessage::StreamRequest {
                conn: 11,
                head: RequestHead {
                    address: Some(IpAddr::from([198, 51, 100, 1])),
                    ..RequestHead::default()
                },
            },
            LinkMessage::StreamOpened {
                conn: 9,
                refusal: None,
            },
            LinkMessage::StreamOpened {
                conn: 10,
                refusal: Some((AnswerHead::default(), Bytes::from_static(b"no"))),
            },
        ]
    }

    /// Log records sent to a follower, and its acknowledgement.
    fn replication_messages() -> Vec<LinkMessage> {
        vec![
            LinkMessage::Replicate(Shipped {
                shard: 1,
                seq: 42,
                namespace: "demo".into(),
                reset: true,
                records: Bytes::from_static(b"records"),
            }),
            LinkMessage::ReplicaAck(ToOwnerNode {
                shard: 0,
                seqs: vec![3, 5, u64::MAX],
            }),
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
            items: vec![EdgeItem::Frames { conn: 1, frames: 0 }],
        };
        let mut out = BytesMut::new();
        batch.encode(&mut out);
        let body = out.split_off(4).freeze();
        assert_eq!(LinkMessage::decode(body), Err(DecodeError::FrameIndex));
        let moved = LinkMessage::Batch {
            frames: Vec::new(),
            items: vec![EdgeItem::Moved {
                conn: 1,
                cause: MoveCause::Moved,
            }],
        };
        let mut out = BytesMut::new();
        moved.encode(&mut out);
        let last = out.len() - 1;
        out[last] = 9;
        let body = out.split_off(4).freeze();
        assert_eq!(LinkMessage::decode(body), Err(DecodeError::MoveCause(9)));
        // An address of no known form (its byte is the open's last).
        let open = LinkMessage::Open(Opening {
            conn: 1,
            namespace: "demo".into(),
            session_id: "s".into(),
            previous: None,
            app_check: None,
            address: None,
            transport: RealtimeTransport::WebSocket,
        });
        let mut out = BytesMut::new();
        open.encode(&mut out);
        // The transport's byte is the open's last, the address's before it.
        let mut unknown = out.to_vec();
        if let Some(byte) = unknown.last_mut() {
            *byte = 9;
        }
        let body = Bytes::from(unknown[4..].to_vec());
        assert_eq!(LinkMessage::decode(body), Err(DecodeError::Transport(9)));
        out.truncate(out.len() - 1);
        let last = out.len() - 1;
        out[last] = 5;
        let body = out.split_off(4).freeze();
        assert_eq!(LinkMessage::decode(body), Err(DecodeError::Address(5)));
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
        let open = |head| LinkMessage::StreamRequest { conn: 1, head };
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
