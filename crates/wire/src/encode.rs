//! Encoding server messages (spec §3, §4, §6). Every function returns the message text; the
//! caller splits it with [`crate::split_frames`] when it is long.

use hearth_sync::{Push, PushData, Reply, ReplyData, Tag};
use hearth_tree::{Node, Path};
use serde_json::Value;

/// The answer to a control ping. The inner `d` must be present or the client ignores it.
pub const PONG: &str = r#"{"t":"c","d":{"t":"o","d":null}}"#;

/// The server's acknowledgement on a WebSocket that names a long-polling session (spec §3.1,
/// `a`): it will carry that session once the client switches. The client answers with pings
/// until the WebSocket is healthy, then switches.
pub const SWITCH_ACK: &str = r#"{"t":"c","d":{"t":"a","d":{}}}"#;

/// The last message of the old transport of a session that moved to a WebSocket (spec §3.1,
/// `n`): the client reads the new one from here on.
pub const END_OF_TRANSMISSION: &str = r#"{"t":"c","d":{"t":"n","d":{}}}"#;

/// A reset (spec §3.1, `r`) naming `host`. On a WebSocket that was to carry a long-polling
/// session, the client takes it as "no such session" and drops that WebSocket.
pub fn encode_reset(host: &str) -> String {
    let mut out = String::from(r#"{"t":"c","d":{"t":"r","d":"#);
    push_json_string(&mut out, host);
    out.push_str("}}");
    out
}

/// The first message of every connection: server time, protocol version, the host the client
/// should use from now on, and the session id it will echo as `ls` when it reconnects.
pub fn encode_handshake(now_ms: u64, host: &str, session_id: &str) -> String {
    let mut out = String::with_capacity(96 + host.len() + session_id.len());
    out.push_str(r#"{"t":"c","d":{"t":"h","d":{"ts":"#);
    out.push_str(&now_ms.to_string());
    out.push_str(r#","v":"5","h":"#);
    push_json_string(&mut out, host);
    out.push_str(r#","s":"#);
    push_json_string(&mut out, session_id);
    out.push_str("}}}");
    out
}

/// The shutdown control message: the client stops reconnecting for good. Only for a
/// namespace that cannot be served at all.
pub fn encode_shutdown(reason: &str) -> String {
    let mut out = String::from(r#"{"t":"c","d":{"t":"s","d":"#);
    push_json_string(&mut out, reason);
    out.push_str("}}");
    out
}

/// The reply to request `request_id`.
pub fn encode_reply(request_id: u64, reply: &Reply) -> String {
    let mut out = reply_head(request_id, reply.status.as_str());
    match &reply.data {
        ReplyData::EmptyText => out.extend_from_slice(b"\"\""),
        ReplyData::EmptyObject => out.extend_from_slice(b"{}"),
        ReplyData::NoIndexWarning => out.extend_from_slice(br#"{"w":["no_index"]}"#),
        ReplyData::Value(node) => node.write_json(&mut out, true),
        ReplyData::Text(text) => push_json_bytes(&mut out, text),
    }
    out.extend_from_slice(b"}}}");
    into_string(out)
}

/// A reply with any status word and a text payload, for errors found before the request
/// reached a database.
pub fn encode_reply_status(request_id: u64, status: &str, text: &str) -> String {
    let mut out = reply_head(request_id, status);
    push_json_bytes(&mut out, text);
    out.extend_from_slice(b"}}}");
    into_string(out)
}

/// A reply whose payload is any JSON value (the `auth` reply carries the token's claims).
pub fn encode_reply_value(request_id: u64, status: &str, data: &Value) -> String {
    let mut out = reply_head(request_id, status);
    // Serializing a JSON value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, data);
    out.extend_from_slice(b"}}}");
    into_string(out)
}

fn reply_head(request_id: u64, status: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(br#"{"t":"d","d":{"r":"#);
    out.extend_from_slice(request_id.to_string().as_bytes());
    out.extend_from_slice(br#","b":{"s":"#);
    push_json_bytes(&mut out, status);
    out.extend_from_slice(br#","d":"#);
    out
}

/// A push serialized once. The untagged text is shared by every default listener; a tagged
/// listener's text is the same bytes with its tag spliced in before the closing braces.
#[derive(Debug, Clone)]
pub struct EncodedPush {
    head: String,
}

impl EncodedPush {
    /// The message for a default listen.
    pub fn untagged(&self) -> String {
        let mut out = String::with_capacity(self.head.len() + 3);
        out.push_str(&self.head);
        out.push_str("}}}");
        out
    }

    /// The message for the filtered listen with tag `tag`.
    pub fn tagged(&self, tag: Tag) -> String {
        let mut out = String::with_capacity(self.head.len() + 28);
        out.push_str(&self.head);
        out.push_str(",\"t\":");
        out.push_str(&tag.to_string());
        out.push_str("}}}");
        out
    }

    /// The message for an optional tag.
    pub fn for_tag(&self, tag: Option<Tag>) -> String {
        match tag {
            Some(tag) => self.tagged(tag),
            None => self.untagged(),
        }
    }
}

/// Serializes a data push (`d` for a put, `m` for a merge) in export form.
pub fn encode_push(push: &Push) -> EncodedPush {
    let mut out = Vec::with_capacity(128);
    let action: &[u8] = match push.data {
        PushData::Put(_) => b"d",
        PushData::Merge(_) => b"m",
    };
    out.extend_from_slice(br#"{"t":"d","d":{"a":""#);
    out.extend_from_slice(action);
    out.extend_from_slice(br#"","b":{"p":"#);
    push_json_bytes(&mut out, &push.path.to_string());
    out.extend_from_slice(br#","d":"#);
    match &push.data {
        PushData::Put(node) => node.write_json(&mut out, true),
        PushData::Merge(entries) => write_merge(&mut out, entries),
    }
    EncodedPush {
        head: into_string(out),
    }
}

fn write_merge(out: &mut Vec<u8>, entries: &[(Path, Node)]) {
    out.push(b'{');
    for (index, (path, node)) in entries.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let key = path.to_string();
        push_json_bytes(out, key.trim_start_matches('/'));
        out.push(b':');
        node.write_json(out, true);
    }
    out.push(b'}');
}

/// The push that tells a client its credential is no longer valid (`ac`): the client drops the
/// token, closes the socket and reconnects with a fresh one.
pub fn encode_auth_revoked(status: &str, reason: &str) -> String {
    let mut out = String::from(r#"{"t":"d","d":{"a":"ac","b":{"s":"#);
    push_json_string(&mut out, status);
    out.push_str(r#","d":"#);
    push_json_string(&mut out, reason);
    out.push_str("}}}");
    out
}

/// The push that revokes a listen. A filtered listen is named by its query object, exactly as
/// the client sent it, inside a one-element array.
pub fn encode_cancel(path: &Path, query_wire: Option<&Value>) -> String {
    let mut out = String::from(r#"{"t":"d","d":{"a":"c","b":{"p":"#);
    push_json_string(&mut out, &path.to_string());
    if let Some(query) = query_wire {
        out.push_str(r#","q":["#);
        out.push_str(&query.to_string());
        out.push(']');
    }
    out.push_str("}}}");
    out
}

fn push_json_string(out: &mut String, text: &str) {
    out.push_str(&Value::String(text.to_owned()).to_string());
}

fn push_json_bytes(out: &mut Vec<u8>, text: &str) {
    // Serializing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(value: Value) -> Node {
        Node::from_json(&value).expect("valid test node")
    }

    fn path(text: &str) -> Path {
        Path::parse(text).expect("valid test path")
    }

    #[test]
    fn handshake_shape() {
        let text = encode_handshake(1795323485336, "localhost:9555", "sessABC");
        let value: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(
            value,
            json!({"t":"c","d":{"t":"h","d":{"ts":1795323485336u64,"v":"5","h":"localhost:9555","s":"sessABC"}}})
        );
    }

    #[test]
    fn replies() {
        assert_eq!(
            encode_reply(7, &Reply::listen_ok()),
            r#"{"t":"d","d":{"r":7,"b":{"s":"ok","d":{}}}}"#
        );
        assert_eq!(
            encode_reply(9, &Reply::listen_ok_no_index()),
            r#"{"t":"d","d":{"r":9,"b":{"s":"ok","d":{"w":["no_index"]}}}}"#
        );
        assert_eq!(
            encode_reply(8, &Reply::write_ok()),
            r#"{"t":"d","d":{"r":8,"b":{"s":"ok","d":""}}}"#
        );
        let value = Reply {
            status: hearth_sync::Status::Ok,
            data: ReplyData::Value(node(json!({"a": {".value": 1, ".priority": 2}}))),
        };
        let text = encode_reply(9, &value);
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(
            parsed["d"]["b"]["d"],
            json!({"a": {".value": 1, ".priority": 2}})
        );
    }

    #[test]
    fn pushes_share_bytes_and_splice_tags() {
        let push = Push {
            path: path("/rooms/1"),
            data: PushData::Put(node(json!({"name": "x"}))),
        };
        let encoded = encode_push(&push);
        assert_eq!(
            encoded.untagged(),
            r#"{"t":"d","d":{"a":"d","b":{"p":"/rooms/1","d":{"name":"x"}}}}"#
        );
        assert_eq!(
            encoded.tagged(3),
            r#"{"t":"d","d":{"a":"d","b":{"p":"/rooms/1","d":{"name":"x"},"t":3}}}"#
        );
        let merge = Push {
            path: path("/w"),
            data: PushData::Merge(vec![
                (path("/d/e"), node(json!(1))),
                (path("/f"), Node::empty()),
            ]),
        };
        assert_eq!(
            encode_push(&merge).untagged(),
            r#"{"t":"d","d":{"a":"m","b":{"p":"/w","d":{"d/e":1,"f":null}}}}"#
        );
    }

    #[test]
    fn cancel_echoes_the_query() {
        assert_eq!(
            encode_cancel(&path("/a"), None),
            r#"{"t":"d","d":{"a":"c","b":{"p":"/a"}}}"#
        );
        let q = json!({"l": 1, "vf": "l"});
        assert_eq!(
            encode_cancel(&path("/a"), Some(&q)),
            r#"{"t":"d","d":{"a":"c","b":{"p":"/a","q":[{"l":1,"vf":"l"}]}}}"#
        );
    }
}
