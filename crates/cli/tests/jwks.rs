//! Firebase ID tokens verified with keys fetched from a JWKS URL, as an operator runs it: the
//! real `hearth serve` against a JWKS server on loopback that rotates its key, then restarted
//! with the JWKS server gone (the keys come from the cache in the data directory).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{free_port, serve_logging, temp_dir, Server};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

const PROJECT: &str = "demo-rotation";

fn keys_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/keys")
}

fn read_key(name: &str) -> String {
    std::fs::read_to_string(keys_dir().join(name)).expect("a test key file")
}

/// A Firebase ID token of `PROJECT` signed with the private key `pem` under `kid`.
fn token(pem: &str, kid: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs();
    let claims = json!({
        "iss": format!("https://securetoken.google.com/{PROJECT}"),
        "aud": PROJECT,
        "sub": "alice",
        "user_id": "alice",
        "iat": now - 10,
        "exp": now + 3600,
        "firebase": {"sign_in_provider": "password"},
    });
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let key = EncodingKey::from_rsa_pem(pem.as_bytes()).expect("a valid test key");
    jsonwebtoken::encode(&header, &claims, &key).expect("a signed token")
}

/// A JWKS server on loopback: serves its current document with `Cache-Control: max-age=1`
/// and counts the answers it finished.
struct JwksServer {
    address: SocketAddr,
    document: Arc<Mutex<String>>,
    served: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl JwksServer {
    fn start(document: String) -> JwksServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().expect("an address");
        let document = Arc::new(Mutex::new(document));
        let served = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (document, served, stop) = (document.clone(), served.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let body = document.lock().expect("the document").clone();
                    if answer(stream, &body).is_ok() {
                        served.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        };
        JwksServer {
            address,
            document,
            served,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/keys", self.address)
    }

    fn rotate(&self, document: String) {
        *self.document.lock().expect("the document") = document;
    }

    /// Ends the server: its port refuses connections afterwards.
    fn shut_down(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(stream: TcpStream, body: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
    }
    let mut stream = reader.into_inner();
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncache-control: public, max-age=1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// `hearth serve` with Firebase tokens of `PROJECT`, rules that let only signed-in users read,
/// and the log in `log`.
fn serve(data: &Path, url: &str, extra: &[&Path], log: &Path) -> (Server, u16) {
    let rules = data.with_extension("rules.json");
    std::fs::write(
        &rules,
        r#"{"rules": {".read": "auth != null", ".write": false}}"#,
    )
    .expect("rules written");
    let rules = rules.to_string_lossy().into_owned();
    let mut args = vec!["--firebase-project", PROJECT, "--firebase-jwks-url", url];
    args.extend(["--firebase-jwks-min-refresh-ms", "100", "--rules", &rules]);
    let files: Vec<String> = extra
        .iter()
        .map(|file| file.to_string_lossy().into_owned())
        .collect();
    for file in &files {
        args.extend(["--firebase-jwks", file]);
    }
    let log = std::fs::File::create(log).expect("a log file");
    let port = free_port();
    (serve_logging(data, port, &args, log), port)
}

/// The status of a REST read of the root with `token` (200 verified, 401 refused).
fn read_with(port: u16, token: &str) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("HTTP connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    write!(
        stream,
        "GET /.json?ns=app&auth={token} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("the request is sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("an answer");
    response
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .expect("a status line")
}

#[test]
fn keys_rotate_and_survive_a_restart_without_the_jwks_server() {
    let dir = temp_dir("rotation");
    let data = dir.join("data");
    let token1 = token(&read_key("rsa1-private.pem"), "key-1");
    let token2 = token(&read_key("rsa2-private.pem"), "key-2");
    let jwks = JwksServer::start(read_key("jwks1.json"));
    let url = jwks.url();

    let (hearth, port) = serve(&data, &url, &[], &dir.join("first.log"));
    assert_eq!(read_with(port, &token1), 200, "key 1 is served");
    assert_eq!(read_with(port, &token2), 401, "key 2 is not served yet");

    // Rotate: key 1 is gone, key 2 replaces it. Two answers after the rotation mean the
    // server has installed the first of them: it asks again only after that.
    let before = jwks.served.load(Ordering::SeqCst);
    jwks.rotate(read_key("jwks2.json"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while jwks.served.load(Ordering::SeqCst) < before + 2 {
        assert!(Instant::now() < deadline, "the server refetches the keys");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        read_with(port, &token2),
        200,
        "key 2 verifies after the rotation"
    );
    assert_eq!(read_with(port, &token1), 401, "key 1 no longer verifies");
    drop(hearth);

    // No JWKS server any more: the keys come from the cache the last fetch wrote.
    jwks.shut_down();
    assert!(data.join("jwks-cache.json").is_file());
    let log = dir.join("second.log");
    let (hearth, port) = serve(&data, &url, &[], &log);
    assert_eq!(
        read_with(port, &token2),
        200,
        "key 2 verifies from the cache"
    );
    assert_eq!(read_with(port, &token1), 401);
    drop(hearth);
    let log = std::fs::read_to_string(&log).expect("the log");
    // Stale (the usual case, max-age is 1 s) or, on a fast machine, still fresh.
    assert!(
        log.contains("using the cached keys") || log.contains("loaded from the cache"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_static_file_is_the_last_resort() {
    let dir = temp_dir("static");
    // A port nothing listens on, and no cache: the static file's keys are used.
    let url = format!("http://127.0.0.1:{}/keys", free_port());
    let log = dir.join("serve.log");
    let (hearth, port) = serve(
        &dir.join("data"),
        &url,
        &[&keys_dir().join("jwks1.json")],
        &log,
    );
    assert_eq!(
        read_with(port, &token(&read_key("rsa1-private.pem"), "key-1")),
        200
    );
    assert_eq!(
        read_with(port, &token(&read_key("rsa2-private.pem"), "key-2")),
        401
    );
    drop(hearth);
    let log = std::fs::read_to_string(&log).expect("the log");
    assert!(log.contains("using the keys of --firebase-jwks"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
