//! What the integration tests share: one HTTP/1.1 request over a fresh connection, and the
//! server's log captured in memory.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long an answer may take.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// Sends `method path` with `body` (and a bearer token, if given) and returns the status and
/// the body of the answer.
pub fn http(
    address: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("HTTP connects");
    stream
        .set_read_timeout(Some(ANSWER_WAIT))
        .expect("a read timeout");
    let authorization = bearer.map_or(String::new(), |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .expect("the request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("an answer within the wait");
    status_and_body(&response)
}

/// The status and the body of an HTTP/1.1 answer.
pub fn status_and_body(response: &str) -> (u16, String) {
    let status = response
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_owned());
    (status, body)
}

/// The log lines of the process, captured in memory: some effects (a database loaded or
/// evicted) are visible only there, and a test must see them happen rather than assume them.
/// Not every test binary that includes this module reads the log.
#[allow(dead_code)]
#[derive(Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

#[allow(dead_code)]
impl CapturedLog {
    /// Captures every INFO line from now on. Once per test binary: it installs the global
    /// subscriber.
    pub fn install() -> CapturedLog {
        let log = CapturedLog::default();
        let writer = log.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .init();
        log
    }

    pub fn text(&self) -> String {
        let bytes = self.0.lock().map(|bytes| bytes.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// How many captured lines contain every one of `parts`.
    pub fn count(&self, parts: &[&str]) -> usize {
        self.text()
            .lines()
            .filter(|line| parts.iter().all(|part| line.contains(part)))
            .count()
    }
}

impl Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("a log writer panicked"))?
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
