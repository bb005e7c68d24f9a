//! `hearth backup` and `hearth restore` as an operator runs them: a backup of a server under
//! writes, restored into a new data directory that a new server starts from. Every write
//! acknowledged before the backup began must be there, and each writer's data must be one
//! prefix of its writes.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{free_port, hearth, import_offline, run, serve_with, temp_dir, Server};
use serde_json::{json, Value};

const ADMIN: &str = "backup-test-admin";
const WRITERS: usize = 4;

/// `hearth serve --dev` with an admin token and `extra` flags, on `data`; the server and its
/// port.
fn serve(data: &Path, extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let mut args = vec!["--dev", "--admin-token", ADMIN];
    args.extend(extra);
    let server = serve_with(data, port, &args);
    (server, port)
}

/// One keep-alive HTTP/1.1 connection.
struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("HTTP connects");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        Client {
            reader: BufReader::new(stream),
        }
    }

    /// Sends a request; the status and body of the answer.
    fn request(&mut self, method: &str, path: &str, body: &str) -> (u16, String) {
        let stream = self.reader.get_mut();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("the request is sent");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("a status line");
        let status = line
            .get(9..12)
            .and_then(|code| code.parse().ok())
            .expect("a status");
        let mut length = 0;
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("a header");
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().expect("a length");
                }
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("the body");
        (status, String::from_utf8(body).expect("UTF-8"))
    }
}

/// Writes 0, 1, 2, ... to `/seq/<i>` of database `w<k>`, one at a time, counting the writes
/// the server acknowledged, until told to stop.
fn writer(port: u16, k: usize, acked: Arc<AtomicUsize>, stop: Arc<AtomicBool>) {
    let mut client = Client::connect(port);
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        let (status, _) =
            client.request("PUT", &format!("/seq/{i:06}.json?ns=w{k}"), &i.to_string());
        assert_eq!(status, 200, "write {i} of writer {k}");
        i += 1;
        acked.store(i, Ordering::SeqCst);
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_backup_under_writes_restores_everything_acknowledged_before_it() {
    backup_under_writes("strict", &[]);
}

/// With `--durability batch` a write is acknowledged before its log sync: the backup must
/// still hold it (each shard waits for what was appended before it takes its cut). The long
/// sync interval leaves many acknowledged writes unsynced when the backup begins.
#[test]
fn a_backup_holds_batch_writes_acknowledged_before_their_sync() {
    backup_under_writes(
        "batch",
        &["--durability", "batch", "--sync-interval-ms", "300"],
    );
}

fn backup_under_writes(name: &str, flags: &[&str]) {
    let dir = temp_dir(name);
    let data = dir.join("data");
    // A database only on disk (imported offline, never loaded by the server): its snapshot
    // file is copied as it is.
    let cold = json!({"kept": {"as": "imported"}, "n": 42});
    let cold_file = dir.join("cold.json");
    std::fs::write(&cold_file, cold.to_string()).expect("written");
    import_offline(&data, "cold", &cold_file);

    let (server, port) = serve(&data, flags);
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Vec<Arc<AtomicUsize>> = (0..WRITERS).map(|_| Arc::default()).collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|k| {
            let (acked, stop) = (acked[k].clone(), stop.clone());
            std::thread::spawn(move || writer(port, k, acked, stop))
        })
        .collect();
    let count = |k: usize| acked[k].load(Ordering::SeqCst);
    wait_until("every writer gets going", || {
        (0..WRITERS).all(|k| count(k) >= 30)
    });

    let before: Vec<usize> = (0..WRITERS).map(count).collect();
    let backup = dir.join("backup");
    run(hearth()
        .args(["backup", "--admin-token", ADMIN, "--url"])
        .arg(&server.url)
        .arg("--out")
        .arg(&backup));
    // The writers went on during the backup and after it.
    wait_until("writes go on after the backup", || {
        (0..WRITERS).all(|k| count(k) >= before[k] + 20)
    });
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.join().expect("a writer thread");
    }
    let after: Vec<usize> = (0..WRITERS).map(count).collect();
    drop(server);

    // The target must be new: a non-empty directory is refused.
    let restored = dir.join("restored");
    std::fs::create_dir_all(&restored).expect("a directory");
    std::fs::write(restored.join("precious"), b"x").expect("written");
    let refused = hearth()
        .args(["restore", "--from"])
        .arg(&backup)
        .arg("--data-dir")
        .arg(&restored)
        .output()
        .expect("restore runs");
    assert!(!refused.status.success(), "a non-empty target is refused");
    let restored = dir.join("restored-new");
    run(hearth()
        .args(["restore", "--from"])
        .arg(&backup)
        .arg("--data-dir")
        .arg(&restored));

    let (server, port) = serve(&restored, &[]);
    let mut client = Client::connect(port);
    for k in 0..WRITERS {
        let (status, body) = client.request("GET", &format!("/seq.json?ns=w{k}&format=export"), "");
        assert_eq!(status, 200);
        let written: Value = serde_json::from_str(&body).expect("JSON");
        let written = written.as_object().cloned().unwrap_or_default();
        // One prefix: exactly the writes 0..n, each with its own value.
        for (i, (key, value)) in written.iter().enumerate() {
            assert_eq!(key, &format!("{i:06}"), "writer {k}: a hole before {key}");
            assert_eq!(value, &json!(i), "writer {k}: {key}");
        }
        let n = written.len();
        assert!(
            n >= before[k],
            "writer {k}: {} writes acknowledged before the backup, {n} restored",
            before[k]
        );
        // At most the one write in flight when its shard took the cut beyond the acked ones.
        assert!(
            n <= after[k] + 1,
            "writer {k}: {n} restored, {} written",
            after[k]
        );
    }
    let (status, body) = client.request("GET", "/.json?ns=cold", "");
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Value>(&body).expect("JSON"), cold);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_backup_needs_an_admin() {
    let dir = temp_dir("admin");
    let (server, port) = serve(&dir.join("data"), &[]);
    let mut client = Client::connect(port);
    let (status, _) = client.request("POST", "/.admin/backup", "");
    assert_eq!(status, 401);
    let failed = hearth()
        .args(["backup", "--admin-token", "wrong", "--url"])
        .arg(&server.url)
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .expect("backup runs");
    assert!(!failed.status.success());
    assert!(!dir.join("out").exists(), "nothing is left behind");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
