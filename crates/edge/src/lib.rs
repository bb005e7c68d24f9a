//! The edge role of a shard: the connections this core accepted. Their sockets stay here
//! (`SO_REUSEPORT` spreads them over the cores): the edge reads and assembles their frames and
//! writes every byte they are sent, whichever core owns their database.
//!
//! This crate holds what the edge owns and the plumbing of its sockets, which the owner writes
//! to; what a connection runs is above the owner and the shard, in the server crate's `serve/`
//! (WebSocket connections, attaching a session to its owner, re-homing it, the owners'
//! batches) and `http/` (the HTTP router).
//!
//! - `frames`: a message as the bytes of its WebSocket frames;
//! - `conn`, `socket`: its outbox and the socket the outbox writes to; `tls_socket`: that
//!   socket under TLS;
//! - `state`: what the edge holds ([`Edge`]): the connections it holds for other cores'
//!   databases and its room toward their owners;
//! - `uring`: batched sends through io_uring (`--io-uring-sends`);
//! - `upstream`, `reply_scan`: what a connection's session needs of its owner, followed so
//!   that `serve::rehome` can move the session to a new owner while the socket stays open;
//! - `request_body`: a request body read under its limits;
//! - `http_body`: an HTTP answer's body and the answer bytes a socket has not taken yet;
//!   `event_stream`: an event stream's queue and the fan-out of its pushes;
//! - `recorder`: a transport that records what it is given, for tests here and above.

pub mod conn;
pub mod event_stream;
pub mod frames;
pub mod http_body;
pub mod recorder;
pub mod reply_scan;
pub mod request_body;
pub mod socket;
pub mod state;
pub mod tls_socket;
pub mod upstream;
#[cfg(test)]
mod upstream_tests;
pub mod uring;

pub use conn::EdgeConn;
pub use state::{Edge, EdgeTarget};
pub use tls_socket::Settled;
