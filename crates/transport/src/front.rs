//! A core's front: what every transport of that core needs to serve a connection, and no more.
//! A connection stays on the core that accepted it; when its database is owned there, its
//! requests are handled at once by that core's [`Owner`], otherwise they cross to the owning
//! core (or node) through the [`Inboxes`], and its replies come back to the [`Edge`].
//!
//! The shard (`hearth-server`) makes one front per core and keeps what only it needs (the
//! scrapes, the drain at shutdown, the start of its tasks); the transports take the front.
//! Endpoints that need the whole server (metrics, backups) are reached through
//! [`ServerEndpoints`], which the server implements.

use std::rc::Rc;
use std::sync::Arc;

use hearth_config::ServeConfig;
use hearth_edge::Edge;
use hearth_ground::conn_ids::ConnIds;
use hearth_ground::cross_core::ToOwner;
use hearth_ground::metrics::ShardCounters;
use hearth_ground::rest::{RestCall, RestResponse};
use hearth_owner::Owner;
use hearth_peer::Nodes;
use hearth_sync::ConnId;
use tokio::sync::{oneshot, watch};

use crate::inboxes::Inboxes;
use crate::longpoll_session::Registry;
use crate::routes::ServerEndpoints;

pub struct Front {
    /// What the shard made the front of; private, read through the methods below.
    parts: FrontParts,
    /// The long-polling sessions whose home is this core.
    long_polls: Registry,
}

/// What a front is made of.
pub struct FrontParts {
    pub config: Rc<ServeConfig>,
    /// The owner role of this core: a connection to one of its databases is served inline.
    pub owner: Rc<Owner>,
    /// The edge role: the connections this core holds for other cores' databases.
    pub edge: Edge,
    /// The core's connection ids, shared with its owner role.
    pub ids: Rc<ConnIds>,
    /// What the core counts for `/metrics`; written only by this thread.
    pub counters: Rc<ShardCounters>,
    pub shutdown: watch::Receiver<bool>,
    /// Every shard's inbox (this one's too) and the other nodes.
    pub inboxes: Rc<Inboxes>,
    /// The server's own endpoints on the realtime port.
    pub endpoints: Rc<dyn ServerEndpoints>,
}

impl Front {
    pub fn new(parts: FrontParts) -> Front {
        Front {
            parts,
            long_polls: Registry::default(),
        }
    }

    /// This core's index among the process's shards.
    pub fn index(&self) -> usize {
        self.parts.inboxes.index()
    }

    /// How many shards this process runs.
    pub fn shard_count(&self) -> usize {
        self.parts.inboxes.shard_count()
    }

    pub fn config(&self) -> &Rc<ServeConfig> {
        &self.parts.config
    }

    /// The owner role of this core.
    pub fn owner(&self) -> &Rc<Owner> {
        &self.parts.owner
    }

    /// The edge role: the connections this core holds for other cores' databases.
    pub fn edge(&self) -> &Edge {
        &self.parts.edge
    }

    /// What the core counts for `/metrics`.
    pub fn counters(&self) -> &Rc<ShardCounters> {
        &self.parts.counters
    }

    /// The shutdown signal, for a task of this core to watch.
    pub fn shutdown(&self) -> watch::Receiver<bool> {
        self.parts.shutdown.clone()
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.parts.shutdown.borrow()
    }

    /// The long-polling sessions whose home is this core.
    pub fn long_polls(&self) -> &Registry {
        &self.long_polls
    }

    /// The server's own endpoints on the realtime port.
    pub fn endpoints(&self) -> &dyn ServerEndpoints {
        &*self.parts.endpoints
    }

    /// Every shard's inbox and the other nodes: the way to other shards' owners.
    pub fn inboxes(&self) -> &Rc<Inboxes> {
        &self.parts.inboxes
    }

    /// The other nodes of a cluster, when there are any.
    pub fn nodes(&self) -> Option<&Arc<Nodes>> {
        self.parts.inboxes.nodes()
    }

    /// A new session id, unique in the server: the shards' sequences interleave, so that an
    /// owner can key the sessions of connections held by every core by their id.
    pub fn next_conn_id(&self) -> ConnId {
        self.parts.ids.next()
    }

    /// A connection this core held for another core's database ended; its owner is told.
    pub fn release_connection(&self, id: ConnId, owner: usize) {
        self.parts.edge.forget(id);
        self.send_to_owner(owner, ToOwner::Closed { conn: id });
    }

    /// Sends `message` to the owner role of shard `owner` ([`Inboxes::send_to_owner`]).
    pub fn send_to_owner(&self, owner: usize, message: ToOwner) {
        self.parts.inboxes.send_to_owner(owner, message);
    }

    /// Who owns `namespace`, as an owner index ([`Inboxes::owner_of`]).
    pub fn owner_of(&self, namespace: &str) -> usize {
        self.parts.inboxes.owner_of(namespace)
    }

    /// Sends a REST request to the shard that owns its database, counted as forwarded.
    pub fn forward(&self, owner: usize, call: RestCall) -> oneshot::Receiver<RestResponse> {
        self.parts.counters.rest_forwarded();
        self.parts.inboxes.forward(owner, call)
    }

    /// Ends every event stream (at shutdown), so that their HTTP connections can finish:
    /// those of this core's databases, and those this core holds for other cores'.
    pub fn close_all_streams(&self) {
        let mut streams = self.parts.owner.all_streams();
        streams.extend(self.parts.edge.held_streams());
        for stream in streams {
            stream.close();
        }
    }
}
