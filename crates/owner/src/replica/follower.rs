//! The follower side of replication: records of a database another node owns are applied to
//! this node's copy and appended to this node's log (`pending` acknowledges them, by the
//! owner's sequence number, once this node's log has synced them).

use std::sync::Arc;

use hearth_store::{decode_record, RecordBody, RecordRef};
use tracing::warn;

use crate::state::Owner;
use hearth_net::time::now_ms;

/// Why a follower refuses writes to its copy: the owner takes them (clients reach it through
/// the link anyway). Claiming the database under etcd (failover, `cluster::fence`) lifts it.
pub const FOLLOWER_READ_ONLY: &str =
    "this node keeps a replica of the database; writes go to the node that owns it";

/// Applies `records` (log records of `namespace`) to this node's copy and appends them to its
/// log. `reset`: they are a full copy, which replaces this node's (a differing one from an
/// older owner is kept first: `divergent`). Returns the local sequence number of the last,
/// `None` when they were refused.
pub fn apply(owner: &Owner, namespace: &str, records: &[u8], reset: bool) -> Option<u64> {
    let mut decoded = Vec::new();
    let mut rest = records;
    while !rest.is_empty() {
        match decode_record(rest) {
            Ok((record, size)) if &*record.database == namespace => {
                decoded.push(record);
                rest = rest.get(size..).unwrap_or_default();
            }
            Ok(_) => return None,
            Err(error) => {
                warn!(namespace, %error, "a replicated record is damaged");
                return None;
            }
        }
    }
    // A deposed owner's late records: this log already holds a later epoch of the database
    // (it claimed it, or followed a newer owner). Refused before anything is applied, so the
    // copy never mixes two owners' histories; the old owner gets no acknowledgement.
    let logged = owner
        .store()
        .map_or(0, |store| store.logged_epoch(namespace));
    if let Some(stale) = decoded.iter().find(|record| record.epoch < logged) {
        warn!(
            namespace,
            epoch = stale.epoch,
            logged,
            "replicated records of an older epoch than this log's are refused"
        );
        return None;
    }
    let now = now_ms();
    let (failure, local) = owner.with_database(namespace, |loaded| {
        if reset && owner.store().is_some() {
            super::divergent::keep_replaced(&owner.config().data_dir, loaded, logged, &decoded);
        }
        let mut failure = None;
        for record in decoded {
            // Logged under the owner's epoch, so that this copy's log tells owners apart too
            // and a claim here later must be newer (`cluster::fence`).
            loaded.set_epoch(record.epoch);
            let appended = match &record.body {
                RecordBody::Write(write) => {
                    loaded.apply_replicated(write);
                    owner.counters().write_applied();
                    owner
                        .store()
                        .map(|store| loaded.log_to(store, RecordRef::Write(write)))
                }
                RecordBody::Rules(text) => {
                    // An empty text is the server's default (a full copy of a database
                    // whose rules were never set through the API).
                    let rules = (!text.is_empty()).then(|| Arc::clone(text));
                    owner.apply_rules(loaded, rules, now);
                    owner
                        .store()
                        .map(|store| loaded.log_to(store, RecordRef::Rules(text)))
                }
                RecordBody::Settings(text) => {
                    loaded.set_settings(Some(Arc::clone(text)));
                    owner
                        .store()
                        .map(|store| loaded.log_to(store, RecordRef::Settings(text)))
                }
                // The owner's entry of the write before it: this node's trail copies it
                // once its own log has it, so that a failover keeps the trail.
                RecordBody::Audit(entry) => owner
                    .store()
                    .map(|store| loaded.log_to(store, RecordRef::Audit(entry))),
                // The owner's event for a declared trigger: this node's outbox keeps it once
                // its own log has it, and delivers it if this node takes the database over.
                RecordBody::Triggered(event) => owner
                    .store()
                    .map(|store| loaded.log_to(store, RecordRef::Triggered(event))),
                _ => None,
            };
            if let Some(Err(error)) = appended {
                failure = Some(error.to_string());
                break;
            }
        }
        if loaded.read_only_reason().is_none() {
            // A reason of the cluster's, like the fence's own: under etcd, the fence lifts it
            // once this node claims the database (failover), and not before.
            loaded.fence(Some(FOLLOWER_READ_ONLY));
        }
        let local = loaded.seq();
        (failure, local)
    });
    if let Some(reason) = failure {
        crate::durability::report_failure(owner, reason);
        return None;
    }
    Some(local)
}
