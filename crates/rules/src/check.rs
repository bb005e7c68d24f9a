//! Static type checking of rule expressions (spec §5.3), and their lowering to [`Expr`].
//!
//! The hosted service refuses ill-typed rules when they are deployed rather than letting them
//! fail at run time, and operators rely on that: a typo in a rule must not silently become a
//! "deny everything" (or worse) in production. Types are coarse: `prim` stands for a data
//! value of unknown primitive type (`val()`), `dyn` for anything reached from the auth token.

use std::sync::Arc;

use crate::ast::{Ast, AstKind, BinaryOp, UnaryOp};
use crate::decision::RuleKind;
use crate::error::LoadError;
use crate::expr::{split_path, Expr, ExprKind, ListArg, PathArg, QueryProp, SnapMethod, StrMethod};
use crate::regex;

#[path = "check_types.rs"]
mod types;

use types::{arity, must_call, type_error, Checked, Ty, SNAPSHOT_METHODS, STRING_METHODS};
pub(crate) use types::{CheckError, Scope};

/// Checks a whole rule: it must be a boolean expression.
pub(crate) fn check_rule(ast: &Ast, scope: &Scope<'_>) -> Result<Expr, CheckError> {
    let (expr, ty) = check(ast, scope)?;
    if ty != Ty::Bool {
        return Err(type_error(
            ast.at,
            format!(
                "a rule must be a boolean expression, but this one is {}",
                ty.name()
            ),
        ));
    }
    Ok(expr)
}

fn check(ast: &Ast, scope: &Scope<'_>) -> Result<(Expr, Ty), CheckError> {
    let (kind, ty) = check_kind(ast, scope)?;
    let span = (to_u32(ast.span.0), to_u32(ast.span.1));
    Ok((Expr { kind, span }, ty))
}

