//! Writes to a database: sets and multi-path updates checked in one order (access before
//! anything that depends on the data), the pre-check that refuses a write before its data is
//! parsed, and the commit that turns a checked write into a log record and pushes.

use std::sync::Arc;

use hearth_tree::{Node, Path};
use serde_json::Value;

use super::volatile::{classify, Classified, MIXED_WRITE_MESSAGE};
use super::{invalid, refused, Database};
use hearth_rules::RuleSite;

use crate::access::{Access, AuthState, Refusal, WriteScope};
use crate::audit::{AuditFacts, AuditOp, Grant, Writer};
use crate::effect::{Effect, Effects};
use crate::events::write_events;
use crate::limits::MAX_MERGE_ENTRIES;
use crate::request::{ConnId, Reply, ReplyData, Status};
use crate::server_values::{resolve_server_values, ServerValueError};
use crate::triggers::{self, Following, Trigger, TriggerChange, TriggerSource};
use crate::write::{
    change_from_json, check_disjoint, PreparedSet, Write, WriteError, WriteOp, WriteTarget,
};

/// A compare-and-set condition: the write applies only if the node at `path` has the node
/// hash `hash` (spec §10; the empty string for an empty location).
#[derive(Debug, Clone, Copy)]
pub struct Condition<'a> {
    pub path: &'a Path,
    pub hash: &'a str,
}

/// A write that passed every check. It borrows the database mutably, so nothing can change
/// between the checks and [`CheckedWrite::commit`]; dropping it abandons the write. It lets a
/// caller make a last check of its own after the access checks (REST's `writeSizeLimit`).
pub struct CheckedWrite<'a> {
    database: &'a mut Database,
    write: Write,
    new_root: Node,
    volatile: bool,
    /// Who writes, kept only for a database with triggers (their events name the writer).
    writer: Option<AuthState>,
    /// The changes it makes for the database's triggers, found while checking it.
    triggered: Option<(Vec<TriggerChange>, usize)>,
    /// Its audit record, made only on an audited database and for a logged (not volatile)
    /// write: who writes, how, and the grant the access check found.
    audit: Option<Box<AuditFacts>>,
}

impl CheckedWrite<'_> {
    /// The data as it is before the write.
    pub fn current(&self) -> &Node {
        &self.database.root
    }

    /// Applies the write: its log record and pushes are appended to `out`.
    pub fn commit(self, out: &mut Effects) {
        if self.write.ops.is_empty() {
            return;
        }
        if self.volatile {
            self.database
                .commit_volatile(self.write, self.new_root, out);
        } else {
            self.database.commit(
                self.write,
                self.new_root,
                self.writer,
                self.triggered,
                self.audit,
                out,
            );
        }
    }

    /// Marks the write as one an onDisconnect queue made, for its audit record (it was
    /// checked as the set or update it is).
    pub(super) fn on_disconnect(mut self) -> Self {
        if let Some(audit) = &mut self.audit {
            audit.op = AuditOp::OnDisconnect;
        }
        self
    }
}

impl Database {
    /// Replaces the database's triggers: the writes from now on report their changes to
    /// these.
    pub fn set_triggers(&mut self, triggers: Arc<[Trigger]>) {
        self.triggers = triggers;
    }

    /// `strictTriggerValidation` (on unless set otherwise): whether a write that would
    /// trigger more than one write may, or send an event larger than one may, is refused.
    pub fn set_strict_triggers(&mut self, strict: bool) {
        self.lenient_triggers = !strict;
    }

    /// Runs `f` with `strictTriggerValidation` off: for writes whose changes no trigger is
    /// told of (the emulator suite's import, `disableTriggers`).
    pub fn without_trigger_validation<R>(&mut self, f: impl FnOnce(&mut Database) -> R) -> R {
        let lenient = std::mem::replace(&mut self.lenient_triggers, true);
        let result = f(self);
        self.lenient_triggers = lenient;
        result
    }

