//! Dropping idle databases from memory, and loading them again on their next use.
//!
//! A database with no clients, no writes in flight and no use for `--evict-idle-secs` is
//! dropped once a snapshot covers all of its log records (one is taken first if needed), so
//! that loading it again is one snapshot read. A server with many databases then holds only
//! the ones in use.

use std::rc::Rc;
use std::time::Instant;

use hearth_store::{read_snapshot, snapshot_name};
use hearth_sync::{Access, Database, Effects};
use tracing::{error, info};

use crate::loaded::Loaded;
use crate::state::Owner;

/// Loads `namespace` from its newest snapshot if it was evicted; `None` if it has none.
pub fn load_evicted(owner: &Owner, namespace: &str, now: u64) -> Option<Loaded> {
    let store = owner.store()?;
    let covered = store.newest_snapshot(namespace)?;
    let started = Instant::now();
    let name = snapshot_name(namespace, covered);
    match read_snapshot(&**store.storage(), &name) {
        Ok(snapshot) => {
            let mut loaded = Loaded::new(
                Rc::from(namespace),
                Database::with_root(snapshot.root),
                covered,
                now,
            );
            if let Some(changes) = store.take_on_disk_changes(namespace) {
                loaded.feeds_mut().recovered(changes);
            }
            owner.apply_rules(&mut loaded, snapshot.rules, now);
            loaded.set_settings(snapshot.settings);
            owner.follow_audit(&mut loaded);
            // Snapshots hold no volatile data, but an import's snapshot may.
            loaded.drop_volatile_data();
            loaded.loaded_from_disk();
            info!(
                namespace,
                shard = owner.index(),
                elapsed_us = started.elapsed().as_micros() as u64,
                "database loaded from its snapshot"
            );
            Some(loaded)
        }
        Err(failure) => {
            // Never pretend the database is empty to its users: it is locked (admins only)
            // and refuses writes, and the log says why.
            error!(namespace, snapshot = %name, %failure, "cannot load an evicted database; it is locked until the server restarts");
            let mut loaded = Loaded::new(Rc::from(namespace), Database::new(), covered, now);
            let mut effects = Effects::new();
            loaded.set_access(Access::Locked, now, &mut effects);
            loaded.set_read_only(Some(std::sync::Arc::from(format!(
                "the database could not be loaded from disk: {failure}"
            ))));
            loaded.unreadable_on_disk();
            Some(loaded)
        }
    }
}
