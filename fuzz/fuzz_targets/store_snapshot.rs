//! Snapshot files: header, chained frame checksums, end frame, then the contents.
//!
//! An input whose first byte is odd is taken as the contents (database name, rules, root)
//! and framed with correct checksums first, in frames whose sizes the second byte picks, so
//! that the decoder runs across frame boundaries, as version 2 with an epoch when the first
//! byte's second bit is set and version 1 otherwise; any other input is read as a file as it
//! is.
#![no_main]

use hearth_store::{
    read_snapshot, verify_snapshot, MemoryStorage, SNAPSHOT_FORMAT_VERSION, SNAPSHOT_MAGIC,
};
use libfuzzer_sys::fuzz_target;

/// A snapshot file around `contents`, as FORMAT.md describes it; `epoch` 0 makes it version
/// 1, which has none.
fn framed(contents: &[u8], frame_bytes: usize, epoch: u64) -> Vec<u8> {
    let version = if epoch == 0 { 1 } else { SNAPSHOT_FORMAT_VERSION };
    let mut file = Vec::new();
    file.extend_from_slice(&SNAPSHOT_MAGIC);
    file.extend_from_slice(&version.to_le_bytes());
    file.extend_from_slice(&[0; 4]); // header checksum, below
    file.extend_from_slice(&7u64.to_le_bytes()); // covered sequence number
    file.extend_from_slice(&epoch.to_le_bytes());
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
            let epoch = u64::from(mode & 2) * 3;
            (framed(contents, usize::from(*size) + 1, epoch), true)
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