    /// Takes the database's triggers from the source `source` gives from now on, under the
    /// name `database` (kept if it follows a source already: `source` is then not called).
    pub fn follow_triggers<S: TriggerSource + 'static>(
        &mut self,
        source: impl FnOnce() -> Arc<S>,
        database: &str,
    ) {
        if self.following.is_none() {
            self.following = Some(Following {
                source: source(),
                database: Arc::from(database),
                generation: u64::MAX,
            });
        }
    }

    /// Takes the triggers anew when the source changed since they were taken (one atomic
    /// read otherwise).
    fn refresh_triggers(&mut self) {
        if let Some(following) = &mut self.following {
            let generation = following.source.generation();
            if generation != following.generation {
                following.generation = generation;
                self.triggers = following.source.triggers_of(&following.database);
            }
        }
    }

    /// Replaces the value at `target` with admin rights (no rules); with `hash`, only if the
    /// current value hashes to it.
    pub fn put(
        &mut self,
        target: &WriteTarget,
        data: &Value,
        hash: Option<&str>,
        now_ms: u64,
        out: &mut Effects,
    ) -> Result<(), Reply> {
        self.put_as(&AuthState::Admin, target, data, hash, now_ms, out)
    }

    /// Replaces the value at `target` if `auth` may write it; with `hash`, only if the current
    /// value hashes to it.
    pub fn put_as(
        &mut self,
        auth: &AuthState,
        target: &WriteTarget,
        data: &Value,
        hash: Option<&str>,
        now_ms: u64,
        out: &mut Effects,
    ) -> Result<(), Reply> {
        let condition = hash.map(|hash| Condition {
            path: &target.path,
            hash,
        });
        self.prepare_put(auth, target, data, condition, now_ms)?
            .commit(out);
        Ok(())
    }

    /// Checks a set of `target` to `data` by `auth`, with an optional compare-and-set
    /// `condition`, and returns it ready to commit. Refusals come in an order that tells a
    /// refused caller nothing of data it may not read (see [`Database::check`]).
    pub fn prepare_put(
        &mut self,
        auth: &AuthState,
        target: &WriteTarget,
        data: &Value,
        condition: Option<Condition<'_>>,
        now_ms: u64,
    ) -> Result<CheckedWrite<'_>, Reply> {
        let existing = self.root.get(&target.path);
        let (mut op, data_error) = resolve_op(&Path::root(), target, data, &existing, now_ms)?;
        // A set is one operation at the write's base.
        op.path = Path::root();
        let write = Write {
            base: target.path.clone(),
            ops: vec![op],
        };
        self.check(
            auth,
            set_op(&condition),
            write,
            data_error,
            condition,
            now_ms,
        )
    }

    /// [`Database::prepare_put`] for data converted ahead (see [`PreparedSet`]): the same
    /// checks in the same order, without the conversion.
    pub fn prepare_put_prepared(
        &mut self,
        auth: &AuthState,
        target: &WriteTarget,
        data: PreparedSet,
        condition: Option<Condition<'_>>,
        now_ms: u64,
    ) -> Result<CheckedWrite<'_>, Reply> {
        let write = Write {
            base: target.path.clone(),
            ops: vec![WriteOp {
                path: Path::root(),
                change: data.into_change(),
            }],
        };
        self.check(auth, set_op(&condition), write, None, condition, now_ms)
    }

    /// Applies a multi-path update atomically with admin rights (no rules).
    pub fn merge(
        &mut self,
        path: &Path,
        entries: &[(WriteTarget, Value)],
        now_ms: u64,
        out: &mut Effects,
    ) -> Result<(), Reply> {
        self.merge_as(&AuthState::Admin, path, entries, now_ms, out)
    }

    /// Applies a multi-path update atomically if `auth` may write every one of its paths.
    pub fn merge_as(
        &mut self,
        auth: &AuthState,
        path: &Path,
        entries: &[(WriteTarget, Value)],
        now_ms: u64,
        out: &mut Effects,
    ) -> Result<(), Reply> {
        self.prepare_merge(auth, path, entries, None, now_ms)?
            .commit(out);
        Ok(())
    }

    /// Checks a multi-path update by `auth`, with an optional compare-and-set `condition`,
    /// and returns it ready to commit (see [`Database::prepare_put`]).
    pub fn prepare_merge(
        &mut self,
        auth: &AuthState,
        path: &Path,
        entries: &[(WriteTarget, Value)],
        condition: Option<Condition<'_>>,
        now_ms: u64,
    ) -> Result<CheckedWrite<'_>, Reply> {
        let (write, data_error) = self.resolve_merge(path, entries, now_ms)?;
        self.check(auth, AuditOp::Update, write, data_error, condition, now_ms)
    }

    /// Decides whether `auth` may make `write`, in an order chosen so that a refused caller
    /// gets the same answer whatever the hidden data holds: first the access checks (the
    /// rules, and for a compare-and-set the right to read its location, since its answer
    /// tells whether the hash matches), then what depends on the data: the hash, then an
    /// error found while resolving server values against the data (`data_error`). `op` is
    /// what kind of request it is, for its audit record on an audited database.
    pub(super) fn check(
        &mut self,
        auth: &AuthState,
        op: AuditOp,
        write: Write,
        data_error: Option<WriteError>,
        condition: Option<Condition<'_>>,
        now_ms: u64,
    ) -> Result<CheckedWrite<'_>, Reply> {
        self.refresh_triggers();
        let new_root = write.apply(&self.root);
        if write.ops.is_empty() && condition.is_none() {
            // An empty update changes nothing and is not logged.
            return Ok(CheckedWrite {
                database: self,
                write,
                new_root,
                volatile: false,
                writer: None,
                triggered: None,
                audit: None,
            });
        }
        self.check_writable()?;
        if let Some(condition) = &condition {
            self.access
                .check_read(
                    &self.coverage,
                    auth,
                    &self.root,
                    condition.path,
                    None,
                    now_ms,
                )
                .map_err(|refusal| self.denied(0, &refusal))?;
        }
        // An audited database asks the rules which of them granted; the others do not pay
        // for it.
        let grant = if self.audited {
            self.check_write_granted(auth, &write, &new_root, now_ms)
                .map(Some)
        } else {
            self.check_write(auth, &write, &new_root, now_ms)
                .map(|()| None)
        }
        .map_err(|refusal| self.denied(0, &refusal))?;
        // Whether a write mixes volatile and durable paths depends on its paths and the
        // rules only; it is told after the rules allowed the write, so that it tells a refused
        // caller nothing of the rules either.
        let volatile = match classify(&self.access, &write) {
            Classified::Durable => false,
            Classified::Volatile => true,
            Classified::Mixed => {
                return Err(Reply::error(Status::InvalidData, MIXED_WRITE_MESSAGE))
            }
        };
        if let Some(condition) = &condition {
            // Either client's form of the hash: the Java client prints some numbers
            // differently (`Node::hash_matches`), and the second form is computed only when
            // the first does not match.
            if !self.root.get(condition.path).hash_matches(condition.hash) {
                return Err(Reply {
                    status: Status::DataStale,
                    data: ReplyData::EmptyText,
                });
            }
        }
        if let Some(error) = data_error {
            return Err(invalid(error));
        }
        let writer = (!self.triggers.is_empty()).then(|| auth.clone());
        let triggered = (!self.triggers.is_empty() && !volatile)
            .then(|| triggers::changes(&self.triggers, &write, &self.root, &new_root));
        if let (Some((changes, dropped)), false) = (&triggered, self.lenient_triggers) {
            if let Some(reason) = triggers::check_limits(changes, *dropped) {
                return Err(Reply::error(Status::LimitExceeded, reason));
            }
        }
        // A volatile write is not logged, so it has no audit record either.
        let audit = grant.filter(|_| !volatile).map(|grant| {
            Box::new(AuditFacts {
                writer: Writer::of(auth),
                op,
                grant,
            })
        });
        Ok(CheckedWrite {
            database: self,
            write,
            new_root,
            volatile,
            writer,
            triggered,
            audit,
        })
    }

    /// Checks that `auth` may read `path` (with no query), for answers that reveal something
    /// of its data without sending it (REST ETags).
    pub fn check_read_as(&self, auth: &AuthState, path: &Path, now_ms: u64) -> Result<(), Reply> {
        self.access
            .check_read(&self.coverage, auth, &self.root, path, None, now_ms)
            .map_err(|refusal| self.denied(0, &refusal))
    }

    /// Refuses at once a write that `conn` could never be allowed, whatever its data (see
    /// [`Access::could_write`]), with the reply the full check would give; called before the
    /// data is parsed. A connection that is not open is left for [`Database::handle`].
    pub fn precheck_write(
        &self,
        conn: ConnId,
        path: &Path,
        scope: WriteScope,
    ) -> Result<(), Reply> {
        match self.sessions.get(&conn) {
            Some(session) => self.precheck_write_as(&session.auth, path, scope),
            None => Ok(()),
        }
    }

    /// [`Database::precheck_write`] for a caller with the rights of `auth` (REST).
    pub fn precheck_write_as(
        &self,
        auth: &AuthState,
        path: &Path,
        scope: WriteScope,
    ) -> Result<(), Reply> {
        // A read-only database answers so whoever asks, as the full check does first.
        self.check_writable()?;
        precheck(
            &self.access,
            auth,
            path,
            scope,
            self.explain_refusals.as_deref(),
        )
    }

    /// What [`Database::precheck_write`] decides for `conn`, detached from the database (see
    /// [`WritePrecheck`]); `None` when the connection is not open.
    pub fn write_precheck(&self, conn: ConnId) -> Option<WritePrecheck> {
        let session = self.sessions.get(&conn)?;
        Some(WritePrecheck {
            access: self.access.clone(),
            auth: session.auth.clone(),
            read_only: self.read_only.clone(),
            explain_refusals: self.explain_refusals.clone(),
        })
    }

    /// Resolves a multi-path update against the current data; the first error that depends
    /// on the data comes back beside the write (see [`Database::check`]).
    pub(super) fn resolve_merge(
        &self,
        path: &Path,
        entries: &[(WriteTarget, Value)],
        now_ms: u64,
    ) -> Result<(Write, Option<WriteError>), Reply> {
        if entries.len() > MAX_MERGE_ENTRIES {
            return Err(invalid(WriteError::TooManyEntries {
                limit: MAX_MERGE_ENTRIES,
            }));
        }
        let mut ops = Vec::with_capacity(entries.len());
        let mut first_data_error = None;
        for (target, data) in entries {
            let existing = self.root.get(&path.join(&target.path));
            let (op, data_error) = resolve_op(path, target, data, &existing, now_ms)?;
            ops.push(op);
            first_data_error = first_data_error.or(data_error);
        }
        check_disjoint(&ops).map_err(invalid)?;
        let write = Write {
            base: path.clone(),
            ops,
        };
        Ok((write, first_data_error))
    }

    /// Checks `write`, which would turn the current root into `new_root`, against the rules
    /// as `auth`.
    pub(super) fn check_write(
        &self,
        auth: &AuthState,
        write: &Write,
        new_root: &Node,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        self.check_write_rules(auth, write, new_root, now_ms, None)
    }

    /// [`Database::check_write`], also telling why the write is allowed: an admin's, open
    /// access, or the `.write` rules that granted its targets.
    pub(super) fn check_write_granted(
        &self,
        auth: &AuthState,
        write: &Write,
        new_root: &Node,
        now_ms: u64,
    ) -> Result<Grant, Refusal> {
        if *auth == AuthState::Admin {
            return Ok(Grant::Admin);
        }
        if matches!(self.access, Access::Open) {
            return Ok(Grant::Open);
        }
        let mut sites = Vec::new();
        self.check_write_rules(auth, write, new_root, now_ms, Some(&mut sites))?;
        Ok(Grant::from_sites(&sites))
    }

    /// The rules' check of `write` (none for an admin or open access), reporting each
    /// granting rule into `sites` when given.
    fn check_write_rules(
        &self,
        auth: &AuthState,
        write: &Write,
        new_root: &Node,
        now_ms: u64,
        sites: Option<&mut Vec<RuleSite>>,
    ) -> Result<(), Refusal> {
        if *auth == AuthState::Admin || matches!(self.access, Access::Open) {
            return Ok(());
        }
        let relative: Vec<Path> = write.ops.iter().map(|op| op.path.clone()).collect();
        self.access.check_write(
            &self.coverage,
            auth,
            &self.root,
            new_root,
            &write.base,
            &relative,
            now_ms,
            sites,
        )
    }

    /// Applies a resolved write: the new root replaces the old one, the write goes to the log,
    /// and every affected view gets its push.
    pub(super) fn commit(
        &mut self,
        write: Write,
        new_root: Node,
        writer: Option<AuthState>,
        triggered: Option<(Vec<TriggerChange>, usize)>,
        audit: Option<Box<AuditFacts>>,
        out: &mut Effects,
    ) {
        let old_root = std::mem::replace(&mut self.root, new_root);
        self.stats.writes += 1;
        let write = Arc::new(write);
        out.push(Effect::Log(write.clone()));
        if let Some(audit) = audit {
            out.push(Effect::Audit(audit));
        }
        if let Some((changes, dropped)) = triggered {
            if !changes.is_empty() || dropped > 0 {
                out.push(Effect::Triggered {
                    changes,
                    dropped,
                    writer: writer.unwrap_or_default(),
                });
            }
        }
        let before = out.len();
        write_events(&mut self.views, &write, &old_root, &self.root, out);
        self.stats.pushes += (out.len() - before) as u64;
    }
}

