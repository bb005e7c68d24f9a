//! Every shard's inbox, by index, and the other nodes of a cluster: the way from this shard
//! to other shards' owner roles (a connection's messages, REST calls, prechecks, long polls,
//! backups' cuts, the list of databases). Plain queues and a handle on the node link; it holds
//! no role's state, so what needs only these and the local owner takes them, not the shard.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use hearth_ground::cross_core::ToOwner;
use hearth_ground::inbox::{
    ask_every_shard, DatabaseInfo, Forwarded, Precheck, ShardCut, ShardMessage,
};
use hearth_ground::rest::precheck::WriteCheck;
use hearth_ground::rest::{RestCall, RestResponse};
use hearth_peer::Nodes;

pub struct Inboxes {
    /// This shard's index among them.
    index: usize,
    /// Every shard's inbox (this one's too), by index.
    peers: Vec<mpsc::UnboundedSender<ShardMessage>>,
    /// The other nodes of a cluster (`--cluster-peers`, or etcd with the link), when there
    /// are any.
    nodes: Option<Arc<Nodes>>,
}

impl Inboxes {
    pub fn new(
        index: usize,
        peers: Vec<mpsc::UnboundedSender<ShardMessage>>,
        nodes: Option<Arc<Nodes>>,
    ) -> Inboxes {
        Inboxes {
            index,
            peers,
            nodes,
        }
    }

    /// This shard's index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many shards this process runs.
    pub fn shard_count(&self) -> usize {
        self.peers.len()
    }

    /// The other nodes of a cluster, when there are any.
    pub fn nodes(&self) -> Option<&Arc<Nodes>> {
        self.nodes.as_ref()
    }

    /// Sends `message` to the owner role of shard `owner`. Nothing is lost but at shutdown,
    /// when that shard may be gone with its sessions.
    pub fn send_to_owner(&self, owner: usize, message: ToOwner) {
        if let Some(sender) = self.peers.get(owner) {
            let _ = sender.send(ShardMessage::Owner(message));
        } else if let Some(nodes) = &self.nodes {
            nodes.send(owner - self.peers.len(), message);
        }
    }

    /// Who owns `namespace`, as an owner index: a local shard's index, or past them, the
    /// local shard count plus the index of the node that owns it (`peer`).
    pub fn owner_of(&self, namespace: &str) -> usize {
        hearth_peer::owner_index(self.nodes.as_deref(), namespace, self.peers.len())
    }

    /// Asks the shard that owns a REST write's database whether the write is refused before
    /// its body is read. `None` when it may go on, or when that shard is gone (shutdown: the
    /// write itself then fails).
    pub async fn precheck(&self, owner: usize, check: WriteCheck) -> Option<RestResponse> {
        let (reply, answer) = oneshot::channel();
        let sender = self.peers.get(owner)?;
        let _ = sender.send(ShardMessage::Precheck(Box::new(Precheck { check, reply })));
        answer.await.ok().flatten()
    }

    /// Asks every shard's owner role (this one's too, through its own queue) for its
    /// databases. A shard that is gone (shutdown) is left out.
    pub async fn all_databases(&self) -> Vec<DatabaseInfo> {
        let answers = ask_every_shard(&self.peers, ShardMessage::Databases, None).await;
        answers.into_iter().flatten().flatten().collect()
    }

    /// Sends a long poll to the shard that holds its session. A failed send (that shard is
    /// gone) drops the reply, which the caller reports as an error.
    pub fn forward_long_poll(
        &self,
        home: usize,
        forwarded: hearth_ground::longpoll_request::Forwarded,
    ) {
        if let Some(sender) = self.peers.get(home) {
            let _ = sender.send(ShardMessage::LongPoll(Box::new(forwarded)));
        }
    }

    /// Sends a WebSocket that takes a long-polling session over to the shard that holds the
    /// session. A failed send (that shard is gone) drops the socket.
    pub fn forward_upgrade(
        &self,
        home: usize,
        moved: hearth_ground::longpoll_request::MovedUpgrade,
    ) {
        if let Some(sender) = self.peers.get(home) {
            let _ = sender.send(ShardMessage::Upgrade(Box::new(moved)));
        }
    }

    /// Sends a REST request to the shard that owns its database. The receiver yields the
    /// answer, or an error when that shard is gone (shutting down).
    pub fn forward(&self, owner: usize, call: RestCall) -> oneshot::Receiver<RestResponse> {
        let (reply, answer) = oneshot::channel();
        if let Some(sender) = self.peers.get(owner) {
            // A failed send drops `reply`, which the receiver reports as an error.
            let _ = sender.send(ShardMessage::Rest(Box::new(Forwarded { call, reply })));
        }
        answer
    }

    /// This shard's own queue, for what other threads tell it later.
    pub fn own_queue(&self) -> Option<mpsc::UnboundedSender<ShardMessage>> {
        self.peers.get(self.index).cloned()
    }

    /// Asks shard `index` (this one included) for its part of a backup, through its queue.
    pub fn ask_cut(&self, index: usize) -> oneshot::Receiver<Result<ShardCut, String>> {
        let (reply, answer) = oneshot::channel();
        if let Some(sender) = self.peers.get(index) {
            // A failed send drops `reply`, which the receiver reports as an error.
            let _ = sender.send(ShardMessage::BackupCut(reply));
        }
        answer
    }
}
