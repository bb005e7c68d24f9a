//! The client's messages put back together from the segments its polls carry. Pure.
//!
//! The SDK encodes each message as UTF-8, then web-safe base64, and cuts that into segments
//! numbered on from the session's previous ones; every segment of a message names how many
//! the message has. Two polls may be in flight at once and arrive in either order, so a
//! segment ahead of the next expected one waits, within limits.

use std::collections::BTreeMap;

use base64::Engine;
use hearth_wire::MAX_MESSAGE_BYTES;
use thiserror::Error;

use hearth_ground::longpoll_request::Segment;

/// The most segments held while an earlier one is missing. The SDK has at most two polls in
/// flight, each with at most 63 segments.
pub const MAX_WAITING_SEGMENTS: usize = 128;

/// The most base64 characters one message may have: the WebSocket limit on a message's
/// bytes, as base64.
pub const MAX_MESSAGE_BASE64: usize = MAX_MESSAGE_BYTES / 3 * 4 + 4;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SegmentError {
    #[error("segment {0} is too far ahead of the next expected one")]
    TooFarAhead(u64),
    #[error("segment {0} does not belong to the message it continues")]
    Inconsistent(u64),
    #[error("a message may hold at most {MAX_MESSAGE_BYTES} bytes")]
    TooLarge,
    #[error("a message is not valid base64")]
    Base64,
}

/// The segments of one session received so far.
#[derive(Debug, Default)]
pub struct Reassembler {
    /// The number of the next segment to take.
    next: u64,
    /// Segments that arrived before one they follow.
    waiting: BTreeMap<u64, Segment>,
    /// The message being put together: how many segments it has, how many came, its text.
    current: Option<(u64, u64, String)>,
}

impl Reassembler {
    /// Takes one segment; appends every message it completes (with those after it that were
    /// waiting) to `out`. A segment seen before is ignored.
    pub fn push(&mut self, segment: Segment, out: &mut Vec<String>) -> Result<(), SegmentError> {
        if segment.number < self.next || self.waiting.contains_key(&segment.number) {
            return Ok(());
        }
        if segment.number - self.next >= MAX_WAITING_SEGMENTS as u64 {
            return Err(SegmentError::TooFarAhead(segment.number));
        }
        self.waiting.insert(segment.number, segment);
        while let Some(segment) = self.waiting.remove(&self.next) {
            self.take(segment, out)?;
            self.next += 1;
        }
        Ok(())
    }

    fn take(&mut self, segment: Segment, out: &mut Vec<String>) -> Result<(), SegmentError> {
        let (total, count, text) = self
            .current
            .get_or_insert_with(|| (segment.total, 0, String::new()));
        if *total != segment.total {
            return Err(SegmentError::Inconsistent(segment.number));
        }
        if text.len() + segment.data.len() > MAX_MESSAGE_BASE64 {
            return Err(SegmentError::TooLarge);
        }
        text.push_str(&segment.data);
        *count += 1;
        if count == total {
            let (_, _, text) = self.current.take().unwrap_or_default();
            out.push(decode(&text)?);
        }
        Ok(())
    }
}

/// A message's text from its web-safe base64. A lone surrogate, which the SDK's encoder turns
/// into bytes that are not UTF-8, becomes U+FFFD as a browser's WebSocket would make it.
pub fn decode(base64: &str) -> Result<String, SegmentError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(base64.trim_end_matches('.'))
        .map_err(|_| SegmentError::Base64)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SDK's encoding: web-safe base64 with `.` padding, cut into `size` characters.
    fn encode(text: &str, first: u64, size: usize) -> Vec<Segment> {
        let encoded = base64::engine::general_purpose::URL_SAFE
            .encode(text.as_bytes())
            .replace('=', ".");
        let pieces: Vec<String> = encoded
            .as_bytes()
            .chunks(size)
            .map(|chunk| String::from_utf8(chunk.to_vec()).expect("valid test input"))
            .collect();
        let total = pieces.len() as u64;
        pieces
            .into_iter()
            .enumerate()
            .map(|(i, data)| Segment {
                number: first + i as u64,
                total,
                data,
            })
            .collect()
    }

    #[test]
    fn messages_come_back_whole_in_any_arrival_order() {
        let first = r#"{"t":"d","d":{"r":1,"a":"p","b":{"p":"/a","d":"héllo ✓"}}}"#;
        let second = "{\"t\":\"d\",\"d\":{\"r\":2,\"a\":\"n\",\"b\":{\"p\":\"/b\"}}}";
        let mut segments = encode(first, 0, 8);
        let count = segments.len() as u64;
        segments.extend(encode(second, count, 1840));
        // The last poll arrives first, then the rest in reverse.
        let mut reassembler = Reassembler::default();
        let mut out = Vec::new();
        for segment in segments.into_iter().rev() {
            reassembler
                .push(segment, &mut out)
                .expect("valid test input");
        }
        assert_eq!(out, vec![first.to_owned(), second.to_owned()]);
    }

    #[test]
    fn repeated_segments_are_ignored() {
        let mut reassembler = Reassembler::default();
        let mut out = Vec::new();
        for segment in encode("{\"x\":1}", 0, 4) {
            reassembler
                .push(segment.clone(), &mut out)
                .expect("valid test input");
            reassembler
                .push(segment, &mut out)
                .expect("valid test input");
        }
        assert_eq!(out, vec!["{\"x\":1}".to_owned()]);
    }

    #[test]
    fn limits_hold() {
        let mut reassembler = Reassembler::default();
        let mut out = Vec::new();
        let far = Segment {
            number: MAX_WAITING_SEGMENTS as u64,
            total: 1,
            data: "AA".into(),
        };
        assert_eq!(
            reassembler.push(far, &mut out),
            Err(SegmentError::TooFarAhead(MAX_WAITING_SEGMENTS as u64))
        );
        let mut reassembler = Reassembler::default();
        reassembler
            .push(
                Segment {
                    number: 0,
                    total: 3,
                    data: "AA".into(),
                },
                &mut out,
            )
            .expect("valid test input");
        assert_eq!(
            reassembler.push(
                Segment {
                    number: 1,
                    total: 2,
                    data: "AA".into()
                },
                &mut out
            ),
            Err(SegmentError::Inconsistent(1))
        );
        // A message announced as longer than the limit fails once its text passes it.
        let mut reassembler = Reassembler::default();
        let data = "A".repeat(4096);
        let mut failed = None;
        for number in 0..(MAX_MESSAGE_BASE64 / 4096 + 2) as u64 {
            let segment = Segment {
                number,
                total: u64::MAX,
                data: data.clone(),
            };
            if let Err(error) = reassembler.push(segment, &mut out) {
                failed = Some(error);
                break;
            }
        }
        assert_eq!(failed, Some(SegmentError::TooLarge));
        assert!(out.is_empty());
    }

    #[test]
    fn bad_base64_and_lone_surrogates() {
        assert_eq!(decode("!!"), Err(SegmentError::Base64));
        // The SDK's encoding of a lone high surrogate (U+D800) as three bytes.
        let bytes = [b'"', 0xED, 0xA0, 0x80, b'"'];
        let encoded = base64::engine::general_purpose::URL_SAFE
            .encode(bytes)
            .replace('=', ".");
        assert_eq!(
            decode(&encoded).expect("valid test input"),
            "\"\u{FFFD}\u{FFFD}\u{FFFD}\""
        );
    }
}