/// Expression strings are bounded by the rules document (`MAX_RULES_BYTES`), so offsets fit.
fn to_u32(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

fn check_kind(ast: &Ast, scope: &Scope<'_>) -> Checked {
    let at = ast.at;
    match &ast.kind {
        AstKind::Null => Ok((ExprKind::Null, Ty::Null)),
        AstKind::Bool(b) => Ok((ExprKind::Bool(*b), Ty::Bool)),
        AstKind::Num(n) => Ok((ExprKind::Num(*n), Ty::Num)),
        AstKind::Str(s) => Ok((ExprKind::Str(s.as_str().into()), Ty::Str)),
        AstKind::Ident(name) => variable(name, at, scope),
        AstKind::Regex { .. } => Err(type_error(
            at,
            "a regular expression can only be the argument of matches()",
        )),
        AstKind::Array(_) => Err(type_error(
            at,
            "an array can only be the argument of hasChildren()",
        )),
        AstKind::Unary(UnaryOp::Not, operand) => {
            let (expr, ty) = check(operand, scope)?;
            if ty != Ty::Bool {
                return Err((at, LoadError::NotOnNonBoolean));
            }
            Ok((ExprKind::Not(Box::new(expr)), Ty::Bool))
        }
        AstKind::Unary(UnaryOp::Neg, operand) => {
            let (expr, ty) = check(operand, scope)?;
            if !ty.may_be_number() {
                return Err(type_error(
                    at,
                    format!("unary '-' needs a number, not {}", ty.name()),
                ));
            }
            Ok((ExprKind::Neg(Box::new(expr)), Ty::Num))
        }
        AstKind::And(items) => Ok((ExprKind::And(logical(items, "&&", scope)?), Ty::Bool)),
        AstKind::Or(items) => Ok((ExprKind::Or(logical(items, "||", scope)?), Ty::Bool)),
        AstKind::Cond(cond, then, otherwise) => conditional(cond, then, otherwise, scope),
        AstKind::Binary(op, left, right) => binary(*op, left, right, scope),
        AstKind::Member {
            target,
            name,
            name_at,
        } => property(target, name, *name_at, scope),
        AstKind::Index(target, index) => computed(target, index, scope),
        AstKind::Call(callee, args) => call(callee, args, at, scope),
    }
}

fn variable(name: &str, at: usize, scope: &Scope<'_>) -> Checked {
    let resolved = match name {
        "auth" => (ExprKind::Auth, Ty::Dyn),
        "now" => (ExprKind::Now, Ty::Num),
        "root" => (ExprKind::Root, Ty::Snap),
        "data" => (ExprKind::Data, Ty::Snap),
        "newData" if scope.kind != RuleKind::Read => (ExprKind::NewData, Ty::Snap),
        // Accepted in .write/.validate too, with the values of an unqueried read (§5.3).
        "query" => (ExprKind::Null, Ty::Query),
        _ if name.starts_with('$') => {
            let Some((_, index)) = scope.wildcards.iter().find(|(n, _)| n == name) else {
                return Err((at, LoadError::UnknownVariable(name.to_owned())));
            };
            (ExprKind::Wildcard(*index), Ty::Str)
        }
        _ => return Err((at, LoadError::UnknownVariable(name.to_owned()))),
    };
    Ok(resolved)
}

fn logical(items: &[Ast], op: &str, scope: &Scope<'_>) -> Result<Box<[Expr]>, CheckError> {
    items
        .iter()
        .map(|item| {
            let (expr, ty) = check(item, scope)?;
            if ty != Ty::Bool {
                return Err(type_error(
                    item.at,
                    format!(
                        "{op} only operates on booleans (this operand is {})",
                        ty.name()
                    ),
                ));
            }
            Ok(expr)
        })
        .collect()
}

fn conditional(cond: &Ast, then: &Ast, otherwise: &Ast, scope: &Scope<'_>) -> Checked {
    let (c, cty) = check(cond, scope)?;
    if cty != Ty::Bool {
        return Err(type_error(
            cond.at,
            format!("the condition of '?' must be a boolean, not {}", cty.name()),
        ));
    }
    let (a, aty) = check(then, scope)?;
    let (b, bty) = check(otherwise, scope)?;
    let ty = if aty == bty && aty != Ty::Query {
        aty
    } else if aty.is_structural() || bty.is_structural() {
        return Err(type_error(
            then.at,
            format!(
                "the branches of '?' are {} and {}; they must be values of one kind",
                aty.name(),
                bty.name()
            ),
        ));
    } else if aty == Ty::Dyn || bty == Ty::Dyn {
        Ty::Dyn
    } else {
        Ty::Prim
    };
    Ok((ExprKind::Cond(Box::new((c, a, b))), ty))
}

fn binary(op: BinaryOp, left: &Ast, right: &Ast, scope: &Scope<'_>) -> Checked {
    let (l, lty) = check(left, scope)?;
    let (r, rty) = check(right, scope)?;
    let bad = |ast: &Ast, ty: Ty, what: &str| {
        type_error(ast.at, format!("'{}' {what}, not {}", op.text(), ty.name()))
    };
    let ty = match op {
        BinaryOp::Eq | BinaryOp::Ne => {
            for (ast, ty) in [(left, lty), (right, rty)] {
                if ty.is_structural() {
                    return Err(type_error(
                        ast.at,
                        format!(
                            "{} cannot be compared; compare values (e.g. exists() or val())",
                            ty.name()
                        ),
                    ));
                }
            }
            Ty::Bool
        }
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
            for (ast, ty) in [(left, lty), (right, rty)] {
                if !matches!(ty, Ty::Num | Ty::Str | Ty::Prim | Ty::Dyn) {
                    return Err(bad(ast, ty, "compares numbers or strings"));
                }
            }
            if matches!((lty, rty), (Ty::Num, Ty::Str) | (Ty::Str, Ty::Num)) {
                return Err(type_error(
                    left.at,
                    format!("'{}' cannot compare a number with a string", op.text()),
                ));
            }
            Ty::Bool
        }
        BinaryOp::Add => {
            for (ast, ty) in [(left, lty), (right, rty)] {
                if !matches!(ty, Ty::Num | Ty::Str | Ty::Prim | Ty::Dyn) {
                    return Err(bad(ast, ty, "adds numbers or joins strings"));
                }
            }
            match (lty, rty) {
                (Ty::Str, _) | (_, Ty::Str) => Ty::Str,
                (Ty::Num, Ty::Num) => Ty::Num,
                _ => Ty::Prim,
            }
        }
        BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
            for (ast, ty) in [(left, lty), (right, rty)] {
                if !ty.may_be_number() {
                    return Err(bad(ast, ty, "needs numbers"));
                }
            }
            Ty::Num
        }
    };
    Ok((ExprKind::Binary(op, Box::new((l, r))), ty))
}

