//! The few HTTP/1.1 requests the online tools make: one request per connection
//! (`Connection: close`), bodies sent from memory and answers streamed to a writer. The
//! server's REST answers carry a `Content-Length`; an answer without one is read to the end.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};

/// The longest a request may take to answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The most bytes of response head read.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// A server's address from `http://HOST:PORT` (or `HOST:PORT`).
pub fn address(url: &str) -> anyhow::Result<String> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    if url.starts_with("https://") {
        bail!("https is not supported by the tools; use http:// on a trusted network");
    }
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || !host.contains(':') {
        bail!("--url must look like http://HOST:PORT; got {url:?}");
    }
    Ok(host.to_owned())
}

/// Sends a request and writes the body of the answer to `out`; returns the status.
pub fn request(
    address: &str,
    method: &str,
    target: &str,
    token: &str,
    body: Option<&[u8]>,
    out: &mut dyn Write,
) -> anyhow::Result<u16> {
    let mut stream =
        TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP answer: {status_line:?}"))?;
    let mut length = None;
    let mut head_bytes = status_line.len();
    loop {
        let mut line = String::new();
        let read = reader.read_line(&mut line)?;
        head_bytes += read;
        if read == 0 || line == "\r\n" {
            break;
        }
        if head_bytes > MAX_HEAD_BYTES {
            bail!("the answer's head is too large");
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<u64>().ok();
            }
        }
    }
    match length {
        Some(length) => std::io::copy(&mut reader.take(length), out)?,
        None => std::io::copy(&mut reader, out)?,
    };
    Ok(status)
}

/// Percent-encodes a key for a URL path.
pub fn encode_key(key: &str) -> String {
    let mut encoded = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_keys() -> anyhow::Result<()> {
        assert_eq!(address("http://127.0.0.1:9000")?, "127.0.0.1:9000");
        assert_eq!(address("localhost:9000/")?, "localhost:9000");
        assert!(address("https://x:1").is_err());
        assert!(address("http://nohost").is_err());
        assert_eq!(encode_key("a b/é"), "a%20b%2F%C3%A9");
        Ok(())
    }
}
