//! A small blocking NATS JetStream publisher, written on `std::net::TcpStream` from the NATS
//! client protocol: it connects, subscribes once to a reply inbox, and publishes each message
//! with a `Nats-Msg-Id` header (so JetStream drops a repeat within the stream's duplicate
//! window) before waiting for the stream's acknowledgement.
//!
//! One publisher is one connection, used by one thread; nothing here spawns or locks. Every
//! wait is bounded by the timeout given at connect, and everything the server sends is
//! parsed by [`parse_op`], a pure function with bounded lengths, so that a broken or hostile
//! server yields an error, never a panic or an unbounded allocation.
//!
//! An ack that times out does not mean the message was lost: it may have been stored. Publish
//! it again with the same message id and JetStream answers with the first copy's sequence,
//! marked `duplicate`. A late ack for an earlier publish arrives on another reply subject
//! (each publish has its own, under the one inbox subscription) and is ignored.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tracing::debug;

/// The longest control line (`INFO {...}`, `MSG ...`, `-ERR ...`) read from the server, without
/// its CRLF. A server's INFO is well under 4 KiB; past this the server is not speaking NATS.
pub const MAX_SERVER_LINE: usize = 64 * 1024;

/// The largest message (headers and payload) accepted from the server. Acks and JetStream API
/// replies are a few KiB; the server's own default `max_payload` is 1 MiB.
pub const MAX_SERVER_PAYLOAD: usize = 1024 * 1024;

/// The port a `nats://` URL without one names: the server's default.
const DEFAULT_PORT: u16 = 4222;

/// The one subscription this client makes: its reply inbox.
const INBOX_SID: &str = "1";

/// What a publish or a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error("invalid NATS URL {url:?}: {reason}")]
    Url { url: String, reason: &'static str },
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("cannot connect to the NATS server at {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("NATS connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("the NATS server closed the connection")]
    Closed,
    #[error("NATS protocol error: {0}")]
    Protocol(String),
    #[error("the NATS server does not support message headers, which JetStream publishing needs (nats-server 2.2 or later)")]
    NoHeaders,
    #[error("the NATS server requires TLS, which this publisher does not speak")]
    TlsRequired,
    #[error("NATS server error: {0}")]
    Server(String),
    #[error("no answer from the NATS server within {0:?}")]
    Timeout(Duration),
    #[error("no JetStream stream (no responder) takes subject {subject:?}")]
    NoStream { subject: String },
    #[error("NATS status {code} in reply: {description}")]
    Status { code: u16, description: String },
    #[error("JetStream error {code} ({err_code:?}): {description}")]
    JetStream {
        code: u64,
        err_code: Option<u64>,
        description: String,
    },
    #[error("message of {size} bytes is over the server's max_payload of {max}")]
    TooLarge { size: usize, max: usize },
}

/// JetStream's acknowledgement of a stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PubAck {
    pub stream: String,
    pub seq: u64,
    /// The message id was seen within the duplicate window: this message was not stored
    /// again, and `seq` is the first copy's.
    pub duplicate: bool,
}

/// A connection to a NATS server that publishes to JetStream.
#[derive(Debug)]
pub struct NatsPublisher {
    stream: TcpStream,
    /// Bytes read from the server and not parsed yet.
    buf: Vec<u8>,
    timeout: Duration,
    /// The largest message the server accepts (its INFO's `max_payload`).
    max_payload: usize,
    /// `_INBOX.<random>`: replies come to `<inbox>.<n>`, one `n` per publish or request.
    inbox: String,
    next_reply: u64,
}

