//! What the log carries beside the data: audit entries (`audit`) and the events of the
//! declared triggers (`hearth_triggers::outbox`). Once released (durable, and on the
//! followers) each goes to its keeper; at a start, every one the log still holds goes again
//! (the keepers skip those they have); and log segments are dropped only once both keepers
//! have what they carried on disk.

use hearth_store::{SideKind, SideRecord};
use hearth_triggers::outbox::{confirmation_text, Handed};

use crate::state::Owner;

/// Hands the entries released up to `released` to their keepers; and, once a second, logs
/// how far the declared triggers' receivers confirmed the databases this shard owns, so
/// that their followers drop those events.
pub fn release(owner: &Owner, released: u64) {
    let Some(store) = owner.store() else {
        return;
    };
    hand(owner, store.take_released_side(released));
    if let Some(outbox) = &owner.config().triggers.outbox {
        if owner
            .triggers()
            .confirmations_due(hearth_net::time::now_ms())
        {
            let owned = |database: &str| {
                owner
                    .with_loaded(database, |loaded| !loaded.is_fenced())
                    .unwrap_or(false)
            };
            for (trigger, database, id) in outbox.confirmations(owned) {
                owner.log_triggered(&database, &confirmation_text(&trigger, &id));
            }
        }
    }
}

/// At start, before any write: hands the keepers every entry the shard's log held, so that
/// they copy those a crash kept from their files.
pub fn catch_up(owner: &Owner) {
    let Some(store) = owner.store() else {
        return;
    };
    let records = store.take_recovered_side();
    if !records.is_empty() {
        tracing::info!(
            shard = owner.index(),
            entries = records.len(),
            "audit entries and trigger events in the log handed to their keepers"
        );
    }
    hand(owner, records);
}

fn hand(owner: &Owner, records: Vec<SideRecord>) {
    if records.is_empty() {
        return;
    }
    let (audit, triggered): (Vec<SideRecord>, Vec<SideRecord>) = records
        .into_iter()
        .partition(|record| record.kind == SideKind::Audit);
    crate::audit::hand(owner, audit);
    if triggered.is_empty() {
        return;
    }
    match &owner.config().triggers.outbox {
        Some(outbox) => outbox.take(
            triggered
                .into_iter()
                .map(|record| Handed {
                    database: record.database,
                    seq: record.seq,
                    text: record.entry,
                })
                .collect(),
        ),
        None => tracing::warn!(
            events = triggered.len(),
            "trigger events in the log, and no trigger declared to take them"
        ),
    }
}

/// What must be on disk before log segments are removed: a call that syncs the audit trail
/// and the outbox, `false` if either could not (the log then keeps its segments).
pub fn before_truncation(owner: &Owner) -> Option<impl FnOnce() -> bool + Send + 'static> {
    let trail = owner.audit_trail().cloned();
    let outbox = owner.config().triggers.outbox.clone();
    if trail.is_none() && outbox.is_none() {
        return None;
    }
    Some(move || {
        let trail_ok = trail.is_none_or(|trail| trail.sync());
        let outbox_ok = outbox.is_none_or(|outbox| outbox.sync());
        trail_ok && outbox_ok
    })
}
