//! Why the server closes a WebSocket connection: the reason sent in the close frame, and the
//! reasons the server gives, which the logs and the close counters name.

use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// The most bytes that may wait in one connection's queue (the held queue's limit, in
/// `hearth-persist`). A client that reads slower than its data arrives is disconnected rather
/// than allowed to grow the server's memory: it gets [`SLOW_READER_CLOSE`] (1008), as it does
/// when its queued bytes do not fit in the server's answer budget
/// (`budget::DEFAULT_ANSWER_BUDGET_BYTES`).
pub use hearth_persist::MAX_OUTBOUND_BYTES;

/// The close reason of a connection closed for reading too slowly.
pub const SLOW_READER_CLOSE: &str = "the client reads too slowly: outbound queue limit reached";

/// The close reason of a session ended by a reconnect of the same client (`ls`).
pub const REPLACED_CLOSE: &str = "replaced by a newer connection of the same client";

/// The close reason of the clients of a database that lost writes to a disk failure.
pub const DISK_FAILED_CLOSE: &str = "the server's disk failed";

/// The close reason of a connection whose client answered no ping for the idle timeout.
pub const IDLE_CLOSE: &str = "no answer to pings";

/// The close reason sent to every connection when the server stops.
pub const SHUTDOWN_CLOSE: &str = "the server is shutting down";

/// The close reason of a WebSocket that names a long-polling session (`s`) it cannot carry:
/// none by that name and secret on that database, one that is already moving or has moved,
/// or one that ended before the client switched. One text for all, so that it tells a
/// guesser nothing.
pub const UPGRADE_REFUSED_CLOSE: &str = "no long-polling session to move onto this WebSocket";

/// Why a connection is closed when the link to its database's owner node is lost: the SDK
/// reconnects and sets up its listens again.
pub const OWNER_NODE_LOST_CLOSE: &str = "the node that owns the database is unreachable";

/// Why a connection whose session was on another node is closed when its database's owner
/// changes (`peer::follow`): the SDK reconnects and reaches the new owner.
pub const OWNER_MOVED_CLOSE: &str = "the database moved to another node";

/// Why a connection whose client takes no byte for the write timeout is dropped.
pub const UNWRITABLE_DROP: &str = "the client accepts no data";

/// Why the server closes a connection, sent as the close frame's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseReason {
    pub code: CloseCode,
    pub text: String,
}

impl CloseReason {
    pub fn new(code: CloseCode, text: impl Into<String>) -> CloseReason {
        CloseReason {
            code,
            text: text.into(),
        }
    }

    /// The close frame; its reason is cut to the 123 bytes that a close frame can carry.
    pub fn frame(&self) -> CloseFrame {
        let mut end = self.text.len().min(123);
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        CloseFrame {
            code: self.code,
            reason: Utf8Bytes::from(self.text[..end].to_owned()),
        }
    }
}
