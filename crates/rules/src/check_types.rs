//! The checker's vocabulary (`check`): the static types of spec §5.3, what an expression
//! may refer to, the method names each type has, and the errors a check reports.

use crate::ast::Ast;
use crate::decision::RuleKind;
use crate::error::LoadError;
use crate::expr::ExprKind;

/// Static types of spec §5.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Bool,
    Num,
    Str,
    Null,
    Snap,
    Query,
    /// A data value of unknown primitive type.
    Prim,
    /// A value from the auth token: anything.
    Dyn,
}

impl Ty {
    pub(super) fn name(self) -> &'static str {
        match self {
            Ty::Bool => "a boolean",
            Ty::Num => "a number",
            Ty::Str => "a string",
            Ty::Null => "null",
            Ty::Snap => "a snapshot",
            Ty::Query => "the query object",
            Ty::Prim => "a data value of unknown type",
            Ty::Dyn => "an auth value",
        }
    }

    /// Types that exist only as method targets, never as values to compare or combine.
    /// (Regex and array literals are not typed at all: they are only accepted, syntactically,
    /// as the arguments of `matches()` and `hasChildren()`.)
    pub(super) fn is_structural(self) -> bool {
        matches!(self, Ty::Snap | Ty::Query)
    }

    /// Types accepted where a string is expected; `prim`/`dyn` are checked at run time, and
    /// `null` fails at run time (spec §5.6 lists `root.child(null)` as a runtime error).
    pub(super) fn may_be_string(self) -> bool {
        matches!(self, Ty::Str | Ty::Prim | Ty::Dyn | Ty::Null)
    }

    pub(super) fn may_be_number(self) -> bool {
        matches!(self, Ty::Num | Ty::Prim | Ty::Dyn)
    }
}

/// What an expression may refer to.
pub(crate) struct Scope<'a> {
    pub kind: RuleKind,
    /// Wildcards bound on the path to the rule: name (with `$`) and the index of its key.
    pub wildcards: &'a [(String, usize)],
}

/// A check failure: byte offset in the expression text and reason.
pub(crate) type CheckError = (usize, LoadError);

/// A checked node's kind and type; `check::check` gives it the span of its syntax.
pub(super) type Checked = Result<(ExprKind, Ty), CheckError>;

pub(super) const SNAPSHOT_METHODS: &[&str] = &[
    "val",
    "child",
    "parent",
    "hasChild",
    "hasChildren",
    "exists",
    "getPriority",
    "isNumber",
    "isString",
    "isBoolean",
];

pub(super) const STRING_METHODS: &[&str] = &[
    "contains",
    "beginsWith",
    "endsWith",
    "replace",
    "toLowerCase",
    "toUpperCase",
    "matches",
];

pub(super) fn type_error(at: usize, message: impl Into<String>) -> CheckError {
    (at, LoadError::Type(message.into()))
}

pub(super) fn must_call(at: usize, name: &str) -> CheckError {
    type_error(
        at,
        format!("'{name}' is a method and must be called: {name}()"),
    )
}

pub(super) fn arity(
    name: &str,
    args: &[Ast],
    counts: &[usize],
    at: usize,
) -> Result<(), CheckError> {
    if counts.contains(&args.len()) {
        return Ok(());
    }
    let expected = match counts {
        [0] => "no arguments".to_owned(),
        [1] => "one argument".to_owned(),
        [2] => "two arguments".to_owned(),
        _ => "no arguments or one array of strings".to_owned(),
    };
    Err(type_error(
        at,
        format!("{name}() takes {expected}, not {}", args.len()),
    ))
}
