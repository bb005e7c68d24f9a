//! The NATS publisher: its parser of what the server sends, its URL and subject checks, a fake
//! server in a thread (the exact bytes of a publish, acks, PINGs, timeouts, late replies), and
//! a real `nats-server -js` (streams, duplicates, subjects no stream takes, credentials).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use serde_json::{json, Value};

use super::*;

// ---- The parser ----

fn op(bytes: &[u8]) -> Op {
    match parse_op(bytes) {
        Ok(Some((op, used))) => {
            assert_eq!(used, bytes.len(), "{op:?} takes all of {bytes:?}");
            op
        }
        other => panic!("{bytes:?} parsed as {other:?}"),
    }
}

fn refused(bytes: &[u8]) -> String {
    match parse_op(bytes) {
        Err(NatsError::Protocol(reason)) => reason,
        other => panic!("{:?} parsed as {other:?}", String::from_utf8_lossy(bytes)),
    }
}

#[test]
fn parses_info_ping_pong_ok_and_err() {
    let line = r#"INFO {"server_id":"x","version":"2.10.1","headers":true,"max_payload":8388608}"#;
    let info = op(format!("{line}\r\n").as_bytes());
    assert_eq!(
        info,
        Op::Info(ServerInfo {
            headers: true,
            tls_required: false,
            max_payload: Some(8_388_608),
            version: "2.10.1".into(),
        })
    );
    let Op::Info(old) = op(b"INFO {\"version\":\"2.1.0\"}\r\n") else {
        panic!("not an INFO");
    };
    assert!(!old.headers, "a server that does not say headers has none");
    assert_eq!(op(b"PING\r\n"), Op::Ping);
    assert_eq!(op(b"pong\r\n"), Op::Pong, "operation names ignore case");
    assert_eq!(op(b"+OK\r\n"), Op::Ok);
    assert_eq!(
        op(b"-ERR 'Authorization Violation'\r\n"),
        Op::Err("Authorization Violation".into())
    );
    assert!(refused(b"INFO not json\r\n").contains("INFO"));
    assert!(refused(b"PING now\r\n").contains("arguments"));
    assert!(refused(b"HELLO\r\n").contains("unknown"));
    assert!(refused(b"\xff\xfe\r\n").contains("UTF-8"));
}

#[test]
fn parses_msg_with_and_without_reply() {
    assert_eq!(
        op(b"MSG _INBOX.a.1 1 5\r\nhello\r\n"),
        Op::Msg(Msg {
            subject: "_INBOX.a.1".into(),
            sid: "1".into(),
            reply: None,
            status: None,
            description: String::new(),
            payload: b"hello".to_vec(),
        })
    );
    let Op::Msg(msg) = op(b"MSG a.b  9\tr.1 0\r\n\r\n") else {
        panic!("not a MSG");
    };
    assert_eq!(
        (msg.sid.as_str(), msg.reply.as_deref(), msg.payload.len()),
        ("9", Some("r.1"), 0)
    );
    assert!(refused(b"MSG a 1\r\n").contains("arguments"));
    assert!(refused(b"MSG a 1 b c 5\r\n").contains("arguments"));
    assert!(refused(b"MSG a 1 +5\r\n").contains("length"));
    assert!(refused(b"MSG a 1 -1\r\n").contains("length"));
    assert!(refused(b"MSG a 1 5\r\nhelloXX").contains("CRLF"));
}

#[test]
fn parses_hmsg_status_and_headers() {
    let Op::Msg(msg) = op(b"HMSG _INBOX.a.2 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n") else {
        panic!("not an HMSG");
    };
    assert_eq!((msg.status, msg.payload.len()), (Some(503), 0));
    let headers = "NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\n\r\n";
    let frame = format!(
        "HMSG s 1 r {} {}\r\n{headers}{{}}\r\n",
        headers.len(),
        headers.len() + 2
    );
    let Op::Msg(msg) = op(frame.as_bytes()) else {
        panic!("not an HMSG");
    };
    assert_eq!(msg.status, Some(408));
    assert_eq!(msg.description, "Request Timeout");
    assert_eq!(msg.payload, b"{}");
    assert_eq!(msg.reply.as_deref(), Some("r"));
    let Op::Msg(plain) = op(b"HMSG s 1 12 14\r\nNATS/1.0\r\n\r\nok\r\n") else {
        panic!("not an HMSG");
    };
    assert_eq!((plain.status, plain.payload.as_slice()), (None, &b"ok"[..]));
    assert!(refused(b"HMSG s 1 20 10\r\n").contains("header length"));
    assert!(refused(b"HMSG s 1 4 4\r\nHTTP\r\n").contains("NATS/1.0"));
    assert!(refused(b"HMSG s 1 10 10\r\nNATS/1.0XX\r\n").contains("NATS/1.0"));
    for status in ["5034", "50", "5x3"] {
        let headers = format!("NATS/1.0 {status}\r\n\r\n");
        let frame = format!("HMSG s 1 {0} {0}\r\n{headers}\r\n", headers.len());
        assert!(refused(frame.as_bytes()).contains("status"), "{status}");
    }
}

