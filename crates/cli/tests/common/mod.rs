//! What the tests of the `hearth` command share: the built binary, free ports, and a server
//! that runs for the length of a test.

#![allow(dead_code)] // Each test binary uses part of it.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `hearth` command, with none of the user's `HEARTH_*` settings.
pub fn hearth() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hearth"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("HEARTH_") {
            command.env_remove(name);
        }
    }
    command
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hearth-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// Runs `command` with `stdin` as its input.
pub fn output(command: &mut Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("stdin written");
    }
    child.wait_with_output().expect("the command runs")
}

/// Runs `command`, which must succeed, and returns its stdout.
pub fn run(command: &mut Command) -> String {
    let output = command.output().expect("the command runs");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// `hearth import` of `file` into database `db` of the data directory `data` (two shards,
/// offline), which must succeed.
pub fn import_offline(data: &Path, db: &str, file: &Path) {
    run(hearth()
        .args([
            "import",
            "--quiet",
            "--create",
            "--threads",
            "2",
            "--db",
            db,
            "--data-dir",
        ])
        .arg(data)
        .arg(file));
}

/// A port nothing listens on, never one this test process handed out before: the tests of a
/// file run in parallel, and the system may give a port back to `bind(0)` as soon as it is
/// let go, so two servers could otherwise be told the same port (the second exits, and its
/// test talks to the first until that one's test ends: "connection refused").
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .expect("a free port");
        let mut given = GIVEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Whether something listens on `port` of 127.0.0.1. A connection whose two ends are the
/// same address is not an answer: with nothing listening, the kernel may pick the very port
/// as the probe's source and connect the socket to itself (TCP simultaneous open), which made
/// tests start talking to a server that was not listening yet.
pub fn listens(port: u16) -> bool {
    match std::net::TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))) {
        Ok(stream) => match (stream.local_addr(), stream.peer_addr()) {
            (Ok(local), Ok(peer)) => local != peer,
            _ => false,
        },
        Err(_) => false,
    }
}

/// A running `hearth serve`, stopped when dropped.
pub struct Server {
    child: Child,
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `hearth serve --dev` on `dir` and `port`.
pub fn serve(dir: &Path, port: u16) -> Server {
    serve_with(dir, port, &["--dev"])
}

/// `hearth serve` with two shards on `dir` and `port`, and `extra` arguments; returns once
/// it accepts connections.
pub fn serve_with(dir: &Path, port: u16, extra: &[&str]) -> Server {
    serve_logging(dir, port, extra, Stdio::null())
}

/// [`serve_with`], with the server's log (stderr) going to `log`.
pub fn serve_logging(dir: &Path, port: u16, extra: &[&str], log: impl Into<Stdio>) -> Server {
    let child = hearth()
        .args(["serve", "--threads", "2", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir)
        .args(extra)
        .stderr(log)
        .spawn()
        .expect("the server starts");
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut server = server;
    while !listens(port) {
        assert!(Instant::now() < deadline, "the server listens in time");
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("the server on port {port} exited before it listened: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}
