//! The owner role of a shard: the databases whose names hash to this core. The owner applies
//! the requests of their sessions, wherever those sessions' sockets are, and routes the replies
//! and pushes back to the edges that hold them (`hearth_ground::cross_core`). Everything here
//! takes the [`Owner`], never the whole shard, and this crate cannot import the server: what
//! runs connections (the transports) is above it.
//!
//! - `state`: what the owner holds ([`Owner`]): its databases, their log and gate, their
//!   sessions ([`Session`]) and the batches for other cores' edges;
//! - `databases`: a database's lifecycle: found, loaded after an eviction, created, fenced,
//!   given its rules, logged;
//! - `dispatch`: one request of a session, handled by its database;
//! - `effects`: the pushes, cancels and log records a step of a database produced, delivered;
//! - `sessions`: sessions opening and ending (onDisconnect, `ls`); `streams`: an event
//!   stream's session opened on its database;
//! - `outbound`: a session's held queue and the route of its messages;
//! - `intake`: the messages edges send about connections they hold;
//! - `rest`: a REST call run on its database, and the rules endpoints;
//! - `rest_precheck`: whether a REST write is refused before its body is read;
//! - `volatile`: the tick that pushes volatile changes and then the replies they held;
//!   `volatile_ticks`: what waits for it;
//! - `replica`: the tasks of replication in a cluster (a follower's log, catching a new
//!   follower up, the sync set, moving a database to its follower); `replication`: their
//!   state, which the owner logs through;
//! - `durability`: the commit task, snapshots, eviction and a failed log, over `persist`'s
//!   pipeline;
//! - `loaded`: a database in memory and its bookkeeping; `cluster`: the fence (writes only
//!   under a valid claim); `rules_file`: the default rules.

pub mod app_check;
pub mod audit;
pub mod caller_limits;
pub mod cluster;
pub mod databases;
pub mod dispatch;
pub mod durability;
pub mod effects;
pub mod feed;
pub mod intake;
pub mod loaded;
pub mod outbound;
pub mod profile;
pub mod quotas;
pub mod replica;
pub mod replication;
pub mod rest;
pub mod rest_precheck;
pub mod rules_file;
pub mod sessions;
pub mod side;
pub mod state;
pub mod streams;
pub mod trigger_queue;
pub mod triggers;
pub mod volatile;
pub mod volatile_ticks;
pub mod watchers;

pub use state::{Owner, OwnerParts, Session};
