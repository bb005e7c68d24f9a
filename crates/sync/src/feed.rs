//! The change feed's pure part: a database's recent write records, kept so that a feed can
//! resume from a log position, and one record as a feed at some location sees it.
//!
//! A feed is a client's event stream of a database's changes, each event carrying the
//! position of its log record. Positions come from the log, never from here: the runtime
//! hands each applied write's record to [`ChangeLog::record`] with its sequence number.
//! What a feed may still resume from is what this keeps: the records after its floor.

use std::collections::VecDeque;
use std::sync::Arc;

use hearth_tree::Path;

use crate::effect::{Push, PushData};
use crate::write::{Change, Write};

/// Write records a database keeps for feeds to resume from. Past it, the oldest go.
pub const MAX_FEED_RECORDS: usize = 10_000;

/// Bytes (as the tree estimates its nodes) of the write records a database keeps for feeds.
/// A record's nodes are shared with the tree until a later write replaces them, so what this
/// costs is at most this much per written database (old values a later write replaced),
/// usually far less. A record larger than this is not kept at all.
pub const MAX_FEED_BYTES: usize = 4 * 1024 * 1024;

/// Why a feed cannot resume from a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeError {
    /// Records after the position are no longer kept; `floor` is the oldest position a feed
    /// may resume from.
    TooOld { floor: u64 },
    /// The position is beyond the database's last record (`last`): not one of this log's.
    Ahead { last: u64 },
}

/// A database's recent write records, oldest first, with the position below which they are no
/// longer kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeLog {
    /// Every write record of the database after this position is in `records`.
    floor: u64,
    records: VecDeque<Kept>,
    bytes: usize,
}

#[derive(Debug, Clone, PartialEq)]
struct Kept {
    seq: u64,
    write: Arc<Write>,
    bytes: usize,
}

impl ChangeLog {
    /// An empty log whose database's state is as of position `floor` (what it was loaded at):
    /// a feed may resume from `floor` or later.
    pub fn new(floor: u64) -> ChangeLog {
        ChangeLog {
            floor,
            records: VecDeque::new(),
            bytes: 0,
        }
    }

    /// The oldest position a feed may resume from.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// Records kept now.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Keeps the write record at position `seq`, and lets the oldest go past the limits. A
    /// position at or below one already kept (or the floor) is ignored: positions only grow.
    pub fn record(&mut self, seq: u64, write: Arc<Write>) {
        if seq <= self.floor || self.records.back().is_some_and(|kept| kept.seq >= seq) {
            return;
        }
        let bytes = write_bytes(&write);
        if bytes > MAX_FEED_BYTES {
            // Kept, it would hold its whole value beside the tree's once a later write
            // replaced it: a feed resumes after it, never across it.
            self.forget_through(seq);
            return;
        }
        self.records.push_back(Kept { seq, write, bytes });
        self.bytes += bytes;
        while self.records.len() > MAX_FEED_RECORDS || self.bytes > MAX_FEED_BYTES {
            let Some(gone) = self.records.pop_front() else {
                break;
            };
            self.bytes -= gone.bytes;
            self.floor = gone.seq;
        }
    }

    /// Bytes of the records kept, as the tree estimates them.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Lets go of every record up to position `seq`, which becomes the floor: for a caller
    /// that cannot keep a record, so that none after a gap is offered as if nothing were
    /// missing.
    pub fn forget_through(&mut self, seq: u64) {
        while self.records.front().is_some_and(|kept| kept.seq <= seq) {
            if let Some(gone) = self.records.pop_front() {
                self.bytes -= gone.bytes;
            }
        }
        self.floor = self.floor.max(seq);
    }

    /// The records after `position`, for a feed resuming from there while the database's last
    /// record (of any kind) is at `last`.
    pub fn since(
        &self,
        position: u64,
        last: u64,
    ) -> Result<impl Iterator<Item = (u64, &Arc<Write>)>, ResumeError> {
        if position > last {
            return Err(ResumeError::Ahead { last });
        }
        if position < self.floor {
            return Err(ResumeError::TooOld { floor: self.floor });
        }
        let start = self.records.partition_point(|kept| kept.seq <= position);
        Ok(self
            .records
            .range(start..)
            .map(|kept| (kept.seq, &kept.write)))
    }

    /// The log failed and the database went back to its state at position `durable`: the
    /// records after it never happened.
    pub fn roll_back(&mut self, durable: u64) {
        while self.records.back().is_some_and(|kept| kept.seq > durable) {
            if let Some(gone) = self.records.pop_back() {
                self.bytes -= gone.bytes;
            }
        }
        self.floor = self.floor.min(durable);
    }
}

fn write_bytes(write: &Write) -> usize {
    write
        .ops
        .iter()
        .map(|op| {
            op.path.byte_len()
                + match &op.change {
                    Change::Set(node) => node.estimated_bytes(),
                    Change::Priority(_) => 16,
                }
        })
        .sum::<usize>()
        + write.base.byte_len()
}

/// What a feed at `at` sees of `write`: `None` when it changes nothing there. A set is a
/// `put` (of the part at `at` when it was written above); a multi-path update is a `patch` at
/// its base (or at `at`, when its base is above), each member named by its path relative to
/// it, as REST streams send them. Priority-only changes are not in the feed.
pub fn feed_push(write: &Write, at: &Path) -> Option<Push> {
    let is_set = write.ops.len() == 1 && write.ops[0].path.is_root();
    let mut members = Vec::new();
    for op in &write.ops {
        let Change::Set(node) = &op.change else {
            continue;
        };
        let target = write.base.join(&op.path);
        if let Some(below) = at.strip_prefix(&target).filter(|rest| !rest.is_root()) {
            // Written above the feed: only the part at its location. The members of an
            // update are never ancestors of one another, so no other member reaches `at`.
            return Some(Push {
                path: at.clone(),
                data: PushData::Put(node.get(&below)),
            });
        }
        if target.starts_with(at) {
            members.push((target, node.clone()));
        }
    }
    if members.is_empty() {
        return None;
    }
    if is_set || (members.len() == 1 && members[0].0 == *at) {
        let (path, node) = members.swap_remove(0);
        return Some(Push {
            path,
            data: PushData::Put(node),
        });
    }
    let base = if write.base.starts_with(at) {
        write.base.clone()
    } else {
        at.clone()
    };
    let members = members
        .into_iter()
        .filter_map(|(target, node)| Some((target.strip_prefix(&base)?, node)))
        .collect();
    Some(Push {
        path: base,
        data: PushData::Merge(members),
    })
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
