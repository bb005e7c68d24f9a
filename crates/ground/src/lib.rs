//! The ground every role of a Hearth server stands on: the values that cross between cores
//! (the in-process queues of `cross_core` and the shards' `inbox`) and between nodes (the node
//! link carries the same messages), and the counters every role writes.
//!
//! - `cross_core`: what an edge sends an owner (`ToOwner`) and what an owner sends back
//!   (`ToEdge`), and the queues that carry them;
//! - `inbox`: the other messages a shard takes (forwarded REST calls, long polls, backup cuts,
//!   scrapes);
//! - `rest`: a REST request as it crosses (`RestCall`), its parsing, and its answer;
//! - `longpoll_request`: a long-polling request forwarded to the core that holds its session;
//! - `replica_messages`: what an owner and its followers tell each other;
//! - `close`, `session_id`, `conn_ids`, `namespace`: why a connection ends, the id a client is
//!   told, the ids a core gives its connections, and which core owns a database;
//! - `metrics`: the counters each core writes and their encoding for a scrape.
//!
//! Nothing here holds a shard's state or does IO of its own.

pub mod app_check;
pub mod close;
pub mod conn_ids;
pub mod cross_core;
pub mod inbox;
pub mod longpoll_request;
pub mod metrics;
pub mod namespace;
pub mod replica_messages;
pub mod rest;
pub mod session_id;
pub mod settings;
