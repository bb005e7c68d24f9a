//! The snapshot and string methods of the evaluator (`eval`): `data.child(...)`,
//! `newData.val().matches(...)` and the rest, each charged to the operation's budget.

use std::sync::Arc;

use hearth_tree::Key;

use super::Evaluator;
use crate::expr::{split_path, Expr, ListArg, PathArg, SnapMethod, StrMethod};
use crate::snapshot::walk;
use crate::value::{from_json, EvalError, Text, Value};

impl<'a> Evaluator<'_, 'a, '_> {
    /// Resolves a path argument to keys, sharing the load-time split of literals.
    pub(super) fn path(
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

    pub(super) fn snapshot_method(
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

    pub(super) fn string_method(
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
