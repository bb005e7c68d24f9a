//! One simulated user's WebSocket session: it listens and writes on its timetable until the
//! server goes away (`user.rs` reconnects it), and what its WebTransport twin shares with it.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::incoming::{self, Incoming};
use crate::metrics::Metrics;
use crate::plan::Plan;
use crate::schedule::Schedule;
use crate::tcp::open_tcp;
use crate::wire;

/// How long a connection may take to open and greet: 30 s, as the Firebase JS SDK allows.
/// A shorter limit turned a slow ramp of thousands of connections on a busy machine into a
/// storm of retries that the run then measured instead of the server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests awaiting their reply, at most; beyond it the server is not answering.
const MAX_IN_FLIGHT: usize = 10_000;
/// The WebSocket read buffer. The library zero-fills its buffer (128 KiB by default) before
/// every read, which made the tester spend most of its time in memset and delayed the
/// events it timed; Firebase messages are small.
const READ_BUFFER_BYTES: usize = 8 * 1024;

/// Requests sent and awaiting their reply, and the listens not confirmed yet.
#[derive(Default)]
pub struct Requests {
    next_id: u64,
    /// By request id: when it was sent, its kind and, for a write, its send stamp.
    in_flight: HashMap<u64, (Instant, &'static str, Option<u64>)>,
    /// Data pushed before the listens are confirmed is the initial state, old writes
    /// included: not events to time.
    listens_pending: usize,
}

impl Requests {
    /// The text of a new request, remembered with its kind and send time.
    pub fn text(&mut self, action: &str, body: serde_json::Value, kind: &'static str) -> String {
        self.next_id += 1;
        if self.in_flight.len() < MAX_IN_FLIGHT {
            let stamp = body
                .get("d")
                .and_then(|data| data.get("t"))
                .and_then(serde_json::Value::as_u64);
            self.in_flight
                .insert(self.next_id, (Instant::now(), kind, stamp));
        }
        if kind == "listen" {
            self.listens_pending += 1;
        }
        wire::request(self.next_id, action, body)
    }

    /// The same, as a WebSocket message.
    fn make(&mut self, action: &str, body: serde_json::Value, kind: &'static str) -> Message {
        Message::text(self.text(action, body, kind))
    }
}

/// The requests that open a session: its listens, then its presence.
pub fn opening_requests(plan: &Plan, requests: &mut Requests) -> Vec<String> {
    let mut texts = Vec::new();
    if let Some(uid) = &plan.sign_in {
        texts.push(requests.text("auth", json!({"cred": unsigned_token(uid)}), "auth"));
    }
    for (tag, listen) in plan.listens.iter().enumerate() {
        let body = match &listen.query {
            Some(query) => json!({"p": listen.path, "q": query, "t": tag + 1, "h": ""}),
            None => json!({"p": listen.path, "h": ""}),
        };
        texts.push(requests.text("q", body, "listen"));
    }
    if let Some(path) = &plan.presence {
        texts.push(requests.text("o", json!({"p": path, "d": false}), "presence"));
        texts.push(requests.text("p", json!({"p": path, "d": true}), "presence"));
    }
    texts
}

/// An unsigned ID token for `uid` (`alg: none`), as the emulator SDKs' mock tokens are: only a
/// development server accepts it.
fn unsigned_token(uid: &str) -> String {
    use base64::Engine as _;
    let encode = |value: serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
    };
    let now = wire::now_us() / 1_000_000;
    format!(
        "{}.{}.",
        encode(json!({"alg": "none", "typ": "JWT"})),
        encode(json!({"sub": uid, "user_id": uid, "iat": now, "exp": now + 3_600}))
    )
}

/// Counts what one message of the server tells: a reply's latency (and error), or the
/// event latency of each send stamp a push carries.
pub fn on_incoming(
    context: &Context<'_>,
    requests: &mut Requests,
    seen: &mut Seen,
    incoming: Incoming,
) {
    let Context { plan, metrics, .. } = *context;
    match incoming {
        Incoming::Reply { id, ok, detail } => {
            match requests.in_flight.remove(&id) {
                Some((sent, "write", stamp)) => {
                    metrics.ack("write", sent.elapsed().as_micros() as u64);
                    if let Some(stamp) = stamp.filter(|_| ok) {
                        metrics.acked_stamp(stamp);
                    }
                }
                Some((_, "listen", _)) => {
                    requests.listens_pending = requests.listens_pending.saturating_sub(1);
                }
                _ => {}
            }
            if !ok {
                metrics.error(detail);
            }
        }
        Incoming::Push(stamps) if requests.listens_pending > 0 => {
            // Not timed, but a server that pushes them again must not have them timed later.
            stamps.into_iter().for_each(|t| {
                seen.first(t);
            });
        }
        Incoming::Push(stamps) => {
            let now = wire::now_us();
            for t in stamps.into_iter().filter(|t| seen.first(*t)) {
                metrics.event(plan.group, now.saturating_sub(t));
                metrics.received_stamp(t);
            }
        }
        Incoming::Handshake | Incoming::Other => {}
    }
}

