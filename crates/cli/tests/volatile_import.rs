//! Volatile data does not outlive the process that holds it, even when an import put it on
//! disk: a database loaded from an imported snapshot starts without the data under the
//! server's `.volatile` marks (docs/volatile.md).

mod common;

use common::{hearth, import_offline, run, serve_with, temp_dir};
use serde_json::{json, Value};

#[test]
fn an_imported_snapshot_loads_without_volatile_data() {
    let dir = temp_dir("volatile-import");
    let file = dir.join("in.json");
    let document = json!({
        "rooms": {
            "r1": {"title": "kept", "cursors": {"alice": {"x": 1}}},
            "r2": {"cursors": {"bob": {"x": 2}}}
        },
        "users": {"alice": "A"}
    });
    std::fs::write(&file, document.to_string()).expect("written");
    let rules = dir.join("rules.json");
    std::fs::write(
        &rules,
        r#"{"rules": {".read": true, ".write": true,
            "rooms": {"$room": {"cursors": {".volatile": true}}}}}"#,
    )
    .expect("written");
    let data = dir.join("data");
    import_offline(&data, "game", &file);
    let server = serve_with(
        &data,
        common::free_port(),
        &["--dev", "--rules", rules.to_str().expect("a UTF-8 path")],
    );
    let exported = run(hearth()
        .args(["export", "--quiet", "--db", "game", "--url"])
        .arg(&server.url));
    let exported: Value = serde_json::from_str(&exported).expect("the export is JSON");
    assert_eq!(
        exported,
        json!({"rooms": {"r1": {"title": "kept"}}, "users": {"alice": "A"}})
    );
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}
