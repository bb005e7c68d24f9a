//! Tests of rules coverage (`coverage.rs`): tallies with their places in the source, errors,
//! the bounds on distinct values and their length, and the HTML page.

use super::*;
use hearth_tree::{Node, Path};
use serde_json::json;

const RULES: &str = r#"{
  "rules": {
    "rooms": {
      "$room": {
        ".read": true,
        ".write": "auth != null && (data.child('owner').val() === auth.uid || !data.exists())",
        "owner": {".validate": "newData.isString()"}
      }
    }
  }
}"#;

fn load() -> Arc<Rules> {
    Arc::new(Rules::parse(RULES).expect("valid"))
}

fn write(
    rules: &Rules,
    coverage: &mut Coverage,
    auth: serde_json::Value,
    value: serde_json::Value,
) -> bool {
    let old = Node::from_json(&json!({"rooms": {"r1": {"owner": "alice"}}})).expect("json");
    let path = Path::parse("/rooms/r1").expect("path");
    let new = old.set(&path, Node::from_json(&value).expect("json"));
    rules
        .can_write_with(&old, &new, &path, &auth, 0, Some(coverage))
        .is_allowed()
}

fn report(coverage: &Coverage, rules: &Rules) -> serde_json::Value {
    serde_json::from_str(&coverage.report_json(rules)).expect("json")
}

fn find<'v>(node: &'v serde_json::Value, text: &str) -> Option<&'v serde_json::Value> {
    if node["text"] == text {
        return Some(node);
    }
    node["children"]
        .as_array()?
        .iter()
        .find_map(|child| find(child, text))
}

#[test]
fn tallies_values_with_places_in_the_source() {
    let rules = load();
    let mut coverage = Coverage::new(&rules);
    assert!(write(
        &rules,
        &mut coverage,
        json!({"uid": "alice"}),
        json!({"owner": "alice"})
    ));
    assert!(!write(
        &rules,
        &mut coverage,
        json!({"uid": "bob"}),
        json!({"owner": "bob"})
    ));
    assert!(!write(
        &rules,
        &mut coverage,
        json!(null),
        json!({"owner": "x"})
    ));
    let report = report(&coverage, &rules);
    assert_eq!(report["rules"], RULES);
    let exprs = report["exprs"].as_array().expect("exprs");
    // In source order: .read, .write, .validate.
    let patterns: Vec<&str> = exprs
        .iter()
        .map(|e| e["rule"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        patterns,
        [
            "/rules/rooms/$room/.read",
            "/rules/rooms/$room/.write",
            "/rules/rooms/$room/owner/.validate"
        ]
    );
    // `.read: true` never ran (no read was checked).
    assert_eq!(exprs[0]["text"], "true");
    assert_eq!(exprs[0]["location-start"], "5:18");
    assert_eq!(exprs[0]["location-end"], "5:21");
    assert_eq!(exprs[0]["values"], json!([]));

    let write_rule = &exprs[1];
    assert_eq!(
        write_rule["text"],
        "auth != null && (data.child('owner').val() === auth.uid || !data.exists())"
    );
    assert_eq!(write_rule["location-start"], "6:20");
    assert_eq!(write_rule["location-end"], "6:93");
    assert_eq!(
        write_rule["values"],
        json!([{"value": true, "count": 1}, {"value": false, "count": 2}])
    );
    let owner = find(write_rule, "data.child('owner').val()").expect("node");
    assert_eq!(owner["location-start"], "6:37");
    assert_eq!(owner["location-end"], "6:61");
    assert_eq!(owner["values"], json!([{"value": "alice", "count": 2}]));
    let auth = find(write_rule, "auth").expect("node");
    assert_eq!(
        auth["values"],
        json!([{"value": "object", "count": 2}, {"value": null, "count": 1}])
    );
    // `!data.exists()` ran only for bob: alice was granted before it.
    let exists = find(write_rule, "!data.exists()").expect("node");
    assert_eq!(exists["values"], json!([{"value": false, "count": 1}]));
    // The parenthesized group keeps its parentheses.
    assert!(find(
        write_rule,
        "(data.child('owner').val() === auth.uid || !data.exists())"
    )
    .is_some());
    // Validation runs only after a write is granted.
    assert_eq!(exprs[2]["values"], json!([{"value": true, "count": 1}]));
}

#[test]
fn errors_are_tallied_and_other_rules_are_not_recorded() {
    let rules = Arc::new(
        Rules::parse(r#"{"rules": {"$k": {".write": "newData.val().length > 2"}}}"#)
            .expect("valid"),
    );
    let mut coverage = Coverage::new(&rules);
    let old = Node::empty();
    let path = Path::parse("/k").expect("path");
    let new = old.set(&path, Node::from_json(&json!(5)).expect("json"));
    assert!(!rules
        .can_write_with(&old, &new, &path, &json!(null), 0, Some(&mut coverage))
        .is_allowed());
    let report = report(&coverage, &rules);
    let root = &report["exprs"][0];
    assert_eq!(root["values"][0]["count"], 1);
    assert!(
        root["values"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("length")),
        "{root}"
    );

    // A record made for other rules records nothing, and reports these rules untouched.
    let other = load();
    let mut foreign = Coverage::new(&other);
    assert!(!rules
        .can_write_with(&old, &new, &path, &json!(null), 0, Some(&mut foreign))
        .is_allowed());
    assert!(foreign.tallies.is_empty());
    assert_eq!(report_values(&foreign, &rules), json!([]));
}

fn report_values(coverage: &Coverage, rules: &Rules) -> serde_json::Value {
    report(coverage, rules)["exprs"][0]["values"].clone()
}

#[test]
fn distinct_values_and_their_length_are_bounded() {
    let rules = Arc::new(
        Rules::parse(r#"{"rules": {"$k": {".write": "newData.val() != null"}}}"#).expect("valid"),
    );
    let mut coverage = Coverage::new(&rules);
    let path = Path::parse("/k").expect("path");
    let old = Node::empty();
    for i in 0..(MAX_COVERAGE_VALUES + 5) {
        let long = format!("{i}{}", "x".repeat(MAX_COVERAGE_VALUE_CHARS * 2));
        let new = old.set(&path, Node::from_json(&json!(long)).expect("json"));
        let decision =
            rules.can_write_with(&old, &new, &path, &json!(null), 0, Some(&mut coverage));
        assert!(decision.is_allowed());
    }
    let report = report(&coverage, &rules);
    let val = find(&report["exprs"][0], "newData.val()").expect("node");
    let values = val["values"].as_array().expect("values");
    assert_eq!(values.len(), MAX_COVERAGE_VALUES + 1);
    assert_eq!(
        values[MAX_COVERAGE_VALUES],
        json!({"other": true, "count": 5})
    );
    let first = values[0]["value"].as_str().expect("string");
    assert_eq!(first.chars().count(), MAX_COVERAGE_VALUE_CHARS + 1);
    assert!(first.ends_with('…'));
}

#[test]
fn html_lists_every_expression() {
    let rules = load();
    let mut coverage = Coverage::new(&rules);
    write(
        &rules,
        &mut coverage,
        json!({"uid": "alice"}),
        json!({"owner": "<b>"}),
    );
    let html = coverage.report_html(&rules, "demo<x>");
    assert!(html.contains("Rules coverage: demo&lt;x&gt;"));
    assert!(html.contains("never evaluated"));
    assert!(html.contains("data.child('owner').val()"));
    assert!(!html.contains("<b>"));
}
