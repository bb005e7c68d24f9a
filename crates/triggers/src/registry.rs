//! The server's registered triggers, shared by every shard: a registration (rare, on any
//! shard) replaces the whole list, and a database's owner reads it without a lock, checking
//! one counter per step to see whether it changed since it last took its triggers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use hearth_sync::triggers::{Trigger, TriggerSource, MAX_TRIGGERS_PER_DATABASE};

use crate::declared::Declared;
use crate::registration::Registration;

/// The most triggers a server holds (the Functions emulator registers each function once,
/// and again under the same name when its code changes).
pub const MAX_TRIGGERS: usize = 10_000;

/// Why a registration was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("the server holds {MAX_TRIGGERS} triggers, the most it takes")]
    Full,
    #[error("a database may have at most {MAX_TRIGGERS_PER_DATABASE} triggers")]
    DatabaseFull,
}

/// Every registered trigger.
#[derive(Debug, Default)]
pub struct TriggerRegistry {
    /// Serializes registrations; readers never take it.
    writer: Mutex<()>,
    current: ArcSwap<Vec<Arc<Registration>>>,
    /// Moves on with every change of the list.
    generation: AtomicU64,
    /// The triggers of the server's triggers file (`declared`), replaced whole by a new
    /// declaration: their changes are logged and delivered from the outbox, not to a
    /// Functions emulator.
    declared: ArcSwap<Vec<Arc<Declared>>>,
    /// Whether triggers may be declared (the server has an outbox).
    declarable: bool,
}

impl TriggerRegistry {
    pub fn new() -> TriggerRegistry {
        TriggerRegistry::default()
    }

    /// A registry holding the declared triggers `declared` besides what the Functions
    /// emulator registers, and taking new declarations.
    pub fn with_declared(declared: Vec<Arc<Declared>>) -> TriggerRegistry {
        TriggerRegistry {
            declared: ArcSwap::from_pointee(declared),
            declarable: true,
            ..TriggerRegistry::default()
        }
    }

    /// Replaces the declared triggers: every database takes them at its next write.
    pub fn set_declared(&self, declared: Vec<Arc<Declared>>) {
        self.declared.store(Arc::new(declared));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The declared trigger named `name`, if any.
    pub fn declared(&self, name: &str) -> Option<Arc<Declared>> {
        self.declared
            .load()
            .iter()
            .find(|d| &*d.trigger.name == name)
            .cloned()
    }

    /// Whether triggers may be declared on this server (then every database follows the
    /// registry, to take a declaration made while it is loaded).
    pub fn is_declarable(&self) -> bool {
        self.declarable
    }

    /// Adds `registration`, or replaces the one of the same name (the Functions emulator
    /// registers a function again when its code changes, under the same name).
    pub fn register(&self, registration: Registration) -> Result<(), RegistryError> {
        let _writer = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut list: Vec<Arc<Registration>> = self.current.load().as_ref().clone();
        match list.iter().position(|r| r.name() == registration.name()) {
            Some(index) => list[index] = Arc::new(registration),
            None if list.len() >= MAX_TRIGGERS => return Err(RegistryError::Full),
            None => {
                let per_database = list
                    .iter()
                    .filter(|r| r.databases == registration.databases)
                    .count();
                if per_database >= MAX_TRIGGERS_PER_DATABASE {
                    return Err(RegistryError::DatabaseFull);
                }
                list.push(Arc::new(registration));
            }
        }
        self.current.store(Arc::new(list));
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Moves on with every change: a database's owner compares it with the one its
    /// triggers were taken at.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The triggers of `namespace`: the declared ones, then the registered ones in the
    /// order they were registered.
    pub fn for_database(&self, namespace: &str) -> Arc<[Trigger]> {
        let declared = self.declared.load();
        declared
            .iter()
            .filter(|d| d.databases.admits(namespace))
            .map(|d| d.trigger.clone())
            .chain(
                self.current
                    .load()
                    .iter()
                    .filter(|r| r.databases.admits(namespace))
                    .map(|r| r.trigger.clone()),
            )
            .collect()
    }

    /// The registration named `name`, if it is still registered.
    pub fn get(&self, name: &str) -> Option<Arc<Registration>> {
        self.current
            .load()
            .iter()
            .find(|r| &*r.trigger.name == name)
            .cloned()
    }

    /// Every registration, for `GET /.settings/functionTriggers.json`.
    pub fn all(&self) -> Arc<Vec<Arc<Registration>>> {
        self.current.load_full()
    }
}

impl TriggerSource for TriggerRegistry {
    fn generation(&self) -> u64 {
        TriggerRegistry::generation(self)
    }

    fn triggers_of(&self, database: &str) -> Arc<[Trigger]> {
        self.for_database(database)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(key: &str, path: &str, ns: Option<&str>) -> Registration {
        let body = match ns {
            Some(_) => format!(
                r#"{{"name":"projects/p/locations/_/functions/{key}","path":"{path}",
                "event":"providers/google.firebase.database/eventTypes/ref.write"}}"#
            ),
            None => format!(
                r#"{{"name":"projects/p/locations/l/triggers/{key}","path":"{path}",
                "event":"google.firebase.database.ref.v1.written","namespacePattern":"*"}}"#
            ),
        };
        Registration::parse(body.as_bytes(), ns).expect("parses")
    }

    #[test]
    fn a_registration_of_the_same_name_replaces_the_first() {
        let registry = TriggerRegistry::new();
        let start = registry.generation();
        registry
            .register(registration("a", "/x", Some("db")))
            .expect("room");
        registry
            .register(registration("b", "/y", None))
            .expect("room");
        registry
            .register(registration("a", "/z", Some("db")))
            .expect("room");
        assert_eq!(registry.generation(), start + 3);
        let triggers = registry.for_database("db");
        let patterns: Vec<String> = triggers.iter().map(|t| t.pattern.to_string()).collect();
        assert_eq!(patterns, vec!["/z", "/y"]);
        let others: Vec<String> = registry
            .for_database("other")
            .iter()
            .map(|t| t.pattern.to_string())
            .collect();
        assert_eq!(others, vec!["/y"], "a v2 trigger for every database");
        assert!(registry.get("projects/p/locations/_/functions/a").is_some());
        assert_eq!(registry.all().len(), 2);
    }

    #[test]
    fn a_database_holds_a_bounded_number_of_triggers() {
        let registry = TriggerRegistry::new();
        for i in 0..MAX_TRIGGERS_PER_DATABASE {
            registry
                .register(registration(&format!("k{i}"), "/x", Some("db")))
                .expect("room");
        }
        assert_eq!(
            registry.register(registration("more", "/x", Some("db"))),
            Err(RegistryError::DatabaseFull)
        );
        registry
            .register(registration("k0", "/y", Some("db")))
            .expect("a replacement takes no room");
    }
}
