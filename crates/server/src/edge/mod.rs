//! The edge role of a shard: the connections this core accepted. Their sockets stay here
//! (`SO_REUSEPORT` spreads them over the cores): the edge reads and assembles their frames and
//! writes every byte they are sent, whichever core owns their database.
//!
//! - `websocket`: a WebSocket connection from the upgrade to the close;
//! - `side`: where a connection's messages are handled (this core's owner, or another's);
//! - `conn`, `socket`: its outbox and the socket the outbox writes to; `tls_socket`: that
//!   socket under TLS;
//! - `state`: what the edge holds ([`Edge`]): the connections it holds for other cores'
//!   databases and its room toward their owners;
//! - `uring`: batched sends through io_uring (`--io-uring-sends`);
//! - `intake`: the batches owners send to this core's connections;
//! - `upstream`, `reply_scan`: what a connection's session needs of its owner, followed so
//!   that `rehome` can move the session to a new owner while the socket stays open;
//! - `http`, `http_body`, `http_unsent`: HTTP (REST and event streams) with hyper, and the
//!   answer bytes not yet taken by the socket; `request_body`: a request body read under its
//!   limits; `http_forward`: REST requests and event streams sent to the node that owns their
//!   database.

pub mod attach;
mod conn;
pub mod http;
pub mod http_body;
mod http_forward;
pub mod http_unsent;
mod intake;
mod rehome;
pub(crate) mod reply_scan;
pub mod request_body;
pub mod side;
pub mod socket;
mod state;
mod tls_socket;
pub mod upstream;
#[cfg(test)]
mod upstream_tests;
pub mod uring;
pub mod websocket;

pub use conn::EdgeConn;
pub use intake::on_batch;
pub use state::{Edge, EdgeTarget};
pub use tls_socket::Settled;
