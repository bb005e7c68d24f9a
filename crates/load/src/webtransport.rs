//! One simulated user over Hearth's WebTransport endpoint (`hearth serve
//! --webtransport-listen`), as the `clients/webtransport` module speaks it (docs/volatile.md):
//! one bidirectional stream of Firebase messages, one per line (the handshake, listens,
//! replies, large pushes), writes sent as datagrams, pushes received as datagrams (`d` or `m`
//! and the push's body). The server's certificate is pinned by its SHA-256, as a browser
//! pins a development certificate with `serverCertificateHashes`.
//!
//! Every connection has its own QUIC endpoint, so its own UDP socket and source port, as
//! separate users would: the server then sees as many peers as there are connections, and
//! cannot batch sends to several of them into one system call.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use wtransport::tls::Sha256Digest;
use wtransport::{ClientConfig, Endpoint, SendStream, VarInt};

use crate::conn::{on_incoming, opening_requests, Context, Requests, Seen, CONNECT_TIMEOUT};
use crate::incoming::{self, Incoming};
use crate::metrics::QuicUse;
use crate::schedule::Schedule;

/// The longest line the server's stream may send (its own limit for what it reads is
/// 64 KiB; a room's first data is far smaller).
const MAX_LINE_BYTES: usize = 1024 * 1024;
/// The stream's read buffer.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Where the sessions go.
pub struct Server<'a> {
    /// `host:port` of the UDP endpoint.
    pub address: &'a str,
    /// The SHA-256 of its certificate (`hearth serve` logs it at start).
    pub certificate: [u8; 32],
}

/// Reads a certificate hash given as hex (colons and spaces allowed, as tools print them).
pub fn parse_certificate_hash(text: &str) -> anyhow::Result<[u8; 32]> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(|byte| !matches!(byte, b':' | b' '))
        .collect();
    anyhow::ensure!(
        digits.len() == 64,
        "a SHA-256 is 64 hex digits; got {} in {text:?}",
        digits.len()
    );
    let mut hash = [0u8; 32];
    for (byte, pair) in hash.iter_mut().zip(digits.chunks(2)) {
        let pair = std::str::from_utf8(pair)?;
        *byte = u8::from_str_radix(pair, 16)
            .map_err(|_| anyhow::anyhow!("{pair:?} in {text:?} is not hex"))?;
    }
    Ok(hash)
}

/// Splits a byte stream into lines, each at most [`MAX_LINE_BYTES`].
#[derive(Default)]
struct Lines {
    buffered: Vec<u8>,
}

impl Lines {
    /// Feeds bytes; returns the complete, non-empty lines they end.
    fn feed(&mut self, bytes: &[u8]) -> anyhow::Result<Vec<String>> {
        self.buffered.extend_from_slice(bytes);
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(end) = self.buffered[start..].iter().position(|&b| b == b'\n') {
            let line = std::str::from_utf8(&self.buffered[start..start + end])?;
            if !line.is_empty() {
                lines.push(line.to_owned());
            }
            start += end + 1;
        }
        self.buffered.drain(..start);
        anyhow::ensure!(
            self.buffered.len() <= MAX_LINE_BYTES,
            "a line of more than {MAX_LINE_BYTES} bytes on the stream"
        );
        Ok(lines)
    }
}

/// Writes a request on the stream, as one line.
async fn send_line(send: &mut SendStream, text: &str) -> anyhow::Result<()> {
    let mut line = Vec::with_capacity(text.len() + 1);
    line.extend_from_slice(text.as_bytes());
    line.push(b'\n');
    send.write_all(&line).await?;
    Ok(())
}

