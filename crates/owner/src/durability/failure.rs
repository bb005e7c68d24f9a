//! What a shard does when its log fails (ENOSPC, EIO, a failed sync).
//!
//! The writer refuses everything after a failure, and a failed fdatasync may have dropped
//! pages, so nothing is retried. The shard instead:
//!
//! 1. marks the store failed at once, which holds every message that depends on a write not
//!    yet durable (their tags can no longer be reached) and fails waiting REST answers;
//! 2. then, out of line (the failure may be noticed in the middle of delivering effects):
//!    every database is made read-only; a database with writes that did not reach the disk
//!    goes back to its durable state, and its clients are disconnected with their held
//!    messages dropped, so no client ever sees a write that is not on disk. The SDKs
//!    reconnect, resync and resend their pending writes, which are then refused with an
//!    error the application sees.
//!
//! Reads go on. Writes stay refused until the server is restarted, which reopens the log and
//! re-reads what is really on disk.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::error;

use crate::loaded::Loaded;
use crate::state::Owner;
use crate::state::Session;
use hearth_ground::close::{CloseReason, DISK_FAILED_CLOSE};
use hearth_net::time::now_ms;
use hearth_persist::ShardStore;

/// What clients are told while writes are refused.
pub fn read_only_reason(failure: &str) -> String {
    format!("writes are refused: the server's write-ahead log failed ({failure}); reads go on")
}

/// Records a log failure; the commit task handles it.
pub fn report_failure(owner: &Owner, reason: String) {
    let Some(store) = owner.store() else {
        return;
    };
    if store.failure().is_none() {
        error!(
            shard = owner.index(),
            "the write-ahead log failed: {reason}. Writes are refused from now on and reads go \
             on; restart the server once the disk is fixed"
        );
        owner.health().shard_failed(owner.index(), &reason);
        store.fail(reason);
        owner.counters().never_acked();
    }
    store.notify_commit_task();
}

/// Makes every database read-only and rolls back the ones with writes that are not durable.
pub fn handle_failure(owner: &Owner) {
    let Some(store) = owner.store() else {
        return;
    };
    let Some(reason) = store.failure() else {
        return;
    };
    let read_only: Arc<str> = Arc::from(read_only_reason(&reason));
    let now = now_ms();
    let rolled_back = owner.with_all(|databases| {
        roll_back_databases(store, databases, &read_only, |loaded, rules| {
            owner.apply_rules(loaded, rules, now)
        })
    });
    let close = CloseReason::new(CloseCode::Error, DISK_FAILED_CLOSE);
    for session in owner.sessions().all() {
        match session {
            Session::Socket(handle) if rolled_back.contains(&handle.namespace) => {
                handle.discard_held();
                handle.close(close.clone());
            }
            Session::Stream(stream) if rolled_back.contains(&stream.namespace) => {
                stream.discard_held();
                stream.close();
            }
            Session::Socket(_) | Session::Stream(_) => {}
        }
    }
    error!(
        shard = owner.index(),
        rolled_back = ?rolled_back,
        "databases are read-only; those with writes that did not reach the disk went back to \
         their durable state and their clients were disconnected"
    );
}

/// Makes every database read-only with the reason `read_only` and rolls back those with
/// writes the log did not make durable; `reapply` gives a rolled-back database the rules of
/// its durable state. Returns the names of the rolled-back databases, whose clients must be
/// disconnected with their held messages dropped.
pub fn roll_back_databases(
    store: &ShardStore,
    databases: &mut HashMap<String, Loaded>,
    read_only: &Arc<str>,
    mut reapply: impl FnMut(&mut Loaded, Option<Arc<str>>),
) -> Vec<String> {
    let durable = store.synced_seq();
    let rolled_back: Vec<String> = store
        .databases_to_roll_back(
            databases
                .iter()
                .map(|(name, loaded)| (name.as_str(), loaded.seq())),
        )
        .into_iter()
        .map(str::to_owned)
        .collect();
    for (name, loaded) in databases.iter_mut() {
        if rolled_back.contains(name) {
            let rules = loaded.roll_back(durable);
            reapply(loaded, rules);
        }
        loaded.set_read_only(Some(read_only.clone()));
    }
    rolled_back
}
