//! Who may read and write what: the database's rules, and the identity of each session.

use std::cell::{RefCell, RefMut};
use std::sync::Arc;

use hearth_query::{Index, QueryParams};
use hearth_rules::{Coverage, Decision, RuleSite, Rules};
use hearth_tree::{Node, Path};
use serde_json::Value;

/// The rules a database enforces.
#[derive(Debug, Clone, Default)]
pub enum Access {
    /// Everything is allowed (development mode, before any rules are set).
    #[default]
    Open,
    /// Nothing is allowed except to admins: the safe default of a production server with no
    /// rules configured.
    Locked,
    /// A loaded rules document.
    Rules(Arc<Rules>),
}

/// Who a connection is, as far as the database is concerned.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum AuthState {
    /// No credential: rules see `auth == null`.
    #[default]
    Anonymous,
    /// Full access; rules are bypassed.
    Admin,
    /// An identity; rules see this value as `auth` (`{uid, provider, token}`).
    User(Value),
}

impl AuthState {
    /// The `auth` variable of the rules language.
    fn variable(&self) -> &Value {
        static NULL: Value = Value::Null;
        match self {
            AuthState::User(value) => value,
            AuthState::Anonymous | AuthState::Admin => &NULL,
        }
    }
}

/// A database's rules coverage record, when it keeps one (see `Database::record_coverage`).
/// Checks run behind `&self`, so the record is a `RefCell` of the database's own.
pub(crate) type CoverageSlot = Option<RefCell<Coverage>>;

/// The record to write to, if there is one and it is free (it always is: checks do not nest).
fn observer(slot: &CoverageSlot) -> Option<RefMut<'_, Coverage>> {
    slot.as_ref().and_then(|cell| cell.try_borrow_mut().ok())
}

/// Why an operation was refused, for the reply and the debug log.
pub(crate) struct Refusal {
    pub detail: String,
}

impl Access {
    pub(crate) fn check_read(
        &self,
        coverage: &CoverageSlot,
        auth: &AuthState,
        root: &Node,
        path: &Path,
        query: Option<&QueryParams>,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        if *auth == AuthState::Admin {
            return Ok(());
        }
        match self {
            Access::Open => Ok(()),
            Access::Locked => Err(locked(path)),
            Access::Rules(rules) => {
                let mut coverage = observer(coverage);
                decision(rules.can_read_with(
                    root,
                    path,
                    auth.variable(),
                    query,
                    now_ms,
                    coverage.as_deref_mut(),
                ))
            }
        }
    }

    /// Whether `.indexOn` declares `index` for the children of `path` (key and priority order
    /// need no declaration). Without rules (open or locked) nothing is declared, as with the
    /// Firebase emulator's default rules.
    pub(crate) fn declares_index(&self, path: &Path, index: &Index) -> bool {
        match self {
            Access::Rules(rules) => rules.is_indexed(path, index),
            Access::Open | Access::Locked => matches!(index, Index::Key | Index::Priority),
        }
    }

    /// Checks a write whose targets are `base` joined with each of `relative` (one empty
    /// relative path for a plain set). With `grants`, the rules name in it the `.write` rule
    /// that granted each target (nothing for an admin or open access: no rule was asked);
    /// without, they build no site.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_write(
        &self,
        coverage: &CoverageSlot,
        auth: &AuthState,
        old_root: &Node,
        new_root: &Node,
        base: &Path,
        relative: &[Path],
        now_ms: u64,
        grants: Option<&mut Vec<RuleSite>>,
    ) -> Result<(), Refusal> {
        if *auth == AuthState::Admin {
            return Ok(());
        }
        match self {
            Access::Open => Ok(()),
            Access::Locked => Err(locked(base)),
            Access::Rules(rules) => {
                let mut coverage = observer(coverage);
                let coverage = coverage.as_deref_mut();
                let auth = auth.variable();
                decision(match (relative, grants) {
                    ([only], None) if only.is_root() => {
                        rules.can_write_with(old_root, new_root, base, auth, now_ms, coverage)
                    }
                    ([only], Some(grants)) if only.is_root() => rules.can_write_granted(
                        old_root, new_root, base, auth, now_ms, coverage, grants,
                    ),
                    (_, None) => rules.can_update_with(
                        old_root, new_root, base, relative, auth, now_ms, coverage,
                    ),
                    (_, Some(grants)) => rules.can_update_granted(
                        old_root, new_root, base, relative, auth, now_ms, coverage, grants,
                    ),
                })
            }
        }
    }
}

/// Where a write's targets lie, as far as is known before its data is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteScope {
    /// A set (or delete) of the path itself.
    At,
    /// Targets at or below the path that the data names (a multi-path update), or that are
    /// made later (a push).
    Below,
}

impl Access {
    /// Whether `auth` could be allowed some write in `scope` of `path`, whatever its data:
    /// `false` means the write is refused for sure, so its data need not even be parsed.
    pub fn could_write(&self, auth: &AuthState, path: &Path, scope: WriteScope) -> bool {
        if *auth == AuthState::Admin {
            return true;
        }
        match self {
            Access::Open => true,
            Access::Locked => false,
            Access::Rules(rules) => match scope {
                WriteScope::At => rules.could_set(path, auth.variable()),
                WriteScope::Below => rules.could_write_below(path, auth.variable()),
            },
        }
    }
}

fn locked(path: &Path) -> Refusal {
    Refusal {
        detail: format!("{path}: no rules are configured, so only admins have access"),
    }
}

fn decision(decision: Decision) -> Result<(), Refusal> {
    match decision.denial() {
        None => Ok(()),
        Some(denial) => Err(Refusal {
            detail: denial.to_string(),
        }),
    }
}
