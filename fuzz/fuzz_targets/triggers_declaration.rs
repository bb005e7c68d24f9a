//! The triggers declaration reader (`--triggers FILE`, `PUT /.admin/triggers/declaration`):
//! an operator's file, but one the console sends from a browser, so any bytes must yield an
//! error or triggers, never a panic. A declaration that loads is then matched against a write
//! (the bytes after the first NUL, a JSON value set at the root) and every change it matches
//! becomes the CloudEvent its receiver would get, which must be one line of JSON.
#![no_main]

use hearth_sync::triggers::changes;
use hearth_sync::{AuthState, Change, Write, WriteOp};
use hearth_tree::{Node, Path};
use hearth_triggers::declared::{cloud_event, parse};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let (declaration, written) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b"{\"rooms\": {\"r1\": {\"a\": 2}}}"[..]),
    };
    let Ok(declared) = parse(declaration) else {
        return;
    };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(written) else {
        return;
    };
    let (Ok(before), Ok(after)) = (
        Node::from_json(&json!({"rooms": {"r1": {"a": 1}, "r2": "x"}})),
        Node::from_json(&value),
    ) else {
        return;
    };
    let write = Write {
        base: Path::root(),
        ops: vec![WriteOp {
            path: Path::root(),
            change: Change::Set(after.clone()),
        }],
    };
    let triggers: Vec<_> = declared.iter().map(|d| d.trigger.clone()).collect();
    let (found, _) = changes(&triggers, &write, &before, &after);
    for change in &found {
        let Some(declared) = declared.iter().find(|d| d.trigger.name == change.trigger) else {
            panic!("a change for a trigger not declared");
        };
        let text = cloud_event(declared, "chat", change, "1.0.0", 0, &AuthState::Admin);
        assert!(!text.contains('\n'), "one line");
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_ok(),
            "the event is JSON"
        );
    }
});
