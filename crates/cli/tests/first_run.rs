//! What a new user trips over first, run as they would: a mistyped data directory given to
//! `export` or `import`, and the progress line of both on a terminal.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::{free_port, hearth, temp_dir};

fn hearth_path() -> &'static str {
    env!("CARGO_BIN_EXE_hearth")
}

/// A fresh directory holding `in.json`, a small document to import.
fn dir_with_document(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir(name);
    let file = dir.join("in.json");
    std::fs::write(&file, br#"{"a": 1}"#).expect("written");
    (dir, file)
}

fn output(command: &mut Command) -> Output {
    command.output().expect("hearth runs")
}

#[test]
fn export_of_a_mistyped_data_directory_is_refused_and_creates_nothing() {
    let dir = temp_dir("typo");
    let typo = dir.join("hearth-dta");
    let out = output(
        hearth()
            .args(["export", "--quiet", "--ns", "shop", "--data-dir"])
            .arg(&typo),
    );
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no `null` is printed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!typo.exists(), "nothing was created");
    // A directory that exists but is not a data directory is refused as well, and left as it is.
    let out = output(
        hearth()
            .args(["export", "--quiet", "--ns", "shop", "--data-dir"])
            .arg(&dir),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not a Hearth data directory"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&dir).map(Iterator::count).ok(), Some(0));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn import_creates_a_data_directory_only_when_asked_to() {
    let (dir, file) = dir_with_document("create");
    let data = dir.join("data");
    let import = |create: bool| {
        let mut command = hearth();
        command.args(["import", "--ns", "shop", "--threads", "1"]);
        if create {
            command.arg("--create");
        }
        output(command.arg("--data-dir").arg(&data).arg(&file))
    };
    let refused = import(false);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        format!(
            "{} does not exist; if the path is right, add --create to make a new data \
             directory there\n",
            data.display()
        )
    );
    assert!(!data.exists());
    let created = import(true);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    // Into an existing data directory, --create is not needed.
    let again = import(false);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let exported = output(
        hearth()
            .args(["export", "--quiet", "--ns", "shop", "--data-dir"])
            .arg(&data),
    );
    assert_eq!(
        String::from_utf8_lossy(&exported.stdout).trim(),
        r#"{"a":1}"#
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_document_that_does_not_parse_is_named() {
    let (dir, file) = dir_with_document("unparsed");
    std::fs::write(&file, b"{\"a\": 1,\n").expect("written");
    let data = dir.join("data");
    let out = output(
        hearth()
            .args([
                "import",
                "--quiet",
                "--create",
                "--ns",
                "shop",
                "--data-dir",
            ])
            .arg(&data)
            .arg(&file),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{}: invalid JSON in the document: EOF while parsing a value at line 2 column 0\n",
            file.display()
        )
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_port_another_program_holds_is_named_with_the_option_that_moves_it() {
    let dir = temp_dir("port-in-use");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("an address");
    let out = output(
        hearth()
            .args(["serve", "--dev", "--threads", "1", "--listen"])
            .arg(address.to_string())
            .arg("--data-dir")
            .arg(dir.join("data"))
            .env("RUST_BACKTRACE", "0"),
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "Error: cannot listen on [{address}]: another program already listens there (`ss \
             -ltnp` names it); stop it or choose another --listen\n"
        )),
        "{stderr}"
    );
    drop(taken);
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs `command` with a pseudo-terminal as its stdin, stdout and stderr (`script`, from
/// util-linux, which every Debian has) and returns what the terminal received.
fn on_a_terminal(command: &str) -> String {
    let out = output(Command::new("script").args(["-q", "-e", "-c", command, "/dev/null"]));
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_lines_are_cleared_and_quiet_draws_none() {
    let (dir, file) = dir_with_document("progress");
    let data = dir.join("data");
    let data = data.display();
    let file = file.display();
    let output = dir.join("out.json");
    let output = output.display();
    let hearth = hearth_path();
    // With --quiet, the terminal gets no bar at all (it used to get a "0 B" line).
    let quiet = on_a_terminal(&format!(
        "{hearth} import --quiet --create --threads 1 --db shop --data-dir {data} {file} && \
         {hearth} export --quiet --db shop --data-dir {data} -o {output}"
    ));
    assert!(!quiet.contains(" B"), "{quiet:?}");
    assert!(
        !quiet.contains("importing") && !quiet.contains("exporting"),
        "{quiet:?}"
    );
    // Without it, every bar drawn is cleared at the end: the last thing on the bar's line is
    // the erase-line sequence, and what follows it starts a clean line.
    let shown = on_a_terminal(&format!(
        "{hearth} export --db shop --data-dir {data} -o {output}"
    ));
    if let Some(drawn) = shown.rfind("exporting") {
        let erased = shown.rfind("\u{1b}[2K").unwrap_or(0);
        assert!(erased > drawn, "the bar was left on the screen: {shown:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A server in `--dev` whose log goes to a file, stopped when dropped.
struct DevServer {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
    dir: PathBuf,
}

impl DevServer {
    fn start(name: &str) -> DevServer {
        DevServer::start_with(name, &[])
    }

    fn start_with(name: &str, args: &[&str]) -> DevServer {
        let dir = temp_dir(name);
        let log = dir.join("server.log");
        let port = free_port();
        let child = hearth()
            .args(["serve", "--dev", "--threads", "2", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(args)
            .env("RUST_LOG", "info")
            .stderr(std::fs::File::create(&log).expect("the log file"))
            .spawn()
            .expect("the server starts");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the server listens in time"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        DevServer {
            child,
            port,
            log,
            dir,
        }
    }

    /// One HTTP/1.1 request on its own connection; the answer's status and body.
    fn request(&self, method: &str, target: &str, host: &str, body: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connected");
        write!(
            stream,
            "{method} {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("the request is sent");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("the answer");
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).expect("the log is readable")
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn in_dev_a_read_of_a_missing_database_answers_null_and_only_a_write_creates_one() {
    let server = DevServer::start("dev-read");
    let host = format!("127.0.0.1:{}", server.port);
    let (status, body) = server.request("GET", "/users.json?ns=typo", &host, "");
    assert_eq!((status, body.trim()), (200, "null"));
    let (status, _) = server.request("PUT", "/users/a.json?ns=shop", &host, "1");
    assert_eq!(status, 200);
    // The write's answer comes after its log record, and so after the log line.
    let log = server.log();
    assert!(
        log.contains("database created by its first write namespace=\"shop\""),
        "{log}"
    );
    assert!(!log.contains("\"typo\""), "the read made a database: {log}");
    // Reading the database that exists still works, and reading the missing one again too.
    let (_, body) = server.request("GET", "/users.json?ns=shop", &host, "");
    assert_eq!(body.trim(), r#"{"a":1}"#);
    let (_, body) = server.request("GET", "/.json?ns=typo&shallow=true", &host, "");
    assert_eq!(body.trim(), "null");
    assert!(!server.log().contains("\"typo\""));
}

#[test]
fn a_database_named_after_an_ip_address_is_warned_about_once() {
    let server = DevServer::start("ns-from-ip");
    let host = format!("127.0.0.1:{}", server.port);
    // What the SDK sends for databaseURL "http://127.0.0.1:PORT" (no ?ns=).
    for _ in 0..3 {
        let (status, _) = server.request("GET", "/.json?ns=127", &host, "");
        assert_eq!(status, 200);
    }
    let (status, _) = server.request("GET", "/.json?ns=my-app", &host, "");
    assert_eq!(status, 200);
    let log = server.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("?ns=NAME"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains("WARN"), "{}", warnings[0]);
    assert!(warnings[0].contains("\"127\""), "{}", warnings[0]);
}

#[test]
fn in_dev_the_log_says_which_rule_refused_a_request_and_where() {
    let rules = std::env::temp_dir().join(format!(
        "hearth-first-run-{}.rules.json",
        std::process::id()
    ));
    std::fs::write(
        &rules,
        "{\n  \"rules\": {\n    \"users\": {\n      \"$uid\": { \".write\": \"auth != null && auth.uid === $uid\",\n                \".validate\": \"newData.isNumber()\" }\n    }\n  }\n}\n",
    )
    .expect("the rules file is written");
    let server = DevServer::start_with("explain", &["--rules", &rules.display().to_string()]);
    let host = format!("127.0.0.1:{}", server.port);
    // Alice (an unsigned mock token, as --dev accepts) writes Bob's profile: the rule runs
    // and says no. {"sub":"alice","user_id":"alice","iat":1700000000,"exp":4102444800}
    let alice = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsInVzZXJfaWQiOiJhbGljZSIsI\
                 mlhdCI6MTcwMDAwMDAwMCwiZXhwIjo0MTAyNDQ0ODAwfQ.";
    let target = format!("/users/bob.json?ns=shop&auth={alice}");
    let (status, body) = server.request("PUT", &target, &host, "1");
    assert_eq!(status, 401, "{body}");
    assert!(
        !body.contains("rules"),
        "the client learns nothing of the rules: {body}"
    );
    // Her own, with data the rules refuse: the full check names the .validate rule.
    let target = format!("/users/alice.json?ns=shop&auth={alice}");
    let (status, body) = server.request("PUT", &target, &host, "\"x\"");
    assert_eq!(status, 401, "{body}");
    // Refusals are logged before the answer is sent.
    let log = server.log();
    let refusals: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("permission denied"))
        .collect();
    assert_eq!(refusals.len(), 2, "{log}");
    for line in &refusals {
        assert!(line.contains(" INFO "), "{line}");
        assert!(line.contains("database=\"shop\""), "{line}");
    }
    assert!(
        refusals[0].contains("/rules/users/$uid/.write at /users/bob (line 4, column 27)"),
        "{}",
        refusals[0]
    );
    assert!(
        refusals[1].contains(
            "/rules/users/$uid/.validate at /users/alice (line 5, column 30) evaluated to false"
        ),
        "{}",
        refusals[1]
    );
    let _ = std::fs::remove_file(rules);
}
