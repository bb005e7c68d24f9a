//! The transports of a Hearth shard: how a client's bytes reach a database and its answers
//! leave. The accept loop reads a connection's first request head and hands it to WebSocket
//! (`serve`) or HTTP (`http`: REST, event streams in `sse`, long polling in `longpoll`, the
//! web console); WebTransport (`webtransport`) has a QUIC endpoint of its own.
//!
//! Every transport takes the core's [`Front`](front::Front): the core's owner (a connection
//! whose database is owned on this core is served inline), its edge (the connections held
//! for other cores' databases), its ids, counters, shutdown signal and the inboxes to every
//! owner. None takes the whole shard, and this crate may not import `hearth-server`, which
//! assembles a shard from the front and starts its tasks (see ARCHITECTURE.md).

pub mod accept;
pub mod admin;
pub mod console;
pub mod front;
mod http;
pub mod inboxes;
pub mod longpoll;
mod longpoll_session;
mod owner_side;
pub mod routes;
pub mod serve;
mod sse;
pub mod webtransport;

pub use front::{Front, FrontParts};
pub use routes::ServerEndpoints;
