//! The feed scenario over REST: users' feed pages read with `GET` and their read offsets
//! written with `PATCH`, each connection sending its next request as soon as the last one is
//! answered (closed loop: the rate is whatever the server sustains), over HTTP/1.1 keep-alive.

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::scenario::Scenario;
use crate::wire;

/// The longest response head read.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The longest response body read.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// One keep-alive HTTP/1.1 connection.
struct Http {
    stream: BufReader<TcpStream>,
    host: String,
}

impl Http {
    async fn connect(address: &str, source: Option<IpAddr>) -> anyhow::Result<Http> {
        let stream = crate::tcp::open_tcp(address, source).await?;
        Ok(Http {
            stream: BufReader::new(stream),
            host: address.to_owned(),
        })
    }

    /// Sends a request and returns the status and the body.
    async fn request(
        &mut self,
        method: &str,
        target: &str,
        body: &str,
    ) -> anyhow::Result<(u16, Vec<u8>)> {
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.stream.get_mut().write_all(head.as_bytes()).await?;
        read_answer(&mut self.stream).await
    }
}

/// Reads one HTTP/1.1 answer: the status and the body, sized by `content-length` or sent in
/// chunks (as Node.js servers do).
async fn read_answer<R: AsyncBufRead + Unpin>(reader: &mut R) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("not an HTTP answer: {line:?}"))?;
    let mut length = 0usize;
    let mut chunked = false;
    let mut head_bytes = line.len();
    while field_line(reader, &mut line, &mut head_bytes).await? {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.trim().eq_ignore_ascii_case("chunked");
            }
        }
    }
    if chunked {
        return Ok((status, read_chunks(reader).await?));
    }
    anyhow::ensure!(length <= MAX_BODY_BYTES, "answer body too large");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    Ok((status, body))
}

/// A chunked body: sized chunks up to an empty one, then trailers up to an empty line.
async fn read_chunks<R: AsyncBufRead + Unpin>(reader: &mut R) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        anyhow::ensure!(line.len() <= MAX_HEAD_BYTES, "chunk size line too long");
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| anyhow::anyhow!("not a chunk size: {line:?}"))?;
        if size == 0 {
            break;
        }
        anyhow::ensure!(body.len() + size <= MAX_BODY_BYTES, "answer body too large");
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).await?;
        let mut end = [0u8; 2];
        reader.read_exact(&mut end).await?;
        anyhow::ensure!(&end == b"\r\n", "a chunk does not end its line");
    }
    let mut trailer_bytes = 0;
    while field_line(reader, &mut line, &mut trailer_bytes).await? {}
    Ok(body)
}

/// Reads the next line of a head or of trailers into `line`; `false` at the empty line that
/// ends them. `seen` counts their bytes against [`MAX_HEAD_BYTES`].
async fn field_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut String,
    seen: &mut usize,
) -> anyhow::Result<bool> {
    line.clear();
    let read = reader.read_line(line).await?;
    *seen += read;
    anyhow::ensure!(read > 0, "the connection closed mid-answer");
    anyhow::ensure!(*seen <= MAX_HEAD_BYTES, "answer head or trailers too large");
    Ok(line != "\r\n")
}

/// Writes every user's feed page, then starts the readers.
pub async fn start(
    scenario: &Scenario,
    address: &str,
    source: Option<IpAddr>,
    seed_feeds: bool,
    metrics: &Rc<Metrics>,
    stopping: &Rc<Cell<bool>>,
) -> anyhow::Result<()> {
    let ns = scenario.ns.clone();
    let mut seed = Http::connect(address, source).await?;
    let users = if seed_feeds { scenario.users } else { 0 };
    for user in 0..users {
        let items: Map<String, Value> = (0..scenario.page_items)
            .map(|item| {
                (
                    format!("i{item:04}"),
                    json!({"title": format!("post {item} for user {user}"), "likes": item * 3, "by": format!("u{}", (user + item) % scenario.users)}),
                )
            })
            .collect();
        let body = json!({"items": items, "meta": {"read": 0}}).to_string();
        let (status, _) = seed
            .request(
                "PUT",
                &format!("/feeds/u{user:06}.json?ns={ns}&print=silent"),
                &body,
            )
            .await?;
        anyhow::ensure!(
            (200..300).contains(&status),
            "seeding the feeds: status {status}"
        );
    }
    for index in 0..scenario.connections {
        let address = address.to_owned();
        let metrics = metrics.clone();
        let stopping = stopping.clone();
        let ns = ns.clone();
        let users = scenario.users;
        let write_every = scenario.write_every.max(1);
        tokio::task::spawn_local(async move {
            let mut n = index as u64;
            while !stopping.get() {
                let Ok(mut http) = Http::connect(&address, source).await else {
                    metrics.reconnect();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                metrics.open.set(metrics.open.get() + 1);
                while !stopping.get() {
                    n = n.wrapping_add(7919);
                    let user = n as usize % users;
                    let started = Instant::now();
                    let (kind, outcome) = if n.is_multiple_of(write_every) {
                        let body = json!({"read": n, "t": wire::now_us()}).to_string();
                        let target = format!("/feeds/u{user:06}/meta.json?ns={ns}&print=silent");
                        ("patch", http.request("PATCH", &target, &body).await)
                    } else {
                        let target = format!("/feeds/u{user:06}.json?ns={ns}");
                        ("get", http.request("GET", &target, "").await)
                    };
                    match outcome {
                        Ok((status, _)) if (200..300).contains(&status) => {
                            metrics.ack(kind, started.elapsed().as_micros() as u64);
                        }
                        Ok((status, body)) => metrics.error(format!(
                            "{kind} answered {status}: {}",
                            String::from_utf8_lossy(&body)
                        )),
                        Err(_) => break,
                    }
                }
                metrics.open.set(metrics.open.get().saturating_sub(1));
                if !stopping.get() {
                    metrics.reconnect();
                }
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(bytes: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
        let mut reader = bytes;
        read_answer(&mut reader).await
    }

    #[tokio::test]
    async fn answers_are_read_by_length_or_in_chunks() -> anyhow::Result<()> {
        let sized = answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").await?;
        assert_eq!(sized, (200, b"hello".to_vec()));
        let chunked = answer(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nX-Trailer: 1\r\n\r\n",
        )
        .await?;
        assert_eq!(chunked, (404, b"hello".to_vec()));
        assert!(
            answer(b"4c9\r\n").await.is_err(),
            "a status line is required"
        );
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(answer(bad).await.is_err(), "a chunk size is hexadecimal");
        Ok(())
    }
}