/// `target.name` that is not called.
fn property(target: &Ast, name: &str, name_at: usize, scope: &Scope<'_>) -> Checked {
    let (expr, ty) = check(target, scope)?;
    named_property(expr, ty, name, name_at)
}

fn named_property(expr: Expr, ty: Ty, name: &str, name_at: usize) -> Checked {
    match ty {
        Ty::Snap if SNAPSHOT_METHODS.contains(&name) => Err(must_call(name_at, name)),
        Ty::Str | Ty::Prim if name == "length" => Ok((ExprKind::Length(Box::new(expr)), Ty::Num)),
        Ty::Str | Ty::Prim if STRING_METHODS.contains(&name) => Err(must_call(name_at, name)),
        Ty::Dyn => Ok((ExprKind::Member(Box::new(expr), name.into()), Ty::Dyn)),
        Ty::Query => match QueryProp::from_name(name) {
            Some(prop) => {
                let ty = if prop.is_boolean() {
                    Ty::Bool
                } else {
                    Ty::Prim
                };
                Ok((ExprKind::Query(prop), ty))
            }
            None => Err((name_at, LoadError::NoSuchMember(name.to_owned()))),
        },
        _ => Err((name_at, LoadError::NoSuchMember(name.to_owned()))),
    }
}

/// `target[index]` that is not called.
fn computed(target: &Ast, index: &Ast, scope: &Scope<'_>) -> Checked {
    let (expr, ty) = check(target, scope)?;
    if let AstKind::Str(name) = &index.kind {
        return named_property(expr, ty, name, index.at);
    }
    if ty != Ty::Dyn {
        return Err(type_error(
            index.at,
            format!(
                "members of {} can only be named by a string literal",
                ty.name()
            ),
        ));
    }
    let (key, key_ty) = check(index, scope)?;
    if !matches!(key_ty, Ty::Str | Ty::Num | Ty::Prim | Ty::Dyn) {
        return Err(type_error(
            index.at,
            format!("{} cannot name a member", key_ty.name()),
        ));
    }
    Ok((ExprKind::Index(Box::new((expr, key))), Ty::Dyn))
}

fn call(callee: &Ast, args: &[Ast], at: usize, scope: &Scope<'_>) -> Checked {
    let (target, name, name_at) = match &callee.kind {
        AstKind::Member {
            target,
            name,
            name_at,
        } => (target, name.as_str(), *name_at),
        AstKind::Index(target, index) => match &index.kind {
            AstKind::Str(name) => (target, name.as_str(), index.at),
            _ => {
                return Err(type_error(
                    index.at,
                    "a method can only be named by a string literal",
                ))
            }
        },
        _ => return Err(type_error(at, "only methods can be called")),
    };
    let (expr, ty) = check(target, scope)?;
    match ty {
        Ty::Snap if SNAPSHOT_METHODS.contains(&name) => snapshot_call(expr, name, args, at, scope),
        Ty::Str | Ty::Prim | Ty::Dyn if STRING_METHODS.contains(&name) => {
            string_call(expr, name, args, at, scope)
        }
        _ => Err((name_at, LoadError::NoSuchMember(name.to_owned()))),
    }
}

