//! Rules coverage: which rule expressions ran and what they evaluated to, as the Firebase
//! emulator reports it at `/.inspect/coverage.json?ns=` (docs/emulator.md).
//!
//! A [`Coverage`] is an observer the caller passes to [`Rules::can_read_with`] and the other
//! `_with` checks; the evaluator then tallies, for every expression node it evaluates, the value
//! it produced. Without one the evaluator only tests an `Option` per node, so checks that are
//! not observed cost what they did before. The report walks the rules document and reads the
//! tallies, so expressions that never ran are listed too (with no values).
//!
//! Nodes are identified by their address inside the [`Rules`] they belong to: a `Coverage` is
//! made for one `Arc<Rules>` and keeps a weak reference to it, so that it can tell (and ignores)
//! checks against any other rules, and the address of a node can never be reused while it is
//! alive. Make a new one when the rules are replaced.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Weak};

use crate::document::{Rule, RuleNode};
use crate::expr::{Expr, ExprKind, ListArg, PathArg, SnapMethod, StrMethod};
use crate::json::LineIndex;
use crate::rules::Rules;
use crate::value::{write_js_number, EvalError, Value};

/// Distinct values kept per expression; evaluations that produce yet another value are
/// counted together as "other values". The values come from clients' data, so the report's
/// size must not grow with what they write.
pub const MAX_COVERAGE_VALUES: usize = 16;

/// Longest string value (or error message) kept in a tally, in characters; longer ones are cut
/// and end with `…`.
pub const MAX_COVERAGE_VALUE_CHARS: usize = 200;

/// What one evaluation of one node produced, in the form the report prints.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Null,
    Bool(bool),
    /// The number's JavaScript text (`3`, `0.5`, `NaN`).
    Num(String),
    Str(String),
    /// A value with no JSON form: a snapshot, an object or array of the auth token, the
    /// placeholder `val()` gives for a node with children. The emulator prints an identity
    /// hash (`hash@…`), different for every evaluation; a kind says more and tallies.
    Opaque(&'static str),
    Error(String),
}

#[derive(Debug, Default)]
struct Tally {
    values: Vec<(Outcome, u64)>,
    others: u64,
}

impl Tally {
    fn add(&mut self, outcome: Outcome) {
        if let Some((_, count)) = self.values.iter_mut().find(|(o, _)| *o == outcome) {
            *count += 1;
        } else if self.values.len() < MAX_COVERAGE_VALUES {
            self.values.push((outcome, 1));
        } else {
            self.others += 1;
        }
    }
}

/// The coverage of one rules document: what each of its expressions evaluated to.
#[derive(Debug)]
pub struct Coverage {
    rules: Weak<Rules>,
    /// By the address of the node in `rules`.
    tallies: HashMap<usize, Tally>,
}

impl Coverage {
    /// An empty record for `rules`.
    pub fn new(rules: &Arc<Rules>) -> Coverage {
        Coverage {
            rules: Arc::downgrade(rules),
            tallies: HashMap::new(),
        }
    }

    /// Whether this record is for `rules` (checks against other rules are not recorded).
    pub fn is_for(&self, rules: &Rules) -> bool {
        std::ptr::eq(self.rules.as_ptr(), rules)
    }

    /// Records one evaluation of `expr`.
    pub(crate) fn record(&mut self, expr: &Expr, result: &Result<Value<'_>, EvalError>) {
        let outcome = match result {
            Ok(value) => outcome(value),
            Err(error) => Outcome::Error(cut(&error.to_string())),
        };
        self.tallies
            .entry(expr as *const Expr as usize)
            .or_default()
            .add(outcome);
    }

    /// The report as the emulator's `coverage.json`: `{"rules": source, "exprs": [...]}`, one
    /// tree per rule in the order of the source, each node
    /// `{"text", "location-start": "line:column", "location-end", "values": [{"value",
    /// "count"}], "children"}` (see docs/emulator.md). Empty tallies when `rules` is not the
    /// document this record is for.
    pub fn report_json(&self, rules: &Rules) -> String {
        let report = self.report(rules);
        let exprs = report
            .iter()
            .map(|root| {
                let mut node = root.node.to_json();
                if let serde_json::Value::Object(map) = &mut node {
                    map.insert("rule".into(), root.pattern.clone().into());
                }
                node
            })
            .collect();
        let mut out = serde_json::Map::new();
        out.insert("rules".into(), rules.source().into());
        out.insert("exprs".into(), serde_json::Value::Array(exprs));
        serde_json::Value::Object(out).to_string()
    }