impl NatsPublisher {
    /// url: nats://[user:pass@]host:port or nats://token@host:port ; timeout bounds connect and each ack wait.
    pub fn connect(url: &str, timeout: Duration) -> Result<NatsPublisher, NatsError> {
        if timeout.is_zero() {
            return Err(NatsError::Invalid("a zero timeout".into()));
        }
        let target = parse_url(url)?;
        let deadline = Instant::now() + timeout;
        let stream = connect_tcp(&target.addr, deadline, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(timeout))?;
        let mut publisher = NatsPublisher {
            stream,
            buf: Vec::new(),
            timeout,
            max_payload: MAX_SERVER_PAYLOAD,
            inbox: format!("_INBOX.{}", random_token()),
            next_reply: 0,
        };
        // The server speaks first, and says what it supports.
        let info = match publisher.next_op(deadline)? {
            Op::Info(info) => info,
            other => {
                return Err(NatsError::Protocol(format!(
                    "expected INFO first, got {other:?}"
                )))
            }
        };
        if info.tls_required {
            return Err(NatsError::TlsRequired);
        }
        if !info.headers {
            return Err(NatsError::NoHeaders);
        }
        publisher.max_payload = info.max_payload(publisher.max_payload);
        let mut connect = serde_json::json!({
            "verbose": false,
            "pedantic": false,
            "headers": true,
            "no_responders": true,
            "name": "hearth-triggers",
            "lang": "rust",
            "version": "0.1",
        });
        match target.auth {
            Auth::None => {}
            Auth::User { user, pass } => {
                connect["user"] = user.into();
                connect["pass"] = pass.into();
            }
            Auth::Token(token) => connect["auth_token"] = token.into(),
        }
        // The PING's PONG confirms that CONNECT (its credentials) and SUB were accepted: with
        // verbose off, a refusal is a -ERR before it.
        let hello = format!(
            "CONNECT {connect}\r\nSUB {}.* {INBOX_SID}\r\nPING\r\n",
            publisher.inbox
        );
        publisher.write(hello.as_bytes())?;
        loop {
            match publisher.next_op(deadline)? {
                Op::Pong => break,
                Op::Ping => publisher.write(b"PONG\r\n")?,
                Op::Err(message) => return Err(NatsError::Server(message)),
                Op::Ok | Op::Info(_) | Op::Msg(_) => {}
            }
        }
        debug!(server = %target.addr, version = %info.version, "connected to NATS");
        Ok(publisher)
    }

    /// Publishes `payload` to `subject` with the header `Nats-Msg-Id: msg_id` (JetStream drops a repeat
    /// within its duplicate window) and `Content-Type: application/cloudevents+json`, then waits for the
    /// stream's ack on a reply inbox subscribed once at connect. Err when no stream takes the subject.
    pub fn publish(
        &mut self,
        subject: &str,
        msg_id: &str,
        payload: &[u8],
    ) -> Result<PubAck, NatsError> {
        let mut acks = self.publish_many(subject, &[(msg_id, payload)])?;
        acks.pop()
            .ok_or_else(|| NatsError::Protocol("no acknowledgement".into()))
    }

    /// Publishes `messages` (`(msg_id, payload)`) to `subject` back to back, then waits for
    /// every acknowledgement (in any order): one round trip for the lot. Err on the first
    /// refusal or when `timeout` passes; which of them the stream took is then unknown, and
    /// sending them all again is safe within its duplicate window.
    pub fn publish_many(
        &mut self,
        subject: &str,
        messages: &[(&str, &[u8])],
    ) -> Result<Vec<PubAck>, NatsError> {
        check_subject(subject)?;
        let mut frames = Vec::new();
        let mut replies = Vec::with_capacity(messages.len());
        for (msg_id, payload) in messages {
            if msg_id.is_empty() || msg_id.chars().any(char::is_control) {
                return Err(NatsError::Invalid(format!(
                    "message id {msg_id:?} (empty, or with control characters)"
                )));
            }
            let headers = format!(
                "NATS/1.0\r\nNats-Msg-Id: {msg_id}\r\nContent-Type: application/cloudevents+json\r\n\r\n"
            );
            let total = headers.len() + payload.len();
            self.check_size(total)?;
            let reply = self.reply_subject();
            frames.extend_from_slice(
                format!(
                    "HPUB {subject} {reply} {} {total}\r\n{headers}",
                    headers.len()
                )
                .as_bytes(),
            );
            frames.extend_from_slice(payload);
            frames.extend_from_slice(b"\r\n");
            replies.push(reply);
        }
        self.write(&frames)?;
        let mut acks: Vec<Option<PubAck>> = vec![None; replies.len()];
        let mut waiting = replies.len();
        let deadline = Instant::now() + self.timeout;
        while waiting > 0 {
            match self.next_op(deadline)? {
                Op::Ping => self.write(b"PONG\r\n")?,
                Op::Pong | Op::Ok => {}
                Op::Info(info) => self.max_payload = info.max_payload(self.max_payload),
                Op::Err(message) => return Err(NatsError::Server(message)),
                Op::Msg(msg) if msg.sid == INBOX_SID => {
                    let Some(index) = replies.iter().position(|r| *r == msg.subject) else {
                        debug!(subject = %msg.subject, "late NATS reply ignored");
                        continue;
                    };
                    match msg.status {
                        None => {}
                        Some(503) => {
                            return Err(NatsError::NoStream {
                                subject: subject.to_string(),
                            })
                        }
                        Some(code) => {
                            return Err(NatsError::Status {
                                code,
                                description: msg.description,
                            })
                        }
                    }
                    if acks[index].is_none() {
                        acks[index] = Some(parse_ack(&msg.payload)?);
                        waiting -= 1;
                    }
                }
                Op::Msg(msg) => debug!(subject = %msg.subject, "late NATS reply ignored"),
            }
        }
        Ok(acks.into_iter().flatten().collect())
    }