/// [`Database::precheck_write`] as of one moment, detached from the database: the rules, the
/// connection's identity and the read-only state, shared in O(1). It lets a large message be
/// checked where it is decoded, away from the engine's thread, before its data is parsed. The
/// full check runs in the engine later, against the rules of then.
#[derive(Debug, Clone)]
pub struct WritePrecheck {
    access: Access,
    auth: AuthState,
    read_only: Option<Arc<str>>,
    explain_refusals: Option<Arc<str>>,
}

impl WritePrecheck {
    /// The reply [`Database::precheck_write`] would give.
    pub fn check(&self, path: &Path, scope: WriteScope) -> Result<(), Reply> {
        if let Some(reason) = &self.read_only {
            return Err(Reply::error(Status::Unavailable, reason.to_string()));
        }
        precheck(
            &self.access,
            &self.auth,
            path,
            scope,
            self.explain_refusals.as_deref(),
        )
    }
}

/// Refuses a write that `auth` could never be allowed under `access`, whatever its data.
fn precheck(
    access: &Access,
    auth: &AuthState,
    path: &Path,
    scope: WriteScope,
    explain: Option<&str>,
) -> Result<(), Reply> {
    if access.could_write(auth, path, scope) {
        return Ok(());
    }
    let mut detail = format!("{path}: no rule could allow this write, whatever its data");
    // Explained only when asked, after the refusal: allowed writes never pay for it.
    if let (Some(_), Access::Rules(rules)) = (explain, access) {
        let sites: Vec<String> = rules
            .write_rules_on(path)
            .iter()
            .map(ToString::to_string)
            .collect();
        if sites.is_empty() {
            detail.push_str("; no .write rule applies here");
        } else {
            detail.push_str(&format!("; the .write rules here: {}", sites.join(", ")));
        }
    }
    let refusal = Refusal { detail };
    Err(refused(explain, 0, &refusal))
}

