//! The outcome of a permission check, with enough detail on denials to debug a rules file:
//! which location, which rule (with its place in the source) and why.

use std::fmt;
use std::sync::Arc;

use hearth_tree::Path;

use crate::value::EvalError;

/// The three rule properties that decide access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    Read,
    Write,
    Validate,
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleKind::Read => ".read",
            RuleKind::Write => ".write",
            RuleKind::Validate => ".validate",
        })
    }
}

/// Whether an operation may proceed.
#[must_use]
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow,
    /// Boxed so that the common `Allow` stays one word.
    Deny(Box<Denial>),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow)
    }

    /// The reason for a denial; `None` when allowed.
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            Decision::Allow => None,
            Decision::Deny(denial) => Some(denial),
        }
    }
}

/// Why an operation was denied.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// The location read, or the written target that failed.
    pub path: Path,
    pub reason: DenialReason,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DenialReason {
    /// No `.read`/`.write` rule on the path granted access. `last` is the deepest rule that
    /// was evaluated (none if there was no rule at all).
    NotGranted {
        kind: RuleKind,
        last: Option<RuleOutcome>,
    },
    /// A `.validate` rule did not pass.
    Invalid(RuleOutcome),
    /// The operation needed more than the step budget of the rules.
    BudgetExhausted { steps: u64 },
}

/// A rule that did not grant, and how it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleOutcome {
    pub site: RuleSite,
    /// The runtime error, or `None` if the rule evaluated to `false`.
    pub error: Option<EvalError>,
}

/// Where a rule is: its place in the rules document (`/rules/users/$uid/.write`), the
/// location it was evaluated at (wildcards filled in) and its position in the rules source.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSite {
    pub kind: RuleKind,
    pub pattern: Arc<str>,
    pub location: Path,
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for RuleSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {} (line {}, column {})",
            self.pattern, self.location, self.line, self.column
        )
    }
}

impl fmt::Display for RuleOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            None => write!(f, "{} evaluated to false", self.site),
            Some(error) => write!(f, "{} failed: {error}", self.site),
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            DenialReason::NotGranted { kind, last: None } => {
                write!(f, "{}: no {kind} rule applies", self.path)
            }
            DenialReason::NotGranted {
                kind,
                last: Some(last),
            } => write!(f, "{}: no {kind} rule granted access; {last}", self.path),
            DenialReason::Invalid(outcome) => write!(f, "{}: {outcome}", self.path),
            DenialReason::BudgetExhausted { steps } => write!(
                f,
                "{}: rule evaluation needed more than {steps} steps",
                self.path
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Path {
        Path::parse(s).expect("valid path")
    }

    #[test]
    fn denials_explain_themselves() {
        let site = RuleSite {
            kind: RuleKind::Validate,
            pattern: Arc::from("/rules/users/$uid/age/.validate"),
            location: path("/users/bob/age"),
            line: 4,
            column: 20,
        };
        let denial = Denial {
            path: path("/users/bob"),
            reason: DenialReason::Invalid(RuleOutcome {
                site: site.clone(),
                error: Some(EvalError::RootParent),
            }),
        };
        assert_eq!(
            denial.to_string(),
            "/users/bob: /rules/users/$uid/age/.validate at /users/bob/age (line 4, column 20) failed: parent() called on the root"
        );
        let not_granted = Denial {
            path: path("/a"),
            reason: DenialReason::NotGranted {
                kind: RuleKind::Read,
                last: None,
            },
        };
        assert_eq!(not_granted.to_string(), "/a: no .read rule applies");
        let decision = Decision::Deny(Box::new(not_granted));
        assert!(!decision.is_allowed());
        assert!(decision.denial().is_some());
        assert!(Decision::Allow.is_allowed());
        assert_eq!(std::mem::size_of::<Decision>(), 8);
    }
}
