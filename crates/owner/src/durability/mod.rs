//! What the owner does to keep its databases durable, with the pipeline of `persist` (which
//! decides nothing about databases or sessions): the commit task that hands batches to the
//! disk and releases what each batch made durable (`commit`), snapshots and log truncation
//! (`snapshots`), loading an evicted database again (`evict`), and a failed log (`failure`).
//! `sim` drives all of it, with the pipeline, through seeded schedules of writes and disk
//! faults.

mod commit;
mod evict;
mod failure;
#[cfg(test)]
mod sim;
mod snapshots;

pub use commit::{commit_loop, flush_at_shutdown, on_durable};
pub use evict::load_evicted;
pub use failure::{read_only_reason, report_failure};
pub use snapshots::snapshot_all;