#[test]
fn a_partial_operation_waits_for_more() {
    let whole: &[u8] = b"HMSG _INBOX.a.2 1 16 21\r\nNATS/1.0 503\r\n\r\nhello\r\nPING\r\n";
    let first = whole.len() - b"PING\r\n".len();
    for end in 0..first {
        assert!(
            matches!(parse_op(&whole[..end]), Ok(None)),
            "{end} bytes are not a whole operation"
        );
    }
    let Ok(Some((Op::Msg(_), used))) = parse_op(whole) else {
        panic!("not an HMSG");
    };
    assert_eq!(used, first);
    assert!(matches!(parse_op(&whole[used..]), Ok(Some((Op::Ping, 6)))));
}

#[test]
fn oversized_lines_and_lengths_are_refused() {
    let long = vec![b'A'; MAX_SERVER_LINE + 1];
    assert!(matches!(parse_op(&long), Ok(None)), "could still end");
    let longer = vec![b'A'; MAX_SERVER_LINE + 2];
    assert!(refused(&longer).contains("line over"));
    let mut longest_allowed = format!("-ERR '{}'", "x".repeat(MAX_SERVER_LINE - 7)).into_bytes();
    assert_eq!(longest_allowed.len(), MAX_SERVER_LINE);
    longest_allowed.extend_from_slice(b"\r\n");
    assert!(matches!(op(&longest_allowed), Op::Err(_)));
    let at_limit = format!("MSG a 1 {MAX_SERVER_PAYLOAD}\r\n");
    assert!(matches!(parse_op(at_limit.as_bytes()), Ok(None)));
    let over = format!("MSG a 1 {}\r\n", MAX_SERVER_PAYLOAD + 1);
    assert!(refused(over.as_bytes()).contains("over the limit"));
    assert!(refused(b"HMSG a 1 0 99999999999\r\n").contains("length"));
    // The fuzz target's entry point stops at the first error.
    parse_server_bytes(&longer);
    parse_server_bytes(b"PING\r\nPONG\r\nMSG a 1 2\r\nok\r\n\x00\x01");
}

