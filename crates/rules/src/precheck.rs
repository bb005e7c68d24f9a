//! Could this caller ever write here? Answered before a write's data is read or parsed.
//!
//! A write's data can be large (megabytes) and cost many times its size to parse and convert,
//! so a caller the rules will refuse whatever it sends must be refused before any of that.
//! The answer comes from the rules, the caller's `auth` and the path alone: every `.write`
//! that could grant the write is partially evaluated with `data`, `newData`, `root`, `now` and
//! the keys that come from the data unknown. A rule is "never" only when no value of the
//! unknowns can make it true; anything uncertain is "maybe", so the full check still decides.
//!
//! `now` is unknown on purpose: the full check runs when the whole body has arrived, which
//! can be seconds later, and a rule such as `now > deadline` may have turned true by then.

use hearth_tree::{Key, Path};

use crate::decision::{RuleKind, RuleSite};
use crate::document::RuleNode;
use crate::eval::{eval_rule, Budget, Env};
use crate::expr::{Expr, ExprKind, ListArg, PathArg, SnapMethod, StrMethod};
use crate::query::UNQUERIED;
use crate::rules::Rules;
use crate::snapshot::Frames;
use crate::value::EvalError;

/// The outcomes an expression may have, as a set: it may grant, not grant, or fail.
type Outcomes = u8;
const TRUE: Outcomes = 1;
const FALSE: Outcomes = 2;
const ERROR: Outcomes = 4;
const ANY: Outcomes = TRUE | FALSE | ERROR;

impl Rules {
    /// Could `auth` ever be allowed to set (replace or delete) `path`, whatever the data?
    /// `false` only when no data could make any `.write` on `path` or its ancestors grant.
    pub fn could_set(&self, path: &Path, auth: &serde_json::Value) -> bool {
        self.could_write(path, auth, false)
    }

    /// Could `auth` ever be allowed a write whose targets lie at or below `base` but are not
    /// known yet (a multi-path update, whose paths are in its data, or a push, whose key is
    /// made later)? Rules below `base` count too, with the keys that match their wildcards
    /// unknown.
    pub fn could_write_below(&self, base: &Path, auth: &serde_json::Value) -> bool {
        self.could_write(base, auth, true)
    }

    /// The `.write` rules on `path` and its ancestors, root first, each with where it is: what
    /// a refusal by [`Rules::could_set`] can name. Asked only after a refusal, to explain it.
    pub fn write_rules_on(&self, path: &Path) -> Vec<RuleSite> {
        let keys = path.keys();
        let mut sites = Vec::new();
        let mut node = &self.root;
        for depth in 0..=keys.len() {
            if let Some(key) = depth.checked_sub(1).and_then(|i| keys.get(i)) {
                match node.child(key.as_str()) {
                    Some(child) => node = child,
                    None => break,
                }
            }
            if let Some(rule) = &node.write {
                sites.push(RuleSite {
                    kind: RuleKind::Write,
                    pattern: rule.pattern.clone(),
                    location: Path::from_keys(keys.get(..depth).unwrap_or(keys).to_vec()),
                    line: rule.line,
                    column: rule.column,
                });
            }
        }
        sites
    }

    fn could_write(&self, path: &Path, auth: &serde_json::Value, below: bool) -> bool {
        let keys = path.keys();
        let mut walk = Precheck::new(self, auth, keys);
        let mut node = &self.root;
        for depth in 0..=keys.len() {
            if let Some(key) = depth.checked_sub(1).and_then(|i| keys.get(i)) {
                match node.child(key.as_str()) {
                    Some(child) => node = child,
                    // No rule node here, so no rule at or below it.
                    None => return false,
                }
            }
            if walk.grants(node, depth) {
                return true;
            }
        }
        below && walk.grants_below(node, keys.len())
    }
}

struct Precheck<'r> {
    auth: &'r serde_json::Value,
    /// The keys known from the path; deeper keys come from the data.
    keys: &'r [Key],
    budget: Budget<'static>,
}

