//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::sync::Arc;

use hearth_store::{open, Recovered, Storage, StoreError, WalOptions};
use hearth_sync::{Change, Write, WriteOp};
use hearth_tree::{Node, Path};
use serde_json::Value;

pub fn path(text: &str) -> Path {
    Path::parse(text).expect("valid test path")
}

/// A set of `value` at `at`.
pub fn set(at: &str, value: Value) -> Write {
    Write {
        base: path(at),
        ops: vec![WriteOp {
            path: Path::root(),
            change: Change::Set(Node::from_json(&value).expect("valid test value")),
        }],
    }
}

/// Segments large enough that most tests stay in one (the real size would make every test
/// zero-fill and scan 64 MiB).
pub fn options() -> WalOptions {
    WalOptions {
        segment_bytes: 64 * 1024,
    }
}

/// Segments of a few records, for rollover and truncation.
pub fn small_segments() -> WalOptions {
    WalOptions {
        segment_bytes: 1024,
    }
}

pub fn reopen<S: Storage + Clone>(
    storage: &S,
    options: WalOptions,
) -> Result<Recovered<S>, StoreError> {
    open(Arc::new(storage.clone()), options)
}

/// The root of `database` after recovery (empty if recovery does not know it).
pub fn root_of<S: Storage>(recovered: &Recovered<S>, database: &str) -> Node {
    recovered
        .databases
        .get(database)
        .map(|state| state.root.clone())
        .unwrap_or_default()
}

/// The offsets of the records of a segment image, from its header on.
pub fn record_offsets(segment: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut offset = hearth_store::SEGMENT_HEADER_BYTES;
    while let Ok((_, size)) = hearth_store::decode_record(&segment[offset..]) {
        offsets.push(offset);
        offset += size;
    }
    offsets
}
