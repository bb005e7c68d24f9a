//! A declared trigger delivering to a real NATS JetStream stream (docs/triggers.md, "Triggers
//! in production: a triggers file"), with `nats-server` killed and started again while four
//! writers keep writing: every acknowledged change reaches the stream, nothing the writers did
//! not write does, the events keep the log's order, and while the stream is away the status
//! shows the failed attempts, the pending events and their lag.
//!
//! The test needs `nats-server` (2.2 or later, for headers) on the PATH, or named by
//! `HEARTH_TEST_NATS`; without it the test fails saying so, unless `HEARTH_SKIP_NATS=1`.
//! Everything listens on 127.0.0.1; every process is killed when the test ends, even by a panic.

mod common;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{free_port, listens, serve_logging, temp_dir, Server};
use serde_json::{json, Value};

const TOKEN: &str = "nats-test-admin-token";
const STREAM: &str = "ORDERS";
const SUBJECT: &str = "hearth.orders";
const WRITERS: usize = 4;
/// The most writes one writer makes, whatever the phases' timing.
const MAX_WRITES_PER_WRITER: usize = 5_000;
/// How long the stream may take to hold every acknowledged change once the writes stop.
const CATCH_UP: Duration = Duration::from_secs(60);

// ---- nats-server ----

/// `nats-server` from `HEARTH_TEST_NATS` or the PATH (or /usr/sbin, where Debian puts it).
/// Missing, the test fails saying how to install it, unless `HEARTH_SKIP_NATS=1` (then `None`:
/// the test is skipped, and says so).
fn nats_server_binary() -> Option<PathBuf> {
    if let Some(binary) = std::env::var_os("HEARTH_TEST_NATS") {
        return Some(PathBuf::from(binary));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect())
        .unwrap_or_default();
    dirs.push(PathBuf::from("/usr/sbin"));
    let found = dirs
        .into_iter()
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file());
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