impl<'r> Precheck<'r> {
    fn new(rules: &Rules, auth: &'r serde_json::Value, keys: &'r [Key]) -> Precheck<'r> {
        Precheck {
            auth,
            keys,
            budget: Budget::new(rules.step_budget),
        }
    }

    /// Whether the `.write` of `node`, at `depth`, may grant.
    fn grants(&mut self, node: &RuleNode, depth: usize) -> bool {
        node.write
            .as_ref()
            .is_some_and(|rule| self.outcomes(&rule.expr, depth) & TRUE != 0)
    }

    /// Whether any `.write` strictly below `node` (at `depth`) may grant.
    fn grants_below(&mut self, node: &RuleNode, depth: usize) -> bool {
        let children = node.children.iter().map(|(_, child)| child);
        for child in children.chain(node.wildcard.as_deref()) {
            if self.grants(child, depth + 1) || self.grants_below(child, depth + 1) {
                return true;
            }
        }
        false
    }

    fn outcomes(&mut self, expr: &Expr, depth: usize) -> Outcomes {
        if known(expr, self.keys.len()) {
            let env = Env {
                auth: self.auth,
                now: 0.0,
                query: &UNQUERIED,
                keys: self.keys,
                frames: Frames { old: &[], new: &[] },
                depth: depth.min(self.keys.len()),
            };
            return match eval_rule(expr, &env, &mut self.budget) {
                Ok(true) => TRUE,
                Ok(false) => FALSE,
                // Out of steps says nothing about the rule.
                Err(EvalError::Budget) => ANY,
                Err(_) => ERROR,
            };
        }
        match &expr.kind {
            ExprKind::Not(operand) => {
                let inner = self.outcomes(operand, depth);
                (inner & ERROR)
                    | if inner & TRUE != 0 { FALSE } else { 0 }
                    | if inner & FALSE != 0 { TRUE } else { 0 }
            }
            // Evaluated left to right, stopping at the first false (or true, for `||`): the
            // result is what stops the chain, or the last value when nothing does.
            ExprKind::And(items) => self.chain(items, depth, FALSE),
            ExprKind::Or(items) => self.chain(items, depth, TRUE),
            ExprKind::Cond(parts) => {
                let (cond, then, otherwise) = &**parts;
                let test = self.outcomes(cond, depth);
                let mut result = test & ERROR;
                if test & TRUE != 0 {
                    result |= self.outcomes(then, depth);
                }
                if test & FALSE != 0 {
                    result |= self.outcomes(otherwise, depth);
                }
                result
            }
            _ => ANY,
        }
    }

    /// The outcomes of `a && b && …` (`stop` = FALSE) or `a || b || …` (`stop` = TRUE).
    fn chain(&mut self, items: &[Expr], depth: usize, stop: Outcomes) -> Outcomes {
        let go_on = ANY & !ERROR & !stop;
        let mut result = 0;
        for item in items {
            let item = self.outcomes(item, depth);
            result |= item & (stop | ERROR);
            if item & go_on == 0 {
                return result;
            }
        }
        result | go_on
    }
}

/// Whether `expr` depends only on what is known before the data: `auth`, the query (none for
/// writes), literals, and wildcards bound to the first `known_keys` keys.
fn known(expr: &Expr, known_keys: usize) -> bool {
    let k = |e: &Expr| known(e, known_keys);
    match &expr.kind {
        ExprKind::Null
        | ExprKind::Bool(_)
        | ExprKind::Num(_)
        | ExprKind::Str(_)
        | ExprKind::Auth
        | ExprKind::Query(_) => true,
        ExprKind::Now | ExprKind::Root | ExprKind::Data | ExprKind::NewData => false,
        ExprKind::Wildcard(index) => *index < known_keys,
        ExprKind::Not(e) | ExprKind::Neg(e) | ExprKind::Length(e) | ExprKind::Member(e, _) => k(e),
        ExprKind::And(items) | ExprKind::Or(items) => items.iter().all(k),
        ExprKind::Cond(parts) => k(&parts.0) && k(&parts.1) && k(&parts.2),
        ExprKind::Binary(_, operands) | ExprKind::Index(operands) => {
            k(&operands.0) && k(&operands.1)
        }
        ExprKind::SnapCall(target, method) => k(target) && snap_method_known(method, known_keys),
        ExprKind::StrCall(target, method) => {
            k(target)
                && match method {
                    StrMethod::Contains(arg)
                    | StrMethod::BeginsWith(arg)
                    | StrMethod::EndsWith(arg) => k(arg),
                    StrMethod::Replace(args) => k(&args.0) && k(&args.1),
                    StrMethod::ToLowerCase | StrMethod::ToUpperCase | StrMethod::Matches(_) => true,
                }
        }
    }
}

fn snap_method_known(method: &SnapMethod, known_keys: usize) -> bool {
    let path = |arg: &PathArg| match arg {
        PathArg::Literal(_) => true,
        PathArg::Dynamic(e) => known(e, known_keys),
    };
    match method {
        SnapMethod::Child(arg) | SnapMethod::HasChild(arg) => path(arg),
        SnapMethod::HasChildren(ListArg::Literal(items)) => items.iter().all(path),
        SnapMethod::HasChildren(ListArg::Dynamic(e)) => known(e, known_keys),
        _ => true,
    }
}

#[cfg(test)]
#[path = "precheck_tests.rs"]
mod tests;
