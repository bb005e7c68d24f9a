//! One database: its tree, its views and the sessions of the connections that use it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use hearth_query::{OrderedIndex, QueryParams};
use hearth_rules::Coverage;
use hearth_tree::{Node, Path};
use serde_json::Value;

use crate::access::{Access, AuthState, CoverageSlot, Refusal};
use crate::audit::AuditOp;
use crate::effect::{Effect, Effects, Push, PushData, Target};
use crate::limits::MAX_LISTENS_PER_SESSION;
use crate::ondisconnect::{OnDisconnectQueue, QueuedOp};
use crate::request::{ConnId, Reply, ReplyData, Request, Status, Tag};
use crate::triggers::{Following, Trigger};
use crate::views::{ViewId, Views};
use crate::write::{Write, WriteError};

#[path = "database_writes.rs"]
mod writes;

#[path = "database_volatile.rs"]
mod volatile;

pub use volatile::{MAX_VOLATILE_PATHS_PER_TICK, MIXED_WRITE_MESSAGE};
use writes::resolve_op;
pub use writes::{CheckedWrite, Condition, WritePrecheck};

/// Counters of one database, summed by the runtime when read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatabaseStats {
    pub writes: u64,
    pub listens: u64,
    pub gets: u64,
    pub pushes: u64,
}

/// One listen of a session: its view, and the query object as the client sent it (a cancel
/// push must echo it).
struct ListenEntry {
    view: ViewId,
    query_wire: Option<Value>,
}

#[derive(Default)]
struct Session {
    auth: AuthState,
    listens: HashMap<(Path, Option<Tag>), ListenEntry>,
    on_disconnect: OnDisconnectQueue,
}

/// The state machine of one database. Every method takes the time it may need as an argument
/// and appends what must be sent or logged to an [`Effects`] list.
#[derive(Default)]
pub struct Database {
    root: Node,
    access: Access,
    views: Views,
    sessions: HashMap<ConnId, Session>,
    stats: DatabaseStats,
    /// Why writes are refused, when they are (the server's log failed).
    read_only: Option<Arc<str>>,
    /// The database's name, when refusals are explained in the log at `info` (development);
    /// otherwise they go to `debug`.
    explain_refusals: Option<Arc<str>>,
    /// Volatile changes waiting for the next tick.
    volatile: volatile::PendingVolatile,
    /// What the rules' expressions evaluated to, when the server keeps that (the emulator's
    /// rules coverage, `--dev`): `Some` from `record_coverage`, reset with every new rules
    /// document.
    coverage: CoverageSlot,
    recording_coverage: bool,
    /// The triggers of the database (`triggers`): a write that changes one of their paths
    /// reports the change ([`Effect::Triggered`]); taken anew from `following`, when set,
    /// whenever its generation moved.
    triggers: Arc<[Trigger]>,
    following: Option<Following>,
    /// Whether `strictTriggerValidation` is off: a write past the triggers' limits is applied
    /// and delivered in part rather than refused (`triggers::check_limits`).
    lenient_triggers: bool,
    /// Whether each applied write is followed by its [`Effect::Audit`] (who, how, which
    /// rule). Off, the write path builds nothing for it.
    audited: bool,
}

impl Database {
    pub fn new() -> Database {
        Database::default()
    }

    /// A database that starts from `root` (after recovery, or for tests).
    pub fn with_root(root: Node) -> Database {
        Database {
            root,
            ..Database::default()
        }
    }

    /// The current tree. Cloning it is O(1), so a snapshot never stops writers.
    /// Whether the rules' `.indexOn` declares `index` for the children of `path` (key and
    /// priority order need none): what a profiler reports of a listen's query.
    pub fn declares_index(&self, path: &Path, index: &hearth_query::Index) -> bool {
        self.access.declares_index(path, index)
    }

    pub fn root(&self) -> &Node {
        &self.root
    }

    pub fn stats(&self) -> DatabaseStats {
        self.stats
    }

    /// The number of live views (distinct listened path and query pairs).
    pub fn view_count(&self) -> usize {
        self.views.len()
    }