/// A `nats-server -js` of the test's own on a fixed port and store directory, so that it can
/// be killed and started again with its streams. Killed when dropped.
struct NatsServer {
    binary: PathBuf,
    port: u16,
    store: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    starts: usize,
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl NatsServer {
    fn new(binary: PathBuf, dir: &Path) -> NatsServer {
        let store = dir.join("nats-store");
        std::fs::create_dir_all(&store).expect("the NATS store directory");
        NatsServer {
            binary,
            port: free_port(),
            store,
            log: dir.join("nats.log"),
            child: None,
            starts: 0,
        }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Starts it (again), and returns once it accepts clients.
    fn start(&mut self) {
        assert!(self.child.is_none(), "nats-server is already running");
        self.starts += 1;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the NATS log file");
        let child = Command::new(&self.binary)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !listens(self.port) {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                panic!("nats-server exited ({status}): {}", self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "nats-server did not listen within 10 s: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, and waits for it to be gone.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---- A minimal NATS client: requests to the JetStream API ----

/// One connection to the NATS server, subscribed to one reply inbox; every wait is bounded.
struct NatsClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    next: u64,
}

/// A message the server sent: its subject, its status (an HMSG's) and its payload.
struct Message {
    subject: String,
    status: Option<u16>,
    payload: Vec<u8>,
}

const INBOX: &str = "_INBOX.hearth_test";
const NATS_TIMEOUT: Duration = Duration::from_secs(5);

impl NatsClient {
    fn connect(addr: &str) -> Result<NatsClient, String> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        stream
            .set_read_timeout(Some(NATS_TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(NATS_TIMEOUT)))
            .map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut client = NatsClient {
            reader: BufReader::new(stream),
            writer,
            next: 0,
        };
        let info = client.line()?;
        if !info.starts_with("INFO ") {
            return Err(format!("the server did not start with INFO: {info:?}"));
        }
        let connect = json!({"verbose": false, "pedantic": false, "headers": true,
            "no_responders": true, "lang": "rust", "version": "0", "name": "hearth-test"});
        client.send(format!("CONNECT {connect}\r\nSUB {INBOX}.* 1\r\nPING\r\n").as_bytes())?;
        loop {
            let line = client.line()?;
            match line.as_str() {
                "PONG" => return Ok(client),
                "+OK" => {}
                "PING" => client.send(b"PONG\r\n")?,
                other if other.starts_with("-ERR") => return Err(other.to_string()),
                other => return Err(format!("unexpected {other:?} at connect")),
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.writer
            .write_all(bytes)
            .map_err(|e| format!("NATS write: {e}"))
    }

    /// One control line, without its CRLF.
    fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        let read = self
            .reader
            .read_line(&mut line)
            .map_err(|e| format!("NATS read: {e}"))?;
        if read == 0 {
            return Err("the NATS server closed the connection".into());
        }
        line.strip_suffix("\r\n")
            .map(str::to_string)
            .ok_or_else(|| format!("a line without CRLF: {line:?}"))
    }

    /// The next message, answering PINGs on the way.
    fn message(&mut self) -> Result<Message, String> {
        loop {
            let line = self.line()?;
            let words: Vec<&str> = line.split_ascii_whitespace().collect();
            let (subject, header_len, total_len) = match words.first().copied() {
                Some("PING") => {
                    self.send(b"PONG\r\n")?;
                    continue;
                }
                Some("PONG" | "+OK") => continue,
                Some(err) if err.starts_with("-ERR") => return Err(line),
                Some("MSG") if words.len() == 4 || words.len() == 5 => {
                    let len = words[words.len() - 1].parse().map_err(|_| line.clone())?;
                    (words[1].to_string(), 0, len)
                }
                Some("HMSG") if words.len() == 5 || words.len() == 6 => {
                    let n = words.len();
                    let header = words[n - 2].parse().map_err(|_| line.clone())?;
                    let total = words[n - 1].parse().map_err(|_| line.clone())?;
                    (words[1].to_string(), header, total)
                }
                _ => return Err(format!("unexpected from NATS: {line:?}")),
            };
            if header_len > total_len || total_len > 64 << 20 {
                return Err(format!("bad lengths: {line:?}"));
            }
            let mut body = vec![0; total_len + 2];
            self.reader
                .read_exact(&mut body)
                .map_err(|e| format!("NATS read: {e}"))?;
            let headers = String::from_utf8_lossy(&body[..header_len]).into_owned();
            let status = headers
                .lines()
                .next()
                .and_then(|first| first.strip_prefix("NATS/1.0"))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|code| code.parse().ok());
            body.truncate(total_len);
            return Ok(Message {
                subject,
                status,
                payload: body.split_off(header_len),
            });
        }
    }

    /// A request to `subject` and its reply's payload (an error on "no responders").
    fn request(&mut self, subject: &str, payload: &[u8]) -> Result<Vec<u8>, String> {
        self.next += 1;
        let reply = format!("{INBOX}.{}", self.next);
        let mut frame = format!("PUB {subject} {reply} {}\r\n", payload.len()).into_bytes();
        frame.extend_from_slice(payload);
        frame.extend_from_slice(b"\r\n");
        self.send(&frame)?;
        let deadline = Instant::now() + NATS_TIMEOUT;
        loop {
            if Instant::now() > deadline {
                return Err(format!("no reply to {subject} within {NATS_TIMEOUT:?}"));
            }
            let message = self.message()?;
            if message.subject != reply {
                continue; // A late reply to an earlier request.
            }
            return match message.status {
                Some(503) => Err(format!("no responders on {subject}")),
                Some(status) if status >= 300 => Err(format!("status {status} on {subject}")),
                _ => Ok(message.payload),
            };
        }
    }

    /// A JetStream API request, its reply as JSON.
    fn api(&mut self, subject: &str, body: &Value) -> Result<Value, String> {
        let answer = self.request(subject, body.to_string().as_bytes())?;
        serde_json::from_slice(&answer)
            .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&answer)))
    }
}

/// Connects and makes a JetStream API request, again on "no responders" (JetStream still
/// starting) or a refused connection, until `within` has passed.
fn api_retrying(nats: &NatsServer, subject: &str, body: &Value, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let result = NatsClient::connect(&nats.addr()).and_then(|mut c| c.api(subject, body));
        match result {
            Ok(answer) => return answer,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(error) => panic!("{subject}: {error}; NATS log: {}", nats.log_text()),
        }
    }
}

/// Standard base64 (with or without padding), as JetStream encodes a stored message's data.
fn base64_decode(text: &str) -> Vec<u8> {
    fn value(c: u8) -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => panic!("not base64: {c:?}"),
        }
    }
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut bits = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            bits |= value(c) << (18 - 6 * i);
        }
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

