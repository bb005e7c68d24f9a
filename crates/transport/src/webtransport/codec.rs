//! The bytes of a WebTransport session (sans-IO): the owner's messages, which arrive as
//! WebSocket frames like any connection's, sorted into datagrams and stream lines, and the
//! client's messages read from the stream and from datagrams.
//!
//! Format (documented for clients in `docs/volatile.md`):
//! - **Server → client datagram**: one push, as its action letter (`d` for a value, `m` for a
//!   merge of children) followed by the push's body JSON, `{"p":PATH,"d":DATA}` (plus `"t":TAG`
//!   for a tagged query). A cursor `{"x":12,"y":34}` at `rooms/r1/cursors/u1` is 49 bytes;
//!   the same push over WebSocket is 78 (the Firebase envelope and the frame header).
//! - **Server → client stream**: every other message (the handshake, replies, cancels,
//!   credential revocations) and pushes too large for one datagram, as the Firebase wire
//!   message, one per line (`\n`; JSON text holds no raw newline).
//! - **Client → server stream**: Firebase wire messages (`{"t":"d","d":{"r":1,"a":"q",...}}`),
//!   one per line.
//! - **Client → server datagram**: one Firebase write request (`"a":"p"` or `"a":"m"`), whose
//!   reply comes back on the stream.

use bytes::Bytes;
use hearth_wire::{Assembled, FrameAssembler};
use serde::Deserialize;
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

/// The start of every push the owner encodes (`hearth_wire::encode_push`), up to its action.
const PUSH_HEAD: &str = r#"{"t":"d","d":{"a":""#;
/// What follows the action letter, up to the body.
const PUSH_AFTER_ACTION: &str = r#"","b":"#;

/// Where one message of the owner goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Outbound {
    /// A push small enough for a datagram, in the datagram format.
    Datagram(Bytes),
    /// A line for the reliable stream (the message and its `\n`).
    Line(Bytes),
}

/// Sorts one whole message of the owner: a push whose datagram form fits `max_datagram`
/// bytes becomes a datagram; anything else a stream line.
pub fn sort_message(text: &str, max_datagram: usize) -> Outbound {
    if let Some(datagram) = push_datagram(text) {
        if datagram.len() <= max_datagram {
            return Outbound::Datagram(Bytes::from(datagram));
        }
    }
    let mut line = Vec::with_capacity(text.len() + 1);
    line.extend_from_slice(text.as_bytes());
    line.push(b'\n');
    Outbound::Line(Bytes::from(line))
}

/// The datagram form of a push (`d` or `m`, then the body), or `None` for another message.
pub fn push_datagram(text: &str) -> Option<Vec<u8>> {
    let rest = text.strip_prefix(PUSH_HEAD)?;
    let action = rest.as_bytes().first().copied()?;
    if action != b'd' && action != b'm' {
        return None;
    }
    let body = rest[1..]
        .strip_prefix(PUSH_AFTER_ACTION)?
        .strip_suffix("}}")?;
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(action);
    out.extend_from_slice(body.as_bytes());
    Some(out)
}

/// Turns the owner's WebSocket frame bytes back into whole messages. The frames are the
/// server's own (unmasked text frames, long messages split into a count and chunks), so a
/// malformed one is a bug: it ends the session rather than being skipped.
#[derive(Default)]
pub struct FrameReader {
    buffered: Vec<u8>,
    assembler: FrameAssembler,
}

/// The owner's frames could not be read back (never expected).
#[derive(Debug, thiserror::Error)]
#[error("unreadable frames from the owner: {0}")]
pub struct FrameReadError(String);

