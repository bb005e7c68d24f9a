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
/// Functions emulator go (`None`: registrations are kept, nothing is delivered), the outbox
/// of the declared triggers, and the file their declaration is kept in (both `None` without
/// a data directory).
#[derive(Debug, Clone, Default)]
pub struct ServerTriggers {
    pub registry: Arc<TriggerRegistry>,
    pub sink: Option<DeliverySink>,
    pub outbox: Option<outbox::Outbox>,
    pub declaration: Option<Arc<DeclarationFile>>,
}

/// The file the declared triggers are read from at start and written to by a new
/// declaration (`--triggers FILE`, else `DATA_DIR/triggers.json`).
#[derive(Debug)]
pub struct DeclarationFile {
    pub path: std::path::PathBuf,
    /// Held while a declaration is written and applied: one at a time.
    writing: std::sync::Mutex<()>,
}

/// Why a new declaration was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DeclareError {
    #[error("triggers need a data directory (the server runs with --durability none)")]
    NoOutbox,
    #[error(transparent)]
    Invalid(#[from] declared::DeclarationError),
    #[error("the triggers file {path} could not be written: {error}")]
    Io {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
}

impl ServerTriggers {
    /// Triggers delivered to the Functions emulator at `functions` (`host:port`), from a
    /// thread of their own.
    pub fn delivering_to(functions: &str) -> std::io::Result<ServerTriggers> {
        ServerTriggers::start(functions.into(), Vec::new(), None, false)
    }

    /// The server's triggers: those the Functions emulator at `functions` registers (if
    /// given), and `declared` (read from a triggers file), delivered from an outbox in
    /// `outbox.0` (`DATA_DIR/triggers`) and declared anew into the file `outbox.1`. Without
    /// an outbox (no data directory) nothing may be declared. In a cluster (`clustered`) a
    /// database's events wait until this node owns it.
    pub fn start(
        functions: Option<&str>,
        declared: Vec<declared::Declared>,
        outbox: Option<(&std::path::Path, std::path::PathBuf)>,
        clustered: bool,
    ) -> std::io::Result<ServerTriggers> {
        let declared: Vec<Arc<declared::Declared>> = declared.into_iter().map(Arc::new).collect();
        let (registry, outbox, declaration) = match outbox {
            Some((dir, file)) => (
                TriggerRegistry::with_declared(declared.clone()),
                Some(outbox::Outbox::open(dir, &declared, clustered)?),
                Some(Arc::new(DeclarationFile {
                    path: file,
                    writing: std::sync::Mutex::new(()),
                })),
            ),
            None if declared.is_empty() => (TriggerRegistry::new(), None, None),
            None => {
                return Err(std::io::Error::other(
                    "declared triggers need a data directory for their outbox",
                ))
            }
        };
        let registry = Arc::new(registry);
        let sink = match functions {
            Some(functions) => Some(deliver::start(functions, registry.clone())?),
            None => None,
        };
        Ok(ServerTriggers {
            registry,
            sink,
            outbox,
            declaration,
        })
    }

    /// The declaration in effect, as its file holds it (`{"triggers": {}}` when there is
    /// none yet); `None` when nothing may be declared.
    pub fn declaration_text(&self) -> Option<std::io::Result<String>> {
        let file = self.declaration.as_ref()?;
        Some(match std::fs::read_to_string(&file.path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Ok("{\"triggers\": {}}".to_owned())
            }
            read => read,
        })
    }

    /// Declares the triggers of the document `bytes` (a triggers file's text) in place of
    /// the current ones: checked whole, written to the declaration's file (renamed over the
    /// old one, so a start reads one or the other), then applied: new triggers start,
    /// changed ones go on from their files, those left out stop. Returns how many are
    /// declared.
    pub fn redeclare(&self, bytes: &[u8]) -> Result<usize, DeclareError> {
        let (Some(outbox), Some(file)) = (&self.outbox, &self.declaration) else {
            return Err(DeclareError::NoOutbox);
        };
        let declared: Vec<Arc<declared::Declared>> =
            declared::parse(bytes)?.into_iter().map(Arc::new).collect();
        let _writing = file.writing.lock().unwrap_or_else(|p| p.into_inner());
        let io = |error| DeclareError::Io {
            path: file.path.clone(),
            error,
        };
        write_renamed(&file.path, bytes).map_err(io)?;
        outbox.declare(&declared).map_err(io)?;
        let count = declared.len();
        self.registry.set_declared(declared);
        Ok(count)
    }
}

/// Writes `bytes` to `path` through a file beside it, synced and renamed over it.
fn write_renamed(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    {
        let mut out = std::fs::File::create(&tmp)?;
        out.write_all(bytes)?;
        out.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