/// The stream's messages from sequence `from` to its last, as (sequence, event): what a
/// consumer reads. Sequences the stream no longer holds are skipped.
fn stream_messages(client: &mut NatsClient, from: u64) -> Result<Vec<(u64, Value)>, String> {
    let info = client.api(&format!("$JS.API.STREAM.INFO.{STREAM}"), &json!({}))?;
    if let Some(error) = info.get("error") {
        return Err(format!("stream info: {error}"));
    }
    let last = info["state"]["last_seq"]
        .as_u64()
        .ok_or_else(|| format!("no last_seq in {info}"))?;
    let mut messages = Vec::new();
    for seq in from..=last {
        let answer = client.api(
            &format!("$JS.API.STREAM.MSG.GET.{STREAM}"),
            &json!({ "seq": seq }),
        )?;
        if answer["error"]["code"] == 404 {
            continue;
        }
        let message = &answer["message"];
        let data = message["data"]
            .as_str()
            .ok_or_else(|| format!("message {seq} without data: {answer}"))?;
        assert_eq!(message["subject"], SUBJECT, "message {seq}: {answer}");
        let payload = base64_decode(data);
        let event: Value = serde_json::from_slice(&payload).unwrap_or_else(|e| {
            panic!(
                "message {seq} is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&payload)
            )
        });
        messages.push((seq, event));
    }
    Ok(messages)
}

// ---- Hearth ----

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// The status of trigger "orders" from `GET /.admin/triggers`.
fn orders_status(agent: &ureq::Agent, server: &Server) -> Value {
    let mut answer = agent
        .get(&format!("{}/.admin/triggers", server.url))
        .header("authorization", format!("Bearer {TOKEN}"))
        .call()
        .expect("the server answers /.admin/triggers");
    let body = answer.body_mut().read_to_string().unwrap_or_default();
    assert_eq!(answer.status().as_u16(), 200, "/.admin/triggers: {body}");
    let status: Value = serde_json::from_str(&body).expect("JSON status");
    status["triggers"]
        .as_array()
        .and_then(|triggers| triggers.iter().find(|t| t["name"] == "orders"))
        .cloned()
        .unwrap_or_else(|| panic!("no trigger \"orders\" in {body}"))
}

