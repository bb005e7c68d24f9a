//! The few pieces of the Firebase realtime wire format the tester needs (spec: shared/spec/
//! firebase-wire-protocol.md): requests out, and replies and pushes in, with long messages
//! reassembled from their frames.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

/// The most frames one split message may announce; more is a broken server.
const MAX_FRAMES: usize = 100_000;

/// The `host:port` of each of a comma-separated list of URLs of one scheme (connection `i`
/// goes to the `i % n`-th: several load balancers in front of one cluster).
pub fn addresses(urls: &str) -> anyhow::Result<Vec<String>> {
    let scheme = |url: &str| url.split_once("://").map(|(scheme, _)| scheme.to_owned());
    let first = scheme(urls);
    urls.split(',')
        .map(|url| {
            anyhow::ensure!(
                scheme(url) == first,
                "the URLs of one --url must share a scheme; got {urls:?}"
            );
            address(url)
        })
        .collect()
}

/// `host:port` from `ws://host:port` (or `http://…`, `https://…`, `redis://…`, `broadcast://…`, or bare).
pub fn address(url: &str) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("ws://")
        .or_else(|| url.strip_prefix("http://"))
        .or_else(|| url.strip_prefix("https://"))
        .or_else(|| url.strip_prefix("redis://"))
        .or_else(|| url.strip_prefix("broadcast://"))
        .unwrap_or(url);
    let host = rest.split('/').next().unwrap_or_default();
    anyhow::ensure!(
        host.contains(':'),
        "--url must look like ws://HOST:PORT; got {url:?}"
    );
    Ok(host.to_owned())
}

/// Microseconds since the epoch: the clock every process on the machine shares.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

/// A data request.
pub fn request(id: u64, action: &str, body: Value) -> String {
    json!({"t": "d", "d": {"r": id, "a": action, "b": body}}).to_string()
}

/// Joins frames into messages: a frame holding only a number announces that many frames.
#[derive(Debug, Default)]
pub struct Assembler {
    remaining: usize,
    parts: String,
}

impl Assembler {
    /// Feeds one text frame; returns a complete message when there is one.
    pub fn push(&mut self, frame: &str) -> Option<String> {
        if self.remaining > 0 {
            self.parts.push_str(frame);
            self.remaining -= 1;
            return (self.remaining == 0).then(|| std::mem::take(&mut self.parts));
        }
        if !frame.is_empty() && frame.len() <= 6 && frame.bytes().all(|b| b.is_ascii_digit()) {
            let count: usize = frame.parse().unwrap_or(0);
            if count > 0 && count <= MAX_FRAMES {
                self.remaining = count;
                return None;
            }
        }
        Some(frame.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_urls_of_one_scheme() -> anyhow::Result<()> {
        assert_eq!(addresses("ws://127.0.0.1:9000")?, ["127.0.0.1:9000"]);
        assert_eq!(
            addresses("ws://127.0.1.1:80,ws://127.0.1.2:80")?,
            ["127.0.1.1:80", "127.0.1.2:80"]
        );
        assert!(addresses("ws://127.0.0.1:1,https://127.0.0.1:2").is_err());
        Ok(())
    }

    #[test]
    fn split_messages_are_joined() {
        let mut assembler = Assembler::default();
        assert_eq!(assembler.push("2"), None);
        assert_eq!(assembler.push("{\"t\":"), None);
        assert_eq!(assembler.push("\"d\"}").as_deref(), Some("{\"t\":\"d\"}"));
        assert_eq!(assembler.push("{}").as_deref(), Some("{}"));
    }

    #[test]
    fn addresses_come_from_urls() {
        assert_eq!(
            address("ws://127.0.0.1:9000").ok().as_deref(),
            Some("127.0.0.1:9000")
        );
    }
}
