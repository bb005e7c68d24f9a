//! Decoding frames into [`LinkMessage`]s (`codec`): every length is checked against what is
//! left, and nothing is allocated beyond the frame.

use std::net::IpAddr;

use bytes::{Buf, Bytes};
use hearth_sync::ConnId;

use hearth_ground::close::CloseReason;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::{
    cause_of, AnswerHead, ConnMessages, DecodeError, EdgeItem, LinkItem, LinkMessage, Opening,
    RealtimeTransport, RequestHead, Shipped, ToOwnerNode, ADDRESS_NONE, ADDRESS_V4, ADDRESS_V6,
    ANSWER, ANSWER_MORE, AUTH_EXPIRED, BATCH, CLOSED, HANDLED, ITEM_CLOSE, ITEM_EXPIRY,
    ITEM_FRAMES, ITEM_MOVED, MAX_ACKS_PER_MESSAGE, MAX_CHUNK_BYTES, MAX_HEAD_BYTES,
    MAX_HEAD_FIELDS, MAX_WIRE_CONN, MESSAGES, MOVED, OPEN, REPLICATE, REPLICA_ACK, REQUEST,
    REQUEST_MORE, STREAM_OPENED, STREAM_REQUEST,
};

impl LinkMessage {
    /// Decodes one frame's body (without its length prefix).
    pub fn decode(mut body: Bytes) -> Result<LinkMessage, DecodeError> {
        let body = &mut body;
        let message = match get_u8(body)? {
            OPEN => LinkMessage::Open(Opening {
                conn: get_conn(body)?,
                namespace: get_str(body)?,
                session_id: get_str(body)?,
                previous: match get_u8(body)? {
                    0 => None,
                    _ => Some(get_str(body)?),
                },
                app_check: match get_u8(body)? {
                    0 => None,
                    _ => Some(get_str(body)?),
                },
                address: get_address(body)?,
                transport: {
                    let code = get_u8(body)?;
                    RealtimeTransport::from_code(code).ok_or(DecodeError::Transport(code))?
                },
            }),
            MESSAGES => get_messages(body)?,
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
            BATCH => get_batch(body)?,
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
            STREAM_REQUEST => LinkMessage::StreamRequest {
                conn: get_conn(body)?,
                head: get_request_head(body)?,
            },
            STREAM_OPENED => get_stream_opened(body)?,
            REPLICATE => get_replicate(body)?,
            REPLICA_ACK => get_replica_ack(body)?,
            tag => return Err(DecodeError::Tag(tag)),
        };
        match body.remaining() {
            0 => Ok(message),
            left => Err(DecodeError::Trailing(left)),
        }
    }
}

/// The fields of [`LinkMessage::Messages`].
fn get_messages(body: &mut Bytes) -> Result<LinkMessage, DecodeError> {
    let conn = get_conn(body)?;
    let large = get_u8(body)? != 0;
    let count = get_u32(body)? as usize;
    // Each text takes at least its 4-byte length.
    let mut texts = Vec::with_capacity(count.min(body.remaining() / 4));
    for _ in 0..count {
        texts.push(get_str(body)?);
    }
    Ok(LinkMessage::Messages {
        messages: ConnMessages { conn, texts },
        large,
    })
}

/// The fields of [`LinkMessage::Batch`].
fn get_batch(body: &mut Bytes) -> Result<LinkMessage, DecodeError> {
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
    Ok(LinkMessage::Batch { frames, items })
}

/// The fields of [`LinkMessage::StreamOpened`].
fn get_stream_opened(body: &mut Bytes) -> Result<LinkMessage, DecodeError> {
    let conn = get_conn(body)?;
    let refusal = match get_u8(body)? {
        0 => None,
        _ => {
            let head = get_answer_head(body)?;
            Some((head, get_chunk(body)?.0))
        }
    };
    Ok(LinkMessage::StreamOpened { conn, refusal })
}

/// The fields of [`LinkMessage::Replicate`].
fn get_replicate(body: &mut Bytes) -> Result<LinkMessage, DecodeError> {
    let shard = get_u32(body)?;
    let seq = get_u64(body)?;
    let namespace = get_str(body)?;
    if namespace.len() > hearth_store::MAX_DATABASE_NAME_BYTES {
        return Err(DecodeError::Namespace);
    }
    Ok(LinkMessage::Replicate(Shipped {
        shard,
        seq,
        namespace,
        reset: get_u8(body)? != 0,
        records: get_bytes(body)?,
    }))
}

/// The fields of [`LinkMessage::ReplicaAck`].
fn get_replica_ack(body: &mut Bytes) -> Result<LinkMessage, DecodeError> {
    let shard = get_u32(body)?;
    let count = get_u32(body)? as usize;
    if count > MAX_ACKS_PER_MESSAGE {
        return Err(DecodeError::TooManyAcks);
    }
    let mut seqs = Vec::with_capacity(count.min(body.remaining() / 8));
    for _ in 0..count {
        seqs.push(get_u64(body)?);
    }
    Ok(LinkMessage::ReplicaAck(ToOwnerNode { shard, seqs }))
}

fn decode_item(body: &mut Bytes, frames: usize) -> Result<LinkItem, DecodeError> {
    let tag = get_u8(body)?;
    let conn = get_conn(body)?;
    Ok(match tag {
        ITEM_FRAMES => {
            let frame = get_u32(body)?;
            if frame as usize >= frames {
                return Err(DecodeError::FrameIndex);
            }
            EdgeItem::Frames {
                conn,
                frames: frame,
            }
        }
        ITEM_CLOSE => EdgeItem::Close {
            conn,
            reason: CloseReason::new(CloseCode::from(get_u16(body)?), get_str(body)?),
            shed: get_u8(body)? != 0,
        },
        ITEM_EXPIRY => EdgeItem::AuthExpiry {
            conn,
            expires_at: match get_u8(body)? {
                0 => None,
                _ => Some(get_u64(body)?),
            },
        },
        ITEM_MOVED => EdgeItem::Moved {
            conn,
            cause: cause_of(get_u8(body)?)?,
        },
        tag => return Err(DecodeError::Tag(tag)),
    })
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
        address: get_address(body)?,
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

/// A client's address, as `put_address` writes it; an unknown form is refused.
fn get_address(body: &mut Bytes) -> Result<Option<IpAddr>, DecodeError> {
    Ok(match get_u8(body)? {
        ADDRESS_NONE => None,
        ADDRESS_V4 => Some(IpAddr::from(get_array::<4>(body)?)),
        ADDRESS_V6 => Some(IpAddr::from(get_array::<16>(body)?)),
        form => return Err(DecodeError::Address(form)),
    })
}

fn get_array<const N: usize>(body: &mut Bytes) -> Result<[u8; N], DecodeError> {
    need(body, N)?;
    let mut array = [0; N];
    body.copy_to_slice(&mut array);
    Ok(array)
}

fn get_str(body: &mut Bytes) -> Result<String, DecodeError> {
    let bytes = get_bytes(body)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Utf8)
}
