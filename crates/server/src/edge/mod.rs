//! The edge role of a shard: the connections this core accepted. Their sockets stay here
//! (`SO_REUSEPORT` spreads them over the cores): the edge reads and assembles their frames and
//! writes every byte they are sent, whichever core owns their database.
//!
//! - `websocket`: a WebSocket connection from the upgrade to the close;
//! - `conn`, `socket`: its outbox and the socket the outbox writes to; `tls_socket`: that
//!   socket under TLS;
//! - `intake`: the batches owners send to this core's connections;
//! - `http`, `http_body`, `http_unsent`: HTTP (REST and event streams) with hyper, and the
//!   answer bytes not yet taken by the socket; `request_body`: a request body read under its
//!   limits.

mod conn;
pub mod http;
pub mod http_body;
pub mod http_unsent;
mod intake;
pub mod request_body;
pub mod socket;
mod tls_socket;
pub mod websocket;

use std::rc::Rc;

pub use conn::EdgeConn;
pub use intake::on_batch;

use crate::sse::stream::StreamHandle;

/// What this core holds for a database another core owns.
pub enum EdgeTarget {
    /// A WebSocket connection.
    Socket(Rc<EdgeConn>),
    /// An event stream's queue, which its response body drains.
    Stream(Rc<StreamHandle>),
}
