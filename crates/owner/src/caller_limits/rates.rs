//! The rate counters of the limits per caller: a pair of token buckets (writes, bytes) per
//! declaration and caller, bounded in number.

use std::collections::HashMap;

use hearth_rules::{LimitSpec, Rate, Rules};

use super::callers::{Caller, Identity, LimitKind, LimitRefusal};
use crate::quotas::Bucket;

/// Rate counters a database keeps at once (one per caller and declaration). Past it, counters
/// whose buckets have refilled are dropped (they hold nothing a fresh one would not), and if
/// that is not enough, some others: many callers cannot grow the owner's memory without
/// bound, and none is refused for want of room (a dropped counter gives its caller a fresh
/// burst, which a new identity would give it anyway).
pub const MAX_COUNTED_CALLERS: usize = 100_000;

/// How often, at most, the counters are swept for room (a full map would otherwise be walked
/// for every new caller).
const SWEEP_INTERVAL_MS: u64 = 1_000;

#[derive(Debug, Default, Clone, Copy)]
struct RateUse {
    writes: Bucket,
    bytes: Bucket,
}

/// The rate counters of one database, for one rules document (the caller clears them when
/// the document changes: declarations are known by their index).
#[derive(Debug, Default)]
pub(super) struct RateCounters {
    rates: HashMap<(usize, Caller), RateUse>,
    last_sweep_ms: Option<u64>,
}

impl RateCounters {
    pub(super) fn clear(&mut self) {
        self.rates.clear();
    }

    pub(super) fn len(&self) -> usize {
        self.rates.len()
    }

    /// Takes a write of `bytes` by `identity` at `now_ms` from each of the declarations
    /// `touched` (indexes into `rules`' declarations), or says which one refuses it; a
    /// refused write takes nothing from any of them.
    pub(super) fn take(
        &mut self,
        rules: &Rules,
        touched: &[usize],
        identity: &Identity,
        bytes: u64,
        now_ms: u64,
    ) -> Result<(), LimitRefusal> {
        let mut taken: Vec<((usize, Caller), RateUse)> = Vec::new();
        for spec in touched.iter().filter_map(|id| rules.limits().get(*id)) {
            if spec.writes.is_none() && spec.bytes.is_none() {
                continue;
            }
            let key = (spec.id, identity.caller(spec.per));
            if !self.rates.contains_key(&key) && self.rates.len() >= MAX_COUNTED_CALLERS {
                self.make_room(rules, now_ms);
            }
            let counters = self.rates.entry(key.clone()).or_default();
            let before = *counters;
            if let Some((kind, what, rate)) = refusal(spec, counters, bytes, now_ms) {
                *counters = before;
                self.restore(taken);
                return Err(LimitRefusal::new(
                    kind,
                    format!(
                        "{} is past the rules' limit of {what} {} under {}: try again later",
                        key.1.describe(),
                        rate.period_words(),
                        spec.pattern
                    ),
                ));
            }
            taken.push((key, before));
        }
        Ok(())
    }

    /// Puts back what a refused write took from the declarations before the one that refused.
    fn restore(&mut self, taken: Vec<((usize, Caller), RateUse)>) {
        for (key, before) in taken {
            self.rates.insert(key, before);
        }
    }

    /// Drops the counters that have refilled (at most once a [`SWEEP_INTERVAL_MS`]), then, if
    /// the map is still full, a hundredth of it.
    fn make_room(&mut self, rules: &Rules, now_ms: u64) {
        let due = self
            .last_sweep_ms
            .is_none_or(|last| now_ms.saturating_sub(last) >= SWEEP_INTERVAL_MS);
        if due {
            self.last_sweep_ms = Some(now_ms);
            self.rates.retain(|(id, _), counters| {
                let Some(spec) = rules.limits().get(*id) else {
                    return false;
                };
                let full = |bucket: &mut Bucket, rate: Option<Rate>| {
                    rate.is_none_or(|rate| bucket.is_full(rate.count, rate.period_ms, now_ms))
                };
                !(full(&mut counters.writes, spec.writes) && full(&mut counters.bytes, spec.bytes))
            });
        }
        if self.rates.len() >= MAX_COUNTED_CALLERS {
            let mut drop = MAX_COUNTED_CALLERS / 100;
            self.rates.retain(|_, _| {
                if drop == 0 {
                    return true;
                }
                drop -= 1;
                false
            });
        }
    }
}

/// Takes the write from `counters` under `spec`, or says which limit refuses it (what it
/// allows, in words, and its rate).
fn refusal(
    spec: &LimitSpec,
    counters: &mut RateUse,
    bytes: u64,
    now_ms: u64,
) -> Option<(LimitKind, String, Rate)> {
    if let Some(rate) = spec.writes {
        if !counters.writes.take(rate.count, rate.period_ms, 1, now_ms) {
            return Some((LimitKind::Writes, format!("{} writes", rate.count), rate));
        }
    }
    let rate = spec.bytes?;
    // A write larger than a whole period's bytes could never pass: refused as such.
    if bytes > rate.count
        || !counters
            .bytes
            .take(rate.count, rate.period_ms, bytes, now_ms)
    {
        return Some((
            LimitKind::Bytes,
            format!("{} bytes written (this write is about {bytes})", rate.count),
            rate,
        ));
    }
    None
}
