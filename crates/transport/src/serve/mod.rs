//! What a connection this core accepted runs, above the owner and the front: a WebSocket
//! connection from the upgrade to the close (`websocket`), its session attached to its
//! database's owner, here or on another core or node (`attach`), moved to the database's next
//! owner while the socket stays (`rehome`), and the batches owners send to this core's
//! connections (`intake`). What the edge holds, and its sockets, are below in `edge/`.

pub(crate) mod attach;
pub(crate) mod intake;
pub(crate) mod rehome;
pub(crate) mod websocket;

pub use intake::on_batch;