    /// Publishes `payload` to `subject` and returns the first reply's payload: a JetStream
    /// API call (`$JS.API.STREAM.CREATE.<name>`), or any service's request. Err when nothing
    /// listens on the subject; an error the service itself answers is in the payload.
    pub fn request(&mut self, subject: &str, payload: &[u8]) -> Result<Vec<u8>, NatsError> {
        check_subject(subject)?;
        self.check_size(payload.len())?;
        let reply = self.reply_subject();
        let mut frame = format!("PUB {subject} {reply} {}\r\n", payload.len()).into_bytes();
        frame.extend_from_slice(payload);
        frame.extend_from_slice(b"\r\n");
        self.write(&frame)?;
        self.wait_reply(&reply, subject)
    }

    fn check_size(&self, size: usize) -> Result<(), NatsError> {
        if size > self.max_payload {
            return Err(NatsError::TooLarge {
                size,
                max: self.max_payload,
            });
        }
        Ok(())
    }

    fn reply_subject(&mut self) -> String {
        self.next_reply += 1;
        format!("{}.{}", self.inbox, self.next_reply)
    }

    /// Waits for the message on `reply`, answering the server's PINGs meanwhile.
    fn wait_reply(&mut self, reply: &str, subject: &str) -> Result<Vec<u8>, NatsError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.next_op(deadline)? {
                Op::Ping => self.write(b"PONG\r\n")?,
                Op::Pong | Op::Ok => {}
                Op::Info(info) => self.max_payload = info.max_payload(self.max_payload),
                Op::Err(message) => return Err(NatsError::Server(message)),
                Op::Msg(msg) if msg.sid == INBOX_SID && msg.subject == reply => {
                    return match msg.status {
                        None => Ok(msg.payload),
                        Some(503) => Err(NatsError::NoStream {
                            subject: subject.to_string(),
                        }),
                        Some(code) => Err(NatsError::Status {
                            code,
                            description: msg.description,
                        }),
                    };
                }
                Op::Msg(msg) => debug!(subject = %msg.subject, "late NATS reply ignored"),
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), NatsError> {
        self.stream.write_all(bytes).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => NatsError::Timeout(self.timeout),
            _ => NatsError::Io(e),
        })
    }

    /// The next operation from the server, reading until it is whole or `deadline` passes.
    fn next_op(&mut self, deadline: Instant) -> Result<Op, NatsError> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match parse_op(&self.buf) {
                Ok(Some((op, used))) => {
                    self.buf.drain(..used);
                    return Ok(op);
                }
                Ok(None) => {}
                Err(e) => {
                    // The stream is out of step: nothing after this can be trusted, so later
                    // calls fail rather than read garbage as replies.
                    self.buf.clear();
                    let _ = self.stream.shutdown(std::net::Shutdown::Both);
                    return Err(e);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NatsError::Timeout(self.timeout));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(NatsError::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(NatsError::Timeout(self.timeout))
                }
                Err(e) => return Err(NatsError::Io(e)),
            }
        }
    }
}

