//! Database triggers: Cloud Functions code runs on a Hearth server's changes.
//!
//! The Firebase emulator suite's contract, so that unmodified `firebase-functions` code runs
//! under `firebase emulators:start` with Hearth as its database (docs/triggers.md): the
//! Functions emulator registers each database trigger (`registration`, kept server-wide in
//! the `registry`), the owner of a database finds the changes a write makes for its triggers
//! (`hearth_sync::triggers`, pure) and, once the write is durable, hands them to the
//! delivery thread (`deliver`), which posts each as the event the SDK expects (`event`).

pub mod declared;
pub mod deliver;
pub mod event;
pub mod nats;
pub mod outbox;
pub mod registration;
pub mod registry;

pub use deliver::{DeliveryCounters, DeliverySink};
pub use event::Delivery;
pub use registration::{Registration, RegistrationError, MAX_REGISTRATION_BYTES};
pub use registry::{RegistryError, TriggerRegistry};

use std::sync::Arc;

/// The server's triggers: the registry every shard reads, where durable changes for the
/// Functions emulator go (`None`: registrations are kept, nothing is delivered), and the
/// outbox of the declared triggers (`--triggers FILE`).
#[derive(Debug, Clone, Default)]
pub struct ServerTriggers {
    pub registry: Arc<TriggerRegistry>,
    pub sink: Option<DeliverySink>,
    pub outbox: Option<outbox::Outbox>,
}

impl ServerTriggers {
    /// Triggers delivered to the Functions emulator at `functions` (`host:port`), from a
    /// thread of their own.
    pub fn delivering_to(functions: &str) -> std::io::Result<ServerTriggers> {
        ServerTriggers::start(Some(functions), Vec::new(), None)
    }

    /// The server's triggers: those the Functions emulator at `functions` registers (if
    /// given), and `declared` (a triggers file), delivered from an outbox in `outbox_dir`
    /// (`DATA_DIR/triggers`; needed when any is declared).
    pub fn start(
        functions: Option<&str>,
        declared: Vec<declared::Declared>,
        outbox_dir: Option<&std::path::Path>,
    ) -> std::io::Result<ServerTriggers> {
        let declared: Vec<Arc<declared::Declared>> = declared.into_iter().map(Arc::new).collect();
        let outbox = match (declared.is_empty(), outbox_dir) {
            (true, _) => None,
            (false, Some(dir)) => Some(outbox::Outbox::open(dir, &declared)?),
            (false, None) => {
                return Err(std::io::Error::other(
                    "declared triggers need a data directory for their outbox",
                ))
            }
        };
        let registry = Arc::new(TriggerRegistry::with_declared(declared));
        let sink = match functions {
            Some(functions) => Some(deliver::start(functions, registry.clone())?),
            None => None,
        };
        Ok(ServerTriggers {
            registry,
            sink,
            outbox,
        })
    }
}
