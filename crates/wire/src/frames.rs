//! Splitting and joining of messages across WebSocket frames (spec §2.2).

/// The largest frame the client sends, and the size at which the server splits its own
/// messages. The client counts UTF-16 units; a frame of at most this many bytes never has more
/// units than that.
pub const MAX_FRAME_BYTES: usize = 16_384;

/// The largest whole message accepted from a client, after joining its frames. A write of the
/// SDK is limited to 16 MB of JSON; the rest is room for the envelope and escapes.
pub const MAX_MESSAGE_BYTES: usize = 24 * 1024 * 1024;

/// The most frames one split message may announce: the client's own maximum.
const MAX_FRAME_COUNT: usize = 9_999;

/// Why inbound frames could not be joined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("a message may be split into at most {MAX_FRAME_COUNT} frames, not {0}")]
    TooManyFrames(usize),
    #[error("a message may hold at most {MAX_MESSAGE_BYTES} bytes")]
    MessageTooLarge,
}

/// Joins inbound frames into messages. A frame of at most six characters that is a number
/// announces how many frames follow, unless it is `0`, the client's keep-alive.
#[derive(Debug, Default)]
pub struct FrameAssembler {
    pending: Option<Pending>,
}

#[derive(Debug)]
struct Pending {
    remaining: usize,
    text: String,
}

/// What one inbound frame amounted to.
#[derive(Debug, PartialEq, Eq)]
pub enum Assembled {
    /// A whole message.
    Message(String),
    /// Part of a split message; more frames are expected.
    Partial,
    /// The keep-alive frame `0`.
    KeepAlive,
}

impl FrameAssembler {
    /// Feeds one text frame.
    pub fn push(&mut self, frame: &str) -> Result<Assembled, FrameError> {
        if let Some(pending) = self.pending.as_mut() {
            if pending.text.len() + frame.len() > MAX_MESSAGE_BYTES {
                self.pending = None;
                return Err(FrameError::MessageTooLarge);
            }
            pending.text.push_str(frame);
            pending.remaining -= 1;
            if pending.remaining > 0 {
                return Ok(Assembled::Partial);
            }
            let text = self.pending.take().map(|p| p.text).unwrap_or_default();
            return Ok(Assembled::Message(text));
        }
        if frame.len() <= 6 {
            if let Ok(count) = frame.parse::<usize>() {
                if count == 0 {
                    return Ok(Assembled::KeepAlive);
                }
                if count > MAX_FRAME_COUNT {
                    return Err(FrameError::TooManyFrames(count));
                }
                self.pending = Some(Pending {
                    remaining: count,
                    text: String::new(),
                });
                return Ok(Assembled::Partial);
            }
        }
        if frame.len() > MAX_MESSAGE_BYTES {
            return Err(FrameError::MessageTooLarge);
        }
        Ok(Assembled::Message(frame.to_owned()))
    }

    /// Whether a split message is being collected.
    pub fn is_collecting(&self) -> bool {
        self.pending.is_some()
    }
}

/// Cuts a message longer than [`MAX_FRAME_BYTES`] into frames on character boundaries; the
/// caller sends the count first, then the frames. `None` means the message fits in one frame.
pub fn split_frames(message: &str) -> Option<Vec<&str>> {
    if message.len() <= MAX_FRAME_BYTES {
        return None;
    }
    let mut frames = Vec::with_capacity(message.len() / MAX_FRAME_BYTES + 1);
    let mut rest = message;
    while !rest.is_empty() {
        let mut cut = rest.len().min(MAX_FRAME_BYTES);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (frame, tail) = rest.split_at(cut);
        frames.push(frame);
        rest = tail;
    }
    Some(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_announced_frames() {
        let mut assembler = FrameAssembler::default();
        assert_eq!(assembler.push("3"), Ok(Assembled::Partial));
        assert_eq!(assembler.push("{\"a\""), Ok(Assembled::Partial));
        assert_eq!(assembler.push(":"), Ok(Assembled::Partial));
        assert_eq!(
            assembler.push("1}"),
            Ok(Assembled::Message("{\"a\":1}".to_owned()))
        );
        assert!(!assembler.is_collecting());
    }

    #[test]
    fn zero_is_keep_alive_and_long_numbers_are_messages() {
        let mut assembler = FrameAssembler::default();
        assert_eq!(assembler.push("0"), Ok(Assembled::KeepAlive));
        assert_eq!(
            assembler.push("1234567"),
            Ok(Assembled::Message("1234567".to_owned()))
        );
        assert_eq!(
            assembler.push("999999"),
            Err(FrameError::TooManyFrames(999_999))
        );
    }

    #[test]
    fn split_respects_characters() {
        let message = "é".repeat(MAX_FRAME_BYTES);
        let frames = split_frames(&message).expect("long enough to split");
        assert!(frames.iter().all(|f| f.len() <= MAX_FRAME_BYTES));
        assert_eq!(frames.concat(), message);
        assert!(split_frames("short").is_none());
    }

    #[test]
    fn oversized_split_messages_are_refused() {
        let mut assembler = FrameAssembler::default();
        assert_eq!(assembler.push("9999"), Ok(Assembled::Partial));
        let chunk = "x".repeat(MAX_FRAME_BYTES * 64);
        let mut result = Ok(Assembled::Partial);
        for _ in 0..MAX_FRAME_COUNT {
            result = assembler.push(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(FrameError::MessageTooLarge));
    }
}
