//! Entry points for the fuzz targets in `fuzz/` (not part of the storage API).
//!
//! Records and snapshots guard their payloads with checksums, so random bytes almost never
//! reach the value decoder through them; these functions run the decoders of the payload on
//! their own. They are the same code recovery runs, not copies.

use hearth_sync::Write;
use hearth_tree::Node;

use crate::codec::{read_node, read_write, DecodeError, SliceSource};

/// Decodes `bytes` as one value in the encoding of snapshots and records; all must be used.
pub fn decode_value(bytes: &[u8]) -> Result<Node, DecodeError> {
    let mut source = SliceSource::new(bytes);
    let node = read_node(&mut source)?;
    source.finish()?;
    Ok(node)
}

/// Decodes `bytes` as the body of a write record; all must be used.
pub fn decode_write(bytes: &[u8]) -> Result<Write, DecodeError> {
    let mut source = SliceSource::new(bytes);
    let write = read_write(&mut source)?;
    source.finish()?;
    Ok(write)
}
