//! A database's lifecycle on its owner: found in memory, loaded from its snapshot after an
//! eviction, created on first use, fenced by the cluster's claim, given its rules, and logged.
//! Every lookup goes through a closure, so a borrow of the map never outlives a step of a
//! database or crosses an `await`.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use hearth_store::RecordRef;
use hearth_sync::{Access, Database, Effects, Write};
use tracing::{debug, info, warn};

use crate::durability::read_only_reason;
use crate::loaded::Loaded;
use crate::rules_file::default_access;
use crate::state::Owner;
use hearth_net::time::now_ms;
use hearth_persist::{ShardStore, Tagger};

impl Owner {
    /// Runs `f` on the database of `namespace`: loaded from its snapshot if it was evicted,
    /// created on first use. The map is borrowed only while `f` runs ([`Owner::with_loaded`]).
    pub fn with_database<R>(&self, namespace: &str, f: impl FnOnce(&mut Loaded) -> R) -> R {
        self.with_all(|databases| f(self.database_in(databases, namespace)))
    }

    /// Runs `f` on the database of `namespace` if it exists, in memory or on disk (then it
    /// is loaded): for reads, which must not make a database of a mistyped name.
    pub fn with_existing_database<R>(
        &self,
        namespace: &str,
        f: impl FnOnce(&mut Loaded) -> R,
    ) -> Option<R> {
        self.with_all(|databases| self.existing_database_in(databases, namespace).map(f))
    }

