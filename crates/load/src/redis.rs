//! Redis pub/sub as a bare fan-out baseline for the chat pattern: each member subscribes to
//! its room's channel and publishes its messages there, stamped like the Firebase writes, so
//! the same histograms measure the same thing with no database, rules or persistence.
//!
//! The connection speaks RESP3 (`HELLO 3`), in which a subscribed connection may still
//! publish, so that a member is one connection as it is with Firebase. Only what the
//! baseline needs is parsed: simple strings, errors, integers, bulk strings, arrays, maps,
//! sets, pushes and nulls.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::plan::Plan;
use crate::schedule::Schedule;
use crate::tcp::open_tcp;
use crate::wire;

/// Longest reply element we accept (a published chat message is a few hundred bytes).
const MAX_BULK_BYTES: usize = 1 << 20;
/// Deepest nesting of aggregates we accept.
const MAX_DEPTH: usize = 8;
/// How long connecting and subscribing may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A RESP3 value.
#[derive(Debug, Clone, PartialEq)]
pub enum Resp {
    Text(Vec<u8>),
    Error(String),
    Int(i64),
    Null,
    /// Arrays, sets and maps (a map as its keys and values in turn).
    List(Vec<Resp>),
    /// Out-of-band data: pub/sub messages and subscription confirmations.
    Push(Vec<Resp>),
}

/// Parses one value from the start of `buf`: `Ok(None)` if more bytes are needed, else the
/// value and the bytes it took.
pub fn parse(buf: &[u8]) -> anyhow::Result<Option<(Resp, usize)>> {
    parse_at(buf, 0, 0)
}

fn line(buf: &[u8], start: usize) -> Option<(&[u8], usize)> {
    let end = buf[start..].windows(2).position(|pair| pair == b"\r\n")?;
    Some((&buf[start..start + end], start + end + 2))
}

fn number(text: &[u8]) -> anyhow::Result<i64> {
    Ok(std::str::from_utf8(text)?.parse()?)
}

fn parse_at(buf: &[u8], start: usize, depth: usize) -> anyhow::Result<Option<(Resp, usize)>> {
    anyhow::ensure!(depth <= MAX_DEPTH, "RESP nesting deeper than {MAX_DEPTH}");
    let Some(&kind) = buf.get(start) else {
        return Ok(None);
    };
    let Some((text, after)) = line(buf, start + 1) else {
        return Ok(None);
    };
    let value = match kind {
        b'+' => Resp::Text(text.to_vec()),
        b'-' => Resp::Error(String::from_utf8_lossy(text).into_owned()),
        b':' => Resp::Int(number(text)?),
        b'_' => Resp::Null,
        b'$' | b'=' => {
            let len = number(text)?;
            if len < 0 {
                return Ok(Some((Resp::Null, after - start)));
            }
            let len = len as usize;
            anyhow::ensure!(len <= MAX_BULK_BYTES, "a RESP string of {len} bytes");
            if buf.len() < after + len + 2 {
                return Ok(None);
            }
            let end = after + len + 2;
            return Ok(Some((
                Resp::Text(buf[after..after + len].to_vec()),
                end - start,
            )));
        }
        b'*' | b'~' | b'>' | b'%' => {
            let count = number(text)?;
            if count < 0 {
                return Ok(Some((Resp::Null, after - start)));
            }
            let count = count as usize * if kind == b'%' { 2 } else { 1 };
            anyhow::ensure!(count <= MAX_BULK_BYTES, "a RESP aggregate of {count} items");
            let mut items = Vec::with_capacity(count.min(64));
            let mut at = after;
            for _ in 0..count {
                let Some((item, used)) = parse_at(buf, at, depth + 1)? else {
                    return Ok(None);
                };
                items.push(item);
                at += used;
            }
            let value = if kind == b'>' {
                Resp::Push(items)
            } else {
                Resp::List(items)
            };
            return Ok(Some((value, at - start)));
        }
        // Booleans, doubles and big numbers: kept as their text.
        b'#' | b',' | b'(' => Resp::Text(text.to_vec()),
        other => anyhow::bail!("unknown RESP type byte {other:#04x}"),
    };
    Ok(Some((value, after - start)))
}

