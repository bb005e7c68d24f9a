//! One database: its tree, its views and the sessions of the connections that use it.

use std::collections::HashMap;
use std::sync::Arc;

use hearth_query::QueryParams;
use hearth_tree::{Node, Path};
use serde_json::Value;

use crate::effect::{Effect, Effects, Push, PushData, Target};
use crate::events::write_events;
use crate::limits::{MAX_LISTENS_PER_SESSION, MAX_MERGE_ENTRIES};
use crate::ondisconnect::{OnDisconnectQueue, QueuedOp};
use crate::request::{ConnId, Reply, ReplyData, Request, Status, Tag};
use crate::server_values::resolve_server_values;
use crate::views::{ViewId, Views};
use crate::write::{change_from_json, check_disjoint, Write, WriteError, WriteOp, WriteTarget};

/// Who a connection is, as far as the database is concerned.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum AuthState {
    /// No credential: rules see `auth == null`.
    #[default]
    Anonymous,
    /// Full access; rules are bypassed.
    Admin,
    /// An identity; rules see these claims as `auth`.
    User(Value),
}

/// Counters of one database, summed by the runtime when read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatabaseStats {
    pub writes: u64,
    pub listens: u64,
    pub gets: u64,
    pub pushes: u64,
}

#[derive(Default)]
struct Session {
    auth: AuthState,
    listens: HashMap<(Path, Option<Tag>), ViewId>,
    on_disconnect: OnDisconnectQueue,
}

/// The state machine of one database. Every method takes the time it may need as an argument
/// and appends what must be sent or logged to an [`Effects`] list.
#[derive(Default)]
pub struct Database {
    root: Node,
    views: Views,
    sessions: HashMap<ConnId, Session>,
    stats: DatabaseStats,
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

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Registers a connection.
    pub fn connect(&mut self, conn: ConnId) {
        self.sessions.entry(conn).or_default();
    }

    pub fn set_auth(&mut self, conn: ConnId, auth: AuthState) {
        if let Some(session) = self.sessions.get_mut(&conn) {
            session.auth = auth;
        }
    }

    pub fn auth(&self, conn: ConnId) -> Option<&AuthState> {
        self.sessions.get(&conn).map(|session| &session.auth)
    }

