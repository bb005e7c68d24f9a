//! Evaluation of checked expressions (spec §5.5–§5.6, §7, §8).
//!
//! A tree-walking evaluator over [`Expr`]: rules are small, the tree is resolved at load time,
//! and a walk keeps runtime errors (which must abort the whole expression, including through
//! `!`) a plain `?`. Every node visited and every key walked costs one step of a [`Budget`]
//! shared by the whole operation, so no document can make one request expensive.

use hearth_tree::Key;

use crate::ast::BinaryOp;
use crate::coverage::Coverage;
use crate::expr::{Expr, ExprKind};
use crate::query::QueryVars;
use crate::snapshot::{Frames, Snap, Tree};
use crate::value::{self, from_json, utf16_len, EvalError, Text, Value};

#[path = "eval_methods.rs"]
mod methods;

/// Step allowance of one operation (a read, or a write with all its targets), and the
/// coverage record its evaluations go to, if any: both go wherever the evaluation does.
#[derive(Debug)]
pub(crate) struct Budget<'c> {
    left: u64,
    coverage: Option<&'c mut Coverage>,
}

/// String work (search, case mapping, regex) costs one step per this many bytes, on top of
/// the step of the call itself.
const BYTES_PER_STEP: usize = 64;

impl<'c> Budget<'c> {
    pub fn new(steps: u64) -> Budget<'c> {
        Budget {
            left: steps,
            coverage: None,
        }
    }

    /// A budget whose evaluations are recorded in `coverage`.
    pub fn observed(steps: u64, coverage: Option<&'c mut Coverage>) -> Budget<'c> {
        Budget {
            left: steps,
            coverage,
        }
    }

    pub fn spend(&mut self, steps: u64) -> Result<(), EvalError> {
        match self.left.checked_sub(steps) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                Err(EvalError::Budget)
            }
        }
    }

    fn spend_bytes(&mut self, bytes: usize) -> Result<(), EvalError> {
        self.spend((bytes / BYTES_PER_STEP) as u64 + 1)
    }
}

/// Everything an expression can see, for the rule at location `keys[..depth]`.
pub(crate) struct Env<'a> {
    pub auth: &'a serde_json::Value,
    pub now: f64,
    pub query: &'a QueryVars,
    /// The evaluated location; at least `depth` keys (wildcards index into it).
    pub keys: &'a [Key],
    pub frames: Frames<'a>,
    pub depth: usize,
}

/// Evaluates a rule: `Ok(true)` grants, `Ok(false)` does not, an error does not either (and
/// says why).
pub(crate) fn eval_rule(
    expr: &Expr,
    env: &Env<'_>,
    budget: &mut Budget<'_>,
) -> Result<bool, EvalError> {
    Evaluator { env, budget }.boolean(expr)
}

struct Evaluator<'e, 'a, 'c> {
    env: &'e Env<'a>,
    budget: &'e mut Budget<'c>,
}

impl<'a> Evaluator<'_, 'a, '_> {
    fn boolean(&mut self, expr: &'a Expr) -> Result<bool, EvalError> {
        match self.eval(expr)? {
            Value::Bool(b) => Ok(b),
            other => Err(EvalError::Receiver {
                member: "a condition",
                found: other.type_name(),
            }),
        }
    }

    fn number(&mut self, expr: &'a Expr, op: &'static str) -> Result<f64, EvalError> {
        match self.eval(expr)? {
            Value::Num(n) => Ok(n),
            other => Err(EvalError::Receiver {
                member: op,
                found: other.type_name(),
            }),
        }
    }

    fn snapshot(&mut self, expr: &'a Expr, method: &'static str) -> Result<Snap, EvalError> {
        match self.eval(expr)? {
            Value::Snap(snap) => Ok(snap),
            other => Err(EvalError::Receiver {
                member: method,
                found: other.type_name(),
            }),
        }
    }

