//! `hearth data`, `hearth rules get|set` and `hearth databases` run as an operator would: the
//! real binary against a real server with an admin token, checking output, error messages
//! and exit codes.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{free_port, hearth, output, run, serve_logging, temp_dir, Server};
use serde_json::{json, Value};

const TOKEN: &str = "s3cret-admin-token";

/// A server that is locked but for its admins (no --dev, no --rules).
fn locked_server(name: &str) -> (Server, std::path::PathBuf) {
    let dir = temp_dir(name);
    // The server's log is kept beside its data, for a test that fails to show.
    let log = std::fs::File::create(dir.join("server.log")).expect("a log file");
    let server = serve_logging(
        &dir.join("data"),
        free_port(),
        &["--admin-token", TOKEN],
        log,
    );
    (server, dir)
}

/// `hearth` aimed at `server`'s database `shop` as its admin, through the environment.
fn admin(server: &Server) -> Command {
    let mut command = hearth();
    command
        .env("HEARTH_URL", &server.url)
        .env("HEARTH_NS", "shop")
        .env("HEARTH_ADMIN_TOKEN", TOKEN);
    command
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("{error}: {text:?}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn every_data_verb_reads_and_writes_the_running_server() {
    let (server, dir) = locked_server("data");
    let set = run(admin(&server).args([
        "data",
        "set",
        "/users/ada",
        r#"{"name": "Ada", "born": 1815, "note": "é ✓"}"#,
    ]));
    assert_eq!(set, "", "a write prints nothing");
    assert_eq!(
        json_of(&run(admin(&server).args(["data", "get", "/users/ada"]))),
        json!({"name": "Ada", "born": 1815, "note": "é ✓"})
    );
    let from_stdin = output(
        admin(&server).args(["data", "set", "/users/alan", "-"]),
        r#"{"name": "Alan"}"#,
    );
    assert!(from_stdin.status.success(), "{}", stderr(&from_stdin));
    run(admin(&server).args(["data", "update", "/users/ada", r#"{"died": 1852}"#]));
    assert_eq!(
        json_of(&run(admin(&server).args(["data", "get", "users/ada/"]))),
        json!({"name": "Ada", "born": 1815, "note": "é ✓", "died": 1852})
    );
    let id = run(admin(&server).args(["data", "push", "/log", r#""first""#]));
    let id = id.trim_end();
    assert_eq!(id.len(), 20, "a push id: {id:?}");
    assert_eq!(
        run(admin(&server).args(["data", "get", &format!("/log/{id}")])),
        "\"first\"\n"
    );
    assert_eq!(
        json_of(&run(admin(&server).args(["data", "get", "/", "--shallow"]))),
        json!({"log": true, "users": true})
    );
    let pretty = run(admin(&server).args(["data", "get", "/users/alan", "--pretty"]));
    assert_eq!(pretty, "{\n  \"name\" : \"Alan\"\n}\n");
    run(admin(&server).args(["data", "remove", "/users/ada"]));
    assert_eq!(
        run(admin(&server).args(["data", "get", "/users/ada"])),
        "null\n"
    );

    // The database: `?ns=` in the URL, which --ns overrides.
    let other = format!("{}/?ns=other", server.url);
    run(admin(&server)
        .env_remove("HEARTH_NS")
        .args(["data", "set", "/k", "1", "--url", &other]));
    assert_eq!(
        run(admin(&server).args(["data", "get", "/k", "--ns", "other"])),
        "1\n"
    );
    assert_eq!(run(admin(&server).args(["data", "get", "/k"])), "null\n");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn refusals_say_why_with_an_exit_code_per_cause() {
    let (server, dir) = locked_server("refusals");
    let anonymous = output(
        admin(&server)
            .env_remove("HEARTH_ADMIN_TOKEN")
            .args(["data", "get", "/"]),
        "",
    );
    assert_eq!(anonymous.status.code(), Some(4));
    assert_eq!(
        stderr(&anonymous),
        "the server answered 401 to GET /.json: Permission denied (no admin token was given: \
         add --admin-token TOKEN or set HEARTH_ADMIN_TOKEN; a --dev server's is `owner`)\n"
    );
    let wrong = output(
        admin(&server).args(["data", "set", "/a", "1", "--admin-token", "not-it"]),
        "",
    );
    assert_eq!(wrong.status.code(), Some(4), "{}", stderr(&wrong));
    assert!(stderr(&wrong).starts_with("the server answered 401 to PUT /a.json: "));
    let listing = output(
        admin(&server)
            .env_remove("HEARTH_ADMIN_TOKEN")
            .arg("databases"),
        "",
    );
    assert_eq!(listing.status.code(), Some(4), "{}", stderr(&listing));
    assert!(
        stderr(&listing).ends_with("a --dev server's is `owner`)\n"),
        "{}",
        stderr(&listing)
    );

    // No database anywhere: refused before anything is sent, not read from `default`.
    let nameless = output(
        admin(&server)
            .env_remove("HEARTH_NS")
            .args(["data", "get", "/"]),
        "",
    );
    assert_eq!(nameless.status.code(), Some(2), "{}", stderr(&nameless));
    assert_eq!(
        stderr(&nameless),
        "no database given: add --ns NAME (or set HEARTH_NS, or end --url with ?ns=NAME); a \
         request without one reaches the database `default` of a server addressed by IP \
         address or as localhost\n"
    );

    // The server's own message for a request it cannot take.
    let bad_key = output(admin(&server).args(["data", "set", "/a.b", "1"]), "");
    assert_eq!(bad_key.status.code(), Some(1));
    assert!(
        stderr(&bad_key).starts_with("the server answered 400 to PUT /a.b.json: Invalid path"),
        "{}",
        stderr(&bad_key)
    );
    // A value that is not JSON is refused before anything is sent.
    let not_json = output(admin(&server).args(["data", "set", "/a", "{a: 1}"]), "");
    assert_eq!(not_json.status.code(), Some(1));
    assert!(stderr(&not_json).starts_with("invalid JSON in the value: "));
    // A bare word is a string the shell unquoted: the message says how to quote it.
    let bare = output(admin(&server).args(["data", "set", "/name", "Ada"]), "");
    assert_eq!(bare.status.code(), Some(1));
    assert_eq!(
        stderr(&bare),
        "invalid JSON in the value: expected value at line 1 column 1; a string is JSON only \
         in double quotes, and the shell removes one pair of quotes: write '\"Ada\"'\n"
    );
    assert_eq!(run(admin(&server).args(["data", "get", "/"])), "null\n");

    // Nothing listens there.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let refused = output(
        admin(&server).args(["data", "get", "/", "--url", &nowhere]),
        "",
    );
    assert_eq!(refused.status.code(), Some(3));
    assert_eq!(
        stderr(&refused),
        format!(
            "cannot reach the server at {nowhere}: connection refused (is the server running \
             at {nowhere}?)\n"
        )
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rules_check_lists_the_limits_per_caller_and_refuses_bad_ones() {
    let dir = std::env::temp_dir().join(format!("hearth-cli-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("limits.rules.json");
    let text = r#"{"rules": {".limits": {"connections": 5},
        "rooms": {"$room": {"messages": {".limits": {"writes": "10/s", "bytes": "100kb/min"}}}}}}"#;
    std::fs::write(&file, text).expect("written");
    assert_eq!(
        run(hearth().args(["rules", "check"]).arg(&file)),
        format!(
            "{}: ok\n  /rules/.limits: 5 connections per user (anonymous callers by address)\n  \
             /rules/rooms/$room/messages/.limits: 10 writes a second, 102400 bytes a minute per \
             user (anonymous callers by address)\n",
            file.display()
        )
    );
    std::fs::write(
        &file,
        r#"{"rules": {"a": {".limits": {"writes": "10/day"}}}}"#,
    )
    .expect("written");
    let refused = output(hearth().args(["rules", "check"]).arg(&file), "");
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        stderr(&refused),
        format!(
            "{}: line 1, column 40: .limits: unknown period 'day' (s, min or h)\n",
            file.display()
        )
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rules_are_checked_here_then_set_and_read_back() {
    let (server, dir) = locked_server("rules");
    let bad = dir.join("bad.rules.json");
    std::fs::write(&bad, "{\"rules\": {\".read\": \"auth.uid ==\"}}").expect("written");
    let checked = output(hearth().args(["rules", "check"]).arg(&bad), "");
    let refused = output(admin(&server).args(["rules", "set"]).arg(&bad), "");
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&checked).contains("line 1, column"));
    assert_eq!(
        stderr(&refused),
        stderr(&checked),
        "the errors of rules check"
    );
    let before = run(admin(&server).args(["rules", "get"]));
    assert_eq!(json_of(&before)["rules"][".read"], json!(false));

    let good = dir.join("good.rules.json");
    let text = "{\n  // anyone may read\n  \"rules\": {\".read\": true, \".write\": false}\n}\n";
    std::fs::write(&good, text).expect("written");
    let set = run(admin(&server).args(["rules", "set"]).arg(&good));
    assert_eq!(set, format!("{}: ok, set on shop\n", good.display()));
    assert_eq!(run(admin(&server).args(["rules", "get"])), text);
    // The rules hold: anyone reads, nobody but the admin writes.
    let anonymous = || {
        let mut command = admin(&server);
        command.env_remove("HEARTH_ADMIN_TOKEN");
        command
    };
    assert_eq!(run(anonymous().args(["data", "get", "/"])), "null\n");
    let write = output(anonymous().args(["data", "set", "/a", "1"]), "");
    assert_eq!(write.status.code(), Some(4));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rules_history_and_rollback_and_the_settings() {
    let (server, dir) = locked_server("history");
    let rules = |read: bool| {
        let file = dir.join(format!("{read}.rules.json"));
        let text = format!("{{\"rules\": {{\".read\": {read}, \".write\": false}}}}");
        std::fs::write(&file, text).expect("written");
        file
    };
    run(admin(&server).args(["data", "set", "/a", "1"]));
    run(admin(&server).args(["rules", "set"]).arg(rules(true)));
    run(admin(&server).args(["rules", "set"]).arg(rules(false)));
    let anonymous_read = || {
        let mut command = admin(&server);
        command.env_remove("HEARTH_ADMIN_TOKEN");
        output(command.args(["data", "get", "/a"]), "")
            .status
            .code()
    };
    assert_eq!(anonymous_read(), Some(4), "ruleset 2 is in effect");
    let history = run(admin(&server).args(["rules", "history"]));
    assert!(history.contains("  [stable]"), "{history}");
    assert!(
        history
            .lines()
            .any(|line| line.trim_start().starts_with("2 ") && line.ends_with("[stable]")),
        "{history}"
    );

    let rolled = run(admin(&server).args(["rules", "rollback"]));
    assert_eq!(rolled, "shop: ruleset 1 is stable again (it was 2)\n");
    assert_eq!(anonymous_read(), Some(0), "ruleset 1 is back");
    let json = json_of(&run(admin(&server).args(["rules", "history", "--json"])));
    let stables: Vec<&str> = json["releases"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|release| release["stable"].as_str())
        .collect();
    assert_eq!(stables, ["1", "2", "1"], "the rollback is kept too");
    let back = run(admin(&server).args(["rules", "rollback", "--to", "2"]));
    assert_eq!(back, "shop: ruleset 2 is stable again (it was 1)\n");
    let unknown = output(admin(&server).args(["rules", "rollback", "--to", "9"]), "");
    assert_ne!(unknown.status.code(), Some(0));
    assert!(
        stderr(&unknown).contains("no ruleset 9"),
        "{}",
        stderr(&unknown)
    );

    assert_eq!(
        run(admin(&server).args(["settings", "get", "defaultWriteSizeLimit"])),
        "unlimited\n"
    );
    assert_eq!(
        run(admin(&server).args(["settings", "set", "defaultWriteSizeLimit", "large"])),
        "defaultWriteSizeLimit = large on shop\n"
    );
    assert_eq!(
        run(admin(&server).args(["settings", "set", "strictTriggerValidation", "false"])),
        "strictTriggerValidation = false on shop\n"
    );
    assert_eq!(
        run(admin(&server).args(["settings", "get", "strictTriggerValidation"])),
        "false\n"
    );
    let wrong = output(
        admin(&server).args(["settings", "set", "defaultWriteSizeLimit", "tiny"]),
        "",
    );
    assert_ne!(wrong.status.code(), Some(0));
    assert!(stderr(&wrong).contains("must be"), "{}", stderr(&wrong));
    assert_eq!(
        run(admin(&server).args(["settings", "set", "quotas", r#"{"writesPerSecond": 5}"#])),
        "quotas = {\"connections\":null,\"storedBytes\":null,\"writeBytesPerMinute\":null,\"writesPerSecond\":5} on shop\n"
    );
    let unknown = output(admin(&server).args(["settings", "get", "colour"]), "");
    assert_eq!(unknown.status.code(), Some(1), "{}", stderr(&unknown));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_audit_trail_is_turned_on_queried_and_erased_with_the_users_data() {
    let (server, dir) = locked_server("audit");
    assert_eq!(
        run(admin(&server).args(["settings", "set", "audit", r#"{"enabled": true}"#])),
        "audit = {\"enabled\":true,\"retentionDays\":30} on shop\n"
    );
    run(admin(&server).args(["data", "set", "/users/ada", r#"{"name": "Ada"}"#]));
    run(admin(&server).args(["data", "update", "/users", r#"{"bob/name": "Bob"}"#]));
    let lines: Vec<Value> = run(admin(&server).args(["audit", "query"]))
        .lines()
        .map(json_of)
        .collect();
    let ops: Vec<(&str, &str)> = lines
        .iter()
        .map(|line| {
            (
                line["op"].as_str().unwrap_or_default(),
                line["path"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(ops, [("set", "/users/ada"), ("update", "/users")]);
    assert!(lines.iter().all(|line| line["provider"] == "admin"
        && line["transport"] == "rest"
        && line["rules"] == json!(["admin"])));
    let filtered =
        run(admin(&server).args(["audit", "query", "--path", "/users/bob", "--limit", "5"]));
    assert_eq!(filtered.lines().count(), 1, "{filtered}");
    assert_eq!(
        run(admin(&server).args(["audit", "query", "--limit", "1"]))
            .lines()
            .count(),
        1
    );
    // An admin's entries name no uid: erasing one finds none, and --data deletes the data.
    let erased =
        run(admin(&server).args(["audit", "erase", "--uid", "ada", "--data", "/users/ada"]));
    assert_eq!(
        erased,
        "0 audit entries of ada erased on shop\n/users/ada deleted on shop\n"
    );
    assert_eq!(
        run(admin(&server).args(["data", "get", "/users/ada"])),
        "null\n"
    );
    let refused = output(
        admin(&server)
            .env_remove("HEARTH_ADMIN_TOKEN")
            .args(["audit", "query"]),
        "",
    );
    assert_eq!(refused.status.code(), Some(4), "{}", stderr(&refused));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn databases_lists_every_database_with_its_size_and_clients() {
    let (server, dir) = locked_server("databases");
    for ns in ["shop", "chat", "home-0-abc"] {
        run(admin(&server).args(["data", "set", "/x", r#"{"y": [1, 2, 3]}"#, "--ns", ns]));
    }
    let listing = json_of(&run(admin(&server).args(["databases", "--json"])));
    let names: Vec<&str> = listing["databases"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|database| database["name"].as_str())
        .collect();
    assert_eq!(names, ["chat", "home-0-abc", "shop"]);
    for database in listing["databases"].as_array().expect("a list") {
        assert_eq!(database["loaded"], true);
        assert_eq!(database["clients"], 0);
        assert!(database["bytes"].as_u64().is_some_and(|bytes| bytes > 0));
        assert!(database["shard"].as_u64().is_some_and(|shard| shard < 2));
    }
    let table = run(admin(&server).arg("databases"));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].starts_with("NAME"), "{table}");
    assert!(
        lines[1].starts_with("chat ") && lines[1].contains(" yes "),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The lines a child process writes to stdout, as they come.
fn lines_of(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("a piped stdout");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

#[test]
fn a_watch_sees_the_change_a_data_set_makes() {
    let (server, dir) = locked_server("watch");
    run(admin(&server).args(["data", "set", "/room", r#"{"topic": "rust"}"#]));
    let mut watch = admin(&server)
        .args(["data", "watch", "/room"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the watch starts");
    let lines = lines_of(&mut watch);
    // The first event is the whole value: the stream is open from here on.
    let wait = Duration::from_secs(10);
    assert_eq!(
        lines.recv_timeout(wait).as_deref(),
        Ok(r#"{"event":"put","path":"/","data":{"topic":"rust"}}"#)
    );
    run(admin(&server).args([
        "data",
        "set",
        "/room/messages/m1",
        r#"{"text": "hi", "n": 1.5}"#,
    ]));
    assert_eq!(
        lines.recv_timeout(wait).as_deref(),
        Ok(r#"{"event":"put","path":"/messages/m1","data":{"n":1.5,"text":"hi"}}"#)
    );
    run(admin(&server).args(["data", "update", "/room", r#"{"topic": "go", "x": null}"#]));
    assert_eq!(
        lines.recv_timeout(wait).as_deref(),
        Ok(r#"{"event":"patch","path":"/","data":{"topic":"go","x":null}}"#)
    );
    let _ = watch.kill();
    let _ = watch.wait();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_change_feed_watch_resumes_from_its_position_file_with_nothing_missed_or_repeated() {
    let (server, dir) = locked_server("watch-changes");
    let position = dir.join("position");
    let position_arg = position.to_str().expect("a UTF-8 path");
    run(admin(&server).args(["data", "set", "/log", r#"{"m0": 0}"#]));
    let watch_args = [
        "data",
        "watch",
        "/log",
        "--changes",
        "--position-file",
        position_arg,
    ];
    let follow = || {
        admin(&server)
            .args(watch_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the watch starts")
    };
    let wait = Duration::from_secs(10);
    let line = |lines: &mpsc::Receiver<String>| json_of(&lines.recv_timeout(wait).expect("a line"));
    let mut first = follow();
    let lines = lines_of(&mut first);
    // From `now`: the whole value first, with its position.
    let whole = line(&lines);
    assert_eq!(
        (&whole["event"], &whole["data"]),
        (&json!("put"), &json!({"m0": 0}))
    );
    run(admin(&server).args(["data", "set", "/log/m1", "1"]));
    let m1 = line(&lines);
    assert_eq!((&m1["path"], &m1["data"]), (&json!("/m1"), &json!(1)));
    let kept = m1["id"].as_str().expect("an id").to_owned();
    // The position is written once the line is: wait for it, then stop the consumer.
    let deadline = std::time::Instant::now() + wait;
    while std::fs::read_to_string(&position)
        .unwrap_or_default()
        .trim()
        != kept
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the position file holds {kept}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = first.kill();
    let _ = first.wait();
    run(admin(&server).args(["data", "set", "/log/m2", "2"]));
    run(admin(&server).args(["data", "update", "/log", r#"{"m3": 3, "m0": null}"#]));
    // The next run resumes after m1: m2 and the update, nothing before.
    let mut second = follow();
    let lines = lines_of(&mut second);
    let m2 = line(&lines);
    assert_eq!(
        (&m2["event"], &m2["path"], &m2["data"]),
        (&json!("put"), &json!("/m2"), &json!(2))
    );
    let update = line(&lines);
    assert_eq!(
        (&update["event"], &update["data"]),
        (&json!("patch"), &json!({"m3": 3, "m0": null}))
    );
    let _ = second.kill();
    let _ = second.wait();
    // A position the server never gave is refused with what to do.
    std::fs::write(&position, "999999999\n").expect("a position file");
    let refused = output(admin(&server).args(watch_args), "");
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("beyond the database's last record"),
        "{}",
        stderr(&refused)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// An HTTP server that answers one request with `document` in chunks (as a proxy may), and
/// hands back the request head it got.
fn chunked_server(document: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let handle = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().expect("a connection");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            socket.read_exact(&mut byte).expect("the request head");
            head.push(byte[0]);
        }
        let mut answer = String::from(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        );
        let (first, rest) = document.split_at(document.len() / 3);
        let (second, third) = rest.split_at(rest.len() / 2);
        for chunk in [first, second, third] {
            answer.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
        }
        answer.push_str("0\r\n\r\n");
        socket.write_all(answer.as_bytes()).expect("the answer");
        String::from_utf8_lossy(&head).into_owned()
    });
    (url, handle)
}

#[test]
fn an_export_through_a_chunked_answer_holds_only_the_json() {
    const DOCUMENT: &str = r#"{"a":{"b":[1,2,3],".priority":4},"long":"0123456789abcdefghijklmnopqrstuvwxyz","é":true}"#;
    let (url, server) = chunked_server(DOCUMENT);
    let exported = run(hearth().args([
        "export",
        "--quiet",
        "--db",
        "shop",
        "--admin-token",
        TOKEN,
        "--url",
        &url,
    ]));
    assert_eq!(exported, format!("{DOCUMENT}\n"));
    let head = server.join().expect("the server thread");
    assert!(
        head.starts_with("GET /.json?ns=shop&format=export HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("authorization: bearer {TOKEN}\r\n")),
        "{head}"
    );
}

#[test]
fn declared_triggers_are_seen_and_their_dead_letters_dropped_or_sent_again() {
    let dir = temp_dir("triggers");
    // A receiver that is not there: every attempt fails, and one is all a trigger gets.
    let nobody = free_port();
    let file = dir.join("triggers.json");
    let declaration = json!({"triggers": {"hook": {
        "path": "/orders/{id}",
        "maxAttempts": 1,
        "http": {"url": format!("http://127.0.0.1:{nobody}/hook")}
    }}});
    std::fs::write(&file, declaration.to_string()).expect("the triggers file");
    let log = std::fs::File::create(dir.join("server.log")).expect("a log file");
    let triggers = file.to_str().expect("a UTF-8 path");
    let server = serve_logging(
        &dir.join("data"),
        free_port(),
        &["--admin-token", TOKEN, "--triggers", triggers],
        log,
    );
    run(admin(&server).args(["data", "set", "/orders/o1", "1"]));
    let mut dead = String::new();
    for _ in 0..200 {
        dead = run(admin(&server).args(["triggers", "dead", "hook"]));
        if !dead.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let letter = json_of(dead.lines().next().expect("a dead letter"));
    assert_eq!(letter["database"], "shop");
    assert_eq!(letter["event"]["ref"], "orders/o1");
    let status = run(admin(&server).args(["triggers", "status"]));
    let row = status.lines().nth(1).expect("a row for the trigger");
    assert!(row.starts_with("hook"), "{status}");
    let full = json_of(&run(admin(&server).args(["triggers", "status", "--json"])));
    assert_eq!(full["triggers"][0]["deadLetters"], 1, "{full}");
    // Sent again: it fails again (the receiver is still away) and comes back.
    assert_eq!(
        run(admin(&server).args(["triggers", "retry", "hook"])),
        "1 dead letters of hook sent again\n"
    );
    let mut back = String::new();
    for _ in 0..200 {
        back = run(admin(&server).args(["triggers", "dead", "hook"]));
        if !back.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(back.lines().count(), 1, "{back}");
    assert_eq!(
        run(admin(&server).args(["triggers", "drop", "hook"])),
        "1 dead letters of hook dropped\n"
    );
    assert_eq!(run(admin(&server).args(["triggers", "dead", "hook"])), "");
    // Declared anew from the command line: the file in effect is printed back.
    let next = dir.join("next.json");
    let redeclared = json!({"triggers": {"hook": {
        "path": "/orders/{id}",
        "maxAttempts": 2,
        "http": {"url": format!("http://127.0.0.1:{nobody}/hook")}
    }, "more": {
        "path": "/more/{id}",
        "http": {"url": format!("http://127.0.0.1:{nobody}/more")}
    }}});
    std::fs::write(&next, redeclared.to_string()).expect("the next triggers file");
    let next = next.to_str().expect("a UTF-8 path");
    assert_eq!(
        run(admin(&server).args(["triggers", "set", next])),
        "2 triggers declared\n"
    );
    assert_eq!(
        json_of(&run(admin(&server).args(["triggers", "get"]))),
        redeclared
    );
    std::fs::write(dir.join("bad.json"), r#"{"triggers": {"x": {}}}"#).expect("a bad file");
    let bad = dir.join("bad.json");
    let refused = output(
        admin(&server).args(["triggers", "set", bad.to_str().expect("a UTF-8 path")]),
        "",
    );
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("missing field `path`"),
        "{}",
        stderr(&refused)
    );
    let unknown = output(admin(&server).args(["triggers", "dead", "other"]), "");
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("no trigger is named"),
        "{}",
        stderr(&unknown)
    );
    drop(server);
}