/// Runs the server-side parser over `bytes` as the client would, one operation after another,
/// and discards the result: the entry point of the `nats_reply` fuzz target.
#[doc(hidden)]
pub fn parse_server_bytes(bytes: &[u8]) {
    let mut rest = bytes;
    while let Ok(Some((op, used))) = parse_op(rest) {
        assert!(
            used > 0 && used <= rest.len(),
            "an operation consumes bytes"
        );
        if let Op::Msg(msg) = op {
            assert!(msg.payload.len() <= MAX_SERVER_PAYLOAD);
        }
        rest = &rest[used..];
    }
}

/// One operation the server sends.
#[derive(Debug, PartialEq, Eq)]
enum Op {
    Info(ServerInfo),
    Ping,
    Pong,
    Ok,
    Err(String),
    Msg(Msg),
}

/// The part of the server's INFO this client uses.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
struct ServerInfo {
    #[serde(default)]
    headers: bool,
    #[serde(default)]
    tls_required: bool,
    max_payload: Option<u64>,
    #[serde(default)]
    version: String,
}

impl ServerInfo {
    fn max_payload(&self, otherwise: usize) -> usize {
        self.max_payload
            .and_then(|max| usize::try_from(max).ok())
            .unwrap_or(otherwise)
    }
}

/// A `MSG` or an `HMSG`; `status` is the code of an HMSG's `NATS/1.0 <code> <description>`.
#[derive(Debug, PartialEq, Eq)]
struct Msg {
    subject: String,
    sid: String,
    reply: Option<String>,
    status: Option<u16>,
    description: String,
    payload: Vec<u8>,
}

/// Parses the operation at the start of `buf`: `Ok(None)` while it is incomplete, else the
/// operation and how many bytes it took. Pure, so that it can be fuzzed.
fn parse_op(buf: &[u8]) -> Result<Option<(Op, usize)>, NatsError> {
    let window = &buf[..buf.len().min(MAX_SERVER_LINE + 2)];
    let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
        if buf.len() >= MAX_SERVER_LINE + 2 {
            return Err(NatsError::Protocol(format!(
                "a line over {MAX_SERVER_LINE} bytes"
            )));
        }
        return Ok(None);
    };
    let line = std::str::from_utf8(&buf[..end])
        .map_err(|_| NatsError::Protocol("a control line that is not UTF-8".into()))?;
    let body_start = end + 2;
    let (name, rest) = match line.find([' ', '\t']) {
        Some(at) => (&line[..at], line[at..].trim_start_matches([' ', '\t'])),
        None => (line, ""),
    };
    let args: Vec<&str> = rest.split([' ', '\t']).filter(|a| !a.is_empty()).collect();
    let simple = |op: Op| {
        if args.is_empty() {
            Ok(Some((op, body_start)))
        } else {
            Err(NatsError::Protocol(format!(
                "unexpected arguments in {line:?}"
            )))
        }
    };
    match name.to_ascii_uppercase().as_str() {
        "PING" => simple(Op::Ping),
        "PONG" => simple(Op::Pong),
        "+OK" => simple(Op::Ok),
        "-ERR" => {
            let message = rest.trim_end();
            let message = message
                .strip_prefix('\'')
                .and_then(|m| m.strip_suffix('\''))
                .unwrap_or(message);
            Ok(Some((Op::Err(message.to_string()), body_start)))
        }
        "INFO" => {
            let info = serde_json::from_str(rest)
                .map_err(|e| NatsError::Protocol(format!("INFO that is not JSON: {e}")))?;
            Ok(Some((Op::Info(info), body_start)))
        }
        "MSG" => {
            let (subject, sid, reply, sizes) = message_args(&args, 1, line)?;
            let total = parse_len(sizes[0])?;
            let Some(payload) = body(buf, body_start, total)? else {
                return Ok(None);
            };
            let msg = Msg {
                subject,
                sid,
                reply,
                status: None,
                description: String::new(),
                payload: payload.to_vec(),
            };
            Ok(Some((Op::Msg(msg), body_start + total + 2)))
        }
        "HMSG" => {
            let (subject, sid, reply, sizes) = message_args(&args, 2, line)?;
            let (header_len, total) = (parse_len(sizes[0])?, parse_len(sizes[1])?);
            if header_len > total {
                return Err(NatsError::Protocol(format!(
                    "header length over total length in {line:?}"
                )));
            }
            let Some(whole) = body(buf, body_start, total)? else {
                return Ok(None);
            };
            let (headers, payload) = whole.split_at(header_len);
            let (status, description) = parse_status(headers)?;
            let msg = Msg {
                subject,
                sid,
                reply,
                status,
                description,
                payload: payload.to_vec(),
            };
            Ok(Some((Op::Msg(msg), body_start + total + 2)))
        }
        _ => Err(NatsError::Protocol(format!("unknown operation {line:?}"))),
    }
}

