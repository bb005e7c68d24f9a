//! hearth-tree: the data model of a Firebase-Realtime-Database-compatible server.
//!
//! * [`Key`] and [`Path`]: validated names and locations, ordered as the JS client orders them.
//! * [`Priority`] and [`Leaf`]: the scalar parts of a node.
//! * [`Node`]: an immutable, structurally shared tree with O(log n) copy-on-write updates,
//!   JSON conversion in plain and export form, and the node hash that clients send with
//!   transactions.
//! * [`ObjectBuilder`]: an object built from children in key order straight into its stored
//!   form (what the store's snapshot reader uses).
//! * [`compare_values`], [`compare_keys`], [`compare_utf16`]: the orders queries use.
//!
//! Everything that must agree with the client bit for bit (orders, hash, number text) is
//! tested against vectors captured from the real client (spec §9, §10).

mod builder;
mod children;
mod chunk_cutter;
mod chunk_index;
mod chunked;
mod digest;
mod estimate;
mod hash;
mod hash_java;
mod json;
mod json_write;
mod key;
mod leaf;
mod limits;
mod node;
mod number;
mod order;
mod packed;
mod packing;
mod path;
mod priority;
mod raw;
mod read;
mod surrogates;
#[cfg(test)]
mod testing;
mod update;

pub use builder::ObjectBuilder;
pub use key::{compare_keys, compare_utf16, Key};
pub use leaf::Leaf;
pub use limits::{TreeError, MAX_DEPTH, MAX_KEY_BYTES, MAX_PATH_BYTES, MAX_STRING_BYTES};
pub use node::Node;
pub use order::compare_values;
pub use path::Path;
pub use priority::Priority;
pub use raw::{RawEntries, RawObject, RawValue};
pub use read::{Children, ChildrenRange};
pub use surrogates::{replace_lone_surrogates, replace_lone_surrogates_str};