    /// The database of `namespace` in `databases`: loaded from its snapshot if it was
    /// evicted, created on first use.
    pub fn database_in<'a>(
        &self,
        databases: &'a mut HashMap<String, Loaded>,
        namespace: &str,
    ) -> &'a mut Loaded {
        let now = now_ms();
        let loaded = match databases.entry(namespace.to_owned()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                let loaded = crate::durability::load_evicted(self, namespace, now)
                    .unwrap_or_else(|| self.new_database(namespace, now));
                entry.insert(loaded)
            }
        };
        loaded.touched(now);
        if self.triggers().delivers() {
            loaded.follow_triggers(|| self.triggers().registry().clone());
        }
        self.fence(loaded);
        self.note_trigger_role(loaded);
        loaded
    }

    /// The database of `namespace` in `databases` if it exists, in memory or on disk (then
    /// it is loaded).
    fn existing_database_in<'a>(
        &self,
        databases: &'a mut HashMap<String, Loaded>,
        namespace: &str,
    ) -> Option<&'a mut Loaded> {
        let now = now_ms();
        let loaded = match databases.entry(namespace.to_owned()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                entry.insert(crate::durability::load_evicted(self, namespace, now)?)
            }
        };
        loaded.touched(now);
        self.fence(loaded);
        Some(loaded)
    }

    /// In a cluster, lets the database take writes only while this node's claim on it is
    /// valid (`cluster::fence`); checked at every lookup, so a claim that lapses refuses the
    /// next write.
    pub fn fence(&self, loaded: &mut Loaded) {
        let Some(placement) = self.config().cluster.as_ref() else {
            return;
        };
        let store = self.store();
        let disk_failed = store.is_some_and(|store| store.failure().is_some());
        let logged_epoch = store.map_or(0, |store| store.logged_epoch(loaded.name()));
        crate::cluster::fence::apply(placement, disk_failed, logged_epoch, loaded);
    }

    /// Adds the databases recovered from the store at start.
    pub fn add_recovered(
        &self,
        recovered: std::collections::BTreeMap<Arc<str>, hearth_store::RecoveredDatabase>,
    ) {
        let now = now_ms();
        self.with_all(|databases| {
            for (name, state) in recovered {
                let mut loaded = Loaded::new(
                    Rc::from(&*name),
                    Database::with_root(state.root),
                    state.seq,
                    now,
                );
                loaded.feeds_mut().recovered(state.changes);
                self.apply_rules(&mut loaded, state.rules, now);
                loaded.set_settings(state.settings);
                self.follow_audit(&mut loaded);
                // Volatile data that reached the log inside a durable write above its mark does
                // not survive a restart.
                loaded.drop_volatile_data();
                loaded.loaded_from_disk();
                databases.insert(name.to_string(), loaded);
            }
        });
    }

    /// A new, empty database with the server's default rules. It is announced in the log
    /// only with its first write (`log`): a listener alone leaves nothing behind.
    pub fn new_database(&self, namespace: &str, now: u64) -> Loaded {
        debug!(
            namespace,
            shard = self.index(),
            "new database opened in memory"
        );
        let mut loaded = Loaded::new(
            Rc::from(namespace),
            Database::new(),
            self.gate().durable(),
            now,
        );
        self.apply_rules(&mut loaded, None, now);
        self.follow_audit(&mut loaded);
        loaded
    }

    /// Sets whether `loaded`'s writes are audited (the server's trail and `--audit`, then its
    /// settings) and tells the trail how long it keeps them. Called once its settings are
    /// known, and again whenever they change.
    pub fn follow_audit(&self, loaded: &mut Loaded) {
        let audit = &self.config().audit;
        loaded.set_audit_policy(audit.trail.is_some(), audit.by_default);
        if let (Some(trail), true) = (&audit.trail, loaded.is_audited()) {
            let days = loaded.settings().audit_retention(audit.retention_days);
            trail.retain(Arc::from(&**loaded.name()), days);
        }
    }

    /// Gives a database the rules `text` set through the API, or the server's default.
    pub fn apply_rules(&self, loaded: &mut Loaded, text: Option<Arc<str>>, now: u64) {
        let config = self.config();
        let access = match text.as_deref().map(hearth_rules::Rules::parse) {
            Some(Ok(rules)) => Access::Rules(Arc::new(rules)),
            Some(Err(error)) => {
                warn!(namespace = %loaded.name(), %error, "stored rules do not compile; using the default rules");
                default_access(config.default_rules.clone(), config.dev)
            }
            None => default_access(config.default_rules.clone(), config.dev),
        };
        // Called before the database has subscribers, or with the effects routed by the
        // caller: nothing to revoke here.
        let mut effects = Effects::new();
        loaded.set_access(access, now, &mut effects);
        // In development the log says which rule refused a request, where in the rules, and
        // the emulator's rules coverage report is kept.
        if config.dev {
            let name = Arc::from(&**loaded.name());
            loaded.explain_refusals(Some(name));
            loaded.record_coverage();
        }
        loaded.set_rules(text);
        if let Some(reason) = self.store().and_then(ShardStore::failure) {
            loaded.set_read_only(Some(Arc::from(read_only_reason(&reason))));
        }
    }

    /// The tagger for the outbound queue of a client of `namespace`.
    pub fn tagger(&self, namespace: &str) -> Tagger {
        let database_seq = self.with_database(namespace, |loaded| loaded.shared_seq());
        Tagger {
            gate: self.gate().clone(),
            database_seq,
        }
    }

    /// Sends an applied write to the log: its record's position, `None` without a log or when
    /// the log refused it.
    pub fn log_write(&self, namespace: &str, write: &Write) -> Option<u64> {
        self.counters().write_applied();
        let logged = self.log(namespace, RecordRef::Write(write));
        if let Some(seq) = logged.filter(|_| self.gate().is_strict()) {
            self.counters().awaiting_ack(seq);
        }
        logged
    }

    /// Sends a change of rules set through the API to the log.
    pub fn log_rules(&self, namespace: &str, text: &str) {
        self.log(namespace, RecordRef::Rules(text));
    }

    /// Sends a change of a database's settings document to the log.
    pub fn log_settings(&self, namespace: &str, text: &str) {
        self.log(namespace, RecordRef::Settings(text));
    }

    /// Sends a change for a declared trigger (`TRIGGER\nID\nEVENT`) to the log, right after
    /// its write.
    pub fn log_triggered(&self, namespace: &str, text: &str) {
        self.log(namespace, RecordRef::Triggered(text));
    }

    /// Sends the audit entry of the write just logged to the log, right after it.
    pub fn log_audit(&self, namespace: &str, entry: &str) {
        self.log(namespace, RecordRef::Audit(entry));
    }

    /// Appends a record for `namespace` and returns its position. If the log cannot take
    /// it, the database's clients are held (the change is in memory but will never be
    /// durable) until the failure is handled.
    fn log(&self, namespace: &str, body: RecordRef<'_>) -> Option<u64> {
        let logged =
            self.with_loaded(namespace, |loaded| self.log_loaded(loaded, namespace, body))?;
        match logged {
            Ok(seq) => seq,
            Err(error) => {
                crate::durability::report_failure(self, error.to_string());
                None
            }
        }
    }

    /// [`Owner::log`] for a loaded database: its record's position (`None` without a log),
    /// or the log's error, which the caller reports once the database is let go.
    fn log_loaded(
        &self,
        loaded: &mut Loaded,
        namespace: &str,
        body: RecordRef<'_>,
    ) -> Result<Option<u64>, hearth_store::StoreError> {
        if matches!(body, RecordRef::Write(_)) {
            loaded.wrote();
        }
        if loaded.announce() {
            info!(
                namespace,
                shard = self.index(),
                "database created by its first write"
            );
        }
        let Some(store) = self.store() else {
            return Ok(None);
        };
        loaded.log_to(store, body)?;
        if let Some(replication) = self.replication() {
            // The epoch the record was just logged under, as `ShardStore::append` chose it:
            // the claim's, else the log's last for the database.
            let epoch = loaded
                .epoch()
                .unwrap_or_else(|| store.logged_epoch(namespace));
            let events = |database: &str, room: u64| self.copy_events(database, room);
            replication.ship(loaded, loaded.seq(), epoch, body, &events);
        }
        Ok(Some(loaded.seq()))
    }
}