/// A command as a RESP array of bulk strings.
pub fn command(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One chat member over Redis, from connect to close. `Ok` when the server closed the
/// connection or the run ended.
pub async fn session(
    plan: &Plan,
    address: &str,
    source: Option<IpAddr>,
    metrics: &Metrics,
    stopping: &std::cell::Cell<bool>,
    schedule: &mut Schedule,
) -> anyhow::Result<()> {
    let channel = plan.room()?;
    let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, open_tcp(address, source)).await??;
    let mut out = command(&[b"HELLO", b"3"]);
    out.extend(command(&[b"SUBSCRIBE", channel.as_bytes()]));
    stream.write_all(&out).await?;
    let mut buffer = Vec::with_capacity(4096);
    let mut published: VecDeque<Instant> = VecDeque::new();
    let mut subscribed = false;
    let session = async {
        loop {
            if stopping.get() {
                return Ok(());
            }
            tokio::select! {
                _ = tokio::time::sleep_until(schedule.next_when(subscribed)) => {
                    let mut out = Vec::new();
                    for (_, body) in schedule.due_writes(plan, metrics) {
                        let payload = serde_json::to_vec(&body["d"])?;
                        out.extend(command(&[b"PUBLISH", channel.as_bytes(), &payload]));
                        published.push_back(Instant::now());
                    }
                    stream.write_all(&out).await?;
                }
                read = stream.read_buf(&mut buffer) => {
                    if read? == 0 {
                        return Ok(());
                    }
                    let mut used = 0;
                    while let Some((value, len)) = parse(&buffer[used..])? {
                        used += len;
                        handle(value, metrics, &mut published, &mut subscribed);
                    }
                    buffer.drain(..used);
                }
            }
        }
    };
    metrics.while_open(session).await
}

/// Accounts for one value from the server.
fn handle(
    value: Resp,
    metrics: &Metrics,
    published: &mut VecDeque<Instant>,
    subscribed: &mut bool,
) {
    match value {
        // The reply to a PUBLISH: how many subscribers got it.
        Resp::Int(_) => {
            if let Some(sent) = published.pop_front() {
                metrics.ack("write", sent.elapsed().as_micros() as u64);
            }
        }
        Resp::Error(error) => {
            published.pop_front();
            metrics.error(error);
        }
        Resp::Push(items) => match items.first() {
            Some(Resp::Text(kind)) if kind == b"message" => {
                if let Some(Resp::Text(payload)) = items.get(2) {
                    let now = wire::now_us();
                    for t in crate::incoming::stamps(payload).unwrap_or_default() {
                        metrics.event("all", now.saturating_sub(t));
                    }
                }
            }
            Some(Resp::Text(kind)) if kind == b"subscribe" => *subscribed = true,
            _ => {}
        },
        // The HELLO reply (a map).
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_whole_or_wait_for_more() -> anyhow::Result<()> {
        let push = b">3\r\n$7\r\nmessage\r\n$4\r\nroom\r\n$9\r\n{\"t\":123}\r\n";
        let (value, used) = parse(push)?.expect("complete");
        assert_eq!(used, push.len());
        assert_eq!(
            value,
            Resp::Push(vec![
                Resp::Text(b"message".to_vec()),
                Resp::Text(b"room".to_vec()),
                Resp::Text(b"{\"t\":123}".to_vec()),
            ])
        );
        for cut in 0..push.len() {
            assert_eq!(parse(&push[..cut])?, None, "cut at {cut}");
        }
        assert_eq!(parse(b":42\r\n")?, Some((Resp::Int(42), 5)));
        assert_eq!(parse(b"_\r\n")?, Some((Resp::Null, 3)));
        let (map, _) = parse(b"%1\r\n+server\r\n+redis\r\n")?.expect("complete");
        assert_eq!(
            map,
            Resp::List(vec![
                Resp::Text(b"server".to_vec()),
                Resp::Text(b"redis".to_vec())
            ])
        );
        assert!(matches!(parse(b"-ERR no\r\n")?, Some((Resp::Error(_), 9))));
        assert!(parse(b"?x\r\n").is_err());
        assert!(parse(b"$99999999\r\n").is_err());
        Ok(())
    }

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        assert_eq!(
            command(&[b"PUBLISH", b"a", b"{}"]),
            b"*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$2\r\n{}\r\n".to_vec()
        );
    }

    #[test]
    fn a_message_is_an_event_and_an_integer_an_ack() {
        let metrics = Metrics::new();
        metrics.start_measuring();
        let mut published = VecDeque::from([Instant::now()]);
        let mut subscribed = false;
        handle(
            Resp::Push(vec![Resp::Text(b"subscribe".to_vec())]),
            &metrics,
            &mut published,
            &mut subscribed,
        );
        assert!(subscribed);
        let stamp = format!("{{\"t\":{}}}", wire::now_us());
        handle(
            Resp::Push(vec![
                Resp::Text(b"message".to_vec()),
                Resp::Text(b"room".to_vec()),
                Resp::Text(stamp.into_bytes()),
            ]),
            &metrics,
            &mut published,
            &mut subscribed,
        );
        handle(Resp::Int(1), &metrics, &mut published, &mut subscribed);
        assert_eq!(metrics.counters.borrow().events, 1);
        assert_eq!(metrics.counters.borrow().acks, 1);
        assert!(published.is_empty());
    }
}
