//! The Hearth server: thread-per-core shards around the pure sync engine, the WebSocket
//! transport, development credentials and the command line.
//!
//! Each shard is one pinned thread running a single-threaded tokio runtime. Every database is
//! owned by exactly one shard, chosen by a hash of its name; a connection accepted elsewhere is
//! handed to the owner as soon as its request head names the database, and stays there. Within a
//! shard nothing is locked: state lives in `RefCell`s touched only by that thread.

mod accept_backoff;
pub mod auth;
pub mod budget;
pub mod config;
mod connection;
mod dispatch;
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod http_body;
pub mod http_head;
mod http_unsent;
mod listener;
mod loaded;
pub mod namespace;
mod offload;
mod outbound;
pub mod persist;
mod port_claim;
pub mod query_string;
mod rest;
pub mod rules_file;
mod server;
mod session;
mod shard;
mod socket;
mod sse;
mod time;
pub mod tools;

pub use config::{ServeConfig, DEFAULT_NAMESPACE};
pub use listener::resolve_listen;
pub use server::{Server, StartError};
