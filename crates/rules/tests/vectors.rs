//! Runs every operation vector and every load error of `security-rules-vectors.json` (spec
//! §15) against the engine, the way the sync engine will call it: build the new tree, then ask
//! `can_read` / `can_write` / `can_update`.

use hearth_query::QueryParams;
use hearth_rules::{Decision, Rules};
use hearth_tree::{Node, Path};
use serde_json::{json, Map, Value};

const VECTORS: &str = include_str!("data/security-rules-vectors.json");

/// Server time for vectors that do not fix one (no vector depends on it then).
const DEFAULT_NOW: u64 = 1_700_000_000_000;

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("the vectors file is JSON")
}

/// Replaces `{".sv": "timestamp"}` placeholders with `now`, as the sync engine does before
/// asking the rules.
fn resolve_server_values(value: &Value, now: u64) -> Value {
    match value {
        Value::Object(map) if map.get(".sv") == Some(&json!("timestamp")) => json!(now),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), resolve_server_values(v, now)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The wire query object (`q`) for a vector's query, parsed as the server would.
fn query_params(query: &Map<String, Value>) -> QueryParams {
    let mut q = Map::new();
    for (name, value) in query {
        match name.as_str() {
            "orderByKey" => {
                q.insert("i".into(), json!(".key"));
            }
            "orderByValue" => {
                q.insert("i".into(), json!(".value"));
            }
            "orderByPriority" => {}
            "orderByChild" => {
                q.insert("i".into(), value.clone());
            }
            "startAt" => {
                q.insert("sp".into(), value.clone());
            }
            "endAt" => {
                q.insert("ep".into(), value.clone());
            }
            "equalTo" => {
                q.insert("sp".into(), value.clone());
                q.insert("ep".into(), value.clone());
            }
            "limitToFirst" => {
                q.insert("l".into(), value.clone());
                q.insert("vf".into(), json!("l"));
            }
            "limitToLast" => {
                q.insert("l".into(), value.clone());
                q.insert("vf".into(), json!("r"));
            }
            other => panic!("unknown query key {other}"),
        }
    }
    QueryParams::from_wire(&Value::Object(q)).expect("vector queries are valid")
}

fn run(vector: &Value) -> Decision {
    let text = serde_json::to_string_pretty(&vector["rules"]).expect("serializable");
    let rules = Rules::parse(&text).unwrap_or_else(|err| panic!("rules refused: {err}\n{text}"));
    let old = Node::from_json(&vector["data"]).expect("valid data");
    let auth = &vector["auth"];
    let now = vector["now"].as_u64().unwrap_or(DEFAULT_NOW);
    let path = Path::parse(vector["path"].as_str().expect("path")).expect("valid path");
    match vector["op"].as_str().expect("op") {
        "read" => {
            let query = vector
                .get("query")
                .map(|q| query_params(q.as_object().expect("query object")));
            rules.can_read(&old, &path, auth, query.as_ref(), now)
        }
        "set" => {
            let value = resolve_server_values(&vector["value"], now);
            let new = old.set(&path, Node::from_json(&value).expect("valid value"));
            rules.can_write(&old, &new, &path, auth, now)
        }
        "update" => {
            let entries = vector["value"].as_object().expect("update object");
            let mut new = old.clone();
            let mut relative = Vec::new();
            for (key, value) in entries {
                let rel = Path::parse(key).expect("valid relative path");
                let value = resolve_server_values(value, now);
                new = new.set(
                    &path.join(&rel),
                    Node::from_json(&value).expect("valid value"),
                );
                relative.push(rel);
            }
            rules.can_update(&old, &new, &path, &relative, auth, now)
        }
        other => panic!("unknown op {other}"),
    }
}

#[test]
fn every_operation_vector() {
    let all = vectors();
    let list = all["vectors"].as_array().expect("vectors");
    assert_eq!(list.len(), 187, "the spec ships 187 operation vectors");
    let mut failures = Vec::new();
    for vector in list {
        let decision = run(vector);
        let expected = vector["expect"].as_bool().expect("expect");
        if decision.is_allowed() != expected {
            failures.push(format!(
                "{}: expected {}, got {:?}\n  why: {}",
                vector["name"].as_str().unwrap_or("?"),
                if expected { "allow" } else { "deny" },
                decision.denial().map(ToString::to_string),
                vector["why"].as_str().unwrap_or(""),
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        list.len(),
        failures.join("\n")
    );
}

#[test]
fn every_load_error_is_refused() {
    let all = vectors();
    let list = all["load_errors"].as_array().expect("load_errors");
    assert_eq!(list.len(), 23, "the spec ships 23 load errors");
    let mut accepted = Vec::new();
    for case in list {
        let text = serde_json::to_string_pretty(&case["rules"]).expect("serializable");
        match Rules::parse(&text) {
            Ok(_) => accepted.push(case["name"].as_str().unwrap_or("?").to_owned()),
            Err(err) => {
                // Every refusal points into the document (shown with --nocapture).
                assert!(err.line >= 1 && err.column >= 1, "{err}");
                println!("{}: {err}", case["name"].as_str().unwrap_or("?"));
            }
        }
    }
    assert!(
        accepted.is_empty(),
        "accepted invalid documents: {accepted:?}"
    );
}

#[test]
fn load_errors_name_the_offending_place() {
    // The same documents as written by hand, to check the positions and texts.
    let cases = [
        (
            "{\n  \"rules\": {\n    \".read\": \"newData.exists()\"\n  }\n}",
            "line 3, column 15: Unknown variable 'newData'.",
        ),
        (
            "{\"rules\": {\".write\": \"!newData.child('disabled').val()\"}}",
            "line 1, column 23: ! only operates on booleans.",
        ),
        (
            "{\"rules\": {\".write\": true, \"x\": {\".validate\": \"newData.isArray()\"}}}",
            "line 1, column 56: No such method/property 'isArray'.",
        ),
        (
            "{\"rules\": {\"a\": {\"$x\": {\".read\": true}, \"$y\": {\".read\": true}}}}",
            "line 1, column 41: Cannot have multiple default rules ('$x' and '$y').",
        ),
        (
            "{\"rulez\": {}}",
            "line 1, column 2: unexpected top-level member 'rulez' (only 'rules' is allowed)",
        ),
    ];
    for (text, expected) in cases {
        let err = Rules::parse(text).expect_err(text);
        assert_eq!(err.to_string(), expected);
    }
}
