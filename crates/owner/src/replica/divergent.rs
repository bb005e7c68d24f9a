//! Divergence is never silent: before a full copy from a database's newer owner replaces
//! this node's copy, a copy that differs is kept, logged and counted.
//!
//! A node's copy can hold writes the new owner never had only if they were never
//! acknowledged (decision 58: an owner acknowledges a write only once every node that may
//! take over has it), for instance the writes a cut-off owner took in before its fence closed.
//! They are lost to the database, by design, but an operator may want them: the replaced
//! copy is written, in export form, to `<data-dir>/divergent/<namespace>.epoch-<E>.<ms>.json`
//! (`E`: the epoch of the last record this node held). A copy that merely lacks the new
//! owner's later writes differs too and is kept the same way: comparing the file with the
//! database tells the two apart. An owner that gives up writes at its fence (`sync_set`)
//! keeps the database with them the same way, as `<namespace>.given-up.<ms>.json`, before
//! it goes back to its state without them.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use hearth_store::{Record, RecordBody};
use hearth_sync::Change;
use hearth_tree::Node;
use tracing::warn;

use crate::loaded::Loaded;

/// The folder of the data directory that holds replaced copies.
pub const DIVERGENT_DIR: &str = "divergent";

/// The most bytes the folder may hold: past it copies are still logged and counted, but not
/// written (a node that keeps diverging must not fill its disk).
pub const MAX_DIVERGENT_BYTES: u64 = 1024 * 1024 * 1024;

/// Called before `records`, a full copy of `loaded` from its owner, are applied: keeps
/// this node's copy if it came from an older epoch and differs. `logged_epoch`: the highest
/// epoch this node's log holds for the database (0 when it held nothing).
pub fn keep_replaced(data_dir: &Path, loaded: &Loaded, logged_epoch: u64, records: &[Record]) {
    let Some(copy) = records.iter().find_map(|record| match &record.body {
        RecordBody::Write(write) if write.base.is_root() => match write.ops.as_slice() {
            [op] if op.path.is_root() => match &op.change {
                Change::Set(node) => Some((record.epoch, node)),
                Change::Priority(_) => None,
            },
            _ => None,
        },
        _ => None,
    }) else {
        return;
    };
    let (epoch, tree) = copy;
    let held = loaded.root();
    if logged_epoch == 0 || epoch <= logged_epoch || held == tree || held.is_empty() {
        return;
    }
    hearth_ground::replica_messages::DIVERGENT_COPIES.fetch_add(1, Ordering::Relaxed);
    match keep(
        data_dir,
        loaded.name(),
        &format!("epoch-{logged_epoch}"),
        held,
    ) {
        Ok(file) => warn!(
            namespace = %loaded.name(),
            held_epoch = logged_epoch,
            owner_epoch = epoch,
            file = %file.display(),
            "this node's copy of the database differs from its new owner's and is replaced; \
             the replaced copy is kept in the file (it may hold writes never acknowledged)"
        ),
        Err(error) => warn!(
            namespace = %loaded.name(),
            held_epoch = logged_epoch,
            owner_epoch = epoch,
            %error,
            "this node's copy of the database differs from its new owner's and is replaced; \
             it could not be kept"
        ),
    }
}

/// Before a database whose writes from some point on were given up goes back to its state
/// before them (`sync_set`): keeps its state with them, where an operator finds them.
pub fn keep_given_up(data_dir: &Path, loaded: &Loaded) {
    match keep(data_dir, loaded.name(), "given-up", loaded.root()) {
        Ok(file) => warn!(
            namespace = %loaded.name(),
            file = %file.display(),
            "the database with the writes given up is kept in the file"
        ),
        Err(error) => warn!(
            namespace = %loaded.name(),
            %error,
            "the database with the writes given up could not be kept"
        ),
    }
}

/// Writes `tree` in export form to `<data_dir>/divergent/<name>.<label>.<ms>.json`.
fn keep(data_dir: &Path, name: &str, label: &str, tree: &Node) -> std::io::Result<PathBuf> {
    let dir = data_dir.join(DIVERGENT_DIR);
    let file = dir.join(format!(
        "{name}.{label}.{}.json",
        hearth_net::time::now_ms()
    ));
    if folder_bytes(&dir) > MAX_DIVERGENT_BYTES {
        return Err(std::io::Error::other(format!(
            "the folder holds more than {MAX_DIVERGENT_BYTES} bytes"
        )));
    }
    let mut json = Vec::new();
    tree.write_json(&mut json, true);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(&file, json)?;
    Ok(file)
}

fn folder_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(|entry| entry.ok()?.metadata().ok())
            .map(|metadata| metadata.len())
            .sum()
    })
}
