//! What leaves the shard's thread: work on a request that grows with its size is done on
//! tokio's blocking pool above a threshold, while the request's connection waits for it, so
//! the connection's order holds and the shard's other connections and databases go on.

/// Bodies larger than this are parsed on tokio's blocking pool rather than on the shard's
/// thread, so that other connections and databases of the shard are served meanwhile (a
/// 20 MB body takes about a second to parse). Smaller ones are not worth the hand-off.
pub const OFF_THREAD_PARSE_BYTES: usize = 256 * 1024;
