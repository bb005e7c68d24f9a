//! The storage trait: every byte the store reads or writes goes through it.
//!
//! A [`Storage`] is one flat directory of named files (the server gives each shard its own).
//! The trait is deliberately small, so that a backend is easy to write and, above all, so that
//! the fault-injecting backend can model exactly what a crash or a failing disk does at each
//! call: [`crate::FileStorage`] uses `std::fs`, [`crate::MemoryStorage`] keeps bytes in memory,
//! and [`crate::FaultStorage`] adds failures and crash images on top of memory.
//!
//! The durability contract every backend follows, and the store relies on:
//!
//! * `write_at` and `set_len` change the *live* contents at once (reads see them) but make
//!   nothing durable.
//! * `sync_data` makes the file's contents and size durable (fdatasync), not its name.
//! * `create`, `rename` and `remove` change the directory at once but durably only after
//!   `sync_dir`.
//! * After a failed `sync_data` the data written since the last successful one may be lost
//!   even if a later `sync_data` succeeds (Linux drops pages it could not write back).

use std::io;

/// A directory of files.
pub trait Storage: Send + Sync + 'static {
    type File: StorageFile;

    /// Creates `name`, empty; fails if it already exists.
    fn create(&self, name: &str) -> io::Result<Self::File>;

    /// Opens the existing file `name` for reading and writing.
    fn open(&self, name: &str) -> io::Result<Self::File>;

    /// The names of all files, in no particular order.
    fn list(&self) -> io::Result<Vec<String>>;

    /// Renames `from` to `to`, replacing `to` atomically if it exists.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;

    /// Removes `name`.
    fn remove(&self, name: &str) -> io::Result<()>;

    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self) -> io::Result<()>;
}

/// An open file. Positional reads and writes only, so that one handle can be shared between
/// the shard thread and a thread that syncs it.
pub trait StorageFile: Send + Sync + 'static {
    /// The current (live) size in bytes.
    fn size(&self) -> io::Result<u64>;

    /// Fills `buf` with the bytes at `offset`; reading past the end is an `UnexpectedEof` error.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Writes all of `data` at `offset`, growing the file if needed.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Truncates or zero-extends the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Makes the contents and size durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
}

/// Reads all of `file` (used for segments, which are bounded by their header's size).
pub(crate) fn read_all<F: StorageFile>(file: &F) -> io::Result<Vec<u8>> {
    let size = usize::try_from(file.size()?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            "file larger than the address space",
        )
    })?;
    let mut bytes = vec![0; size];
    file.read_at(0, &mut bytes)?;
    Ok(bytes)
}
