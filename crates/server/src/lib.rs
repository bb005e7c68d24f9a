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

pub mod backup;
#[cfg(test)]
mod cross_core_sim;
#[doc(hidden)]
pub mod fuzzing;
pub mod offline;
mod reload;
mod scrape;
mod server;
mod shard;
mod startup;

pub use hearth_config::{ServeConfig, DEFAULT_NAMESPACE};
// The crates the server is assembled from, under the names the command and the tools use.
pub use hearth_auth as auth;
pub use hearth_auth::jwks;
pub use hearth_config as config;
pub use hearth_ground::rest::cache::DEFAULT_REST_CACHE_BYTES;
pub use hearth_ground::{metrics, namespace, replica_messages};
pub use hearth_net::listener::resolve_listen;
pub use hearth_net::{budget, http_head, query_string, tls};
pub use hearth_owner::rules_file;
pub use hearth_owner::volatile::{DEFAULT_VOLATILE_HZ, MAX_VOLATILE_HZ};
pub use hearth_peer as peer;
/// The durability settings of [`ServeConfig`], and the data directory the offline tools open.
pub use hearth_persist as persist;
pub use server::Server;
pub use startup::StartError;
