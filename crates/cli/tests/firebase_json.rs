//! `hearth serve --firebase-json`: the real binary started from a Firebase project file, as the
//! Firebase emulator is: the rules file and the address come from it, and flags win over it.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, hearth, temp_dir};

/// A project directory with `firebase.json` (`text`) and a rules file `db.rules.json` that
/// opens only `/pub`.
fn project(name: &str, text: &str) -> PathBuf {
    let dir = temp_dir(name);
    std::fs::write(
        dir.join("db.rules.json"),
        r#"{"rules": {"pub": {".read": true, ".write": true}}}"#,
    )
    .expect("the rules file is written");
    std::fs::write(dir.join("firebase.json"), text).expect("the project file is written");
    dir
}

/// A server started with `args`, stopped when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &Path, port: u16, args: &[&str]) -> Running {
    let child = hearth()
        .args([
            "serve",
            "--threads",
            "1",
            "--durability",
            "none",
            "--data-dir",
        ])
        .arg(dir.join("data"))
        .args(args)
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    let running = Running(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the server listens on {port} in time"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    running
}

/// The status code of a REST GET of `path` in the namespace `t`.
fn get_status(port: u16, path: &str) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    write!(
        stream,
        "GET {path}.json?ns=t HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("the request is sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

#[test]
fn the_project_file_gives_rules_and_address() {
    let port = free_port();
    let dir = project(
        "firebase-json-file",
        &format!(
            r#"{{"database": {{"rules": "db.rules.json"}},
                "hosting": {{"public": "dist"}},
                "emulators": {{"database": {{"host": "127.0.0.1", "port": {port}}}}}}}"#
        ),
    );
    let file = dir.join("firebase.json");
    let file = file.to_str().expect("a UTF-8 path");
    // From another working directory: the rules path is relative to the project file.
    let _server = start(&dir, port, &["--dev", "--firebase-json", file]);
    assert_eq!(get_status(port, "/pub"), 200);
    assert_eq!(get_status(port, "/secret"), 401);
}

#[test]
fn flags_win_over_the_project_file() {
    let (file_port, flag_port) = (free_port(), free_port());
    let dir = project(
        "firebase-json-flags",
        &format!(
            r#"{{"database": [{{"target": "main", "rules": "db.rules.json"}}],
                "emulators": {{"database": {{"port": {file_port}}}}}}}"#
        ),
    );
    std::fs::write(dir.join("open.rules.json"), r#"{"rules": {".read": true}}"#)
        .expect("the rules file is written");
    let file = dir.join("firebase.json");
    let open = dir.join("open.rules.json");
    let listen = format!("127.0.0.1:{flag_port}");
    let _server = start(
        &dir,
        flag_port,
        &[
            "--dev",
            "--firebase-json",
            file.to_str().expect("a UTF-8 path"),
            "--listen",
            &listen,
            "--rules",
            open.to_str().expect("a UTF-8 path"),
        ],
    );
    assert_eq!(get_status(flag_port, "/secret"), 200);
    assert!(TcpStream::connect(("127.0.0.1", file_port)).is_err());
}

#[test]
fn a_bad_project_file_is_refused_with_its_name() {
    for (name, text, expected) in [
        (
            "firebase-json-bad-json",
            "{\"database\": ",
            "is not valid JSON",
        ),
        (
            "firebase-json-bad-port",
            r#"{"emulators": {"database": {"port": 70000}}}"#,
            "\"emulators.database.port\" must be from 0 to 65535",
        ),
        (
            "firebase-json-missing-rules",
            r#"{"database": {"rules": "nowhere.rules.json"}}"#,
            "nowhere.rules.json",
        ),
    ] {
        let dir = project(name, text);
        let out = hearth()
            .args(["serve", "--dev", "--listen"])
            .arg(format!("127.0.0.1:{}", free_port()))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--firebase-json")
            .arg(dir.join("firebase.json"))
            .output()
            .expect("hearth runs");
        assert!(!out.status.success(), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{name}: {stderr}");
        if !expected.contains("nowhere") {
            assert!(stderr.contains("firebase.json"), "{name}: {stderr}");
        }
    }
    let out = hearth()
        .args([
            "serve",
            "--dev",
            "--firebase-json",
            "/nonexistent/firebase.json",
        ])
        .output()
        .expect("hearth runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/firebase.json"));
}