/// The send stamps a connection has already timed, for servers that push them again (see
/// [`Protocol::FirebaseWholeValues`]); kept across reconnections, off for other servers.
pub struct Seen(Option<HashSet<u64>>);

impl Seen {
    pub fn new(on: bool) -> Seen {
        Seen(on.then(HashSet::new))
    }

    /// Whether `stamp` is seen for the first time (always, when off).
    fn first(&mut self, stamp: u64) -> bool {
        self.0.as_mut().is_none_or(|seen| seen.insert(stamp))
    }
}

/// What a session reads but does not own.
pub struct Context<'a> {
    pub plan: &'a Plan,
    pub metrics: &'a Metrics,
    pub stopping: &'a Cell<bool>,
}

/// A WebSocket client connection to `url` at `address` (from `source` when given), opened
/// within [`CONNECT_TIMEOUT`].
pub async fn open_websocket(
    url: String,
    address: &str,
    source: Option<IpAddr>,
) -> anyhow::Result<WebSocketStream<TcpStream>> {
    let (socket, _) = tokio::time::timeout(CONNECT_TIMEOUT, async {
        let stream = open_tcp(address, source).await?;
        let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER_BYTES);
        Ok::<_, anyhow::Error>(
            tokio_tungstenite::client_async_with_config(url, stream, Some(config)).await?,
        )
    })
    .await??;
    Ok(socket)
}

/// One connection, from connect to close. `Ok` when the run ended; an error says how the
/// server ended it otherwise.
pub async fn session(
    context: &Context<'_>,
    address: &str,
    source: Option<IpAddr>,
    schedule: &mut Schedule,
    seen: &mut Seen,
) -> anyhow::Result<()> {
    let Context {
        plan,
        metrics,
        stopping,
    } = *context;
    let url = format!("ws://{address}/.ws?v=5&ns={}", plan.ns);
    let (mut sink, mut stream) = open_websocket(url, address, source).await?.split();
    let mut assembler = wire::Assembler::default();
    // Wait for the handshake.
    let greeted = tokio::time::timeout(CONNECT_TIMEOUT, async {
        while let Some(message) = stream.next().await {
            if let Message::Text(text) = message? {
                if let Some(text) = assembler.push(text.as_str()) {
                    if incoming::parse(&text) == Incoming::Handshake {
                        return Ok::<_, anyhow::Error>(true);
                    }
                }
            }
        }
        Ok(false)
    })
    .await??;
    anyhow::ensure!(greeted, "closed before the handshake");
    metrics.open.set(metrics.open.get() + 1);
    let result = async {
        let mut requests = Requests::default();
        for text in opening_requests(plan, &mut requests) {
            sink.feed(Message::text(text)).await?;
        }
        sink.flush().await?;
        loop {
            if stopping.get() {
                return Ok(());
            }
            tokio::select! {
                _ = tokio::time::sleep_until(schedule.next_or_idle()) => {
                    for (action, body) in schedule.due_writes(plan, metrics) {
                        sink.feed(requests.make(action, body, "write")).await?;
                    }
                    sink.flush().await?;
                }
                message = stream.next() => {
                    // How the server ended a session is sampled (`Metrics::session_failed`):
                    // a close frame's code and reason, or a bare end of the stream.
                    let Some(message) = message else {
                        anyhow::bail!("the connection ended without a close frame");
                    };
                    let text = match message? {
                        Message::Text(text) => text,
                        Message::Close(frame) => {
                            let (code, reason) = frame.map_or((0, String::new()), |frame| {
                                (u16::from(frame.code), frame.reason.to_string())
                            });
                            anyhow::bail!("closed by the server: {code} {reason}");
                        }
                        _ => continue,
                    };
                    let Some(text) = assembler.push(text.as_str()) else { continue };
                    on_incoming(context, &mut requests, seen, incoming::parse(&text));
                }
            }
        }
    }
    .await;
    metrics.open.set(metrics.open.get().saturating_sub(1));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_value_servers_have_each_stamp_timed_once() {
        let mut seen = Seen::new(true);
        assert!(seen.first(5));
        assert!(seen.first(7));
        assert!(!seen.first(5), "a stamp pushed again is not timed again");
        let mut off = Seen::new(false);
        assert!(
            off.first(5) && off.first(5),
            "other servers have every stamp timed"
        );
    }
}
