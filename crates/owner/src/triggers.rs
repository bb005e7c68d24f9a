//! The owner's side of database triggers (`hearth_triggers`): the changes a write made for
//! its database's triggers, queued until the write is durable (`trigger_queue`), and the
//! registration endpoint, `/.settings/functionTriggers.json`.

use hearth_ground::rest::RestResponse;
use hearth_net::time::now_ms;
use std::sync::Arc;

use hearth_sync::triggers::TriggerChange;
use hearth_sync::AuthState;
use hearth_triggers::declared::cloud_event;
use hearth_triggers::outbox::{record_text, RECORD_OVERHEAD};
use hearth_triggers::{Delivery, Registration};
use serde_json::json;
use tracing::warn;

use crate::state::Owner;

impl Owner {
    /// The changes the write `namespace` just logged (at `logged`) made for its triggers:
    /// sent once the write is durable, at once without a log (`--durability none`).
    pub fn triggered(
        &self,
        namespace: &str,
        logged: Option<u64>,
        changes: Vec<TriggerChange>,
        dropped: usize,
        writer: AuthState,
    ) {
        let triggers = self.triggers();
        let registry = triggers.registry().clone();
        let (declared, changes): (Vec<TriggerChange>, Vec<TriggerChange>) = changes
            .into_iter()
            .partition(|change| registry.declared(&change.trigger).is_some());
        if !declared.is_empty() {
            self.log_declared(namespace, logged, &declared, &writer);
        }
        let Some(sink) = triggers.sink() else {
            return;
        };
        if changes.is_empty() && dropped == 0 {
            return;
        }
        if dropped > 0 {
            let counted = u64::try_from(dropped).unwrap_or(u64::MAX);
            sink.counters()
                .dropped
                .fetch_add(counted, std::sync::atomic::Ordering::Relaxed);
            warn!(
                namespace,
                dropped,
                "a write changed more trigger paths than one write reports: the rest are not delivered"
            );
        }
        let seq = match (self.store(), logged) {
            (Some(_), Some(seq)) => Some(seq),
            (None, _) => None,
            // The log refused the write: it never becomes durable (its clients are held).
            (Some(_), None) => return,
        };
        let time_ms = now_ms();
        let shard = self.index();
        let writer = Arc::new(writer);
        for (index, change) in changes.into_iter().enumerate() {
            let delivery = Delivery {
                namespace: namespace.to_owned(),
                change,
                event_id: format!("{shard}-{}-{index}", seq.unwrap_or(0)),
                time_ms,
                writer: writer.clone(),
            };
            match seq {
                Some(seq) => triggers.hold(seq, delivery),
                None => sink.send(delivery),
            }
        }
    }
}

impl Owner {
    /// Logs each change for a declared trigger as a record of its own, right after its
    /// write's (`logged`): the outbox takes it once released, and the log hands it over again
    /// after a crash until the outbox has it on disk (docs/triggers.md).
    fn log_declared(
        &self,
        namespace: &str,
        logged: Option<u64>,
        changes: &[TriggerChange],
        writer: &AuthState,
    ) {
        let (Some(_), Some(seq)) = (self.store(), logged) else {
            // No log, or the log refused the write (never durable): no event.
            return;
        };
        let registry = self.triggers().registry().clone();
        let time_ms = now_ms();
        // Unique to the change, and the same on a follower's copy: the owner's epoch of the
        // database (0 outside a cluster), its write's log position, and its place among the
        // write's changes.
        let epoch = self
            .with_loaded(namespace, |loaded| loaded.epoch())
            .flatten()
            .unwrap_or(0);
        for (index, change) in changes.iter().enumerate() {
            let Some(declared) = registry.declared(&change.trigger) else {
                continue;
            };
            let id = format!("{epoch}.{seq}.{index}");
            let event = cloud_event(&declared, namespace, change, &id, time_ms, writer);
            let text = record_text(&change.trigger, &id, &event);
            // The event as JSON can outgrow what its data weighed (escapes): one the log would
            // refuse is dropped and counted, never sent to the log (a refused record would
            // fail the shard's log).
            if text.len() as u64 > hearth_store::MAX_TRIGGERED_BYTES {
                warn!(
                    namespace,
                    trigger = %change.trigger,
                    bytes = text.len(),
                    "a trigger event larger than a log record may be: dropped"
                );
                if let Some(outbox) = &self.config().triggers.outbox {
                    outbox.count_dropped(&change.trigger);
                }
                continue;
            }
            self.log_triggered(namespace, &text);
        }
    }

