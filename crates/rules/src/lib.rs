//! hearth-rules: Firebase Realtime Database security rules (spec: `security-rules.md`).
//!
//! Pure like the other core crates: no IO, no clocks (`now_ms` is an argument), no threads.
//!
//! # Loading
//!
//! [`Rules::parse`] reads a rules document — JSON with comments, multi-line strings and
//! trailing commas, at most [`MAX_RULES_BYTES`] — checks its structure, and parses and
//! statically type-checks every expression, as the hosted service does on deploy. A refused
//! document yields a [`RulesError`] that displays as `line L, column C: reason`, pointing into
//! the original text (inside expression strings too). Expressions are compiled once into a
//! resolved tree; evaluation does no name lookups and, on common paths, no allocation.
//!
//! # Checking operations
//!
//! The sync engine asks before it commits a write or registers a listen:
//!
//! * [`Rules::can_read`]`(root, path, auth, query, now_ms)` — a get or listen at `path`.
//! * [`Rules::can_write`]`(old_root, new_root, path, auth, now_ms)` — a set (or delete, or
//!   transaction, or push) at `path`; `new_root` already has the write applied.
//! * [`Rules::can_update`]`(old_root, new_root, base, relative_paths, auth, now_ms)` — a
//!   multi-location update; each `base/relative` target is checked on its own, validation
//!   sees the whole merged update.
//!
//! [`Rules::can_write_granted`] and [`Rules::can_update_granted`] decide the same and also
//! name the `.write` rule that granted each target (a [`RuleSite`]), for an audit trail of
//! who wrote and which rule let them; the plain checks build no site.
//!
//! ```
//! use hearth_rules::Rules;
//! use hearth_tree::{Node, Path};
//! use serde_json::json;
//!
//! let rules = Rules::parse(r#"{
//!   // Everyone may write their own profile.
//!   "rules": { "users": { "$uid": { ".write": "auth != null && auth.uid === $uid" } } }
//! }"#)?;
//! let old = Node::empty();
//! let path = Path::parse("/users/alice")?;
//! let new = old.set(&path, Node::from_json(&json!({"name": "Alice"}))?);
//! assert!(rules.can_write(&old, &new, &path, &json!({"uid": "alice"}), 0).is_allowed());
//! let denied = rules.can_write(&old, &new, &path, &json!(null), 0);
//! assert_eq!(
//!     denied.denial().map(ToString::to_string).as_deref(),
//!     Some("/users/alice: no .write rule granted access; \
//!           /rules/users/$uid/.write at /users/alice (line 3, column 45) evaluated to false")
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `auth` is the `auth` variable: `serde_json::Value::Null` for an unauthenticated client,
//! else the object `{uid, provider, token: {...claims}}`. Privileged (admin) clients bypass
//! rules entirely; the caller does not ask for them (spec §4.7).
//!
//! Each returns a [`Decision`]. A denial carries a [`Denial`]: the path, and which rule
//! failed (its kind, location with wildcards filled in, line and column) and how (false, or
//! the runtime error), for debug logs. Every operation runs under a step budget
//! ([`DEFAULT_STEP_BUDGET`], adjustable with [`Rules::with_step_budget`]); exceeding it denies.
//!
//! # Semantics in brief
//!
//! `.read`/`.write` cascade: the first grant on the path from the root down to the location
//! allows, and deeper rules cannot revoke it. `.validate` does not cascade: for a write, every
//! `.validate` on the target, its ancestors and the written subtree must pass, evaluated over
//! the merged new data and skipped where the new data is null. Literal keys hide a sibling
//! wildcard; `$` variables are strings. A runtime error anywhere fails the whole expression;
//! `&&`, `||` and `?:` short-circuit.
//!
//! # Indexes
//!
//! [`Rules::indexed_on`] and [`Rules::is_indexed`] report the `.indexOn` declarations, so a
//! listen can carry the `no_index` warning and REST can refuse unindexed queries (spec §10).

mod access;
mod ast;
mod check;
mod coverage;
mod decision;
mod document;
mod error;
mod eval;
mod expr;
mod json;
mod lexer;
mod limit_lookup;
mod limits;
mod parser;
mod precheck;
mod query;
mod regex;
mod rules;
mod snapshot;
mod value;
mod volatile;

pub use coverage::{Coverage, MAX_COVERAGE_VALUES, MAX_COVERAGE_VALUE_CHARS};
pub use decision::{Decision, Denial, DenialReason, RuleKind, RuleOutcome, RuleSite};
pub use error::{LoadError, RulesError};
pub use json::MAX_NESTING;
pub use limits::{LimitKey, LimitSpec, Rate, MAX_LIMIT, MAX_LIMIT_DECLARATIONS};
pub use parser::MAX_EXPR_DEPTH;
pub use regex::{MAX_REGEX_PROGRAM_BYTES, MAX_REPEAT};
pub use rules::{Rules, DEFAULT_STEP_BUDGET, MAX_RULES_BYTES};
pub use value::EvalError;
