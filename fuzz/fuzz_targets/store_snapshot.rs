//! Snapshot files: header, chained frame checksums, end frame, then the contents.
//!
//! An input whose first byte is odd is taken as the contents (database name, rules, root)
//! and framed with correct checksums first, in frames whose sizes the second byte picks, so
//! that the decoder runs across frame boundaries; any other input is read as a file as it is.
#![no_main]

use hearth_store::{
    read_snapshot, verify_snapshot, MemoryStorage, SNAPSHOT_FORMAT_VERSION, SNAPSHOT_MAGIC,
};
use libfuzzer_sys::fuzz_target;

/// A snapshot file around `contents`, as FORMAT.md describes it.
fn framed(contents: &[u8], frame_bytes: usize) -> Vec<u8> {
    let mut file = Vec::new();
    file.extend_from_slice(&SNAPSHOT_MAGIC);
    file.extend_from_slice(&SNAPSHOT_FORMAT_VERSION.to_le_bytes());
    file.extend_from_slice(&[0; 4]); // header checksum, below
    file.extend_from_slice(&7u64.to_le_bytes()); // covered sequence number
    file.extend_from_slice(&[0; 8]);
    let mut crc = crc32c::crc32c_append(crc32c::crc32c(&file[..12]), &file[16..32]);
    file[12..16].copy_from_slice(&crc.to_le_bytes());
    for frame in contents.chunks(frame_bytes) {
        let len = (frame.len() as u32).to_le_bytes();
        crc = crc32c::crc32c_append(crc32c::crc32c_append(crc, &len), frame);
        file.extend_from_slice(&len);
        file.extend_from_slice(&crc.to_le_bytes());
        file.extend_from_slice(frame);
    }
    let total = (contents.len() as u64).to_le_bytes();
    crc = crc32c::crc32c_append(crc32c::crc32c_append(crc, &[0; 4]), &total);
    file.extend_from_slice(&[0; 4]);
    file.extend_from_slice(&crc.to_le_bytes());
    file.extend_from_slice(&total);
    file
}

fuzz_target!(|data: &[u8]| {
    let (file, well_framed) = match data {
        [mode, size, contents @ ..] if mode & 1 == 1 => {
            (framed(contents, usize::from(*size) + 1), true)
        }
        _ => (data.to_vec(), false),
    };
    let storage = MemoryStorage::new();
    let name = "fuzz";
    storage.set_contents(name, file);
    let verified = verify_snapshot(&storage, name);
    if well_framed {
        assert!(
            verified.is_ok(),
            "a correctly framed file failed to verify: {verified:?}"
        );
    }
    // The name never matches the contents, so a read fails, but only after decoding them.
    let _ = read_snapshot(&storage, name);
});