    /// Tells the declared triggers' outbox whether this node owns `loaded` (delivers its
    /// events) or follows it (keeps them for a failover), when that changed.
    pub fn note_trigger_role(&self, loaded: &crate::loaded::Loaded) {
        let Some(outbox) = &self.config().triggers.outbox else {
            return;
        };
        let owned = !loaded.is_fenced();
        if self.triggers().role_changed(loaded.name(), owned) {
            outbox.set_following(loaded.name(), !owned);
        }
    }
}

/// The most bytes of trigger events a full copy of a database carries: the shard waits while
/// the outbox reads them (at disk speed, a fraction of a second), and past this its follower
/// keeps the events it had instead.
pub const MAX_COPY_EVENT_BYTES: u64 = 64 * 1024 * 1024;

impl Owner {
    /// The record texts a full copy of `namespace` carries to its follower, within `room`
    /// bytes (and [`MAX_COPY_EVENT_BYTES`]): for each declared trigger, a reset of what the
    /// follower kept and the events the receiver has not confirmed, from the outbox and then
    /// from the log (those not released yet). A follower caught up by a copy then has what a
    /// failover must deliver.
    pub fn copy_events(&self, namespace: &str, room: u64) -> Vec<String> {
        let room = room.min(MAX_COPY_EVENT_BYTES);
        let Some(outbox) = &self.config().triggers.outbox else {
            return Vec::new();
        };
        let Some(store) = self.store() else {
            return Vec::new();
        };
        let waiting = store.waiting_triggered(namespace);
        let waiting_bytes: u64 = waiting
            .iter()
            .map(|text| text.len() as u64 + RECORD_OVERHEAD)
            .sum();
        if waiting_bytes > room {
            return Vec::new();
        }
        let Some(mut texts) = outbox.unconfirmed(namespace, room - waiting_bytes) else {
            return Vec::new();
        };
        texts.extend(waiting.iter().map(|text| text.to_string()));
        texts
    }
}

/// `POST /.settings/functionTriggers.json`: registers a trigger (a v1 trigger for
/// `namespace`, the request's database), or replaces the one of the same name.
pub fn register(owner: &Owner, namespace: &str, body: &[u8]) -> RestResponse {
    let registration = match Registration::parse(body, Some(namespace)) {
        Ok(registration) => registration,
        Err(error) => return RestResponse::error(400, error.to_string()),
    };
    match owner.triggers().registry().register(registration) {
        Ok(()) => RestResponse::json(200, "{\"status\":\"ok\"}"),
        Err(error) => RestResponse::error(400, error.to_string()),
    }
}

/// `GET /.settings/functionTriggers.json`: every registered trigger.
pub fn list(owner: &Owner) -> RestResponse {
    let registry = owner.triggers().registry();
    let all: Vec<serde_json::Value> = registry
        .all()
        .iter()
        .map(|r| {
            json!({
                "name": &*r.trigger.name,
                "path": r.trigger.pattern.to_string(),
                "event": r.event,
                "databases": match &r.databases {
                    hearth_triggers::registration::Databases::Named(name) => name.as_str(),
                    hearth_triggers::registration::Databases::All => "*",
                },
            })
        })
        .collect();
    RestResponse::json(200, serde_json::Value::Array(all).to_string())
}

#[cfg(test)]
#[path = "triggers_tests.rs"]
mod tests;
