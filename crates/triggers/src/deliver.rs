//! Delivering changes to a Firebase Functions emulator (`--functions-emulator HOST:PORT`):
//! one thread, fed by every shard once a change is durable, posts each event to
//! `/functions/projects/PROJECT/triggers/KEY`, one at a time, in the order the shards handed
//! them over; so a database's changes (one shard's) reach their functions in the order the
//! database applied them. The emulator answers once the function has run.
//!
//! As Firebase's own emulator: in memory, at most once. A change that finds the queue full,
//! or whose post fails (the function threw, or the emulator is gone), is counted and logged,
//! not retried.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, warn};

use crate::event::{event_body, Delivery};
use crate::registry::TriggerRegistry;

/// The most changes waiting for the Functions emulator: past this, new ones are dropped and
/// counted (the writes themselves are never held back by their triggers).
pub const MAX_PENDING_DELIVERIES: usize = 10_000;

/// How long one function may take to answer its event.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(120);

/// What the delivery thread counts.
#[derive(Debug, Default)]
pub struct DeliveryCounters {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    pub dropped: AtomicU64,
}

/// Where the shards hand their durable changes; cloned into each.
#[derive(Debug, Clone)]
pub struct DeliverySink {
    queue: SyncSender<Delivery>,
    counters: Arc<DeliveryCounters>,
}

impl DeliverySink {
    /// Queues `delivery`; counts and logs it when the queue is full.
    pub fn send(&self, delivery: Delivery) {
        match self.queue.try_send(delivery) {
            Ok(()) => {}
            Err(TrySendError::Full(delivery)) => {
                let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if dropped.is_power_of_two() {
                    warn!(
                        trigger = %delivery.change.trigger,
                        dropped,
                        "trigger event dropped: {MAX_PENDING_DELIVERIES} are waiting for the Functions emulator"
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn counters(&self) -> &Arc<DeliveryCounters> {
        &self.counters
    }
}

/// Starts the delivery thread for the Functions emulator at `functions` (`host:port`). It
/// ends once every sink is dropped and the queue is empty.
pub fn start(functions: &str, registry: Arc<TriggerRegistry>) -> std::io::Result<DeliverySink> {
    let (sink, receiver) = queue(MAX_PENDING_DELIVERIES);
    let base = format!("http://{functions}");
    let counters = sink.counters.clone();
    std::thread::Builder::new()
        .name("hearth-triggers".into())
        .spawn(move || deliver_all(&base, &registry, &receiver, &counters))?;
    Ok(sink)
}

/// A sink and the queue it feeds, of `capacity` changes: what [`start`] delivers from, and
/// what tests read.
pub fn queue(capacity: usize) -> (DeliverySink, Receiver<Delivery>) {
    let (queue, receiver) = sync_channel(capacity);
    let counters = Arc::new(DeliveryCounters::default());
    (DeliverySink { queue, counters }, receiver)
}

fn deliver_all(
    base: &str,
    registry: &TriggerRegistry,
    receiver: &Receiver<Delivery>,
    counters: &DeliveryCounters,
) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(DELIVERY_TIMEOUT))
        .http_status_as_error(true)
        .build()
        .into();
    while let Ok(delivery) = receiver.recv() {
        // A trigger may have been registered again since (same name, new code): its
        // current registration says where and how.
        let Some(registration) = registry.get(&delivery.change.trigger) else {
            continue;
        };
        let url = format!(
            "{base}/functions/projects/{}/triggers/{}",
            registration.project, registration.key
        );
        let body = event_body(&registration, &delivery).to_string();
        match agent
            .post(&url)
            .header("content-type", "application/json")
            .send(body)
        {
            Ok(_) => {
                counters.delivered.fetch_add(1, Ordering::Relaxed);
                debug!(trigger = %registration.key, event = %delivery.event_id, "trigger event delivered");
            }
            Err(error) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                warn!(trigger = %registration.key, event = %delivery.event_id, %error, "trigger event not delivered");
            }
        }
    }
}
