//! `hearth import` and `hearth export`, run as a user would: the real binary, offline on a data
//! directory and online against a running server, with a document that exercises priorities,
//! unicode keys and exact numbers.

mod common;

use common::{free_port, hearth, import_offline, output, run, serve, temp_dir};
use serde_json::{json, Value};

fn document() -> Value {
    let mut rooms = serde_json::Map::new();
    for room in 0..50 {
        let messages: serde_json::Map<String, Value> = (0..100)
            .map(|n| {
                (
                    format!("m{n:03}"),
                    json!({"text": format!("message {n} in room {room} ✓"), "ts": 1_700_000_000_000u64 + n}),
                )
            })
            .collect();
        rooms.insert(format!("room{room}"), Value::Object(messages));
    }
    json!({
        "rooms": rooms,
        "numbers": {"big": 1e300, "tenth": 0.1, "huge": 9007199254740993u64, "neg": -0.0},
        "prioritized": {".priority": 5, "a": {".value": "x", ".priority": "p"}},
        "é ünïcode ✓": true,
        ".priority": 1.5,
    })
}

/// The document as the tree holds it (export form, numbers as the server stores them).
fn canonical(value: &Value) -> Value {
    hearth_tree::Node::from_json(value)
        .expect("a valid document")
        .to_json(true)
}

#[test]
fn offline_import_then_export_round_trips_and_the_server_serves_it() {
    let dir = temp_dir("offline");
    let file = dir.join("in.json");
    std::fs::write(&file, serde_json::to_vec(&document()).expect("JSON")).expect("written");
    let data = dir.join("data");
    import_offline(&data, "shop", &file);
    let exported = run(hearth()
        .args(["export", "--quiet", "--db", "shop", "--data-dir"])
        .arg(&data));
    let exported: Value = serde_json::from_str(&exported).expect("the export is JSON");
    assert_eq!(exported, canonical(&document()));

    // A server started on the directory serves the imported data.
    let port = free_port();
    let server = serve(&data, port);
    // Online through the variables every online command reads.
    let online = run(hearth()
        .args(["export", "--quiet"])
        .env("HEARTH_URL", format!("http://127.0.0.1:{port}"))
        .env("HEARTH_NS", "shop"));
    let online: Value = serde_json::from_str(&online).expect("the export is JSON");
    assert_eq!(online, canonical(&document()));
    // An offline import while it runs is refused: the directory is locked, and the message
    // says what to do instead.
    let refused = hearth()
        .args(["import", "--quiet", "--ns", "shop", "--data-dir"])
        .arg(&data)
        .arg(&file)
        .output()
        .expect("the command runs");
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        format!(
            "data directory {} is in use by another process (its LOCK file is locked); stop \
             the server that runs on it, or go through the running server with --url URL\n",
            data.display()
        )
    );
    // Both places on one command line is a mistake.
    let both = hearth()
        .args([
            "export",
            "--ns",
            "shop",
            "--url",
            "http://127.0.0.1:1",
            "--data-dir",
        ])
        .arg(&data)
        .output()
        .expect("the command runs");
    assert_eq!(both.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&both.stderr),
        "error: export takes --data-dir (a stopped server) or --url (a running one), not both\n"
    );
    drop(server);
    // --data-dir wins over a HEARTH_URL left in the environment.
    let offline = run(hearth()
        .args(["export", "--quiet", "--ns", "shop", "--data-dir"])
        .arg(&data)
        .env("HEARTH_URL", "http://127.0.0.1:1"));
    let offline: Value = serde_json::from_str(&offline).expect("the export is JSON");
    assert_eq!(offline, canonical(&document()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn online_import_replaces_the_database_member_by_member() {
    let dir = temp_dir("online");
    let port = free_port();
    let _server = serve(&dir.join("data"), port);
    let url = format!("http://127.0.0.1:{port}");
    let first = dir.join("first.json");
    std::fs::write(&first, r#"{"stale": 1, "rooms": {"old": true}}"#).expect("written");
    run(hearth()
        .args(["import", "--quiet", "--ns", "live", "--url", &url])
        .arg(&first));
    let file = dir.join("in.json");
    std::fs::write(&file, serde_json::to_vec(&document()).expect("JSON")).expect("written");
    run(hearth()
        .args(["import", "--quiet", "--ns", "live", "--url", &url])
        .arg(&file));
    let exported = run(hearth().args(["export", "--quiet", "--ns", "live", "--url", &url]));
    let exported: Value = serde_json::from_str(&exported).expect("the export is JSON");
    assert_eq!(exported, canonical(&document()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_online_import_of_a_document_the_server_would_refuse_changes_nothing() {
    let dir = temp_dir("online-refused");
    let port = free_port();
    let _server = serve(&dir.join("data"), port);
    let url = format!("http://127.0.0.1:{port}");
    let before = dir.join("before.json");
    std::fs::write(&before, r#"{"a": "old", "b": "old"}"#).expect("written");
    run(hearth()
        .args(["import", "--quiet", "--ns", "kept", "--url", &url])
        .arg(&before));
    // A key with a `.` in the middle of the file: the first members are fine.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"a": "new", "bad.key": 1, "c": "new"}"#).expect("written");
    let refused = output(
        hearth()
            .args(["import", "--quiet", "--ns", "kept", "--url", &url])
            .arg(&bad),
        "",
    );
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("bad.json is not a document the server would take")
            && stderr.contains("nothing was changed"),
        "{stderr}"
    );
    let exported = run(hearth().args(["export", "--quiet", "--ns", "kept", "--url", &url]));
    let exported: Value = serde_json::from_str(&exported).expect("the export is JSON");
    assert_eq!(exported, json!({"a": "old", "b": "old"}));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_online_import_reads_a_pipe_whole_before_it_sends_it() {
    let dir = temp_dir("online-pipe");
    let port = free_port();
    let _server = serve(&dir.join("data"), port);
    let url = format!("http://127.0.0.1:{port}");
    // The file is read twice (checked, then sent): a pipe is copied first.
    let piped = output(
        hearth().args([
            "import",
            "--quiet",
            "--ns",
            "piped",
            "--url",
            &url,
            "/dev/stdin",
        ]),
        r#"{"a": 1, "b": {"c": "from a pipe"}}"#,
    );
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    let exported = run(hearth().args(["export", "--quiet", "--ns", "piped", "--url", &url]));
    let exported: Value = serde_json::from_str(&exported).expect("the export is JSON");
    assert_eq!(exported, json!({"a": 1, "b": {"c": "from a pipe"}}));
    let _ = std::fs::remove_dir_all(dir);
}
