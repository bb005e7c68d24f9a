//! Limits on what one client may ask of a database. Each is a named constant so that the
//! errors, the documentation and the tests all speak of the same number.

/// Listens one connection may hold at once. Every listen costs a view subscription and work on
/// every write below it, so a client must not open an unbounded number.
pub const MAX_LISTENS_PER_SESSION: usize = 10_000;

/// Operations one connection may queue with onDisconnect.
pub const MAX_ONDISCONNECT_OPS: usize = 1_000;

/// Estimated JSON bytes of all operations one connection may queue with onDisconnect.
pub const MAX_ONDISCONNECT_BYTES: usize = 16 * 1024 * 1024;

/// Entries in one multi-path update.
pub const MAX_MERGE_ENTRIES: usize = 100_000;
