//! Evaluation of checked expressions (spec §5.5–§5.6, §7, §8).
//!
//! A tree-walking evaluator over [`Expr`]: rules are small, the tree is resolved at load time,
//! and a walk keeps runtime errors (which must abort the whole expression, including through
//! `!`) a plain `?`. Every node visited and every key walked costs one step of a [`Budget`]
//! shared by the whole operation, so no document can make one request expensive.

use std::sync::Arc;

use hearth_tree::Key;

use crate::ast::BinaryOp;
use crate::coverage::Coverage;
use crate::expr::{split_path, Expr, ExprKind, ListArg, PathArg, SnapMethod, StrMethod};
use crate::query::QueryVars;
use crate::snapshot::{walk, Frames, Snap, Tree};
use crate::value::{self, from_json, utf16_len, EvalError, Text, Value};

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

    /// Resolves a path argument to keys, sharing the load-time split of literals.
    fn path(
        &mut self,
        arg: &'a PathArg,
        method: &'static str,
    ) -> Result<Arc<[Option<Key>]>, EvalError> {
        let keys = match arg {
            PathArg::Literal(keys) => keys.clone(),
            PathArg::Dynamic(expr) => {
                let text = self.string_arg(expr, method)?;
                split_path(&text).collect()
            }
        };
        self.budget.spend(keys.len() as u64)?;
        Ok(keys)
    }

    fn snapshot_method(
        &mut self,
        target: &'a Expr,
        method: &'a SnapMethod,
    ) -> Result<Value<'a>, EvalError> {
        let name = snapshot_method_name(method);
        let snap = self.snapshot(target, name)?;
        Ok(match method {
            SnapMethod::Val => snap.val(),
            SnapMethod::Exists => Value::Bool(snap.exists()),
            SnapMethod::Parent => match snap.parent(&self.env.frames) {
                Some(parent) => Value::Snap(parent),
                None => return Err(EvalError::RootParent),
            },
            SnapMethod::Child(arg) => {
                let keys = self.path(arg, name)?;
                Value::Snap(snap.child(&keys))
            }
            SnapMethod::HasChild(arg) => {
                let keys = self.path(arg, name)?;
                Value::Bool(!walk(snap.node(), &keys).is_empty())
            }
            SnapMethod::HasAnyChildren => Value::Bool(snap.has_children()),
            SnapMethod::HasChildren(ListArg::Literal(items)) => {
                for item in items.iter() {
                    let keys = self.path(item, name)?;
                    if walk(snap.node(), &keys).is_empty() {
                        return Ok(Value::Bool(false));
                    }
                }
                Value::Bool(true)
            }
            SnapMethod::HasChildren(ListArg::Dynamic(expr)) => {
                let list = match self.eval(expr)? {
                    Value::Token(serde_json::Value::Array(items)) => items,
                    other => {
                        return Err(EvalError::Argument {
                            method: name,
                            expected: "an array of strings",
                            found: other.type_name(),
                        })
                    }
                };
                let mut all = true;
                for item in list {
                    let serde_json::Value::String(path) = item else {
                        return Err(EvalError::Argument {
                            method: name,
                            expected: "an array of strings",
                            found: from_json(item).type_name(),
                        });
                    };
                    let keys: Vec<Option<Key>> = split_path(path).collect();
                    self.budget.spend(keys.len() as u64 + 1)?;
                    all = all && !walk(snap.node(), &keys).is_empty();
                }
                Value::Bool(all)
            }
            SnapMethod::IsNumber => Value::Bool(snap.is_number()),
            SnapMethod::IsString => Value::Bool(snap.is_string()),
            SnapMethod::IsBoolean => Value::Bool(snap.is_boolean()),
            SnapMethod::GetPriority => snap.priority(),
        })
    }

    fn string_method(
        &mut self,
        target: &'a Expr,
        method: &'a StrMethod,
    ) -> Result<Value<'a>, EvalError> {
        let name = string_method_name(method);
        let text = match self.eval(target)? {
            Value::Str(text) => text,
            other => {
                return Err(EvalError::Receiver {
                    member: name,
                    found: other.type_name(),
                })
            }
        };
        self.budget.spend_bytes(text.len())?;
        Ok(match method {
            StrMethod::Contains(arg) => {
                let needle = self.string_arg(arg, name)?;
                Value::Bool(text.contains(&*needle))
            }
            StrMethod::BeginsWith(arg) => {
                let prefix = self.string_arg(arg, name)?;
                Value::Bool(text.starts_with(&*prefix))
            }
            StrMethod::EndsWith(arg) => {
                let suffix = self.string_arg(arg, name)?;
                Value::Bool(text.ends_with(&*suffix))
            }
            StrMethod::Replace(args) => {
                let from = self.string_arg(&args.0, name)?;
                let to = self.string_arg(&args.1, name)?;
                if from.is_empty() || !text.contains(&*from) {
                    Value::Str(if from.is_empty() {
                        Text::Owned(text.replace("", &to))
                    } else {
                        text
                    })
                } else {
                    self.budget.spend_bytes(text.len() + to.len())?;
                    Value::Str(Text::Owned(text.replace(&*from, &to)))
                }
            }
            StrMethod::ToLowerCase => {
                if text
                    .bytes()
                    .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
                {
                    Value::Str(text)
                } else {
                    Value::Str(Text::Owned(text.to_lowercase()))
                }
            }
            StrMethod::ToUpperCase => {
                if text
                    .bytes()
                    .all(|b| b.is_ascii() && !b.is_ascii_lowercase())
                {
                    Value::Str(text)
                } else {
                    Value::Str(Text::Owned(text.to_uppercase()))
                }
            }
            StrMethod::Matches(regex) => Value::Bool(regex.is_match(&text)),
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

fn snapshot_method_name(method: &SnapMethod) -> &'static str {
    match method {
        SnapMethod::Val => "val",
        SnapMethod::Exists => "exists",
        SnapMethod::Parent => "parent",
        SnapMethod::Child(_) => "child",
        SnapMethod::HasChild(_) => "hasChild",
        SnapMethod::HasAnyChildren | SnapMethod::HasChildren(_) => "hasChildren",
        SnapMethod::IsNumber => "isNumber",
        SnapMethod::IsString => "isString",
        SnapMethod::IsBoolean => "isBoolean",
        SnapMethod::GetPriority => "getPriority",
    }
}

fn string_method_name(method: &StrMethod) -> &'static str {
    match method {
        StrMethod::Contains(_) => "contains",
        StrMethod::BeginsWith(_) => "beginsWith",
        StrMethod::EndsWith(_) => "endsWith",
        StrMethod::Replace(_) => "replace",
        StrMethod::ToLowerCase => "toLowerCase",
        StrMethod::ToUpperCase => "toUpperCase",
        StrMethod::Matches(_) => "matches",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{check_rule, Scope};
    use crate::parser::parse;
    use crate::query::UNQUERIED;
    use crate::RuleKind;
    use hearth_tree::Node;
    use serde_json::json;

    /// Evaluates `src` as a .write rule at /users/alice (with `$uid` bound to "alice"), with
    /// `old` and `new` as the whole trees.
    fn run_with(
        src: &str,
        auth: serde_json::Value,
        old: serde_json::Value,
        new: serde_json::Value,
    ) -> Result<bool, EvalError> {
        let wildcards = vec![("$uid".to_owned(), 1)];
        let scope = Scope {
            kind: RuleKind::Write,
            wildcards: &wildcards,
        };
        let expr = check_rule(&parse(src).expect("parses"), &scope).expect("checks");
        let keys = vec![
            Key::new("users").expect("key"),
            Key::new("alice").expect("key"),
        ];
        let stack = |root: serde_json::Value| -> Vec<Node> {
            let root = Node::from_json(&root).expect("valid");
            let users = root.child(&keys[0]);
            let alice = users.child(&keys[1]);
            vec![root, users, alice]
        };
        let (old, new) = (stack(old), stack(new));
        let env = Env {
            auth: &auth,
            now: 1000.0,
            query: &UNQUERIED,
            keys: &keys,
            frames: Frames {
                old: &old,
                new: &new,
            },
            depth: 2,
        };
        eval_rule(&expr, &env, &mut Budget::new(10_000))
    }

    fn run(src: &str) -> Result<bool, EvalError> {
        run_with(
            src,
            json!({"uid": "alice", "token": {"email": "a.b@x.io", "roles": ["admin", "dev"], "n": 2}}),
            json!({"users": {"alice": {"name": "Alice", "age": 30, "tags": {"x": true}}}, "cfg": {"max": 5}}),
            json!({"users": {"alice": {"name": "Alicia", "age": 31}}, "cfg": {"max": 5}}),
        )
    }

    fn yes(src: &str) {
        assert_eq!(run(src), Ok(true), "{src}");
    }

    fn no(src: &str) {
        assert_eq!(run(src), Ok(false), "{src}");
    }

    fn fails(src: &str) -> EvalError {
        run(src).expect_err(src)
    }

    #[test]
    fn variables_and_snapshots() {
        yes("auth.uid === $uid");
        yes("data.child('name').val() === 'Alice' && newData.child('name').val() === 'Alicia'");
        yes("root.child('cfg/max').val() === 5 && newData.parent().parent().child('cfg').hasChild('max')");
        yes("data.parent().child('alice').child('tags').hasChildren()");
        yes("data.hasChildren(['name', 'age']) && !newData.hasChildren(['name', 'tags'])");
        yes("newData.child('age').val() > data.child('age').val()");
        yes("now === 1000");
        yes("query.orderByKey && query.limitToFirst == null");
        yes("data.val() != null && root.child('nothing').val() == null");
        no("newData.child('tags').exists()");
        yes("newData.child('name').isString() && newData.child('age').isNumber() && !newData.child('age').isBoolean()");
        yes("newData.child($uid).val() == null");
        yes("root.child('users/' + auth.uid + '/name').val() === 'Alice'");
        yes("newData.hasChildren(auth.token.roles) == false");
    }

    #[test]
    fn auth_values() {
        yes("auth.token.email.replace('.', ',') === 'a,b@x,io'");
        yes("auth.token.roles[0] === 'admin' && auth.token.roles[1] === 'dev' && auth.token.roles[2] == null");
        yes("auth.token.roles.length === 2 && auth.uid.length === 5");
        yes("auth.token['n'] === 2 && auth.token.missing.deeper == null");
        yes("auth.token == auth.token && auth.token != null");
        yes("auth.token[auth.token.n] == null");
        assert_eq!(
            run_with("auth.uid !== 'x'", json!(null), json!(null), json!(null)),
            Ok(true)
        );
        assert!(run_with(
            "auth.uid.beginsWith('a')",
            json!(null),
            json!(null),
            json!(null)
        )
        .is_err());
    }

    #[test]
    fn strings() {
        yes("'abab'.endsWith('ab') && 'abab'.beginsWith('ab') && 'abc'.contains('b')");
        yes("'a.b.c'.replace('.', ',') === 'a,b,c' && 'abc'.replace('x', 'y') === 'abc'");
        yes("'ab'.replace('', '-') === '-a-b-'");
        yes("'ÉCOLE'.toLowerCase() === 'école' && 'abc'.toUpperCase() === 'ABC' && 'abc'.toLowerCase() === 'abc'");
        yes("'😀'.length === 2 && ''.length === 0");
        yes("(newData.child('age').val() + '').matches(/^\\d+$/) && 'x' + 1.5 === 'x1.5'");
        yes("'b' > 'a' && 'B' < 'a'");
        assert!(matches!(
            fails("newData.child('age').val().contains('3')"),
            EvalError::Receiver {
                member: "contains",
                found: "number"
            }
        ));
        assert!(matches!(
            fails("'foo'.contains(root.child('x').val())"),
            EvalError::Argument { found: "null", .. }
        ));
        assert!(matches!(
            fails("newData.child('age').val().length > 0"),
            EvalError::Receiver {
                member: "length",
                ..
            }
        ));
        assert!(matches!(
            fails("data.val().matches(/x/)"),
            EvalError::Receiver {
                found: "object",
                ..
            }
        ));
    }

    #[test]
    fn errors_abort_the_whole_expression() {
        assert_eq!(
            fails("root.parent().exists() || true"),
            EvalError::RootParent
        );
        assert_eq!(
            fails("!(root.child('x').val() > 5)"),
            EvalError::Operands {
                op: ">",
                left: "null",
                right: "number"
            }
        );
        yes("true || root.parent().exists()");
        no("false && root.parent().exists()");
        yes("newData.isString() ? newData.val().length < 5 : true");
        assert!(fails("root.child('x').val() + 1 === 1")
            .to_string()
            .contains("'+'"));
        assert!(fails("root.child(root.child('x').val()).exists()")
            .to_string()
            .contains("child()"));
    }

    #[test]
    fn arithmetic() {
        yes("7 / 2 === 3.5 && 7 % 2 === 1 && -7 % 2 === -1 && 1 + 2 * 3 === 7 && -(2 - 5) === 3");
        yes("(1 / 0 + '') === 'NaN'");
        yes("(0.1 + 0.2) + '' === '0.30000000000000004'");
    }

    #[test]
    fn budget_is_enforced() {
        let wildcards: Vec<(String, usize)> = Vec::new();
        let scope = Scope {
            kind: RuleKind::Read,
            wildcards: &wildcards,
        };
        let expr = check_rule(&parse("1 + 1 + 1 == 3").expect("parses"), &scope).expect("checks");
        let old = vec![Node::empty()];
        let env = Env {
            auth: &serde_json::Value::Null,
            now: 0.0,
            query: &UNQUERIED,
            keys: &[],
            frames: Frames {
                old: &old,
                new: &[],
            },
            depth: 0,
        };
        assert_eq!(eval_rule(&expr, &env, &mut Budget::new(100)), Ok(true));
        assert_eq!(
            eval_rule(&expr, &env, &mut Budget::new(4)),
            Err(EvalError::Budget)
        );
    }
}
