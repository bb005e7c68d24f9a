//! The edge role of a shard: the connections this core accepted. Their sockets stay here
//! (`SO_REUSEPORT` spreads them over the cores): the edge reads and assembles their frames and
//! writes every byte they are sent, whichever core owns their database.

mod conn;
mod intake;

pub use conn::EdgeConn;
pub use intake::on_batch;
