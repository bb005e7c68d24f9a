//! The owner role of a shard: the databases whose names hash to this core. The owner applies
//! the requests of their sessions, wherever those sessions' sockets are, and routes the replies
//! and pushes back to the edges that hold them (`link`).

mod intake;

pub use intake::on_link_message;
