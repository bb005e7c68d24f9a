//! Reading the first head of an HTTP request before any protocol library sees the socket:
//! enough to tell a WebSocket upgrade (and the database it names) from plain HTTP.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::query_string::QueryString;

/// The largest request head accepted.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// How long a client may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// A parsed request head.
#[derive(Debug, Clone)]
pub struct Head {
    pub method: String,
    /// The path without the query string, percent-decoding not applied.
    pub path: String,
    pub query: QueryString,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query.get(name)
    }

    /// A WebSocket upgrade of the realtime endpoint `/.ws`.
    pub fn is_realtime_upgrade(&self) -> bool {
        self.path == "/.ws" && self.is_websocket_upgrade()
    }

    pub fn is_websocket_upgrade(&self) -> bool {
        self.header("upgrade")
            .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
    }
}

/// Why a request head could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("the connection closed before a request arrived")]
    Closed,
    #[error("the request head is larger than {MAX_HEAD_BYTES} bytes")]
    TooLarge,
    #[error("the request head did not arrive within {HEAD_TIMEOUT:?}")]
    Timeout,
    #[error("malformed request head: {0}")]
    Malformed(String),
    #[error("read error: {0}")]
    Io(#[from] std::io::Error),
}

/// A request head together with every byte read so far: the head itself (the first
/// `head_len` bytes) and whatever followed it in the same reads. WebSocket connections
/// continue after the head; HTTP connections give all the bytes back to the HTTP server,
/// which parses the head again.
#[derive(Debug)]
pub struct ReadHead {
    pub head: Head,
    pub buffered: Vec<u8>,
    pub head_len: usize,
}

impl ReadHead {
    /// The bytes that followed the head.
    pub fn after_head(mut self) -> (Head, Vec<u8>) {
        let rest = self
            .buffered
            .split_off(self.head_len.min(self.buffered.len()));
        (self.head, rest)
    }
}

/// Reads one request head, keeping the bytes it read.
pub async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Result<ReadHead, HeadError> {
    tokio::time::timeout(HEAD_TIMEOUT, read_head_inner(stream))
        .await
        .map_err(|_| HeadError::Timeout)?
}

async fn read_head_inner<S: AsyncRead + Unpin>(stream: &mut S) -> Result<ReadHead, HeadError> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(HeadError::Closed);
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some((head, head_len)) = parse(&buffer)? {
            return Ok(ReadHead {
                head,
                buffered: buffer,
                head_len,
            });
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Parses a head from `buffer`; `None` when it is incomplete.
pub fn parse(buffer: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let used = match request.parse(buffer) {
        Ok(httparse::Status::Complete(used)) => used,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(HeadError::Malformed(error.to_string())),
    };
    let target = request.path.unwrap_or("/");
    let (path, query_text) = target.split_once('?').unwrap_or((target, ""));
    let query = QueryString::parse(query_text);
    let headers = request
        .headers
        .iter()
        .map(|header| {
            (
                header.name.to_owned(),
                String::from_utf8_lossy(header.value).into_owned(),
            )
        })
        .collect();
    Ok(Some((
        Head {
            method: request.method.unwrap_or("GET").to_owned(),
            path: path.to_owned(),
            query,
            headers,
        },
        used,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_upgrade_request() {
        let text = b"GET /.ws?v=5&ls=s1&ns=demo HTTP/1.1\r\nHost: localhost:9000\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: abc\r\n\r\nrest";
        let (head, used) = parse(text).expect("valid").expect("complete");
        assert_eq!(head.path, "/.ws");
        assert_eq!(head.query_param("ns"), Some("demo"));
        assert_eq!(head.query_param("ls"), Some("s1"));
        assert_eq!(head.header("host"), Some("localhost:9000"));
        assert!(head.is_websocket_upgrade());
        assert_eq!(&text[used..], b"rest");
    }

    #[test]
    fn partial_and_malformed_heads() {
        assert!(parse(b"GET / HTTP/1.1\r\nHost: x")
            .expect("valid")
            .is_none());
        assert!(parse(b"\x01\x02 nonsense\r\n\r\n").is_err());
    }
}