#[test]
fn acks_and_jetstream_errors() {
    assert_eq!(
        parse_ack(br#"{"stream":"S","seq":3,"duplicate":true}"#).expect("an ack"),
        PubAck {
            stream: "S".into(),
            seq: 3,
            duplicate: true
        }
    );
    assert!(
        !parse_ack(br#"{"stream":"S","seq":1}"#)
            .expect("an ack")
            .duplicate
    );
    let error = br#"{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}"#;
    match parse_ack(error) {
        Err(NatsError::JetStream {
            code: 503,
            err_code: Some(10039),
            description,
        }) => assert_eq!(description, "jetstream not enabled"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(parse_ack(b"{}"), Err(NatsError::Protocol(_))));
    assert!(matches!(
        parse_ack(b"not json"),
        Err(NatsError::Protocol(_))
    ));
}

#[test]
fn urls_and_subjects() {
    let target = parse_url("nats://ada:p%40ss%3Aw@127.0.0.1:4333").expect("parses");
    assert_eq!(target.addr, "127.0.0.1:4333");
    assert_eq!(
        target.auth,
        Auth::User {
            user: "ada".into(),
            pass: "p@ss:w".into()
        }
    );
    let target = parse_url("nats://s3cret@nats.internal/").expect("parses");
    assert_eq!(
        (target.addr.as_str(), target.auth),
        ("nats.internal:4222", Auth::Token("s3cret".into()))
    );
    assert_eq!(parse_url("nats://[::1]").expect("v6").addr, "[::1]:4222");
    assert_eq!(parse_url("nats://[::1]:5").expect("v6").addr, "[::1]:5");
    for bad in [
        "tls://h:1",
        "h:4222",
        "nats://",
        "nats://h:port",
        "nats://h:1/path",
        "nats://@h",
        "nats://a:%zz@h",
    ] {
        assert!(
            matches!(parse_url(bad), Err(NatsError::Url { .. })),
            "{bad}"
        );
    }
    match parse_url("http://user:hunter2@h") {
        Err(e) => assert!(!e.to_string().contains("hunter2"), "{e}"),
        Ok(_) => panic!("not a nats URL"),
    }
    check_subject("hearth.events.rooms-1").expect("a subject");
    for bad in [
        "",
        "a b",
        "a\tb",
        "a\r\nPING",
        "a..b",
        ".a",
        "a.",
        "a.*",
        "a.>",
    ] {
        assert!(check_subject(bad).is_err(), "{bad:?}");
    }
}

// ---- A fake server ----

const INFO: &str =
    r#"INFO {"server_id":"fake","version":"2.10.0","headers":true,"max_payload":1048576}"#;

/// The server side of one connection, reading with a timeout so that a test cannot hang.
struct Fake {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Fake {
    fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.writer.write_all(bytes.as_ref()).expect("fake send");
    }

    /// One line, without its CRLF (which it must have).
    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("fake read");
        line.strip_suffix("\r\n")
            .unwrap_or_else(|| panic!("{line:?} ends with CRLF"))
            .to_string()
    }

    fn exact(&mut self, len: usize) -> Vec<u8> {
        let mut bytes = vec![0; len];
        self.reader.read_exact(&mut bytes).expect("fake read");
        bytes
    }

    /// INFO, then the client's CONNECT, SUB and PING; returns CONNECT's JSON and the inbox.
    fn handshake(&mut self, info: &str) -> (Value, String) {
        self.send(format!("{info}\r\n"));
        let connect = self.line();
        let connect = connect.strip_prefix("CONNECT ").expect("CONNECT first");
        let connect: Value = serde_json::from_str(connect).expect("CONNECT's JSON");
        let sub = self.line();
        let inbox = sub
            .strip_prefix("SUB ")
            .and_then(|s| s.strip_suffix(".* 1"))
            .unwrap_or_else(|| panic!("{sub:?} subscribes to an inbox"))
            .to_string();
        assert!(inbox.starts_with("_INBOX."), "{inbox}");
        assert_eq!(self.line(), "PING");
        self.send("PONG\r\n");
        (connect, inbox)
    }

    /// A PUB or HPUB: its subject, reply subject, and headers and payload.
    fn publication(&mut self) -> (String, String, Vec<u8>) {
        let line = self.line();
        let parts: Vec<&str> = line.split(' ').collect();
        let total: usize = match parts[0] {
            "PUB" if parts.len() == 4 => parts[3].parse().expect("a length"),
            "HPUB" if parts.len() == 5 => parts[4].parse().expect("a length"),
            _ => panic!("{line:?} is a publication"),
        };
        let body = self.exact(total + 2);
        assert!(body.ends_with(b"\r\n"), "the payload ends with CRLF");
        let body = body[..total].to_vec();
        (parts[1].to_string(), parts[2].to_string(), body)
    }

    fn reply(&mut self, to: &str, payload: &str) {
        self.send(format!("MSG {to} 1 {}\r\n{payload}\r\n", payload.len()));
    }

    /// Waits for the client to close the connection.
    fn until_closed(&mut self) {
        let mut rest = Vec::new();
        let _ = self.reader.read_to_end(&mut rest);
    }
}

/// A server for one connection, running `script` in a thread; returns its `host:port`.
fn fake_server(script: impl FnOnce(Fake) + Send + 'static) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let thread = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let writer = stream.try_clone().expect("clone");
        script(Fake {
            reader: BufReader::new(stream),
            writer,
        });
    });
    (addr, thread)
}

const SECOND: Duration = Duration::from_secs(1);
const EVENT: &[u8] = br#"{"specversion":"1.0","id":"e1","type":"t","source":"s"}"#;