    /// A string argument of `method`.
    fn string_arg(&mut self, expr: &'a Expr, method: &'static str) -> Result<Text<'a>, EvalError> {
        match self.eval(expr)? {
            Value::Str(text) => Ok(text),
            other => Err(EvalError::Argument {
                method,
                expected: "a string",
                found: other.type_name(),
            }),
        }
    }

    fn eval(&mut self, expr: &'a Expr) -> Result<Value<'a>, EvalError> {
        let result = self.eval_node(expr);
        // The only cost of coverage when it is off: this test, once per node.
        if let Some(coverage) = self.budget.coverage.as_deref_mut() {
            coverage.record(expr, &result);
        }
        result
    }

    fn eval_node(&mut self, expr: &'a Expr) -> Result<Value<'a>, EvalError> {
        self.budget.spend(1)?;
        let env = self.env;
        Ok(match &expr.kind {
            ExprKind::Null => Value::Null,
            ExprKind::Bool(b) => Value::Bool(*b),
            ExprKind::Num(n) => Value::Num(*n),
            ExprKind::Str(s) => Value::Str(Text::Borrowed(s)),
            ExprKind::Auth => from_json(env.auth),
            ExprKind::Now => Value::Num(env.now),
            ExprKind::Root => Value::Snap(Snap::at(&env.frames, Tree::Old, 0)),
            ExprKind::Data => Value::Snap(Snap::at(&env.frames, Tree::Old, env.depth)),
            ExprKind::NewData => Value::Snap(Snap::at(&env.frames, Tree::New, env.depth)),
            ExprKind::Wildcard(index) => match env.keys.get(*index) {
                Some(key) => Value::Str(Text::Borrowed(key.as_str())),
                None => Value::Null,
            },
            ExprKind::Query(prop) => env.query.get(*prop),
            ExprKind::Not(operand) => Value::Bool(!self.boolean(operand)?),
            ExprKind::Neg(operand) => Value::Num(-self.number(operand, "unary '-'")?),
            ExprKind::And(items) => {
                for item in items.iter() {
                    if !self.boolean(item)? {
                        return Ok(Value::Bool(false));
                    }
                }
                Value::Bool(true)
            }
            ExprKind::Or(items) => {
                for item in items.iter() {
                    if self.boolean(item)? {
                        return Ok(Value::Bool(true));
                    }
                }
                Value::Bool(false)
            }
            ExprKind::Cond(parts) => {
                let (cond, then, otherwise) = &**parts;
                if self.boolean(cond)? {
                    self.eval(then)?
                } else {
                    self.eval(otherwise)?
                }
            }
            ExprKind::Binary(op, operands) => self.binary(*op, &operands.0, &operands.1)?,
            ExprKind::SnapCall(target, method) => self.snapshot_method(target, method)?,
            ExprKind::StrCall(target, method) => self.string_method(target, method)?,
            ExprKind::Length(target) => match self.eval(target)? {
                Value::Str(s) => Value::Num(utf16_len(&s) as f64),
                Value::Null => Value::Null,
                other => {
                    return Err(EvalError::Receiver {
                        member: "length",
                        found: other.type_name(),
                    })
                }
            },
            ExprKind::Member(target, name) => {
                let target = self.eval(target)?;
                member(target, name)
            }
            ExprKind::Index(parts) => {
                let target = self.eval(&parts.0)?;
                match self.eval(&parts.1)? {
                    Value::Str(name) => member(target, &name),
                    Value::Num(n) => index(target, n),
                    other => {
                        return Err(EvalError::Argument {
                            method: "[]",
                            expected: "a string or a number",
                            found: other.type_name(),
                        })
                    }
                }
            }
        })
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        left: &'a Expr,
        right: &'a Expr,
    ) -> Result<Value<'a>, EvalError> {
        let a = self.eval(left)?;
        let b = self.eval(right)?;
        Ok(match op {
            BinaryOp::Eq => Value::Bool(value::equals(&a, &b)),
            BinaryOp::Ne => Value::Bool(!value::equals(&a, &b)),
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                if let (Value::Str(x), Value::Str(y)) = (&a, &b) {
                    self.budget.spend_bytes(x.len().min(y.len()))?;
                }
                Value::Bool(value::compare(op, &a, &b)?)
            }
            BinaryOp::Add => {
                if let Value::Str(x) = &a {
                    self.budget.spend_bytes(x.len())?;
                }
                value::add(a, b)?
            }
            BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
                Value::Num(value::arithmetic(op, &a, &b)?)
            }
        })
    }
}

/// A named property of a value reached from `auth`: missing members and members of `null`
/// read as null (spec §5.6); a string's `length` is its length.
fn member<'a>(target: Value<'a>, name: &str) -> Value<'a> {
    match target {
        Value::Token(serde_json::Value::Object(map)) => {
            map.get(name).map_or(Value::Null, from_json)
        }
        Value::Token(serde_json::Value::Array(items)) if name == "length" => {
            Value::Num(items.len() as f64)
        }
        Value::Token(serde_json::Value::Array(items)) => match name.parse::<usize>() {
            Ok(i) => items.get(i).map_or(Value::Null, from_json),
            Err(_) => Value::Null,
        },
        Value::Str(s) if name == "length" => Value::Num(utf16_len(&s) as f64),
        _ => Value::Null,
    }
}

/// `target[n]` for a number: an array element, or the member named by the number's text.
fn index(target: Value<'_>, n: f64) -> Value<'_> {
    match target {
        Value::Token(serde_json::Value::Array(items)) => {
            if n >= 0.0 && n.fract() == 0.0 && n < items.len() as f64 {
                items.get(n as usize).map_or(Value::Null, from_json)
            } else {
                Value::Null
            }
        }
        Value::Token(serde_json::Value::Object(_)) => {
            let mut name = String::new();
            value::write_js_number(n, &mut name);
            member(target, &name)
        }
        _ => Value::Null,
    }
}

#[cfg(test)]
#[path = "eval_tests.rs"]
mod tests;