    /// Ends a connection: drops its listens, then runs its onDisconnect queue as ordinary
    /// writes, with server values resolved at `now_ms`.
    pub fn disconnect(&mut self, conn: ConnId, now_ms: u64, out: &mut Effects) {
        let Some(mut session) = self.sessions.remove(&conn) else {
            return;
        };
        for ((_, tag), id) in session.listens.drain() {
            self.views.unsubscribe(id, Target { conn, tag });
        }
        for op in session.on_disconnect.take() {
            // A queued write that no longer applies (for example because the data it was
            // checked against changed shape) is dropped: there is nobody left to tell.
            let _ = match op {
                QueuedOp::Put { target, data } => self.put(&target, &data, None, now_ms, out),
                QueuedOp::Merge { path, entries } => self.merge(&path, &entries, now_ms, out),
            };
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
                query_wire: _,
                tag,
                hash,
            } => self.listen(conn, path, query, tag, hash, out),
            Request::Unlisten { path, tag } => self.unlisten(conn, path, tag),
            Request::Put { target, data, hash } => {
                match self.put(&target, &data, hash.as_deref(), now_ms, out) {
                    Ok(()) => Reply::write_ok(),
                    Err(reply) => reply,
                }
            }
            Request::Merge { path, entries } => match self.merge(&path, &entries, now_ms, out) {
                Ok(()) => Reply::write_ok(),
                Err(reply) => reply,
            },
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
                Reply {
                    status: Status::Ok,
                    data: ReplyData::Value(query.apply(&self.root.get(&path))),
                }
            }
        }
    }

    fn listen(
        &mut self,
        conn: ConnId,
        path: Path,
        query: QueryParams,
        tag: Option<Tag>,
        hash: Option<String>,
        out: &mut Effects,
    ) -> Reply {
        if tag.is_none() && query.is_filtered() {
            return Reply::error(Status::InvalidData, "a filtered listen needs a tag");
        }
        let Some(session) = self.sessions.get_mut(&conn) else {
            return Reply::error(Status::Unavailable, "the connection is not open");
        };
        let key = (path.clone(), tag);
        let target = Target { conn, tag };
        if let Some(old) = session.listens.remove(&key) {
            self.views.unsubscribe(old, target);
        } else if session.listens.len() >= MAX_LISTENS_PER_SESSION {
            return Reply::error(
                Status::LimitExceeded,
                format!("a connection may hold at most {MAX_LISTENS_PER_SESSION} listens"),
            );
        }
        let id = self.views.subscribe(&path, &query, target, &self.root);
        session.listens.insert(key, id);
        self.stats.listens += 1;
        let data = match self.views.get(id) {
            Some(view) if view.query.is_filtered() => view.window.clone(),
            _ => self.root.get(&path),
        };
        let cached = hash.is_some_and(|hash| !hash.is_empty() && *data.hash() == *hash);
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
        Reply::listen_ok()
    }

    fn unlisten(&mut self, conn: ConnId, path: Path, tag: Option<Tag>) -> Reply {
        if let Some(session) = self.sessions.get_mut(&conn) {
            if let Some(id) = session.listens.remove(&(path, tag)) {
                self.views.unsubscribe(id, Target { conn, tag });
            }
        }
        Reply::write_ok()
    }

    /// Replaces the value at `target`; with `hash`, only if the current value hashes to it.
    pub fn put(
        &mut self,
        target: &WriteTarget,
        data: &Value,
        hash: Option<&str>,
        now_ms: u64,
        out: &mut Effects,
    ) -> Result<(), Reply> {
        let existing = self.root.get(&target.path);
        if let Some(hash) = hash {
            if *existing.hash() != *hash {
                return Err(Reply {
                    status: Status::DataStale,
                    data: ReplyData::EmptyText,
                });
            }
        }
        let mut op = resolve_op(&Path::root(), target, data, &existing, now_ms).map_err(invalid)?;
        // A set is one operation at the write's base.
        op.path = Path::root();
        self.commit(
            Write {
                base: target.path.clone(),
                ops: vec![op],
            },
            out,
        );
        Ok(())
    }

    /// Applies a multi-path update atomically.
    pub fn merge(
        &mut self,
        path: &Path,
        entries: &[(WriteTarget, Value)],
        now_ms: u64,
        out: &mut Effects,
    ) -> Result<(), Reply> {
        if entries.len() > MAX_MERGE_ENTRIES {
            return Err(invalid(WriteError::TooManyEntries {
                limit: MAX_MERGE_ENTRIES,
            }));
        }
        let mut ops = Vec::with_capacity(entries.len());
        for (target, data) in entries {
            let existing = self.root.get(&path.join(&target.path));
            ops.push(resolve_op(path, target, data, &existing, now_ms).map_err(invalid)?);
        }
        check_disjoint(&ops).map_err(invalid)?;
        if ops.is_empty() {
            return Ok(());
        }
        self.commit(
            Write {
                base: path.clone(),
                ops,
            },
            out,
        );
        Ok(())
    }

    fn queue(&mut self, conn: ConnId, op: QueuedOp, now_ms: u64) -> Reply {
        // Check the operation now, so that a bad one is refused while the client can still be
        // told; it is resolved again, against the data of that time, when it runs.
        let checked = match &op {
            QueuedOp::Put { target, data } => {
                let existing = self.root.get(&target.path);
                resolve_op(&Path::root(), target, data, &existing, now_ms).map(|_| ())
            }
            QueuedOp::Merge { path, entries } => entries
                .iter()
                .map(|(target, data)| {
                    let existing = self.root.get(&path.join(&target.path));
                    resolve_op(path, target, data, &existing, now_ms)
                })
                .collect::<Result<Vec<_>, _>>()
                .and_then(|ops| check_disjoint(&ops)),
        };
        if let Err(error) = checked {
            return invalid(error);
        }
        let Some(session) = self.sessions.get_mut(&conn) else {
            return Reply::error(Status::Unavailable, "the connection is not open");
        };
        match session.on_disconnect.push(op) {
            Ok(()) => Reply::write_ok(),
            Err(error) => Reply::error(Status::LimitExceeded, error.to_string()),
        }
    }

    /// Applies a resolved write: the new root replaces the old one, the write goes to the log,
    /// and every affected view gets its push.
    fn commit(&mut self, write: Write, out: &mut Effects) {
        let old_root = std::mem::take(&mut self.root);
        self.root = write.apply(&old_root);
        self.stats.writes += 1;
        let write = Arc::new(write);
        out.push(Effect::Log(write.clone()));
        let before = out.len();
        write_events(&mut self.views, &write, &old_root, &self.root, out);
        self.stats.pushes += (out.len() - before) as u64;
    }

    /// The number of operations queued with onDisconnect by `conn`.
    pub fn on_disconnect_len(&self, conn: ConnId) -> usize {
        self.sessions
            .get(&conn)
            .map_or(0, |session| session.on_disconnect.len())
    }
}

/// Resolves one operation's server values against `existing` and converts it. `base` is the
/// write's base path; `target` is relative to it.
fn resolve_op(
    base: &Path,
    target: &WriteTarget,
    data: &Value,
    existing: &Node,
    now_ms: u64,
) -> Result<WriteOp, WriteError> {
    let resolved = resolve_server_values(data, existing, now_ms)
        .map_err(|error| WriteError::ServerValue(error.to_string()))?;
    let absolute = WriteTarget {
        path: base.join(&target.path),
        priority_only: target.priority_only,
    };
    let change = change_from_json(&absolute, resolved.as_ref().unwrap_or(data))?;
    Ok(WriteOp {
        path: target.path.clone(),
        change,
    })
}

fn invalid(error: WriteError) -> Reply {
    Reply::error(Status::InvalidData, error.to_string())
}

#[cfg(test)]
#[path = "database_tests.rs"]
mod tests;