type MessageArgs<'a> = (String, String, Option<String>, &'a [&'a str]);

/// Splits `<subject> <sid> [reply] <size>...` with `sizes` trailing numbers.
fn message_args<'a>(
    args: &'a [&'a str],
    sizes: usize,
    line: &str,
) -> Result<MessageArgs<'a>, NatsError> {
    let reply = match args.len().checked_sub(sizes) {
        Some(2) => None,
        Some(3) => Some(args[2].to_string()),
        _ => {
            return Err(NatsError::Protocol(format!(
                "wrong number of arguments in {line:?}"
            )))
        }
    };
    let sizes = &args[args.len() - sizes..];
    Ok((args[0].to_string(), args[1].to_string(), reply, sizes))
}

/// A length the server announced, refused past [`MAX_SERVER_PAYLOAD`] before anything is
/// allocated for it.
fn parse_len(text: &str) -> Result<usize, NatsError> {
    let refuse = || NatsError::Protocol(format!("bad length {text:?}"));
    if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refuse());
    }
    let len: usize = text.parse().map_err(|_| refuse())?;
    if len > MAX_SERVER_PAYLOAD {
        return Err(NatsError::Protocol(format!(
            "a message of {len} bytes, over the limit of {MAX_SERVER_PAYLOAD}"
        )));
    }
    Ok(len)
}

/// The `len` bytes after the control line, once they and their CRLF have all arrived.
fn body(buf: &[u8], start: usize, len: usize) -> Result<Option<&[u8]>, NatsError> {
    let end = start + len;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(NatsError::Protocol("a message not followed by CRLF".into()));
    }
    Ok(Some(&buf[start..end]))
}

/// The status of a header block: `NATS/1.0` alone, or `NATS/1.0 503` with an optional
/// description, then the headers, which this client does not need.
fn parse_status(headers: &[u8]) -> Result<(Option<u16>, String), NatsError> {
    let refuse = || NatsError::Protocol("a header block without a NATS/1.0 line".into());
    let rest = headers.strip_prefix(b"NATS/1.0").ok_or_else(refuse)?;
    let end = rest
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or_else(refuse)?;
    let status = std::str::from_utf8(&rest[..end]).map_err(|_| refuse())?;
    if !status.is_empty() && !status.starts_with([' ', '\t']) {
        return Err(refuse());
    }
    let status = status.trim();
    if status.is_empty() {
        return Ok((None, String::new()));
    }
    let (code, description) = status.split_once([' ', '\t']).unwrap_or((status, ""));
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NatsError::Protocol(format!("bad status {status:?}")));
    }
    let code = code.parse().map_err(|_| refuse())?;
    Ok((Some(code), description.trim().to_string()))
}

/// JetStream's answer to a publish: an ack or an error.
fn parse_ack(payload: &[u8]) -> Result<PubAck, NatsError> {
    #[derive(Deserialize)]
    struct Reply {
        stream: Option<String>,
        seq: Option<u64>,
        #[serde(default)]
        duplicate: bool,
        error: Option<ApiError>,
    }
    #[derive(Deserialize)]
    struct ApiError {
        #[serde(default)]
        code: u64,
        err_code: Option<u64>,
        #[serde(default)]
        description: String,
    }
    let reply: Reply = serde_json::from_slice(payload)
        .map_err(|e| NatsError::Protocol(format!("a publish ack that is not JSON: {e}")))?;
    if let Some(error) = reply.error {
        return Err(NatsError::JetStream {
            code: error.code,
            err_code: error.err_code,
            description: error.description,
        });
    }
    match (reply.stream, reply.seq) {
        (Some(stream), Some(seq)) => Ok(PubAck {
            stream,
            seq,
            duplicate: reply.duplicate,
        }),
        _ => Err(NatsError::Protocol(
            "a publish ack without stream and seq (is the subject a stream's?)".into(),
        )),
    }
}