/// One session, from connect to close. `Ok` when the server closed it or the run ended.
pub async fn session(
    context: &Context<'_>,
    server: &Server<'_>,
    source: Option<IpAddr>,
    schedule: &mut Schedule,
    seen: &mut Seen,
) -> anyhow::Result<()> {
    let (plan, metrics, stopping) = (context.plan, context.metrics, context.stopping);
    let bind = SocketAddr::new(source.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), 0);
    let config = ClientConfig::builder()
        .with_bind_address(bind)
        .with_server_certificate_hashes([Sha256Digest::new(server.certificate)])
        .build();
    let endpoint = Endpoint::client(config)?;
    let url = format!("https://{}/.wt?ns={}", server.address, plan.ns);
    let mut lines = Lines::default();
    let mut buffer = vec![0u8; READ_BUFFER_BYTES];
    // Open the session and its stream, and wait for the handshake on it.
    let (connection, mut send, mut recv) = tokio::time::timeout(CONNECT_TIMEOUT, async {
        let connection = endpoint.connect(url).await?;
        let (send, mut recv) = connection.open_bi().await?.await?;
        loop {
            let Some(read) = recv.read(&mut buffer).await? else {
                anyhow::bail!("closed before the handshake");
            };
            if lines
                .feed(&buffer[..read])?
                .iter()
                .any(|line| incoming::parse(line) == Incoming::Handshake)
            {
                return Ok((connection, send, recv));
            }
        }
    })
    .await??;
    metrics.open.set(metrics.open.get() + 1);
    let mut pushes_received = 0u64;
    let result = async {
        let mut requests = Requests::default();
        for text in opening_requests(plan, &mut requests) {
            send_line(&mut send, &text).await?;
        }
        while !stopping.get() {
            tokio::select! {
                _ = tokio::time::sleep_until(schedule.next_or_idle()) => {
                    for (action, body) in schedule.due_writes(plan, metrics) {
                        let text = requests.text(action, body, "write");
                        let fits = connection
                            .max_datagram_size()
                            .is_some_and(|max| text.len() <= max);
                        // A write too large for a datagram, or refused as one, takes the
                        // stream, as the client module's do.
                        if !fits || connection.send_datagram(text.as_bytes()).is_err() {
                            send_line(&mut send, &text).await?;
                        }
                    }
                }
                read = recv.read(&mut buffer) => {
                    let Some(read) = read? else { return Ok(()) };
                    for line in lines.feed(&buffer[..read])? {
                        on_incoming(context, &mut requests, seen, incoming::parse(&line));
                    }
                }
                datagram = connection.receive_datagram() => {
                    let Ok(datagram) = datagram else { return Ok(()) };
                    pushes_received += 1;
                    let pushed = incoming::parse_datagram(&datagram.payload());
                    on_incoming(context, &mut requests, seen, pushed);
                }
            }
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    metrics.open.set(metrics.open.get().saturating_sub(1));
    let stats = connection.quic_connection().stats();
    metrics.counters.borrow_mut().quic.add(&QuicUse {
        packets_received: stats.udp_rx.datagrams,
        receive_ios: stats.udp_rx.ios,
        pushes_received,
        packets_sent: stats.udp_tx.datagrams,
        send_ios: stats.udp_tx.ios,
    });
    connection.close(VarInt::from_u32(0), b"done");
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_hashes_are_read_as_hex() -> anyhow::Result<()> {
        let hex = "3f".repeat(32);
        assert_eq!(parse_certificate_hash(&hex)?, [0x3f; 32]);
        let colons = vec!["AB"; 32].join(":");
        assert_eq!(parse_certificate_hash(&colons)?, [0xab; 32]);
        assert!(parse_certificate_hash("3f3f").is_err());
        assert!(parse_certificate_hash(&"zz".repeat(32)).is_err());
        Ok(())
    }

    #[test]
    fn stream_lines_are_split_across_reads() -> anyhow::Result<()> {
        let mut lines = Lines::default();
        assert_eq!(lines.feed(b"{\"a\":1}\n{\"b\"")?, vec!["{\"a\":1}"]);
        assert_eq!(lines.feed(b":2}\n\n")?, vec!["{\"b\":2}"]);
        assert!(lines.feed(&vec![b'x'; MAX_LINE_BYTES + 1]).is_err());
        Ok(())
    }
}
