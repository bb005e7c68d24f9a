//! The Hearth server: thread-per-core shards around the pure sync engine, the WebSocket
//! transport and development credentials. The `hearth` command that runs it is the `hearth`
//! package (`crates/cli`); `hearth export` and `hearth import` are `hearth-tools`.
//!
//! Each shard is one pinned thread running a single-threaded tokio runtime, in two roles. As an
//! *owner* it holds every database whose name hashes to it and applies their requests; as an
//! *edge* it holds the WebSocket connections it accepted, wherever their database lives, reads
//! their frames and writes every byte they are sent. Requests, replies and pushes cross between
//! the two over bounded queues (`link`). Within a shard nothing is locked: state lives in
//! `RefCell`s touched only by that thread.

mod accept_backoff;
mod admin;
pub mod auth;
pub mod backup;
pub mod budget;
mod close;
mod cluster;
pub mod config;
mod console;
mod cross_core;
#[cfg(test)]
mod cross_core_sim;
mod edge;
#[doc(hidden)]
pub mod fuzzing;
pub mod http_head;
mod inbox;
pub mod jwks;
mod listener;
mod loaded;
mod local_thread;
mod longpoll;
mod longpoll_request;
pub mod metrics;
pub mod namespace;
pub mod offline;
mod offload;
mod owner;
pub mod peer;
mod port_claim;
pub mod query_string;
mod reload;
mod replica;
pub mod replica_messages;
mod rest;
pub mod rules_file;
mod scrape;
mod server;
mod session_id;
mod shard;
mod sse;
mod startup;
mod time;
pub mod tls;
mod verify_key;
pub mod webtransport;

pub use config::{ServeConfig, DEFAULT_NAMESPACE};
/// The durability settings of [`ServeConfig`], and the data directory the offline tools open.
pub use hearth_persist as persist;
pub use listener::resolve_listen;
pub use owner::volatile::{DEFAULT_VOLATILE_HZ, MAX_VOLATILE_HZ};
pub use rest::cache::DEFAULT_REST_CACHE_BYTES;
pub use server::Server;
pub use startup::StartError;