    /// The report as a page for a browser: every rule with its expression tree, each node with
    /// its text, place and values; expressions that never ran are marked.
    pub fn report_html(&self, rules: &Rules, title: &str) -> String {
        let mut out = String::new();
        out.push_str(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Rules coverage: ",
        );
        escape_html(title, &mut out);
        out.push_str(
            "</title><style>body{font-family:sans-serif}code{white-space:pre-wrap}\
             .never{color:#a00}.values{color:#555}li{margin:2px 0}</style></head><body>\n<h1>Rules coverage: ",
        );
        escape_html(title, &mut out);
        out.push_str("</h1>\n");
        let report = self.report(rules);
        if report.is_empty() {
            out.push_str("<p>These rules have no expressions.</p>\n");
        }
        for root in &report {
            out.push_str("<h2><code>");
            escape_html(&root.pattern, &mut out);
            out.push_str("</code></h2>\n<ul>");
            root.node.write_html(&mut out);
            out.push_str("</ul>\n");
        }
        out.push_str("<h2>Source</h2>\n<pre>");
        escape_html(rules.source(), &mut out);
        out.push_str("</pre>\n</body></html>\n");
        out
    }

    fn report(&self, rules: &Rules) -> Vec<RootReport> {
        let mine = self.is_for(rules);
        let lines = LineIndex::new(rules.source());
        let mut found = Vec::new();
        collect_rules(&rules.root, &mut found);
        let mut roots: Vec<(usize, RootReport)> = found
            .into_iter()
            .map(|rule| {
                let builder = Builder {
                    tallies: mine.then_some(&self.tallies),
                    rule,
                    lines: &lines,
                };
                let node = builder.node(&rule.expr);
                let order = builder.source_offset(rule.expr.span.0 as usize);
                (
                    order,
                    RootReport {
                        pattern: rule.pattern.to_string(),
                        node,
                    },
                )
            })
            .collect();
        roots.sort_by_key(|(order, _)| *order);
        roots.into_iter().map(|(_, root)| root).collect()
    }
}

fn outcome(value: &Value<'_>) -> Outcome {
    match value {
        Value::Null => Outcome::Null,
        Value::Bool(b) => Outcome::Bool(*b),
        Value::Num(n) => {
            let mut text = String::new();
            write_js_number(*n, &mut text);
            Outcome::Num(text)
        }
        Value::Str(text) => Outcome::Str(cut(text)),
        Value::Snap(_) => Outcome::Opaque("snapshot"),
        Value::Token(v) if v.is_array() => Outcome::Opaque("array"),
        Value::Token(_) | Value::Placeholder => Outcome::Opaque("object"),
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_COVERAGE_VALUE_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Every rule of the document.
fn collect_rules<'r>(node: &'r RuleNode, out: &mut Vec<&'r Rule>) {
    out.extend(
        [&node.read, &node.write, &node.validate]
            .into_iter()
            .flatten(),
    );
    for (_, child) in node.children.iter() {
        collect_rules(child, out);
    }
    if let Some(wildcard) = &node.wildcard {
        collect_rules(wildcard, out);
    }
}

struct RootReport {
    pattern: String,
    node: NodeReport,
}

struct NodeReport {
    text: String,
    start: (u32, u32),
    end: (u32, u32),
    values: Vec<(Outcome, u64)>,
    others: u64,
    children: Vec<NodeReport>,
}

impl NodeReport {
    fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("text".into(), self.text.clone().into());
        map.insert("location-start".into(), location(self.start).into());
        map.insert("location-end".into(), location(self.end).into());
        let mut values: Vec<serde_json::Value> = self
            .values
            .iter()
            .map(|(outcome, count)| {
                let mut entry = serde_json::Map::new();
                match outcome {
                    Outcome::Error(message) => entry.insert("error".into(), message.clone().into()),
                    other => entry.insert("value".into(), outcome_json(other)),
                };
                entry.insert("count".into(), (*count).into());
                serde_json::Value::Object(entry)
            })
            .collect();
        if self.others > 0 {
            values.push(serde_json::json!({"other": true, "count": self.others}));
        }
        map.insert("values".into(), serde_json::Value::Array(values));
        if !self.children.is_empty() {
            let children = self.children.iter().map(NodeReport::to_json).collect();
            map.insert("children".into(), serde_json::Value::Array(children));
        }
        serde_json::Value::Object(map)
    }

    fn write_html(&self, out: &mut String) {
        out.push_str("<li><code>");
        escape_html(&self.text, out);
        let _ = write!(
            out,
            "</code> <small>{}–{}</small> ",
            location(self.start),
            location(self.end)
        );
        if self.values.is_empty() && self.others == 0 {
            out.push_str("<span class=\"never\">never evaluated</span>");
        } else {
            out.push_str("<span class=\"values\">");
            let mut parts: Vec<String> = self
                .values
                .iter()
                .map(|(outcome, count)| match outcome {
                    Outcome::Error(message) => format!("error: {message} ×{count}"),
                    other => format!("{} ×{count}", outcome_json(other)),
                })
                .collect();
            if self.others > 0 {
                parts.push(format!("other values ×{}", self.others));
            }
            escape_html(&parts.join(", "), out);
            out.push_str("</span>");
        }
        if !self.children.is_empty() {
            out.push_str("<ul>");
            for child in &self.children {
                child.write_html(out);
            }
            out.push_str("</ul>");
        }
        out.push_str("</li>");
    }
}

