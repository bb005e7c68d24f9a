//! The rules document reader: relaxed JSON, structure, expression parser and type checks;
//! a document that loads is then evaluated for a read, a write and an update.
#![no_main]

use hearth_rules::Rules;
use hearth_tree::{Node, Path};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(rules) = Rules::parse(text) else {
        return;
    };
    // The strict form must load again: the server stores and serves it.
    assert!(
        Rules::parse(rules.strict_json()).is_ok(),
        "strict form refused"
    );
    let Ok(path) = Path::parse("/users/alice/name") else {
        return;
    };
    let Ok(value) = Node::from_json(&json!({"a": 1, "b": "x", ".priority": 2})) else {
        return;
    };
    let auth = json!({"uid": "alice", "provider": "custom", "token": {"admin": true}});
    let old = Node::empty();
    let new = old.set(&path, value);
    for auth in [&auth, &serde_json::Value::Null] {
        let _ = rules.can_read(&new, &path, auth, None, 0);
        let _ = rules.can_write(&old, &new, &path, auth, 0);
    }
});
