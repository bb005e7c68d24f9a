//! Server-sent events of REST streaming (spec §15.6).
//!
//! A push becomes `event: put` (or `patch`) with one `data:` line holding
//! `{"path": <relative path>, "data": <value>}`. The value is the same for every stream that
//! receives the push, so it is serialized once ([`SsePayload`]); only the short head, whose
//! path is relative to each stream's location, differs between streams at different paths.

use hearth_sync::{Push, PushData};
use hearth_tree::Path;

use crate::rest::{write_rest_json, JsonStyle};

/// The bytes that end every data event: the closing brace of the JSON object and the blank
/// line that ends the event.
pub const SSE_EVENT_END: &[u8] = b"}\n\n";

/// The keep-alive event. Clients drop events whose data is `null`.
pub const SSE_KEEP_ALIVE: &[u8] = b"event: keep-alive\ndata: null\n\n";

/// The event that ends a stream whose read permission was withdrawn.
pub const SSE_CANCEL: &[u8] = b"event: cancel\ndata: null\n\n";

/// The event that ends a stream whose credential expired or was revoked. The Python SDK
/// reconnects with a fresh credential when it sees exactly this text.
pub const SSE_AUTH_REVOKED: &[u8] = b"event: auth_revoked\ndata: credential is no longer valid\n\n";

/// The kind of a data event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseKind {
    /// The value at the path is now `data`.
    Put,
    /// For each key of `data` (a relative path), the value there is now that value.
    Patch,
}

impl SseKind {
    pub fn name(self) -> &'static str {
        match self {
            SseKind::Put => "put",
            SseKind::Patch => "patch",
        }
    }
}

/// A push serialized for streams: its kind, its absolute path and its data, shared by every
/// stream it goes to.
#[derive(Debug, Clone)]
pub struct SsePayload {
    pub kind: SseKind,
    pub path: Path,
    pub data: Vec<u8>,
}

/// Serializes the data of `push` once, in plain (or, with `export`, export) form.
pub fn encode_sse_payload(push: &Push, export: bool) -> SsePayload {
    let style = JsonStyle {
        export,
        pretty: false,
    };
    let mut data = Vec::with_capacity(64);
    let kind = match &push.data {
        PushData::Put(node) => {
            write_rest_json(node, style, &mut data);
            SseKind::Put
        }
        PushData::Merge(entries) => {
            // The patch object itself is a map of paths, never rendered as an array.
            data.push(b'{');
            for (index, (path, node)) in entries.iter().enumerate() {
                if index > 0 {
                    data.push(b',');
                }
                let key = path.to_string();
                let _ = serde_json::to_writer(&mut data, key.trim_start_matches('/'));
                data.push(b':');
                write_rest_json(node, style, &mut data);
            }
            data.push(b'}');
            SseKind::Patch
        }
    };
    SsePayload {
        kind,
        path: push.path.clone(),
        data,
    }
}

impl SsePayload {
    /// The start of the event for a stream at `stream_path`, up to where the data begins:
    /// `event: put\ndata: {"path":"/rel","data":`. `None` when the push lies outside the
    /// stream's location (which the engine never produces).
    pub fn head_for(&self, stream_path: &Path) -> Option<Vec<u8>> {
        let relative = self.path.strip_prefix(stream_path)?;
        Some(event_head(self.kind, &relative))
    }
}

/// The head of a data event of `kind` at the relative path `relative`.
pub fn event_head(kind: SseKind, relative: &Path) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(kind.name().as_bytes());
    out.extend_from_slice(b"\ndata: {\"path\":");
    let _ = serde_json::to_writer(&mut out, &relative.to_string());
    out.extend_from_slice(b",\"data\":");
    out
}

/// A whole data event, for callers that do not share payloads.
pub fn encode_sse_event(payload: &SsePayload, stream_path: &Path) -> Option<Vec<u8>> {
    let mut out = payload.head_for(stream_path)?;
    out.extend_from_slice(&payload.data);
    out.extend_from_slice(SSE_EVENT_END);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_tree::Node;
    use serde_json::{json, Value};

    fn node(value: Value) -> Node {
        Node::from_json(&value).expect("valid test node")
    }

    fn path(text: &str) -> Path {
        Path::parse(text).expect("valid test path")
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn put_events_are_relative_to_the_stream() {
        let push = Push {
            path: path("/rooms/1/name"),
            data: PushData::Put(node(json!({".value": "x", ".priority": 1}))),
        };
        let payload = encode_sse_payload(&push, false);
        assert_eq!(
            text(encode_sse_event(&payload, &path("/rooms")).expect("inside")),
            "event: put\ndata: {\"path\":\"/1/name\",\"data\":\"x\"}\n\n"
        );
        assert_eq!(
            text(encode_sse_event(&payload, &path("/rooms/1/name")).expect("inside")),
            "event: put\ndata: {\"path\":\"/\",\"data\":\"x\"}\n\n"
        );
        assert!(payload.head_for(&path("/other")).is_none());
        let exported = encode_sse_payload(&push, true);
        assert_eq!(text(exported.data), r#"{".value":"x",".priority":1}"#);
    }

    #[test]
    fn merges_are_patch_events() {
        let push = Push {
            path: path("/a"),
            data: PushData::Merge(vec![
                (path("/0"), node(json!([1, 2]))),
                (path("/c/d"), Node::empty()),
            ]),
        };
        let payload = encode_sse_payload(&push, false);
        assert_eq!(payload.kind, SseKind::Patch);
        assert_eq!(
            text(encode_sse_event(&payload, &Path::root()).expect("inside")),
            "event: patch\ndata: {\"path\":\"/a\",\"data\":{\"0\":[1,2],\"c/d\":null}}\n\n"
        );
    }

    #[test]
    fn data_stays_on_one_line() {
        let push = Push {
            path: Path::root(),
            data: PushData::Put(node(json!({"text": "two\nlines"}))),
        };
        let event = text(
            encode_sse_event(&encode_sse_payload(&push, false), &Path::root()).expect("inside"),
        );
        assert_eq!(event.matches('\n').count(), 3);
    }
}