fn location((line, column): (u32, u32)) -> String {
    format!("{line}:{column}")
}

fn outcome_json(outcome: &Outcome) -> serde_json::Value {
    match outcome {
        Outcome::Null => serde_json::Value::Null,
        Outcome::Bool(b) => (*b).into(),
        // A finite number's JavaScript text is JSON; NaN and the infinities stay strings.
        Outcome::Num(text) => serde_json::from_str(text).unwrap_or_else(|_| text.clone().into()),
        Outcome::Str(text) | Outcome::Error(text) => text.clone().into(),
        Outcome::Opaque(kind) => (*kind).into(),
    }
}

fn escape_html(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
}

/// Builds the report of one rule: its nodes' text and place in the rules source.
struct Builder<'b> {
    tallies: Option<&'b HashMap<usize, Tally>>,
    rule: &'b Rule,
    lines: &'b LineIndex<'b>,
}

impl Builder<'_> {
    /// The source offset of byte `i` of the rule's expression string.
    fn source_offset(&self, i: usize) -> usize {
        match &self.rule.source {
            Some(text) => text.source_offset(i),
            None => self.rule.at,
        }
    }

    fn node(&self, expr: &Expr) -> NodeReport {
        let (start, end) = (expr.span.0 as usize, expr.span.1 as usize);
        let text = match (&self.rule.source, &expr.kind) {
            (Some(source), _) => source.text.get(start..end).unwrap_or_default().to_owned(),
            (None, ExprKind::Bool(b)) => b.to_string(),
            (None, _) => String::new(),
        };
        let (first, last) = match &self.rule.source {
            Some(_) => (
                self.source_offset(start),
                // The last character's own offset: the end is inclusive, as the emulator's.
                self.source_offset(end.saturating_sub(1).max(start)),
            ),
            None => (self.rule.at, self.rule.at + text.len().saturating_sub(1)),
        };
        let tally = self
            .tallies
            .and_then(|tallies| tallies.get(&(expr as *const Expr as usize)));
        let mut children: Vec<&Expr> = Vec::new();
        push_children(expr, &mut children);
        children.sort_by_key(|child| child.span.0);
        NodeReport {
            text,
            start: self.lines.position(first),
            end: self.lines.position(last),
            values: tally.map(|t| t.values.clone()).unwrap_or_default(),
            others: tally.map_or(0, |t| t.others),
            children: children.into_iter().map(|child| self.node(child)).collect(),
        }
    }
}

/// The nodes the evaluator may evaluate directly below `expr`.
fn push_children<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    let path = |arg: &'e PathArg, out: &mut Vec<&'e Expr>| {
        if let PathArg::Dynamic(e) = arg {
            out.push(e);
        }
    };
    match &expr.kind {
        ExprKind::Null
        | ExprKind::Bool(_)
        | ExprKind::Num(_)
        | ExprKind::Str(_)
        | ExprKind::Auth
        | ExprKind::Now
        | ExprKind::Root
        | ExprKind::Data
        | ExprKind::NewData
        | ExprKind::Wildcard(_)
        | ExprKind::Query(_) => {}
        ExprKind::Not(e) | ExprKind::Neg(e) | ExprKind::Length(e) | ExprKind::Member(e, _) => {
            out.push(e)
        }
        ExprKind::And(items) | ExprKind::Or(items) => out.extend(items.iter()),
        ExprKind::Cond(parts) => out.extend([&parts.0, &parts.1, &parts.2]),
        ExprKind::Binary(_, parts) | ExprKind::Index(parts) => out.extend([&parts.0, &parts.1]),
        ExprKind::SnapCall(target, method) => {
            out.push(target);
            match method {
                SnapMethod::Child(arg) | SnapMethod::HasChild(arg) => path(arg, out),
                SnapMethod::HasChildren(ListArg::Literal(items)) => {
                    for item in items.iter() {
                        path(item, out);
                    }
                }
                SnapMethod::HasChildren(ListArg::Dynamic(e)) => out.push(e),
                SnapMethod::Val
                | SnapMethod::Exists
                | SnapMethod::Parent
                | SnapMethod::HasAnyChildren
                | SnapMethod::IsNumber
                | SnapMethod::IsString
                | SnapMethod::IsBoolean
                | SnapMethod::GetPriority => {}
            }
        }
        ExprKind::StrCall(target, method) => {
            out.push(target);
            match method {
                StrMethod::Contains(e) | StrMethod::BeginsWith(e) | StrMethod::EndsWith(e) => {
                    out.push(e)
                }
                StrMethod::Replace(parts) => out.extend([&parts.0, &parts.1]),
                StrMethod::ToLowerCase | StrMethod::ToUpperCase | StrMethod::Matches(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
            Rules::parse(r#"{"rules": {"$k": {".write": "newData.val() != null"}}}"#)
                .expect("valid"),
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
}
