//! Log records and the value encoding they share with snapshots.
//!
//! * `v` + bytes: the value and write decoders on their own (random bytes would almost never
//!   get past a record's checksum to reach them).
//! * otherwise a record (log format 2, whose header carries a fencing epoch); when its first
//!   byte is odd the target first writes a correct length and the checksum, so that the
//!   payload decoder runs.
#![no_main]

use hearth_store::fuzzing::{decode_value, decode_write};
use hearth_store::{decode_record, RECORD_HEADER_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((b'v', encoded)) = data.split_first() {
        let _ = decode_value(encoded);
        let _ = decode_write(encoded);
        return;
    }
    let mut bytes = data.to_vec();
    if bytes.len() >= RECORD_HEADER_BYTES && bytes[0] & 1 == 1 {
        // Layout in crates/store/FORMAT.md: crc | length | seq | synced | kind | epoch (u56).
        let payload = (bytes.len() - RECORD_HEADER_BYTES) as u32;
        bytes[4..8].copy_from_slice(&payload.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[4..]);
        bytes[..4].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok((_, size)) = decode_record(&bytes) {
        assert!(size <= bytes.len());
    }
});