fn snapshot_call(target: Expr, name: &str, args: &[Ast], at: usize, scope: &Scope<'_>) -> Checked {
    let (method, ty) = match name {
        "child" | "hasChild" => {
            arity(name, args, &[1], at)?;
            let path = path_arg(name, &args[0], scope)?;
            if name == "child" {
                (SnapMethod::Child(path), Ty::Snap)
            } else {
                (SnapMethod::HasChild(path), Ty::Bool)
            }
        }
        "hasChildren" => {
            arity(name, args, &[0, 1], at)?;
            match args.first() {
                None => (SnapMethod::HasAnyChildren, Ty::Bool),
                Some(list) => (SnapMethod::HasChildren(list_arg(list, scope)?), Ty::Bool),
            }
        }
        _ => {
            arity(name, args, &[0], at)?;
            match name {
                "val" => (SnapMethod::Val, Ty::Prim),
                "parent" => (SnapMethod::Parent, Ty::Snap),
                "exists" => (SnapMethod::Exists, Ty::Bool),
                "getPriority" => (SnapMethod::GetPriority, Ty::Prim),
                "isNumber" => (SnapMethod::IsNumber, Ty::Bool),
                "isString" => (SnapMethod::IsString, Ty::Bool),
                _ => (SnapMethod::IsBoolean, Ty::Bool),
            }
        }
    };
    Ok((ExprKind::SnapCall(Box::new(target), method), ty))
}

fn path_arg(method: &str, arg: &Ast, scope: &Scope<'_>) -> Result<PathArg, CheckError> {
    if let AstKind::Str(path) = &arg.kind {
        return Ok(PathArg::Literal(split_path(path).collect::<Arc<[_]>>()));
    }
    Ok(PathArg::Dynamic(Box::new(string_arg(method, arg, scope)?)))
}

fn list_arg(arg: &Ast, scope: &Scope<'_>) -> Result<ListArg, CheckError> {
    match &arg.kind {
        AstKind::Array(items) if items.is_empty() => Err(type_error(
            arg.at,
            "hasChildren() needs at least one child name",
        )),
        AstKind::Array(items) => Ok(ListArg::Literal(
            items
                .iter()
                .map(|item| path_arg("hasChildren", item, scope))
                .collect::<Result<_, _>>()?,
        )),
        _ => {
            let (expr, ty) = check(arg, scope)?;
            if ty != Ty::Dyn {
                return Err(type_error(
                    arg.at,
                    format!("hasChildren() takes an array of strings, not {}", ty.name()),
                ));
            }
            Ok(ListArg::Dynamic(Box::new(expr)))
        }
    }
}

fn string_arg(method: &str, arg: &Ast, scope: &Scope<'_>) -> Result<Expr, CheckError> {
    let (expr, ty) = check(arg, scope)?;
    if !ty.may_be_string() {
        return Err(type_error(
            arg.at,
            format!("{method}() takes a string, not {}", ty.name()),
        ));
    }
    Ok(expr)
}

fn string_call(target: Expr, name: &str, args: &[Ast], at: usize, scope: &Scope<'_>) -> Checked {
    let (method, ty) = match name {
        "toLowerCase" | "toUpperCase" => {
            arity(name, args, &[0], at)?;
            let method = if name == "toLowerCase" {
                StrMethod::ToLowerCase
            } else {
                StrMethod::ToUpperCase
            };
            (method, Ty::Str)
        }
        "replace" => {
            arity(name, args, &[2], at)?;
            let from = string_arg(name, &args[0], scope)?;
            let to = string_arg(name, &args[1], scope)?;
            (StrMethod::Replace(Box::new((from, to))), Ty::Str)
        }
        "matches" => {
            arity(name, args, &[1], at)?;
            let AstKind::Regex { body, flags } = &args[0].kind else {
                return Err(type_error(
                    args[0].at,
                    "matches() takes a regular expression literal such as /^[a-z]+$/",
                ));
            };
            let compiled = regex::compile(body, flags)
                .map_err(|reason| (args[0].at, LoadError::Regex(reason)))?;
            (StrMethod::Matches(Box::new(compiled)), Ty::Bool)
        }
        _ => {
            arity(name, args, &[1], at)?;
            let needle = Box::new(string_arg(name, &args[0], scope)?);
            let method = match name {
                "contains" => StrMethod::Contains(needle),
                "beginsWith" => StrMethod::BeginsWith(needle),
                _ => StrMethod::EndsWith(needle),
            };
            (method, Ty::Bool)
        }
    };
    Ok((ExprKind::StrCall(Box::new(target), method), ty))
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
