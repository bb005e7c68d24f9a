//! Database triggers: Cloud Functions code runs on a Hearth server's changes.
//!
//! The Firebase emulator suite's contract, so that unmodified `firebase-functions` code runs
//! under `firebase emulators:start` with Hearth as its database (docs/triggers.md): the
//! Functions emulator registers each database trigger (`registration`, kept server-wide in
//! the `registry`), the owner of a database finds the changes a write makes for its triggers
//! (`hearth_sync::triggers`, pure) and, once the write is durable, hands them to the
//! delivery thread (`deliver`), which posts each as the event the SDK expects (`event`).

pub mod deliver;
pub mod event;
pub mod registration;
pub mod registry;

pub use deliver::{DeliveryCounters, DeliverySink};
pub use event::Delivery;
pub use registration::{Registration, RegistrationError, MAX_REGISTRATION_BYTES};
pub use registry::{RegistryError, TriggerRegistry};

use std::sync::Arc;

/// The server's triggers: the registry every shard reads, and where durable changes go
/// (`None`: registrations are kept, nothing is delivered).
#[derive(Debug, Clone, Default)]
pub struct ServerTriggers {
    pub registry: Arc<TriggerRegistry>,
    pub sink: Option<DeliverySink>,
}

impl ServerTriggers {
    /// Triggers delivered to the Functions emulator at `functions` (`host:port`), from a
    /// thread of their own.
    pub fn delivering_to(functions: &str) -> std::io::Result<ServerTriggers> {
        let registry = Arc::new(TriggerRegistry::new());
        let sink = deliver::start(functions, registry.clone())?;
        Ok(ServerTriggers {
            registry,
            sink: Some(sink),
        })
    }
}
