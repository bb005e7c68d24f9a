//! What a long-polling client is answered, and the messages taken back out of the WebSocket
//! frames every session's messages are encoded as. Pure.
//!
//! The SDK loads each answer as a script in a hidden iframe of the page, so an answer is
//! JavaScript that calls the page's two functions for its transport, `pLPCommand<n>` and
//! `pRTLPCB<n>` (`n` from the start's `cb`), through `parent`:
//! - `pLPCommand<n>("start", id, password)`: the session exists; the SDK's polls name it;
//! - `pRTLPCB<n>(number, [message, …])`: messages, in answers numbered from 0 that the SDK
//!   puts back in order (polls may return in any order);
//! - `pLPCommand<n>("close", last)`: no more data after answer `last` (or at once without
//!   it); the SDK then drops the transport and reconnects.
//!
//! An answer with nothing to say is an empty script: it takes no number, so it can never
//! leave a gap in the SDK's sequence.

use std::collections::VecDeque;

use hearth_ground::rest::RestResponse;

/// The content type of every script answer.
pub const SCRIPT_TYPE: &str = "application/javascript; charset=utf-8";

/// The content type of the disconnect frame.
pub const HTML_TYPE: &str = "text/html; charset=utf-8";

/// The page the SDK keeps in an iframe for the session's life: when the page goes away (it is
/// closed, navigates, or the SDK removes the frame), it tells the server at once, so the
/// session's onDisconnect writes run without waiting for the idle timeout. It reads the
/// session's id and password from its own address, so nothing of the request is written into
/// it. `sendBeacon` is the one request a page may still send while it unloads.
pub const DISCONNECT_FRAME: &str = "<!doctype html><html><body><script>\
addEventListener('pagehide',function(){\
var q=new URLSearchParams(location.search),p=new URLSearchParams();\
['id','pw','ns'].forEach(function(k){if(q.has(k))p.set(k,q.get(k));});\
p.set('disconn','t');\
navigator.sendBeacon(location.pathname+'?'+p.toString());\
});</script></body></html>";

/// The content security policy of the disconnect frame: its own script, beacons to its own
/// origin, nothing else.
pub const DISCONNECT_FRAME_POLICY: &str =
    "default-src 'none'; script-src 'unsafe-inline'; connect-src 'self'";

/// The start's answer: the session's id and password, then the first messages (the
/// handshake) as answer 0.
pub fn start(callback: u32, id: &str, password: &str, first: &[String]) -> String {
    let mut out = command(callback, "start", &[id, password]);
    if !first.is_empty() {
        out.push_str(&data(callback, 0, first));
    }
    out
}

/// Messages as answer `number`.
pub fn data(callback: u32, number: u64, messages: &[String]) -> String {
    let size: usize = messages.iter().map(|m| m.len() + 1).sum();
    let mut out = String::with_capacity(size + 40);
    out.push_str("parent.pRTLPCB");
    out.push_str(&callback.to_string());
    out.push('(');
    out.push_str(&number.to_string());
    out.push_str(",[");
    for (i, message) in messages.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Every message is a JSON object, which is a JavaScript expression as it is (JSON
        // is a subset of the language since ES2019, U+2028 included).
        out.push_str(message);
    }
    out.push_str("]);\n");
    out
}

/// The end of the session: after answer `last` when messages were sent in this answer or
/// before it, at once otherwise.
pub fn close(callback: u32, last: Option<u64>) -> String {
    match last {
        // The SDK treats 0 as "no argument", so the close after answer 0 would come before
        // it: the answer's own messages are handed over first in any case, as the script
        // calls the data function before this.
        Some(last) => format!("parent.pLPCommand{callback}(\"close\",{last});\n"),
        None => format!("parent.pLPCommand{callback}(\"close\");\n"),
    }
}

fn command(callback: u32, name: &str, args: &[&str]) -> String {
    let mut out = format!("parent.pLPCommand{callback}(\"{name}\"");
    for arg in args {
        // Ids and passwords are made by the server from `A-Z a-z 0-9 - _`.
        out.push_str(",\"");
        out.push_str(arg);
        out.push('"');
    }
    out.push_str(");\n");
    out
}

/// A script answer, never cached.
pub fn script_answer(text: String) -> RestResponse {
    RestResponse {
        status: 200,
        content_type: Some(SCRIPT_TYPE),
        headers: vec![
            ("cache-control", "no-store".into()),
            ("x-content-type-options", "nosniff".into()),
        ],
        body: text.into(),
    }
}