/// The kind of a set for its audit record: a compare-and-set is a transaction's.
fn set_op(condition: &Option<Condition<'_>>) -> AuditOp {
    match condition {
        Some(_) => AuditOp::Transaction,
        None => AuditOp::Set,
    }
}

/// Resolves one operation's server values against `existing` and converts it. `base` is the
/// write's base path; `target` is relative to it. The refusal returned depends only on the
/// request; an error that depends on `existing` comes back beside the operation, to be
/// reported only after the access checks (see [`Database::check`]).
pub(super) fn resolve_op(
    base: &Path,
    target: &WriteTarget,
    data: &Value,
    existing: &Node,
    now_ms: u64,
) -> Result<(WriteOp, Option<WriteError>), Reply> {
    let server_value_error = |error: ServerValueError| WriteError::ServerValue(error.to_string());
    let resolved = resolve_server_values(data, existing, now_ms)
        .map_err(|error| invalid(server_value_error(error)))?;
    let absolute = WriteTarget {
        path: base.join(&target.path),
        priority_only: target.priority_only,
    };
    let change =
        change_from_json(&absolute, resolved.value.as_ref().unwrap_or(data)).map_err(invalid)?;
    let op = WriteOp {
        path: target.path.clone(),
        change,
    };
    Ok((op, resolved.data_error.map(server_value_error)))
}
