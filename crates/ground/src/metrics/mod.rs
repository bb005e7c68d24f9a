//! Metrics and health: what is counted, and the Prometheus text format it is encoded in. A
//! scrape, `GET /healthz` and `GET /readyz` are answered by the `scrape` module, which asks the
//! shards through their inboxes; this module imports nothing of the shard or its roles, so
//! the inbox can carry its [`ShardSnapshot`].
//!
//! Counting costs the hot path a few plain adds: each shard owns its [`ShardCounters`] (cells
//! written only by its thread, no atomics, no locks). A scrape sends every shard a request
//! through its inbox; each answers with a copy of its counters and gauges taken on its own
//! thread ([`ShardSnapshot`]), and the scraper sums the copies ([`ServerSnapshot`]) and encodes
//! them ([`encode`]). Histograms are per shard too and merged bucket by bucket.

mod cluster_series;
mod counters;
mod encode;
mod health;
mod histogram;
pub mod labels;
mod series;
pub mod snapshot;

pub use counters::ShardCounters;
pub use health::{Health, NotReady};
pub use snapshot::{ServerSnapshot, ShardSnapshot};

pub use encode::{encode, CONTENT_TYPE};
pub use health::OK_BODY;
