//! The network plumbing of a Hearth server that knows no database, session or shard: what any
//! server on sockets needs, kept apart so that the roles above read as what they do.
//!
//! - `listener`, `port_claim`, `accept_backoff`: listening sockets, one server per address and
//!   port, and accept errors that back off instead of spinning;
//! - `tls`: the server's certificates and their reloads;
//! - `http_head`, `query_string`: an HTTP request's head and its query, parsed with bounds;
//! - `budget`: the bytes of answers a core may hold at once;
//! - `local_thread`, `offload`: a thread's own runtime, and work too large for it;
//! - `time`: the wall clock, read only here.

pub mod accept_backoff;
pub mod budget;
pub mod http_head;
pub mod listener;
pub mod local_thread;
pub mod offload;
pub mod port_claim;
pub mod query_string;
pub mod time;
pub mod tls;
