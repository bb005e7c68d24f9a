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
use std::sync::{Arc, Weak};

use crate::expr::Expr;
use crate::rules::Rules;
use crate::value::{write_js_number, EvalError, Value};

#[path = "coverage_report.rs"]
mod report;

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

#[cfg(test)]
#[path = "coverage_tests.rs"]
mod tests;
