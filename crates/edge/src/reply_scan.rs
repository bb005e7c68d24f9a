//! What an owner's message to a connection is, read from its encoded WebSocket frames without
//! decoding it: a reply (its request id and status), a listen's revocation, or anything else.
//! Only the edge of a connection whose session may move needs this (`edge::upstream`), and
//! it reads frames that this server's own encoder made (`hearth_wire::encode_reply`,
//! `encode_cancel`): a reply starts with its id and status, so a prefix tells it apart from a
//! push, whatever the push holds.

use hearth_tree::Path;
use serde_json::Value;

/// What one message from the owner is.
#[derive(Debug, PartialEq)]
pub enum FromOwner {
    /// The reply to request `request`, with its status word (`ok`, `permission_denied`, ...).
    Reply { request: u64, status: String },
    /// The owner revoked the listen at `path` (with the query object, for a filtered one).
    Cancel { path: String, query: Option<Value> },
    /// A push or a control message: nothing the edge keeps track of.
    Other,
}

const REPLY_HEAD: &[u8] = br#"{"t":"d","d":{"r":"#;
const REPLY_STATUS: &[u8] = br#","b":{"s":""#;
const CANCEL_HEAD: &[u8] = br#"{"t":"d","d":{"a":"c","#;

/// The longest status word read; the server's are a few letters.
const MAX_STATUS_BYTES: usize = 64;

/// A cancel is a path and a query object; one longer than this is not read (it is forwarded,
/// and the listen it names stays kept until the owner refuses it again).
const MAX_CANCEL_BYTES: usize = 64 * 1024;

/// What the message encoded in `frames` (one text frame, or a count frame and its chunks) is.
pub fn read(frames: &[u8]) -> FromOwner {
    let Some((first, rest)) = frame(frames) else {
        return FromOwner::Other;
    };
    // A long message is a count, then its chunks: its head is in the first chunk.
    let (head, whole) = if is_count(first) {
        match frame(rest) {
            Some((chunk, _)) => (chunk, false),
            None => return FromOwner::Other,
        }
    } else {
        (first, true)
    };
    if let Some(after) = head.strip_prefix(REPLY_HEAD) {
        return reply(after).unwrap_or(FromOwner::Other);
    }
    if whole && head.starts_with(CANCEL_HEAD) && head.len() <= MAX_CANCEL_BYTES {
        return cancel(head).unwrap_or(FromOwner::Other);
    }
    FromOwner::Other
}

fn reply(after: &[u8]) -> Option<FromOwner> {
    let digits = after
        .iter()
        .take_while(|byte| byte.is_ascii_digit())
        .count();
    let request = std::str::from_utf8(&after[..digits]).ok()?.parse().ok()?;
    let status = after[digits..].strip_prefix(REPLY_STATUS)?;
    let end = status
        .iter()
        .take(MAX_STATUS_BYTES)
        .position(|byte| *byte == b'"')?;
    let status = std::str::from_utf8(&status[..end]).ok()?.to_owned();
    Some(FromOwner::Reply { request, status })
}

fn cancel(text: &[u8]) -> Option<FromOwner> {
    let message: Value = serde_json::from_slice(text).ok()?;
    let body = message.get("d")?.get("b")?;
    let path = normalized_path(body.get("p")?.as_str()?)?;
    let query = match body.get("q") {
        Some(Value::Array(queries)) => queries.first().cloned(),
        _ => None,
    };
    Some(FromOwner::Cancel { path, query })
}

/// A path as the server writes it, so that the client's spelling and the server's compare.
pub fn normalized_path(text: &str) -> Option<String> {
    Path::parse(text).ok().map(|path| path.to_string())
}

/// A frame count: up to 6 digits (spec §2.2).
fn is_count(payload: &[u8]) -> bool {
    !payload.is_empty() && payload.len() <= 6 && payload.iter().all(u8::is_ascii_digit)
}

/// The payload of the unmasked WebSocket frame at the start of `bytes`, and what follows it.
fn frame(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let length = *bytes.get(1)?;
    if length & 0x80 != 0 {
        // Masked: not a server frame.
        return None;
    }
    let (length, start): (usize, usize) = match length & 0x7f {
        126 => (
            u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?) as usize,
            4,
        ),
        127 => {
            let length = u64::from_be_bytes(bytes.get(2..10)?.try_into().ok()?);
            (usize::try_from(length).ok()?, 10)
        }
        short => (short as usize, 2),
    };
    let end = start.checked_add(length)?;
    Some((bytes.get(start..end)?, bytes.get(end..)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::encode_frames;
    use hearth_wire::{encode_cancel, encode_reply_status};
    use serde_json::json;

    #[test]
    fn replies_are_told_from_pushes_by_their_head() {
        let ok = encode_frames(encode_reply_status(42, "ok", ""));
        assert_eq!(
            read(&ok),
            FromOwner::Reply {
                request: 42,
                status: "ok".into()
            }
        );
        let denied = encode_frames(encode_reply_status(7, "permission_denied", "no"));
        assert_eq!(
            read(&denied),
            FromOwner::Reply {
                request: 7,
                status: "permission_denied".into()
            }
        );
        // A push whose data looks like a reply is still a push.
        let push = encode_frames(
            r#"{"t":"d","d":{"a":"d","b":{"p":"/r","d":{"t":"d","d":{"r":1}}}}}"#.into(),
        );
        assert_eq!(read(&push), FromOwner::Other);
        assert_eq!(read(b""), FromOwner::Other);
    }

    #[test]
    fn a_long_reply_is_read_from_its_first_chunk() {
        let long = format!(
            r#"{{"t":"d","d":{{"r":9,"b":{{"s":"ok","d":"{}"}}}}}}"#,
            "x".repeat(70_000)
        );
        let frames = encode_frames(long);
        assert_eq!(
            read(&frames),
            FromOwner::Reply {
                request: 9,
                status: "ok".into()
            }
        );
    }

    #[test]
    fn cancels_name_their_listen() {
        let path = Path::parse("/rooms//a/").expect("path");
        let query = json!({"l": 2, "vf": "l"});
        let frames = encode_frames(encode_cancel(&path, Some(&query)));
        assert_eq!(
            read(&frames),
            FromOwner::Cancel {
                path: "/rooms/a".into(),
                query: Some(query)
            }
        );
        let frames = encode_frames(encode_cancel(&path, None));
        assert_eq!(
            read(&frames),
            FromOwner::Cancel {
                path: "/rooms/a".into(),
                query: None
            }
        );
    }
}
