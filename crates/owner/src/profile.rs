//! The database profiler (`firebase database:profile`, docs/profiler.md): while an admin
//! holds `GET /.settings/profile.json` open as an event stream, each operation on its
//! database is sent to it as an `event: log` whose data is one operation record, in the form
//! firebase-tools' report reads: `name`, `timestamp`, `millis`, `path` (its keys), `bytes`,
//! `allowed`, and for a listen ordered by a child no `.indexOn` declares, `unIndexed` with the
//! query's index.
//!
//! Nobody profiling costs one test of an empty list where an operation is handled: a
//! realtime request's database is at hand there; a REST call and a write's pushes look the
//! database up once more for it (a map lookup). A profiled database pays for one small JSON
//! object per operation per profiler.

use std::time::Instant;

use hearth_net::time::now_ms;
use hearth_query::Index;
use hearth_sync::{Request, Status};
use hearth_tree::{Node, Path};
use serde_json::{json, Value};

use crate::loaded::Loaded;

/// Profilers open on one database at a time. A few admins at once is the use; the bound keeps
/// a script that opens them in a loop from multiplying every operation's cost.
pub const MAX_PROFILERS_PER_DATABASE: usize = 8;

/// What the profiler needs of an operation before it runs: its name, where, and what it
/// reads or writes there. `None` for requests the report has no row for (onDisconnect).
pub struct Operation {
    name: &'static str,
    path: Path,
    /// Where the bytes of a write are counted after it: each of its targets.
    targets: Vec<Path>,
    /// A listen's index, when no `.indexOn` declares it.
    unindexed: Option<Index>,
    started: Instant,
}

impl Operation {
    /// The operation of a realtime request on `database`, when it is profiled.
    pub fn of_request(database: &Loaded, request: &Request) -> Option<Operation> {
        if !database.profilers().is_active() {
            return None;
        }
        let (name, path, targets, unindexed) = match request {
            Request::Put { target, hash, .. } | Request::PutPrepared { target, hash, .. } => {
                let name = match hash {
                    Some(_) => "realtime-transaction",
                    None => "realtime-write",
                };
                (name, target.path.clone(), vec![target.path.clone()], None)
            }
            Request::Merge { path, entries } => {
                let targets = entries
                    .iter()
                    .map(|(entry, _)| path.join(&entry.path))
                    .collect();
                ("realtime-update", path.clone(), targets, None)
            }
            Request::MergePrepared { path, .. } => {
                ("realtime-update", path.clone(), vec![path.clone()], None)
            }
            Request::Get { path, .. } => ("realtime-read", path.clone(), vec![], None),
            Request::Listen { path, query, .. } => {
                let unindexed = matches!(query.index, Index::Child(_) | Index::Value)
                    .then(|| !database.declares_index(path, &query.index))
                    .filter(|unindexed| *unindexed)
                    .map(|_| query.index.clone());
                ("listener-listen", path.clone(), vec![], unindexed)
            }
            Request::Unlisten { path, .. } => ("listener-unlisten", path.clone(), vec![], None),
            Request::OnDisconnectPut { .. }
            | Request::OnDisconnectMerge { .. }
            | Request::OnDisconnectCancel { .. } => return None,
        };
        Some(Operation {
            name,
            path,
            targets,
            unindexed,
            started: Instant::now(),
        })
    }

    /// A REST request's operation, when its database is profiled.
    pub fn of_rest(name: &'static str, path: &Path) -> Operation {
        Operation {
            name,
            path: path.clone(),
            targets: Vec::new(),
            unindexed: None,
            started: Instant::now(),
        }
    }

    /// Sends the operation's record, now that it ran with `status`, to the database's
    /// profilers. `bytes`: what it carried, when the caller knows (a REST body or answer);
    /// otherwise the size the tree estimates for its targets (writes) or its path (reads).
    pub fn done(self, database: &mut Loaded, status: Status, bytes: Option<usize>) {
        let millis = self.started.elapsed().as_secs_f64() * 1000.0;
        let root = database.root();
        let bytes = bytes.unwrap_or_else(|| match self.targets.is_empty() {
            true => estimated(root, &self.path),
            false => self.targets.iter().map(|path| estimated(root, path)).sum(),
        });
        let mut record = json!({
            "name": self.name,
            "timestamp": now_ms(),
            "millis": (millis * 1000.0).round() / 1000.0,
            "path": keys(&self.path),
            "bytes": bytes,
            "allowed": status != Status::PermissionDenied,
        });
        if let Some(index) = &self.unindexed {
            record["unIndexed"] = Value::Bool(true);
            record["querySet"] = json!([{ "index": index_json(index) }]);
        }
        database.profilers_mut().send(&record);
    }
}

/// Records an operation that has no path of its own (a session's start or end), when the
/// database is profiled.
pub fn session_event(database: &mut Loaded, name: &'static str) {
    if !database.profilers().is_active() {
        return;
    }
    let record = json!({ "name": name, "timestamp": now_ms(), "millis": 0, "allowed": true });
    database.profilers_mut().send(&record);
}

/// Records one push of a write to its listeners: `bytes` is the value's estimated size times
/// the listeners it went to.
pub fn broadcast(database: &mut Loaded, path: &Path, bytes: usize) {
    let record = json!({
        "name": "listener-broadcast",
        "timestamp": now_ms(),
        "millis": 0,
        "path": keys(path),
        "bytes": bytes,
        "allowed": true,
    });
    database.profilers_mut().send(&record);
}

fn estimated(root: &Node, path: &Path) -> usize {
    root.get(path).estimated_bytes()
}

fn keys(path: &Path) -> Vec<&str> {
    path.keys().iter().map(|key| key.as_str()).collect()
}

/// An index as the report names it: the path below each child it orders by.
fn index_json(index: &Index) -> Value {
    match index {
        Index::Child(path) => json!({ "path": keys(path) }),
        Index::Value => json!({ "path": [".value"] }),
        Index::Key => json!({ "path": [".key"] }),
        Index::Priority => json!({ "path": [".priority"] }),
    }
}