    /// The number of live ordered indexes (`.indexOn` locations and indexes that filtered
    /// views read their windows from).
    pub fn index_count(&self) -> usize {
        self.views.index_count()
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// The listens a connection holds: their paths and tags.
    pub fn listens_of(&self, conn: ConnId) -> impl Iterator<Item = (&Path, Option<Tag>)> {
        self.sessions
            .get(&conn)
            .into_iter()
            .flat_map(|session| session.listens.keys().map(|(path, tag)| (path, *tag)))
    }

    /// Whether a connection holds the listen at `path` with `tag`.
    pub fn holds_listen(&self, conn: ConnId, path: &Path, tag: Option<Tag>) -> bool {
        self.sessions
            .get(&conn)
            .is_some_and(|session| session.listens.contains_key(&(path.clone(), tag)))
    }

    /// Registers a connection.
    pub fn connect(&mut self, conn: ConnId) {
        self.sessions.entry(conn).or_default();
    }

    /// Changes a session's identity. Listens it may no longer read are revoked.
    pub fn set_auth(&mut self, conn: ConnId, auth: AuthState, now_ms: u64, out: &mut Effects) {
        let Some(session) = self.sessions.get_mut(&conn) else {
            return;
        };
        session.auth = auth;
        self.revoke_unreadable(Some(conn), now_ms, out);
    }

    /// Keeps a rules coverage record from now on: what each expression of the rules evaluated
    /// to, for [`Database::coverage_report`]. It starts empty with every new rules document.
    pub fn record_coverage(&mut self) {
        self.recording_coverage = true;
        self.reset_coverage();
    }

    fn reset_coverage(&mut self) {
        self.coverage = match &self.access {
            Access::Rules(rules) if self.recording_coverage => {
                Some(RefCell::new(Coverage::new(rules)))
            }
            _ => None,
        };
    }

    /// The rules coverage report, as JSON (the emulator's `coverage.json`) or, with a title,
    /// as an HTML page; `None` when no record is kept or the database has no rules document.
    pub fn coverage_report(&self, html_title: Option<&str>) -> Option<String> {
        let (Access::Rules(rules), Some(coverage)) = (&self.access, &self.coverage) else {
            return None;
        };
        let coverage = coverage.try_borrow().ok()?;
        Some(match html_title {
            Some(title) => coverage.report_html(rules, title),
            None => coverage.report_json(rules),
        })
    }

    /// Replaces the database's rules. Listens that are no longer readable are revoked.
    pub fn set_access(&mut self, access: Access, now_ms: u64, out: &mut Effects) {
        self.access = access;
        self.reset_coverage();
        self.revoke_unreadable(None, now_ms, out);
        // Indexes follow `.indexOn`: those the new rules declare are built for the views
        // that can use them, and those they no longer declare are dropped.
        let access = &self.access;
        self.views
            .reindex(&self.root, |path, index| access.declares_index(path, index));
    }

    pub fn access(&self) -> &Access {
        &self.access
    }

    /// Audits every write applied from now on (`true`): each one's [`Effect::Log`] is followed
    /// by an [`Effect::Audit`] naming who wrote, how, and the rule that allowed it. Off by
    /// default, and then writes pay nothing for it (no allocation, no extra rule work).
    pub fn set_audited(&mut self, on: bool) {
        self.audited = on;
    }

    /// Whether the database's writes are audited (see [`Database::set_audited`]).
    pub fn is_audited(&self) -> bool {
        self.audited
    }

    /// Applies a write that another node already checked and applied: a follower's copy of
    /// the database (`hearth-server`'s `replica`). No rules, no read-only check and no pushes:
    /// a follower's copy has no listeners (its clients are served by the owner).
    pub fn apply_replicated(&mut self, write: &Write) {
        self.root = write.apply(&self.root);
    }

    /// Refuses every write from now on (`Some`, with the reason the clients are given), or
    /// accepts them again (`None`). Reads and listens go on. onDisconnect writes that run while
    /// writes are refused are dropped.
    pub fn set_read_only(&mut self, reason: Option<Arc<str>>) {
        self.read_only = reason;
    }

    /// Logs each refusal by the rules at `info`, under the database's `name`, with the rule
    /// that refused and its line and column (development: the person reading the log wrote
    /// the rules); `None` logs them at `debug`. The client is told nothing more either way.
    pub fn explain_refusals(&mut self, name: Option<Arc<str>>) {
        self.explain_refusals = name;
    }

    /// Why writes are refused, if they are.
    pub fn read_only_reason(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    fn check_writable(&self) -> Result<(), Reply> {
        match &self.read_only {
            None => Ok(()),
            Some(reason) => Err(Reply::error(Status::Unavailable, reason.to_string())),
        }
    }

    /// Re-checks the listens of one session (or of all) and cancels each one that its
    /// session may no longer read.
    fn revoke_unreadable(&mut self, only: Option<ConnId>, now_ms: u64, out: &mut Effects) {
        let mut revoked = Vec::new();
        for (&conn, session) in &self.sessions {
            if only.is_some_and(|only| only != conn) {
                continue;
            }
            for ((path, tag), entry) in &session.listens {
                let query = self.views.get(entry.view).map(|view| &view.query);
                if let Err(refusal) = self.access.check_read(
                    &self.coverage,
                    &session.auth,
                    &self.root,
                    path,
                    query,
                    now_ms,
                ) {
                    tracing::debug!(conn, path = %path, reason = %refusal.detail, "listen revoked");
                    revoked.push((conn, path.clone(), *tag));
                }
            }
        }
        for (conn, path, tag) in revoked {
            let Some(session) = self.sessions.get_mut(&conn) else {
                continue;
            };
            if let Some(entry) = session.listens.remove(&(path.clone(), tag)) {
                self.views.unsubscribe(entry.view, Target { conn, tag });
                out.push(Effect::Cancel {
                    conn,
                    path,
                    query_wire: entry.query_wire,
                });
            }
        }
    }

    pub fn auth(&self, conn: ConnId) -> Option<&AuthState> {
        self.sessions.get(&conn).map(|session| &session.auth)
    }

    /// Ends a connection's session without running its onDisconnect queue: its listens go and
    /// its queue is dropped. For a session that moves to another server while its client
    /// stays connected (the client did not disconnect; its queue is set up there again).
    pub fn leave(&mut self, conn: ConnId) {
        let Some(mut session) = self.sessions.remove(&conn) else {
            return;
        };
        for ((_, tag), entry) in session.listens.drain() {
            self.views.unsubscribe(entry.view, Target { conn, tag });
        }
    }

    /// Ends a connection: drops its listens, then runs its onDisconnect queue as ordinary
    /// writes, with server values resolved at `now_ms`.
    pub fn disconnect(&mut self, conn: ConnId, now_ms: u64, out: &mut Effects) {
        let Some(mut session) = self.sessions.remove(&conn) else {
            return;
        };
        for ((_, tag), entry) in session.listens.drain() {
            self.views.unsubscribe(entry.view, Target { conn, tag });
        }
        for op in session.on_disconnect.take() {
            // Each queued write is checked again, with the session's identity, against the
            // data of now. One that is refused or no longer applies is dropped: there is nobody
            // left to tell.
            let checked = match &op {
                QueuedOp::Put { target, data } => {
                    self.prepare_put(&session.auth, target, data, None, now_ms)
                }
                QueuedOp::Merge { path, entries } => {
                    self.prepare_merge(&session.auth, path, entries, None, now_ms)
                }
            };
            let result = checked.map(|checked| checked.on_disconnect().commit(out));
            if let Err(reply) = result {
                tracing::debug!(conn, ?reply, "onDisconnect write dropped");
            }
        }
    }

    /// Handles one request of `conn` and returns its reply. Pushes that must precede the reply
    /// are appended to `out`.
    pub fn handle(
        &mut self,
        conn: ConnId,
        request: Request,
        now_ms: u64,
        out: &mut Effects,
    ) -> Reply {
        if !self.sessions.contains_key(&conn) {
            return Reply::error(Status::Unavailable, "the connection is not open");
        }
        match request {
            Request::Listen {
                path,
                query,
                query_wire,
                tag,
                hash,
            } => self.listen(conn, path, query, query_wire, tag, hash, now_ms, out),
            Request::Unlisten { path, tag } => self.unlisten(conn, path, tag),
            Request::Put { target, data, hash } => {
                let auth = self.session_auth(conn);
                match self.put_as(&auth, &target, &data, hash.as_deref(), now_ms, out) {
                    Ok(()) => Reply::write_ok(),
                    Err(reply) => reply,
                }
            }
            Request::PutPrepared { target, data, hash } => {
                let auth = self.session_auth(conn);
                let condition = hash.as_deref().map(|hash| Condition {
                    path: &target.path,
                    hash,
                });
                match self.prepare_put_prepared(&auth, &target, data, condition, now_ms) {
                    Ok(checked) => {
                        checked.commit(out);
                        Reply::write_ok()
                    }
                    Err(reply) => reply,
                }
            }
            Request::Merge { path, entries } => {
                let auth = self.session_auth(conn);
                match self.merge_as(&auth, &path, &entries, now_ms, out) {
                    Ok(()) => Reply::write_ok(),
                    Err(reply) => reply,
                }
            }
            Request::MergePrepared { path, entries } => {
                let auth = self.session_auth(conn);
                let write = Write {
                    base: path,
                    ops: entries.into_ops(),
                };
                match self.check(&auth, AuditOp::Update, write, None, None, now_ms) {
                    Ok(checked) => {
                        checked.commit(out);
                        Reply::write_ok()
                    }
                    Err(reply) => reply,
                }
            }
            Request::OnDisconnectPut { target, data } => {
                self.queue(conn, QueuedOp::Put { target, data }, now_ms)
            }
            Request::OnDisconnectMerge { path, entries } => {
                self.queue(conn, QueuedOp::Merge { path, entries }, now_ms)
            }
            Request::OnDisconnectCancel { path } => {
                if let Some(session) = self.sessions.get_mut(&conn) {
                    session.on_disconnect.cancel(&path);
                }
                Reply::write_ok()
            }
            Request::Get { path, query } => {
                self.stats.gets += 1;
                let auth = self.session_auth(conn);
                if let Err(refusal) = self.access.check_read(
                    &self.coverage,
                    &auth,
                    &self.root,
                    &path,
                    Some(&query),
                    now_ms,
                ) {
                    return self.denied(conn, &refusal);
                }
                Reply {
                    status: Status::Ok,
                    data: ReplyData::Value(self.query_result(&path, &query)),
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn listen(
        &mut self,
        conn: ConnId,
        path: Path,
        query: QueryParams,
        query_wire: Option<Value>,
        tag: Option<Tag>,
        hash: Option<String>,
        now_ms: u64,
        out: &mut Effects,
    ) -> Reply {
        if tag.is_none() && query.is_filtered() {
            return Reply::error(Status::InvalidData, "a filtered listen needs a tag");
        }
        let Some(session) = self.sessions.get_mut(&conn) else {
            return Reply::error(Status::Unavailable, "the connection is not open");
        };
        if let Err(refusal) = self.access.check_read(
            &self.coverage,
            &session.auth,
            &self.root,
            &path,
            Some(&query),
            now_ms,
        ) {
            return self.denied(conn, &refusal);
        }
        let key = (path.clone(), tag);
        let target = Target { conn, tag };
        if let Some(old) = session.listens.remove(&key) {
            self.views.unsubscribe(old.view, target);
        } else if session.listens.len() >= MAX_LISTENS_PER_SESSION {
            return Reply::error(
                Status::LimitExceeded,
                format!("a connection may hold at most {MAX_LISTENS_PER_SESSION} listens"),
            );
        }
        let indexed = self.access.declares_index(&path, &query.index);
        let id = self
            .views
            .subscribe(&path, &query, target, &self.root, indexed);
        session.listens.insert(
            key,
            ListenEntry {
                view: id,
                query_wire,
            },
        );
        self.stats.listens += 1;
        let data = match self.views.get(id) {
            Some(view) if view.query.is_filtered() => view.window.clone(),
            _ => self.root.get(&path),
        };
        // The client's cached copy is current when its hash matches in either client's form.
        let cached = hash.is_some_and(|hash| !hash.is_empty() && data.hash_matches(&hash));
        if !cached {
            self.stats.pushes += 1;
            out.push(Effect::Push {
                push: Arc::new(Push {
                    path,
                    data: PushData::Put(data),
                }),
                targets: vec![target],
            });
        }
        // As Firebase does, a filtered query ordered by a value or child that `.indexOn` does
        // not declare here is answered with a warning, which the SDK logs with the rule to add.
        if query.is_filtered() && OrderedIndex::supports(&query.index) && !indexed {
            return Reply::listen_ok_no_index();
        }
        Reply::listen_ok()
    }

    fn unlisten(&mut self, conn: ConnId, path: Path, tag: Option<Tag>) -> Reply {
        if let Some(session) = self.sessions.get_mut(&conn) {
            if let Some(entry) = session.listens.remove(&(path, tag)) {
                self.views.unsubscribe(entry.view, Target { conn, tag });
            }
        }
        Reply::write_ok()
    }

    /// Reads with the rights of `auth`: the query's result at `path`.
    pub fn read_as(
        &self,
        auth: &AuthState,
        path: &Path,
        query: &QueryParams,
        now_ms: u64,
    ) -> Result<Node, Reply> {
        self.check_query_read_as(auth, path, query, now_ms)?;
        Ok(self.query_result(path, query))
    }

    /// The access check of [`Database::read_as`] alone (the rules see the query), for a
    /// caller that serves the read from elsewhere once it is allowed (the REST answer cache).
    pub fn check_query_read_as(
        &self,
        auth: &AuthState,
        path: &Path,
        query: &QueryParams,
        now_ms: u64,
    ) -> Result<(), Reply> {
        self.access
            .check_read(&self.coverage, auth, &self.root, path, Some(query), now_ms)
            .map_err(|refusal| self.denied(0, &refusal))
    }

    /// The query's result at `path`, read from a live ordered index when a view keeps one.
    fn query_result(&self, path: &Path, query: &QueryParams) -> Node {
        let node = self.root.get(path);
        self.views
            .find_index(path, &query.index)
            .and_then(|index| index.window(query, &node))
            .unwrap_or_else(|| query.apply(&node))
    }

    fn denied(&self, conn: ConnId, refusal: &Refusal) -> Reply {
        refused(self.explain_refusals.as_deref(), conn, refusal)
    }

    /// Whether connection `conn`'s session is an admin's.
    pub fn is_admin(&self, conn: ConnId) -> bool {
        self.sessions
            .get(&conn)
            .is_some_and(|session| session.auth == AuthState::Admin)
    }

    fn session_auth(&self, conn: ConnId) -> AuthState {
        self.sessions
            .get(&conn)
            .map(|session| session.auth.clone())
            .unwrap_or_default()
    }

    fn queue(&mut self, conn: ConnId, op: QueuedOp, now_ms: u64) -> Reply {
        if let Err(reply) = self.check_writable() {
            return reply;
        }
        // Check the operation now, against the data of now, so that a bad or forbidden one is
        // refused while the client can still be told (as production does); it is resolved
        // and checked again, against the data of that time, when it runs. An error that
        // depends on the data (an increment that overflows) is not reported here: it says
        // nothing about the data the operation will meet when it runs.
        let resolved = match &op {
            QueuedOp::Put { target, data } => {
                let existing = self.root.get(&target.path);
                resolve_op(&Path::root(), target, data, &existing, now_ms).map(|(mut op, _)| {
                    op.path = Path::root();
                    Write {
                        base: target.path.clone(),
                        ops: vec![op],
                    }
                })
            }
            QueuedOp::Merge { path, entries } => self
                .resolve_merge(path, entries, now_ms)
                .map(|(write, _)| write),
        };
        let write = match resolved {
            Ok(write) => write,
            Err(reply) => return reply,
        };
        let auth = self.session_auth(conn);
        let new_root = write.apply(&self.root);
        if let Err(refusal) = self.check_write(&auth, &write, &new_root, now_ms) {
            return self.denied(conn, &refusal);
        }
        let Some(session) = self.sessions.get_mut(&conn) else {
            return Reply::error(Status::Unavailable, "the connection is not open");
        };
        match session.on_disconnect.push(op) {
            Ok(()) => Reply::write_ok(),
            Err(error) => Reply::error(Status::LimitExceeded, error.to_string()),
        }
    }

    /// The number of operations queued with onDisconnect by `conn`.
    pub fn on_disconnect_len(&self, conn: ConnId) -> usize {
        self.sessions
            .get(&conn)
            .map_or(0, |session| session.on_disconnect.len())
    }
}

/// The reply to a refused operation. The rule that refused it goes to the log only, at `info`
/// when `explain` names the database, else at `debug`: the client learns nothing about the
/// rules.
pub(crate) fn refused(explain: Option<&str>, conn: ConnId, refusal: &Refusal) -> Reply {
    match explain {
        Some(database) => {
            tracing::info!(database, conn, reason = %refusal.detail, "permission denied");
        }
        None => tracing::debug!(conn, reason = %refusal.detail, "permission denied"),
    }
    Reply::error(Status::PermissionDenied, "Permission denied")
}

fn invalid(error: WriteError) -> Reply {
    Reply::error(Status::InvalidData, error.to_string())
}

#[cfg(test)]
#[path = "database_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "database_oracle_tests.rs"]
mod oracle_tests;

#[cfg(test)]
#[path = "database_prepared_tests.rs"]
mod prepared_tests;

#[cfg(test)]
#[path = "database_access_tests.rs"]
mod access_tests;

#[cfg(test)]
#[path = "audit_tests.rs"]
mod audit_tests;
