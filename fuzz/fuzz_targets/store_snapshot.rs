//! Snapshot files: header, chained frame checksums, end frame, then the contents.
#![no_main]

use hearth_store::{read_snapshot, verify_snapshot, MemoryStorage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let storage = MemoryStorage::new();
    let name = "fuzz";
    storage.set_contents(name, data.to_vec());
    let verified = verify_snapshot(&storage, name);
    let read = read_snapshot(&storage, name);
    // A file whose contents decode must also pass the checksum-only check.
    if read.is_ok() {
        assert!(verified.is_ok());
    }
});