impl FrameReader {
    /// Feeds bytes; every message they complete is passed to `each`.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        mut each: impl FnMut(String),
    ) -> Result<(), FrameReadError> {
        self.buffered.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            let mut cursor = std::io::Cursor::new(&self.buffered[start..]);
            let parsed = FrameHeader::parse(&mut cursor)
                .map_err(|error| FrameReadError(error.to_string()))?;
            let Some((_, length)) = parsed else { break };
            let head = cursor.position() as usize;
            let Ok(length) = usize::try_from(length) else {
                return Err(FrameReadError("frame too long".into()));
            };
            if self.buffered.len() - start < head + length {
                break;
            }
            let payload = &self.buffered[start + head..start + head + length];
            let text =
                std::str::from_utf8(payload).map_err(|error| FrameReadError(error.to_string()))?;
            match self.assembler.push(text) {
                Ok(Assembled::Message(message)) => each(message),
                Ok(Assembled::Partial | Assembled::KeepAlive) => {}
                Err(error) => return Err(FrameReadError(error.to_string())),
            }
            start += head + length;
        }
        self.buffered.drain(..start);
        Ok(())
    }
}

/// What a client's message asks, as far as the session's limits care.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// A listen (`q`).
    Listen,
    /// An unlisten (`n`).
    Unlisten,
    /// A write: set (`p`) or merge (`m`).
    Write,
    /// Anything else the owner answers (auth, onDisconnect, get, stats...).
    Other,
    /// Not a Firebase data message: the owner would close the session for it.
    Malformed,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    d: Option<Data<'a>>,
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(borrow)]
    a: Option<&'a str>,
    r: Option<u64>,
    #[serde(borrow)]
    b: Option<Body<'a>>,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    p: Option<std::borrow::Cow<'a, str>>,
}

/// A listen's request number and path (without slashes at its ends), if `text` is a listen.
pub fn listen_request(text: &str) -> Option<(u64, String)> {
    let data = serde_json::from_str::<Envelope<'_>>(text).ok()?.d?;
    if data.a != Some("q") {
        return None;
    }
    let path = data.b?.p?;
    Some((data.r?, path.trim_matches('/').to_owned()))
}

/// The request number a reply of the owner answers, if `text` is a reply.
pub fn reply_number(text: &str) -> Option<u64> {
    if !text.starts_with(r#"{"t":"d","d":{"r":"#) {
        return None;
    }
    let data = serde_json::from_str::<Envelope<'_>>(text).ok()?.d?;
    data.a.is_none().then_some(data.r).flatten()
}

/// The path of a push (without slashes at its ends), if `text` is one.
pub fn push_path(text: &str) -> Option<String> {
    push_datagram(text)?;
    let data = serde_json::from_str::<Envelope<'_>>(text).ok()?.d?;
    Some(data.b?.p?.trim_matches('/').to_owned())
}

/// Whether one of two paths (without end slashes) lies at or below the other.
pub fn related(a: &str, b: &str) -> bool {
    let within = |short: &str, long: &str| {
        short.is_empty()
            || long == short
            || (long.starts_with(short) && long.as_bytes().get(short.len()) == Some(&b'/'))
    };
    within(a, b) || within(b, a)
}

/// Classifies a client's message by its action, without parsing its data (the owner does).
pub fn classify(text: &str) -> Request {
    let Ok(envelope) = serde_json::from_str::<Envelope<'_>>(text) else {
        return Request::Malformed;
    };
    match envelope.d.and_then(|data| data.a) {
        Some("q") => Request::Listen,
        Some("n") => Request::Unlisten,
        Some("p" | "m") => Request::Write,
        Some(_) => Request::Other,
        None => Request::Malformed,
    }
}

/// Splits a byte stream into `\n`-terminated lines of at most `max` bytes.
pub struct LineReader {
    buffered: Vec<u8>,
    max: usize,
}

/// A line longer than the limit, or not UTF-8.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LineError {
    #[error("a message longer than {0} bytes")]
    TooLong(usize),
    #[error("a message that is not UTF-8")]
    NotText,
}

impl LineReader {
    pub fn new(max: usize) -> LineReader {
        LineReader {
            buffered: Vec::new(),
            max,
        }
    }

