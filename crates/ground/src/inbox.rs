//! A shard's inbox: what edges, scrapes and backups ask of a shard's owner role, and the
//! answers they wait for. Every message is plain data, answered on the receiving shard's
//! thread, so that no shard reads another's state. `link::ToEdge` batches, which go
//! the other way, have a queue of their own (`link`).

use std::sync::Arc;
use std::time::Duration;

use hearth_persist::{DurableState, ShardStorage};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::cross_core::ToOwner;
use crate::metrics::snapshot::ShardSnapshot;
use crate::rest::precheck::WriteCheck;
use crate::rest::{RestCall, RestResponse};

/// A REST request whose database lives on another shard, with the channel for its answer.
pub struct Forwarded {
    pub call: RestCall,
    pub reply: oneshot::Sender<RestResponse>,
}

/// A REST write's check before its body is read, asked of the shard that owns its database,
/// with the channel for the refusal (`None`: go on).
pub struct Precheck {
    pub check: WriteCheck,
    pub reply: oneshot::Sender<Option<RestResponse>>,
}

/// What one shard sends another's owner role (`link::ToEdge` batches go on a channel of
/// their own, so that an owner that waits for an edge never stops that edge's writes).
pub enum ShardMessage {
    Rest(Box<Forwarded>),
    /// A backup asks for this shard's cut (`backup::cut`).
    BackupCut(oneshot::Sender<Result<ShardCut, String>>),
    /// A backup's cut of this shard was dropped: snapshot files may be removed again.
    BackupDone,
    Precheck(Box<Precheck>),
    Owner(ToOwner),
    /// A scrape asks for the shard's numbers.
    Metrics(oneshot::Sender<ShardSnapshot>),
    /// The owner's databases, for `GET /.admin/databases`.
    Databases(oneshot::Sender<Vec<DatabaseInfo>>),
    /// A long poll for a session whose home is this shard (`longpoll`).
    LongPoll(Box<crate::longpoll_request::Forwarded>),
    /// A WebSocket that takes over a session whose home is this shard
    /// (`longpoll::secondary`).
    Upgrade(Box<crate::longpoll_request::MovedUpgrade>),
    /// Replication from or to another node (`replica`).
    Replica(crate::replica_messages::ReplicaIn),
}

/// Sends `ask` to every shard's owner role and waits for the answers, until `timeout` when
/// given: `None` for a shard that is gone or did not answer in time. Each shard answers from
/// its own thread, so no shard's state is read by another.
pub async fn ask_every_shard<T>(
    shards: &[mpsc::UnboundedSender<ShardMessage>],
    ask: impl Fn(oneshot::Sender<T>) -> ShardMessage,
    timeout: Option<Duration>,
) -> Vec<Option<T>> {
    let asked: Vec<_> = shards
        .iter()
        .map(|inbox| {
            let (reply, answer) = oneshot::channel();
            let _ = inbox.send(ask(reply));
            answer
        })
        .collect();
    let deadline = timeout.map(|timeout| tokio::time::Instant::now() + timeout);
    let mut answers = Vec::with_capacity(asked.len());
    for answer in asked {
        let answer = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, answer).await.ok(),
            None => Some(answer.await),
        };
        answers.push(answer.and_then(Result::ok));
    }
    answers
}

/// One database as `GET /.admin/databases` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatabaseInfo {
    pub name: String,
    /// Whether it is in memory now; one that is not was evicted (or not used since the
    /// server started) and is loaded from its snapshot on its next use.
    pub loaded: bool,
    /// A loaded database: the estimated size of its tree as JSON in export form (what an
    /// export would write, about). One on disk only: the size of its newest snapshot file.
    /// Both are known without reading the data.
    pub bytes: u64,
    /// Its sessions: WebSocket connections and REST event streams.
    pub clients: usize,
    /// The shard (core) that owns it.
    pub shard: usize,
}

/// What the backup writer needs of one shard (taken by `backup::cut::take` on the shard's thread, the answer to
/// [`ShardMessage::BackupCut`]).
pub struct ShardCut {
    pub shard: usize,
    /// The log position the cut is taken at: every state below holds every record up to it.
    pub covered: u64,
    /// Loaded databases, as of `covered`.
    pub states: Vec<(Arc<str>, DurableState)>,
    /// Databases only on disk: the name of the newest snapshot file of each.
    pub files: Vec<(Arc<str>, String)>,
    /// The shard's storage, to read `files` from.
    pub storage: Arc<ShardStorage>,
    /// Keeps the shard from removing snapshot files until the cut is dropped.
    pub _pin: Pin,
}

/// While it lives, the shard removes no snapshot file (so `files` stay readable); dropping
/// it, on any thread, runs its release, which tells the shard through its queue. The release
/// is a closure so that the writer, which only reads cuts, needs to know nothing of shards.
pub struct Pin(Option<Box<dyn FnOnce() + Send>>);

impl Pin {
    pub fn new(release: Option<impl FnOnce() + Send + 'static>) -> Pin {
        Pin(release.map(|release| Box::new(release) as Box<dyn FnOnce() + Send>))
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}
