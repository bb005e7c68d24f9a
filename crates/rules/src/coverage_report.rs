//! The coverage report (`coverage`): the rules document walked rule by rule, each
//! expression node with its text, its place in the source and its tally, as the emulator's
//! JSON or as a page for a browser.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{Coverage, Outcome, Tally};
use crate::document::{Rule, RuleNode};
use crate::expr::{Expr, ExprKind, ListArg, PathArg, SnapMethod, StrMethod};
use crate::json::LineIndex;
use crate::rules::Rules;

impl Coverage {
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