/// Takes whole messages back out of the WebSocket frame bytes a session is sent (the owner
/// encodes every message once as frames, for every transport): text frames, a long message
/// as a frame with its chunk count followed by its chunks. Bytes may arrive in any pieces.
#[derive(Debug, Default)]
pub struct FrameReader {
    buffer: Vec<u8>,
    /// The chunks still expected of a long message, and its text so far.
    chunks: Option<(usize, String)>,
}

impl FrameReader {
    /// Takes `bytes`; appends the messages they complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut VecDeque<String>) {
        self.buffer.extend_from_slice(bytes);
        let mut start = 0;
        while let Some((payload, end)) = frame_at(&self.buffer[start..]) {
            let payload = String::from_utf8_lossy(payload).into_owned();
            start += end;
            self.take(payload, out);
        }
        self.buffer.drain(..start);
    }

    fn take(&mut self, payload: String, out: &mut VecDeque<String>) {
        match &mut self.chunks {
            Some((left, text)) => {
                text.push_str(&payload);
                *left -= 1;
                if *left == 0 {
                    if let Some((_, text)) = self.chunks.take() {
                        out.push_back(text);
                    }
                }
            }
            None => match chunk_count(&payload) {
                Some(count) => self.chunks = Some((count, String::new())),
                None => out.push_back(payload),
            },
        }
    }

    /// Bytes of a frame not complete yet.
    pub fn buffered(&self) -> usize {
        self.buffer.len() + self.chunks.as_ref().map_or(0, |(_, text)| text.len())
    }
}

/// A frame holding only a count of chunks: a short number (spec §2.2), never 0 from us.
fn chunk_count(payload: &str) -> Option<usize> {
    if payload.is_empty() || payload.len() > 6 || !payload.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    payload.parse().ok().filter(|count| *count > 0)
}

/// The payload of the unmasked frame at the start of `bytes` and where the frame ends, once
/// all of it is there.
fn frame_at(bytes: &[u8]) -> Option<(&[u8], usize)> {
    let (&_, rest) = bytes.split_first()?;
    let (&length, rest) = rest.split_first()?;
    let (length, header) = match length & 0x7f {
        126 => (
            u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize,
            4,
        ),
        127 => (
            usize::try_from(u64::from_be_bytes(rest.get(..8)?.try_into().ok()?)).ok()?,
            10,
        ),
        short => (short as usize, 2usize),
    };
    let end = header.checked_add(length)?;
    Some((bytes.get(header..end)?, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_edge::frames::encode_frames;

    #[test]
    fn answers_call_the_pages_functions() {
        let hello = r#"{"t":"c","d":{"t":"h","d":{"s":"x"}}}"#.to_owned();
        assert_eq!(
            start(3, "0-7", "pw", std::slice::from_ref(&hello)),
            format!(
                "parent.pLPCommand3(\"start\",\"0-7\",\"pw\");\nparent.pRTLPCB3(0,[{hello}]);\n"
            )
        );
        assert_eq!(
            data(1, 5, &["{\"a\":1}".into(), "{\"b\":2}".into()]),
            "parent.pRTLPCB1(5,[{\"a\":1},{\"b\":2}]);\n"
        );
        assert_eq!(close(2, Some(9)), "parent.pLPCommand2(\"close\",9);\n");
        assert_eq!(close(2, None), "parent.pLPCommand2(\"close\");\n");
    }

    #[test]
    fn messages_come_out_of_their_frames_in_any_pieces() {
        let long = format!("{{\"t\":\"d\",\"d\":\"{}\"}}", "é".repeat(30_000));
        let short = "{\"t\":\"d\",\"d\":1}".to_owned();
        let mut bytes = encode_frames(short.clone()).to_vec();
        bytes.extend_from_slice(&encode_frames(long.clone()));
        bytes.extend_from_slice(&encode_frames(short.clone()));
        for piece in [1, 7, 500, bytes.len()] {
            let mut reader = FrameReader::default();
            let mut out = VecDeque::new();
            for chunk in bytes.chunks(piece) {
                reader.push(chunk, &mut out);
            }
            assert_eq!(
                Vec::from(out),
                vec![short.clone(), long.clone(), short.clone()]
            );
            assert_eq!(reader.buffered(), 0);
        }
    }

    #[test]
    fn a_frame_of_70000_bytes_uses_the_long_length() {
        let text = "x".repeat(70_000);
        let mut out = VecDeque::new();
        let mut reader = FrameReader::default();
        // Past 16 KiB the owner splits into chunks: one frame here is built by hand.
        let mut frame = vec![0x81, 127];
        frame.extend_from_slice(&(text.len() as u64).to_be_bytes());
        frame.extend_from_slice(text.as_bytes());
        reader.push(&frame, &mut out);
        assert_eq!(out.pop_front(), Some(text));
    }
}