    /// Feeds bytes; every complete, non-empty line is passed to `each`.
    pub fn feed(&mut self, bytes: &[u8], mut each: impl FnMut(String)) -> Result<(), LineError> {
        self.buffered.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = self.buffered[start..].iter().position(|&b| b == b'\n') {
            let line = &self.buffered[start..start + end];
            if line.len() > self.max {
                return Err(LineError::TooLong(self.max));
            }
            let line = std::str::from_utf8(line).map_err(|_| LineError::NotText)?;
            let line = line.trim_end_matches('\r');
            if !line.is_empty() {
                each(line.to_owned());
            }
            start += end + 1;
        }
        self.buffered.drain(..start);
        if self.buffered.len() > self.max {
            return Err(LineError::TooLong(self.max));
        }
        Ok(())
    }
}

/// A token bucket: `rate` per second, bursts of up to `burst` (the session's datagram rate).
pub struct Bucket {
    tokens: f64,
    rate: f64,
    burst: f64,
    last_ms: u64,
}

impl Bucket {
    pub fn new(rate: u32, burst: u32, now_ms: u64) -> Bucket {
        Bucket {
            tokens: f64::from(burst),
            rate: f64::from(rate),
            burst: f64::from(burst),
            last_ms: now_ms,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, now_ms: u64) -> bool {
        let elapsed = now_ms.saturating_sub(self.last_ms) as f64 / 1_000.0;
        self.last_ms = self.last_ms.max(now_ms);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_edge::frames::encode_frames;
    use hearth_sync::{Push, PushData};
    use hearth_tree::{Node, Path};

    fn push(path: &str, data: PushData) -> String {
        let push = Push {
            path: Path::parse(path).expect("path"),
            data,
        };
        hearth_wire::encode_push(&push).untagged()
    }

    fn node(json: &str) -> Node {
        Node::from_json(&serde_json::from_str(json).expect("json")).expect("node")
    }

    #[test]
    fn a_cursor_push_is_a_small_datagram() {
        let text = push(
            "rooms/r1/cursors/u1",
            PushData::Put(node(r#"{"x":12,"y":34}"#)),
        );
        let Outbound::Datagram(datagram) = sort_message(&text, 1200) else {
            panic!("a datagram");
        };
        assert_eq!(
            &datagram[..],
            br#"d{"p":"/rooms/r1/cursors/u1","d":{"x":12,"y":34}}"#
        );
        assert_eq!(datagram.len(), 49);
        assert_eq!(
            encode_frames(text).len(),
            78,
            "the same push over WebSocket"
        );
    }

    #[test]
    fn merges_and_tagged_pushes_keep_their_body() {
        let merge = push(
            "rooms/r1/cursors",
            PushData::Merge(vec![
                (Path::parse("a").expect("path"), node("1")),
                (Path::parse("b").expect("path"), node("null")),
            ]),
        );
        assert_eq!(
            push_datagram(&merge).expect("a push"),
            br#"m{"p":"/rooms/r1/cursors","d":{"a":1,"b":null}}"#
        );
        let encoded = hearth_wire::encode_push(&Push {
            path: Path::parse("q").expect("path"),
            data: PushData::Put(node("true")),
        });
        assert_eq!(
            push_datagram(&encoded.tagged(7)).expect("a push"),
            br#"d{"p":"/q","d":true,"t":7}"#
        );
    }

    #[test]
    fn replies_and_large_pushes_go_on_the_stream() {
        let reply = r#"{"t":"d","d":{"r":3,"b":{"s":"ok","d":""}}}"#;
        assert_eq!(
            sort_message(reply, 1200),
            Outbound::Line(Bytes::from(format!("{reply}\n")))
        );
        let big = push(
            "a",
            PushData::Put(node(&format!("\"{}\"", "x".repeat(2000)))),
        );
        assert!(matches!(sort_message(&big, 1200), Outbound::Line(_)));
        // A credential revocation has the push's envelope but not its action.
        let revoked = hearth_wire::encode_auth_revoked("expired_token", "gone");
        assert!(push_datagram(&revoked).is_none());
    }

    #[test]
    fn frames_are_read_back_whole_across_feeds() {
        let long = format!("{{\"x\":\"{}\"}}", "y".repeat(40_000));
        let mut bytes = encode_frames("first".into()).to_vec();
        bytes.extend_from_slice(&encode_frames(long.clone()));
        bytes.extend_from_slice(&encode_frames("last".into()));
        let mut reader = FrameReader::default();
        let mut messages = Vec::new();
        for piece in bytes.chunks(777) {
            reader
                .feed(piece, |message| messages.push(message))
                .expect("frames");
        }
        assert_eq!(messages, vec!["first".to_owned(), long, "last".to_owned()]);
    }

    #[test]
    fn requests_are_classified_by_action() {
        let message = |a: &str| format!(r#"{{"t":"d","d":{{"r":1,"a":"{a}","b":{{"p":"/x"}}}}}}"#);
        assert_eq!(classify(&message("q")), Request::Listen);
        assert_eq!(classify(&message("n")), Request::Unlisten);
        assert_eq!(classify(&message("p")), Request::Write);
        assert_eq!(classify(&message("m")), Request::Write);
        assert_eq!(classify(&message("auth")), Request::Other);
        assert_eq!(classify("not json"), Request::Malformed);
        assert_eq!(classify(r#"{"t":"c","d":{}}"#), Request::Malformed);
    }

    #[test]
    fn listens_replies_and_push_paths_are_read() {
        assert_eq!(
            listen_request(r#"{"t":"d","d":{"r":4,"a":"q","b":{"p":"/rooms/r1/","h":""}}}"#),
            Some((4, "rooms/r1".to_owned()))
        );
        assert_eq!(
            listen_request(r#"{"t":"d","d":{"r":4,"a":"p","b":{"p":"/x","d":1}}}"#),
            None
        );
        assert_eq!(
            reply_number(r#"{"t":"d","d":{"r":4,"b":{"s":"ok","d":{}}}}"#),
            Some(4)
        );
        let text = push("rooms/r1/cursors/u\"1", PushData::Put(node("1")));
        assert_eq!(reply_number(&text), None);
        assert_eq!(push_path(&text).as_deref(), Some("rooms/r1/cursors/u\"1"));
        assert!(related("rooms/r1", "rooms/r1/cursors/a"));
        assert!(related("rooms/r1/cursors/a", "rooms/r1"));
        assert!(related("", "x"));
        assert!(related("a", "a"));
        assert!(!related("rooms/r1", "rooms/r10"));
    }

    #[test]
    fn lines_are_split_and_bounded() {
        let mut reader = LineReader::new(10);
        let mut lines = Vec::new();
        reader
            .feed(b"one\ntw", |line| lines.push(line))
            .expect("lines");
        reader
            .feed(b"o\r\n\nthree\n", |line| lines.push(line))
            .expect("lines");
        assert_eq!(lines, vec!["one", "two", "three"]);
        assert_eq!(
            reader.feed(b"0123456789ab", |_| {}),
            Err(LineError::TooLong(10))
        );
        let mut reader = LineReader::new(10);
        assert_eq!(reader.feed(b"\xff\n", |_| {}), Err(LineError::NotText));
    }

    #[test]
    fn the_bucket_refills_at_its_rate() {
        let mut bucket = Bucket::new(10, 3, 0);
        assert!((0..3).all(|_| bucket.take(0)));
        assert!(!bucket.take(0), "the burst is spent");
        assert!(!bucket.take(50));
        assert!(bucket.take(100), "one more after a tenth of a second");
        assert!(!bucket.take(100));
        assert!(
            (0..3).all(|_| bucket.take(10_000)),
            "refilled up to the burst"
        );
        assert!(!bucket.take(10_000));
    }
}
