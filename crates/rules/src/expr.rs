//! The checked, resolved form of a rule expression: what the evaluator runs.
//!
//! Everything that can be decided when rules load is decided here, so evaluation does no name
//! lookups and allocates nothing on common paths: variables are resolved (a `$` wildcard
//! becomes the index of its key in the location), members are resolved to the method they
//! name, literal child paths are split into keys once, and regexes are compiled.

use std::sync::Arc;

use hearth_tree::Key;
use regex::Regex;

use crate::ast::BinaryOp;

/// A checked expression node and the byte range of its text in the rule's expression string
/// (for the coverage report; evaluation never reads it).
#[derive(Debug)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub span: (u32, u32),
}

impl From<ExprKind> for Expr {
    fn from(kind: ExprKind) -> Expr {
        Expr { kind, span: (0, 0) }
    }
}

#[derive(Debug)]
pub(crate) enum ExprKind {
    Null,
    Bool(bool),
    Num(f64),
    Str(Box<str>),
    Auth,
    Now,
    Root,
    Data,
    NewData,
    /// A `$` variable: the key at this index of the location path.
    Wildcard(usize),
    Query(QueryProp),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    And(Box<[Expr]>),
    Or(Box<[Expr]>),
    Cond(Box<(Expr, Expr, Expr)>),
    Binary(BinaryOp, Box<(Expr, Expr)>),
    /// A snapshot method called on a snapshot-valued expression.
    SnapCall(Box<Expr>, SnapMethod),
    /// A string method called on a (statically or dynamically) string-valued expression.
    StrCall(Box<Expr>, StrMethod),
    /// `.length` of a string (statically `str` or `prim`).
    Length(Box<Expr>),
    /// A named property of an auth value (`auth.token.email`).
    Member(Box<Expr>, Box<str>),
    /// A computed property of an auth value (`auth.roles[$group]`).
    Index(Box<(Expr, Expr)>),
}

#[derive(Debug)]
pub(crate) enum SnapMethod {
    Val,
    Exists,
    Parent,
    Child(PathArg),
    HasChild(PathArg),
    /// `hasChildren()` without arguments.
    HasAnyChildren,
    HasChildren(ListArg),
    IsNumber,
    IsString,
    IsBoolean,
    GetPriority,
}

/// A relative path argument (`child`, `hasChild`, `hasChildren` elements).
#[derive(Debug)]
pub(crate) enum PathArg {
    /// A string literal, split at load time. `None` marks a segment that cannot be a key
    /// (such a path refers to no data).
    Literal(Arc<[Option<Key>]>),
    Dynamic(Box<Expr>),
}

#[derive(Debug)]
pub(crate) enum ListArg {
    /// An array literal.
    Literal(Box<[PathArg]>),
    /// An auth value that must be an array of strings at run time.
    Dynamic(Box<Expr>),
}

#[derive(Debug)]
pub(crate) enum StrMethod {
    Contains(Box<Expr>),
    BeginsWith(Box<Expr>),
    EndsWith(Box<Expr>),
    Replace(Box<(Expr, Expr)>),
    ToLowerCase,
    ToUpperCase,
    Matches(Box<Regex>),
}

/// The nine properties of the `query` variable (spec §6.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueryProp {
    OrderByKey,
    OrderByPriority,
    OrderByValue,
    OrderByChild,
    StartAt,
    EndAt,
    EqualTo,
    LimitToFirst,
    LimitToLast,
}

impl QueryProp {
    pub fn from_name(name: &str) -> Option<QueryProp> {
        Some(match name {
            "orderByKey" => QueryProp::OrderByKey,
            "orderByPriority" => QueryProp::OrderByPriority,
            "orderByValue" => QueryProp::OrderByValue,
            "orderByChild" => QueryProp::OrderByChild,
            "startAt" => QueryProp::StartAt,
            "endAt" => QueryProp::EndAt,
            "equalTo" => QueryProp::EqualTo,
            "limitToFirst" => QueryProp::LimitToFirst,
            "limitToLast" => QueryProp::LimitToLast,
            _ => return None,
        })
    }

    /// The three ordering flags are booleans; the rest may be null.
    pub fn is_boolean(self) -> bool {
        matches!(
            self,
            QueryProp::OrderByKey | QueryProp::OrderByPriority | QueryProp::OrderByValue
        )
    }
}

/// Splits a relative path as `child()` does: on `/`, ignoring empty segments. A segment that
/// is not a valid key (`a.b`, `$x`) can hold no data and becomes `None`.
pub(crate) fn split_path(path: &str) -> impl Iterator<Item = Option<Key>> + '_ {
    path.split('/')
        .filter(|segment| !segment.is_empty())
        .map(|segment| Key::new(segment).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_like_child() {
        let keys: Vec<Option<String>> = split_path("/a//b.c/d/")
            .map(|k| k.map(|k| k.as_str().to_owned()))
            .collect();
        assert_eq!(keys, [Some("a".into()), None, Some("d".into())]);
        assert_eq!(split_path("").count(), 0);
    }

    #[test]
    fn query_properties() {
        assert_eq!(QueryProp::from_name("equalTo"), Some(QueryProp::EqualTo));
        assert_eq!(QueryProp::from_name("foo"), None);
        assert!(QueryProp::OrderByValue.is_boolean());
        assert!(!QueryProp::LimitToLast.is_boolean());
    }
}