#[test]
fn publish_frames_hpub_answers_pings_and_reads_the_ack() {
    let (addr, server) = fake_server(|mut fake| {
        let (connect, inbox) = fake.handshake(INFO);
        for (key, value) in [
            ("verbose", json!(false)),
            ("pedantic", json!(false)),
            ("headers", json!(true)),
            ("no_responders", json!(true)),
            ("name", json!("hearth-triggers")),
            ("lang", json!("rust")),
            ("version", json!("0.1")),
            ("user", json!("ada")),
            ("pass", json!("p@ss:w")),
        ] {
            assert_eq!(connect[key], value, "CONNECT's {key}");
        }
        let line = fake.line();
        let headers =
            "NATS/1.0\r\nNats-Msg-Id: m-1\r\nContent-Type: application/cloudevents+json\r\n\r\n";
        let reply = format!("{inbox}.1");
        assert_eq!(
            line,
            format!(
                "HPUB hearth.events {reply} {} {}",
                headers.len(),
                headers.len() + EVENT.len()
            )
        );
        let body = fake.exact(headers.len() + EVENT.len() + 2);
        assert_eq!(body, [headers.as_bytes(), EVENT, b"\r\n"].concat());
        // A reply to some other request, then a PING: the client skips the one and answers
        // the other while it waits.
        fake.reply(&format!("{inbox}.99"), "{}");
        fake.send("PING\r\n");
        assert_eq!(fake.line(), "PONG");
        fake.reply(&reply, r#"{"stream":"EVENTS","seq":7}"#);
        fake.until_closed();
    });
    let url = format!("nats://ada:p%40ss%3Aw@{addr}");
    let mut publisher = NatsPublisher::connect(&url, 5 * SECOND).expect("connects");
    let ack = publisher
        .publish("hearth.events", "m-1", EVENT)
        .expect("acked");
    assert_eq!(
        ack,
        PubAck {
            stream: "EVENTS".into(),
            seq: 7,
            duplicate: false
        }
    );
    drop(publisher);
    server.join().expect("the fake server's checks hold");
}

#[test]
fn no_responders_jetstream_errors_and_requests() {
    let (addr, server) = fake_server(|mut fake| {
        let (connect, _) = fake.handshake(INFO);
        assert_eq!(connect["auth_token"], "s3cret");
        assert!(connect.get("user").is_none());
        let (_, reply, _) = fake.publication();
        fake.send(format!("HMSG {reply} 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"));
        let (_, reply, _) = fake.publication();
        fake.reply(
            &reply,
            r#"{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"}}"#,
        );
        let (subject, reply, body) = fake.publication();
        assert_eq!(subject, "$JS.API.STREAM.INFO.EVENTS");
        assert_eq!(body, b"{}");
        fake.reply(
            &reply,
            r#"{"type":"io.nats.jetstream.api.v1.stream_info_response"}"#,
        );
        fake.until_closed();
    });
    let url = format!("nats://s3cret@{addr}");
    let mut publisher = NatsPublisher::connect(&url, 5 * SECOND).expect("connects");
    match publisher.publish("nowhere", "m-1", EVENT) {
        Err(NatsError::NoStream { subject }) => assert_eq!(subject, "nowhere"),
        other => panic!("{other:?}"),
    }
    match publisher.publish("hearth.events", "m-2", EVENT) {
        Err(NatsError::JetStream {
            code: 400,
            err_code: Some(10060),
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let answer = publisher
        .request("$JS.API.STREAM.INFO.EVENTS", b"{}")
        .expect("an answer");
    assert!(String::from_utf8_lossy(&answer).contains("stream_info_response"));
    drop(publisher);
    server.join().expect("the fake server's checks hold");
}

#[test]
fn an_ack_that_does_not_come_times_out_and_comes_late_to_no_harm() {
    let (addr, server) = fake_server(|mut fake| {
        fake.handshake(INFO);
        let (_, first, _) = fake.publication();
        // Silence until the client gives up on the first and publishes again; then the first
        // ack, late, before the second's.
        let (_, second, _) = fake.publication();
        fake.reply(&first, r#"{"stream":"EVENTS","seq":1}"#);
        fake.reply(&second, r#"{"stream":"EVENTS","seq":1,"duplicate":true}"#);
        fake.until_closed();
    });
    let timeout = Duration::from_millis(300);
    let mut publisher =
        NatsPublisher::connect(&format!("nats://{addr}"), timeout).expect("connects");
    let start = Instant::now();
    match publisher.publish("hearth.events", "m-1", EVENT) {
        Err(NatsError::Timeout(t)) => assert_eq!(t, timeout),
        other => panic!("{other:?}"),
    }
    let waited = start.elapsed();
    assert!(waited >= timeout && waited < 5 * SECOND, "{waited:?}");
    let ack = publisher
        .publish("hearth.events", "m-1", EVENT)
        .expect("the retry's ack");
    assert!(ack.duplicate, "the second reply is the retry's own");
    drop(publisher);
    server.join().expect("the fake server's checks hold");
}

#[test]
fn connect_refuses_servers_without_headers_tls_or_our_credentials() {
    let (addr, server) = fake_server(|mut fake| {
        fake.send(r#"INFO {"server_id":"old","version":"2.1.0"}"#.to_string() + "\r\n");
    });
    let result = NatsPublisher::connect(&format!("nats://{addr}"), 5 * SECOND);
    assert!(matches!(result, Err(NatsError::NoHeaders)), "{result:?}");
    server.join().expect("the fake server ran");

    let (addr, server) = fake_server(|mut fake| {
        fake.send(r#"INFO {"headers":true,"tls_required":true}"#.to_string() + "\r\n");
    });
    let result = NatsPublisher::connect(&format!("nats://{addr}"), 5 * SECOND);
    assert!(matches!(result, Err(NatsError::TlsRequired)), "{result:?}");
    server.join().expect("the fake server ran");

    let (addr, server) = fake_server(|mut fake| {
        fake.send(format!("{INFO}\r\n"));
        assert!(fake.line().starts_with("CONNECT "));
        assert!(fake.line().starts_with("SUB "));
        assert_eq!(fake.line(), "PING");
        fake.send("-ERR 'Authorization Violation'\r\n");
    });
    match NatsPublisher::connect(&format!("nats://bad:creds@{addr}"), 5 * SECOND) {
        Err(NatsError::Server(message)) => assert_eq!(message, "Authorization Violation"),
        other => panic!("{other:?}"),
    }
    server.join().expect("the fake server ran");
}

#[test]
fn a_silent_or_broken_server_is_an_error_in_bounded_time() {
    let (addr, server) = fake_server(|mut fake| fake.until_closed());
    let start = Instant::now();
    let result = NatsPublisher::connect(&format!("nats://{addr}"), Duration::from_millis(200));
    assert!(matches!(result, Err(NatsError::Timeout(_))), "{result:?}");
    assert!(start.elapsed() < 5 * SECOND);
    drop(result);
    server.join().expect("the fake server ran");

    let (addr, server) = fake_server(|mut fake| {
        let (_, inbox) = fake.handshake(INFO);
        fake.publication();
        fake.send(format!("MSG {inbox}.1 1 {}\r\n", MAX_SERVER_PAYLOAD + 1));
        fake.until_closed();
    });
    let mut publisher =
        NatsPublisher::connect(&format!("nats://{addr}"), 5 * SECOND).expect("connects");
    let result = publisher.publish("hearth.events", "m-1", EVENT);
    assert!(matches!(result, Err(NatsError::Protocol(_))), "{result:?}");
    assert!(
        publisher.publish("hearth.events", "m-2", EVENT).is_err(),
        "a connection out of step is not used again"
    );
    drop(publisher);
    server.join().expect("the fake server ran");
}

// ---- A real nats-server ----

/// A `nats-server` of the test's own, killed and its store removed when dropped.
struct NatsServer {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl NatsServer {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

/// `nats-server` from `HEARTH_TEST_NATS` or the PATH. Missing, the test fails saying how to
/// install it, unless `HEARTH_SKIP_NATS=1` (then `None`: the test is skipped, and says so).
fn nats_server_binary() -> Option<PathBuf> {
    if let Some(binary) = std::env::var_os("HEARTH_TEST_NATS") {
        return Some(PathBuf::from(binary));
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("nats-server"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        if std::env::var("HEARTH_SKIP_NATS").as_deref() == Ok("1") {
            eprintln!("SKIPPED: nats-server is not on PATH and HEARTH_SKIP_NATS=1");
            return None;
        }
        panic!(
            "nats-server is not on PATH: install it (apt-get install -y nats-server), name \
             another binary with HEARTH_TEST_NATS, or set HEARTH_SKIP_NATS=1 to skip this test"
        );
    }
    found
}

/// Starts `nats-server -js` on a free port with `extra` arguments, once it accepts clients.
fn start_nats(extra: &[&str]) -> Option<NatsServer> {
    let binary = nats_server_binary()?;
    // nats-server wants a fixed port: take one the kernel picks, and free it for the server.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let dir =
        std::env::temp_dir().join(format!("hearth-nats-{}-{port}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the store directory");
    let log = std::fs::File::create(dir.join("server.log")).expect("the log file");
    let child = Command::new(&binary)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(&dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let mut server = NatsServer {
        child,
        dir,
        url: format!("127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + 10 * SECOND;
    while TcpStream::connect(&server.url).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("nats-server exited ({status}): {}", server.log());
        }
        assert!(
            Instant::now() < deadline,
            "nats-server did not listen within 10 s: {}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(server)
}

/// Creates a file stream over `subjects`; JetStream may still be starting, so a missing
/// responder is retried for a few seconds.
fn create_stream(publisher: &mut NatsPublisher, name: &str, subjects: &[&str]) {
    let body = json!({"name": name, "subjects": subjects, "storage": "file"}).to_string();
    let deadline = Instant::now() + 10 * SECOND;
    loop {
        match publisher.request(&format!("$JS.API.STREAM.CREATE.{name}"), body.as_bytes()) {
            Ok(answer) => {
                let answer: Value = serde_json::from_slice(&answer).expect("JSON");
                assert!(answer.get("error").is_none(), "stream create: {answer}");
                return;
            }
            Err(NatsError::NoStream { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("stream create: {e}"),
        }
    }
}

#[test]
fn nats_server_stores_acks_and_drops_duplicates() {
    let Some(server) = start_nats(&[]) else {
        return;
    };
    let mut publisher = NatsPublisher::connect(&format!("nats://{}", server.url), 5 * SECOND)
        .unwrap_or_else(|e| panic!("connect: {e}; {}", server.log()));
    create_stream(&mut publisher, "HEARTH_EVENTS", &["hearth.events.>"]);
    for (n, id) in ["m-1", "m-2", "m-3"].into_iter().enumerate() {
        let ack = publisher
            .publish("hearth.events.rooms", id, EVENT)
            .expect("stored");
        assert_eq!(
            ack,
            PubAck {
                stream: "HEARTH_EVENTS".into(),
                seq: n as u64 + 1,
                duplicate: false
            }
        );
    }
    let again = publisher
        .publish("hearth.events.rooms", "m-2", EVENT)
        .expect("acked");
    assert!(again.duplicate, "{again:?}");
    assert_eq!(again.seq, 2, "the first copy's sequence");
    match publisher.publish("elsewhere.events", "m-4", EVENT) {
        Err(NatsError::NoStream { subject }) => assert_eq!(subject, "elsewhere.events"),
        other => panic!("a subject no stream takes: {other:?}"),
    }
    let ack = publisher
        .publish("hearth.events.users", "m-4", EVENT)
        .expect("the connection still works");
    assert_eq!(ack.seq, 4);
    let info = publisher
        .request("$JS.API.STREAM.INFO.HEARTH_EVENTS", b"")
        .expect("stream info");
    let info: Value = serde_json::from_slice(&info).expect("JSON");
    assert_eq!(
        info["state"]["messages"], 4,
        "the duplicate was not stored: {info}"
    );
}

#[test]
fn nats_server_checks_credentials() {
    let Some(server) = start_nats(&["--user", "hearth", "--pass", "s3cret"]) else {
        return;
    };
    let good = format!("nats://hearth:s3cret@{}", server.url);
    let mut publisher = NatsPublisher::connect(&good, 5 * SECOND).expect("connects");
    assert!(matches!(
        publisher.publish("no.stream", "m-1", EVENT),
        Err(NatsError::NoStream { .. })
    ));
    let bad = format!("nats://hearth:wrong@{}", server.url);
    match NatsPublisher::connect(&bad, 5 * SECOND) {
        Err(NatsError::Server(message)) => {
            assert!(message.contains("Authorization"), "{message}")
        }
        other => panic!("wrong password: {other:?}"),
    }
}