/// A subject to publish to: dot-separated tokens, none empty, none a wildcard, and no
/// whitespace or control characters (which would break the protocol line). Its length is
/// the server's to refuse (a -ERR past its `max_control_line`, 4 KiB by default).
fn check_subject(subject: &str) -> Result<(), NatsError> {
    let bad = subject.is_empty()
        || subject.chars().any(|c| c.is_whitespace() || c.is_control())
        || subject
            .split('.')
            .any(|token| token.is_empty() || token == "*" || token == ">");
    if bad {
        return Err(NatsError::Invalid(format!("subject {subject:?}")));
    }
    Ok(())
}

/// Where a URL points, and with which credentials.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    addr: String,
    auth: Auth,
}

#[derive(Debug, PartialEq, Eq)]
enum Auth {
    None,
    User { user: String, pass: String },
    Token(String),
}

/// `nats://[user:pass@|token@]host[:port]`; user, password and token may be percent-encoded.
fn parse_url(url: &str) -> Result<Target, NatsError> {
    let refuse = |reason| NatsError::Url {
        url: redact(url),
        reason,
    };
    let rest = url
        .strip_prefix("nats://")
        .ok_or_else(|| refuse("it must start with nats:// (TLS is not supported)"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (userinfo, host) = match rest.rsplit_once('@') {
        Some((userinfo, host)) => (Some(userinfo), host),
        None => (None, rest),
    };
    if host.is_empty() || host.contains(['/', '?', '#']) {
        return Err(refuse("it must name host[:port] and nothing after"));
    }
    let has_port = match host.strip_prefix('[') {
        Some(v6) => !v6.ends_with(']'),
        None => host.contains(':'),
    };
    let addr = if has_port {
        let (_, port) = host.rsplit_once(':').ok_or_else(|| refuse("bad port"))?;
        port.parse::<u16>().map_err(|_| refuse("bad port"))?;
        host.to_string()
    } else {
        format!("{host}:{DEFAULT_PORT}")
    };
    let auth = match userinfo {
        None => Auth::None,
        Some("") => return Err(refuse("empty credentials before @")),
        Some(userinfo) => match userinfo.split_once(':') {
            Some((user, pass)) => Auth::User {
                user: percent_decode(user).ok_or_else(|| refuse("bad percent-encoding"))?,
                pass: percent_decode(pass).ok_or_else(|| refuse("bad percent-encoding"))?,
            },
            None => {
                Auth::Token(percent_decode(userinfo).ok_or_else(|| refuse("bad percent-encoding"))?)
            }
        },
    };
    Ok(Target { addr, auth })
}

/// The URL without its credentials, for error messages and logs.
fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, host))) => format!("{scheme}://***@{host}"),
        _ => url.to_string(),
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Connects to the first of `addr`'s addresses that answers before `deadline`.
fn connect_tcp(addr: &str, deadline: Instant, timeout: Duration) -> Result<TcpStream, NatsError> {
    let refuse = |source| NatsError::Connect {
        addr: addr.to_string(),
        source,
    };
    let mut last = None;
    for candidate in addr.to_socket_addrs().map_err(refuse)? {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(NatsError::Timeout(timeout));
        }
        match TcpStream::connect_timeout(&candidate, left) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(refuse(last.unwrap_or_else(|| {
        std::io::Error::new(ErrorKind::NotFound, "no address")
    })))
}

/// A token for this connection's inbox. Not a secret (any client allowed to subscribe to
/// `_INBOX.>` sees replies), only unlikely to collide with another client's: std's
/// `RandomState` is seeded per process from the OS.
fn random_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    hasher.write_u128(now);
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
#[path = "nats_tests.rs"]
mod tests;