fn figure(status: &Value, name: &str) -> u64 {
    status[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no {name} in {status}"))
}

/// Polls the status until `done` holds of it, at most `within`; the last status either way.
fn status_until(
    agent: &ureq::Agent,
    server: &Server,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> (bool, Value) {
    let deadline = Instant::now() + within;
    loop {
        let status = orders_status(agent, server);
        if done(&status) {
            return (true, status);
        }
        if Instant::now() >= deadline {
            return (false, status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the writers did.
#[derive(Default)]
struct Writes {
    /// Keys whose PUT was acknowledged (2xx).
    acked: Mutex<HashSet<String>>,
    /// Keys of every PUT sent, acknowledged or not.
    attempted: Mutex<HashSet<String>>,
    /// PUTs not acknowledged, with why.
    refused: Mutex<Vec<String>>,
    count: AtomicUsize,
}

/// Writes `/orders/w{writer}-{i}` of database `shop` until `stop` (or its bounds).
fn write_orders(server: &Server, writer: usize, stop: &AtomicBool, writes: &Writes) {
    let agent = agent();
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..MAX_WRITES_PER_WRITER {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
            return;
        }
        let key = format!("w{writer}-{i}");
        writes
            .attempted
            .lock()
            .expect("not poisoned")
            .insert(key.clone());
        let result = agent
            .put(&format!("{}/orders/{key}.json?ns=shop", server.url))
            .header("authorization", format!("Bearer {TOKEN}"))
            .send(json!({"n": i, "writer": writer}).to_string());
        match result {
            Ok(answer) if answer.status().is_success() => {
                writes.acked.lock().expect("not poisoned").insert(key);
                writes.count.fetch_add(1, Ordering::Relaxed);
            }
            Ok(mut answer) => {
                let body = answer.body_mut().read_to_string().unwrap_or_default();
                let status = answer.status();
                writes
                    .refused
                    .lock()
                    .expect("not poisoned")
                    .push(format!("{key}: {status} {body}"));
            }
            Err(error) => writes
                .refused
                .lock()
                .expect("not poisoned")
                .push(format!("{key}: {error}")),
        }
    }
}

/// Sets `stop` when dropped: the writers end even when the test panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The `POS` of an event id `EPOCH.POS.INDEX`.
fn id_parts(id: &str) -> (u64, u64, u64) {
    let parts: Vec<u64> = id
        .split('.')
        .map(|part| {
            part.parse()
                .unwrap_or_else(|_| panic!("event id {id:?} is not EPOCH.POS.INDEX"))
        })
        .collect();
    match parts[..] {
        [epoch, pos, index] => (epoch, pos, index),
        _ => panic!("event id {id:?} is not EPOCH.POS.INDEX"),
    }
}

#[test]
fn nats_stopped_and_started_under_load_loses_nothing_and_shows_the_lag() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let started = Instant::now();
    let dir = temp_dir("triggers-nats");
    let mut nats = NatsServer::new(binary, &dir);
    nats.start();
    let created = api_retrying(
        &nats,
        &format!("$JS.API.STREAM.CREATE.{STREAM}"),
        &json!({"name": STREAM, "subjects": [SUBJECT], "storage": "file"}),
        Duration::from_secs(10),
    );
    assert!(created.get("error").is_none(), "stream create: {created}");

    let file = dir.join("triggers.json");
    let declaration = json!({"triggers": {"orders": {
        "path": "/orders/{id}",
        "nats": {"url": format!("nats://{}", nats.addr()), "subject": SUBJECT}
    }}});
    std::fs::write(&file, declaration.to_string()).expect("the triggers file");
    let log_path = dir.join("server.log");
    let log = std::fs::File::create(&log_path).expect("a log file");
    let server = serve_logging(
        &dir.join("data"),
        free_port(),
        &[
            "--admin-token",
            TOKEN,
            "--triggers",
            file.to_str().expect("a UTF-8 path"),
        ],
        log,
    );
    let server_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let agent = agent();

    let writes = Writes::default();
    let stop = AtomicBool::new(false);
    // Writes made before the kill, while the stream was away, and after it came back.
    let mut phases = [0usize; 3];
    let mut down_status = Value::Null;
    let mut lag_status = Value::Null;
    std::thread::scope(|scope| {
        let _stop = StopOnDrop(&stop);
        for writer in 0..WRITERS {
            let (server, stop, writes) = (&server, &stop, &writes);
            scope.spawn(move || write_orders(server, writer, stop, writes));
        }
        // A third of the way in: the stream goes away, SIGKILLed.
        std::thread::sleep(Duration::from_millis(1500));
        phases[0] = writes.count.load(Ordering::Relaxed);
        nats.kill();
        let killed = Instant::now();
        let (seen, status) = status_until(&agent, &server, Duration::from_secs(10), |s| {
            figure(s, "failed") > 0 && figure(s, "pending") > 0
        });
        assert!(
            seen,
            "with nats-server down, /.admin/triggers shows failed > 0 and pending > 0: {status}"
        );
        down_status = status;
        // Down for two seconds at least, writes going on: the lag grows.
        std::thread::sleep(Duration::from_secs(2).saturating_sub(killed.elapsed()));
        lag_status = orders_status(&agent, &server);
        phases[1] = writes.count.load(Ordering::Relaxed);
        nats.start();
        // Writes go on a while with the stream back, then stop.
        std::thread::sleep(Duration::from_millis(1500));
        phases[2] = writes.count.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });
    let writes_done = started.elapsed();

    let refused = writes.refused.into_inner().expect("not poisoned");
    let acked = writes.acked.into_inner().expect("not poisoned");
    let attempted = writes.attempted.into_inner().expect("not poisoned");
    eprintln!(
        "writes: {} acknowledged ({} before the kill, {} while down, {} after the restart), \
         {} refused, in {writes_done:?}",
        acked.len(),
        phases[0],
        phases[1] - phases[0],
        phases[2] - phases[1],
        refused.len()
    );
    eprintln!("status while down: {down_status}");
    eprintln!("status before the restart: {lag_status}");
    assert!(
        refused.is_empty(),
        "writes never wait for receivers, and none fails: {} refused, first {:?}",
        refused.len(),
        &refused[..refused.len().min(5)]
    );
    assert!(
        phases[0] > 0 && phases[1] > phases[0] && phases[2] > phases[1],
        "writes before the kill, while down and after the restart: {phases:?}"
    );
    // The lag: the oldest pending event waited about as long as the stream was away.
    assert!(
        figure(&lag_status, "pending") > 0,
        "events pending while the stream is away: {lag_status}"
    );
    let lag = lag_status["lagSeconds"].as_f64().unwrap_or(0.0);
    assert!(
        lag >= 1.0,
        "after 2 s without the stream, the oldest pending event is over 1 s old: {lag_status}"
    );
    let database = lag_status["databases"]
        .as_array()
        .and_then(|dbs| dbs.iter().find(|db| db["database"] == "shop"))
        .unwrap_or_else(|| panic!("no database shop in {lag_status}"));
    assert!(
        database["lastError"].is_string() && figure(database, "attempts") > 0,
        "the head event's failed attempts and error show: {lag_status}"
    );

    // Every acknowledged change reaches the stream, within CATCH_UP.
    let deadline = Instant::now() + CATCH_UP;
    let mut messages: Vec<(u64, Value)> = Vec::new();
    let mut client: Option<NatsClient> = None;
    let mut missing: BTreeSet<&String>;
    loop {
        let next = messages.last().map_or(1, |(seq, _)| seq + 1);
        let read = match client.as_mut() {
            Some(c) => stream_messages(c, next),
            None => NatsClient::connect(&nats.addr()).and_then(|mut c| {
                let read = stream_messages(&mut c, next);
                client = Some(c);
                read
            }),
        };
        match read {
            Ok(more) => messages.extend(more),
            // JetStream recovering its stream after the restart, or our connection gone.
            Err(_) => client = None,
        }
        let seen: HashSet<&str> = messages
            .iter()
            .filter_map(|(_, event)| event["ref"].as_str())
            .filter_map(|r| r.strip_prefix("orders/"))
            .collect();
        missing = acked
            .iter()
            .filter(|k| !seen.contains(k.as_str()))
            .collect();
        if missing.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            let status = orders_status(&agent, &server);
            panic!(
                "{} of {} acknowledged changes not in the stream after {CATCH_UP:?} (first {:?}); \
                 {} messages; status {status}; NATS log: {}; server log: {}",
                missing.len(),
                acked.len(),
                missing.iter().take(10).collect::<Vec<_>>(),
                messages.len(),
                nats.log_text(),
                server_log()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let delivered_in = started.elapsed();

    // Nothing invented, each event as written, and log order among first copies.
    let mut first_ids: HashMap<String, u64> = HashMap::new();
    let mut last_pos: Option<(u64, String)> = None;
    let mut epochs = BTreeSet::new();
    let mut repeats = 0;
    for (seq, event) in &messages {
        let id = event["id"]
            .as_str()
            .unwrap_or_else(|| panic!("message {seq} without an id: {event}"));
        let reference = event["ref"].as_str().unwrap_or_default();
        let key = reference
            .strip_prefix("orders/")
            .unwrap_or_else(|| panic!("message {seq}: ref {reference:?} is not orders/KEY"));
        assert!(
            attempted.contains(key),
            "message {seq} is of a change nobody wrote: {event}"
        );
        assert_eq!(event["instance"], "shop", "message {seq}: {event}");
        assert_eq!(event["trigger"], "orders", "message {seq}: {event}");
        assert_eq!(event["params"]["id"], key, "message {seq}: {event}");
        let (writer, n) = key
            .strip_prefix('w')
            .and_then(|k| k.split_once('-'))
            .and_then(|(w, n)| Some((w.parse::<u64>().ok()?, n.parse::<u64>().ok()?)))
            .unwrap_or_else(|| panic!("message {seq}: key {key:?}"));
        assert_eq!(
            event["data"]["delta"],
            json!({"n": n, "writer": writer}),
            "message {seq}: the value written: {event}"
        );
        if let Some(first) = first_ids.get(id) {
            repeats += 1;
            eprintln!("message {seq} repeats message {first}: {id}");
            continue;
        }
        first_ids.insert(id.to_string(), *seq);
        let (epoch, pos, _) = id_parts(id);
        epochs.insert(epoch);
        if let Some((previous, previous_id)) = &last_pos {
            assert!(
                pos > *previous,
                "message {seq}: id {id} after {previous_id}: the log's order is lost"
            );
        }
        last_pos = Some((pos, id.to_string()));
    }
    assert_eq!(
        first_ids.len(),
        acked.len(),
        "one event per acknowledged write (all writes were acknowledged)"
    );
    assert_eq!(epochs.len(), 1, "one epoch: {epochs:?}");

    // Nothing left behind: nothing pending, nothing dead, nothing dropped.
    let (settled, status) = status_until(&agent, &server, Duration::from_secs(10), |s| {
        figure(s, "pending") == 0
    });
    assert!(settled, "pending 0 once all is in the stream: {status}");
    assert_eq!(status["lagSeconds"].as_f64(), Some(0.0), "{status}");
    assert_eq!(figure(&status, "taken"), acked.len() as u64, "{status}");
    assert!(
        figure(&status, "delivered") >= acked.len() as u64,
        "{status}"
    );
    assert_eq!(figure(&status, "deadLetters"), 0, "{status}");
    assert_eq!(figure(&status, "dropped"), 0, "{status}");
    assert!(figure(&status, "failed") > 0, "{status}");
    eprintln!(
        "{} messages for {} writes ({repeats} repeats), all in the stream {:?} after the start; \
         final status {status}",
        messages.len(),
        acked.len(),
        delivered_in
    );
    drop(client);
    drop(server);
    drop(nats);
    let _ = std::fs::remove_dir_all(&dir);
}
