//! A database's quotas (docs/quotas.md, `hearth_ground::settings::Quotas`): sessions open at
//! once, writes a second, bytes written a minute, bytes stored. What the database's clients
//! use together is measured here, on the owner, with token buckets that take the time as an
//! argument; admins are never limited (an operator must be able to repair a database that is
//! over its quota). A refusal names the quota, and is counted by kind.

use std::sync::atomic::{AtomicU64, Ordering};

use hearth_ground::settings::Quotas;
use hearth_sync::{Change, Request};
use serde_json::Value;

/// Refusals by quota, server-wide (`hearth_quota_refused_total{quota}`): connections, writes,
/// write bytes, stored bytes.
pub static REFUSED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Which quota refused something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    Connections,
    Writes,
    WriteBytes,
    StoredBytes,
}

impl Quota {
    /// The label of its refusals.
    pub const LABELS: [&'static str; 4] = ["connections", "writes", "write_bytes", "stored_bytes"];

    fn index(self) -> usize {
        self as usize
    }
}

/// A refusal, with what the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRefusal {
    pub quota: Quota,
    pub message: String,
}

impl QuotaRefusal {
    fn new(quota: Quota, message: String) -> QuotaRefusal {
        REFUSED[quota.index()].fetch_add(1, Ordering::Relaxed);
        QuotaRefusal { quota, message }
    }
}

/// A token bucket of `capacity` units refilled at `capacity` per `period_ms`, in thousandths
/// of a unit so that slow rates refill smoothly.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bucket {
    milli: u64,
    at_ms: u64,
    started: bool,
}

impl Bucket {
    /// Takes `units` if the bucket holds them at `now_ms`.
    pub(crate) fn take(&mut self, capacity: u64, period_ms: u64, units: u64, now_ms: u64) -> bool {
        self.refill(capacity, period_ms, now_ms);
        let wanted = units.saturating_mul(1000);
        if wanted > self.milli {
            return false;
        }
        self.milli -= wanted;
        true
    }

    /// Whether the bucket has refilled to its capacity at `now_ms`.
    pub(crate) fn is_full(&mut self, capacity: u64, period_ms: u64, now_ms: u64) -> bool {
        self.refill(capacity, period_ms, now_ms);
        self.milli >= capacity.saturating_mul(1000)
    }

    fn refill(&mut self, capacity: u64, period_ms: u64, now_ms: u64) {
        let full = capacity.saturating_mul(1000);
        if !self.started {
            self.started = true;
            self.milli = full;
            self.at_ms = now_ms;
        }
        let period = u128::from(period_ms.max(1));
        let elapsed = now_ms.saturating_sub(self.at_ms);
        let refill = u128::from(elapsed) * u128::from(full) / period;
        let level = u128::from(self.milli) + refill;
        if level >= u128::from(full) {
            self.milli = full;
            self.at_ms = self.at_ms.max(now_ms);
        } else if refill > 0 {
            // The clock moves on by the time the whole thousandths took, no more: at a slow
            // rate (one an hour) calls a few seconds apart would otherwise each round the
            // refill down to nothing and the bucket would never fill again.
            self.milli = level as u64;
            self.at_ms += (refill * period / u128::from(full.max(1))) as u64;
        }
    }
}

/// What a database's clients used of its rate quotas.
#[derive(Debug, Clone, Default)]
pub struct QuotaUse {
    writes: Bucket,
    bytes: Bucket,
}

/// A write to admit: its size and whether it only deletes.
#[derive(Debug, Clone, Copy)]
pub struct WriteSize {
    pub bytes: u64,
    pub deletes_only: bool,
}

impl QuotaUse {
    /// Admits a write of `size` to a database holding `stored` bytes at `now_ms`, or says
    /// which quota refuses it. Nothing is used of a refused write.
    pub fn admit_write(
        &mut self,
        quotas: &Quotas,
        size: WriteSize,
        stored: u64,
        now_ms: u64,
    ) -> Result<(), QuotaRefusal> {
        if let Some(limit) = quotas.stored_bytes {
            if stored >= limit && !size.deletes_only {
                return Err(QuotaRefusal::new(
                    Quota::StoredBytes,
                    format!("the database holds {stored} bytes, at its quota of {limit}: only deletions are accepted until it holds less"),
                ));
            }
        }
        let (before_writes, before_bytes) = (self.writes, self.bytes);
        if let Some(limit) = quotas.writes_per_second {
            if !self.writes.take(limit, 1_000, 1, now_ms) {
                return Err(QuotaRefusal::new(
                    Quota::Writes,
                    format!("the database's quota of {limit} writes a second is used up: try again in a moment"),
                ));
            }
        }
        if let Some(limit) = quotas.write_bytes_per_minute {
            // A write larger than a whole minute's quota could never pass: it is refused as
            // such rather than waited for.
            if size.bytes > limit || !self.bytes.take(limit, 60_000, size.bytes, now_ms) {
                self.writes = before_writes;
                self.bytes = before_bytes;
                return Err(QuotaRefusal::new(
                    Quota::WriteBytes,
                    format!("the database's quota of {limit} bytes written a minute is used up (this write is {} bytes): try again later", size.bytes),
                ));
            }
        }
        Ok(())
    }
}

/// The size of a realtime write request; `None` for a request that writes nothing now (an
/// onDisconnect operation is not counted: it runs once, when its client leaves).
pub fn write_size(request: &Request) -> Option<WriteSize> {
    let change_size = |change: &Change| match change {
        Change::Set(node) => (node.estimated_bytes() as u64, node.is_empty()),
        Change::Priority(_) => (16, false),
    };
    let (bytes, deletes_only) = match request {
        Request::Put { data, .. } => (json_bytes(data), data.is_null()),
        Request::PutPrepared { data, .. } => change_size(data.change()),
        Request::Merge { entries, .. } => entries
            .iter()
            .fold((0, true), |(bytes, deletes), (_, value)| {
                (bytes + json_bytes(value), deletes && value.is_null())
            }),
        Request::MergePrepared { entries, .. } => {
            entries
                .ops()
                .iter()
                .fold((0, true), |(bytes, deletes), op| {
                    let (size, delete) = change_size(&op.change);
                    (bytes + size, deletes && delete)
                })
        }
        _ => return None,
    };
    Some(WriteSize {
        bytes,
        deletes_only,
    })
}

/// About the bytes of `value` as JSON (strings and keys by their length, numbers as 8).
pub(crate) fn json_bytes(value: &Value) -> u64 {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(text) => text.len() as u64 + 2,
        Value::Array(items) => items.iter().map(json_bytes).sum::<u64>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(key, value)| key.len() as u64 + 3 + json_bytes(value))
                .sum::<u64>()
                + 2
        }
    }
}

/// Whether a database with `sessions` open sessions may open one more.
pub fn admit_session(quotas: &Quotas, sessions: usize) -> Result<(), QuotaRefusal> {
    match quotas.connections {
        Some(limit) if sessions as u64 >= limit => Err(QuotaRefusal::new(
            Quota::Connections,
            format!("this database allows {limit} connections at once (its quota)"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(writes: Option<u64>, bytes: Option<u64>, stored: Option<u64>) -> Quotas {
        Quotas {
            connections: Some(2),
            writes_per_second: writes,
            write_bytes_per_minute: bytes,
            stored_bytes: stored,
        }
    }

    const SMALL: WriteSize = WriteSize {
        bytes: 10,
        deletes_only: false,
    };

    #[test]
    fn writes_a_second_allow_a_second_of_burst_then_refill() {
        let quotas = quotas(Some(3), None, None);
        let mut used = QuotaUse::default();
        for _ in 0..3 {
            used.admit_write(&quotas, SMALL, 0, 1_000)
                .expect("within the burst");
        }
        let refused = used
            .admit_write(&quotas, SMALL, 0, 1_000)
            .expect_err("past it");
        assert_eq!(refused.quota, Quota::Writes);
        // A third of a second gives one write back, not two.
        used.admit_write(&quotas, SMALL, 0, 1_334)
            .expect("refilled");
        assert!(used.admit_write(&quotas, SMALL, 0, 1_334).is_err());
        // A long pause refills to the burst, no more.
        for _ in 0..3 {
            used.admit_write(&quotas, SMALL, 0, 60_000)
                .expect("full again");
        }
        assert!(used.admit_write(&quotas, SMALL, 0, 60_000).is_err());
    }

    #[test]
    fn a_slow_rate_refills_however_often_it_is_asked() {
        // One an hour, asked every second: the token comes back after an hour.
        let mut bucket = Bucket::default();
        assert!(bucket.take(1, 3_600_000, 1, 0));
        let mut refilled_at = None;
        for second in 1..=3_700u64 {
            if bucket.take(1, 3_600_000, 1, second * 1_000) {
                refilled_at = Some(second);
                break;
            }
        }
        assert_eq!(refilled_at, Some(3_600));
    }

    #[test]
    fn bytes_a_minute_count_each_write_and_refuse_one_larger_than_a_minute() {
        let quotas = quotas(Some(100), Some(1_000), None);
        let mut used = QuotaUse::default();
        let write = |bytes| WriteSize {
            bytes,
            deletes_only: false,
        };
        used.admit_write(&quotas, write(900), 0, 0).expect("within");
        let refused = used
            .admit_write(&quotas, write(200), 0, 0)
            .expect_err("past");
        assert_eq!(refused.quota, Quota::WriteBytes);
        // The refused write took no write from the other bucket either.
        for _ in 0..99 {
            used.admit_write(&quotas, write(1), 0, 0)
                .expect("99 writes left");
        }
        assert_eq!(
            used.admit_write(&quotas, write(2_000), 0, 600_000)
                .expect_err("never")
                .quota,
            Quota::WriteBytes
        );
        // A minute refills the bytes.
        used.admit_write(&quotas, write(1_000), 0, 600_000)
            .expect("a full minute");
    }

    #[test]
    fn a_full_database_takes_deletions_only() {
        let quotas = quotas(None, None, Some(1_000));
        let mut used = QuotaUse::default();
        used.admit_write(&quotas, SMALL, 999, 0).expect("under");
        let full = used.admit_write(&quotas, SMALL, 1_000, 0).expect_err("at");
        assert_eq!(full.quota, Quota::StoredBytes);
        let delete = WriteSize {
            bytes: 4,
            deletes_only: true,
        };
        used.admit_write(&quotas, delete, 5_000, 0)
            .expect("a deletion");
    }

    #[test]
    fn sessions_up_to_the_quota() {
        let quotas = quotas(None, None, None);
        assert!(admit_session(&quotas, 1).is_ok());
        assert_eq!(
            admit_session(&quotas, 2).expect_err("the third").quota,
            Quota::Connections
        );
        assert!(admit_session(&Quotas::default(), 1_000_000).is_ok());
    }
}
