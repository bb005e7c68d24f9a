//! The in-memory backend: a map of names to byte vectors. Syncs do nothing, since nothing
//! here outlives the process; tests that need crashes use [`crate::FaultStorage`].

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::storage::{Storage, StorageFile};

type Bytes = Arc<Mutex<Vec<u8>>>;

/// A directory in memory. Clones share the same files.
#[derive(Debug, Clone, Default)]
pub struct MemoryStorage {
    files: Arc<Mutex<BTreeMap<String, Bytes>>>,
}

/// A file of a [`MemoryStorage`]; it stays usable after its name is removed, as on Unix.
#[derive(Debug)]
pub struct MemoryFile {
    bytes: Bytes,
}

/// Locks a mutex, ignoring poisoning: a panic elsewhere cannot leave a byte vector in a state
/// that later reads would misinterpret, and tests want to see the bytes anyway.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no file {name:?}"))
}

impl MemoryStorage {
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }

    /// A copy of the bytes of `name`, for tests.
    pub fn contents(&self, name: &str) -> Option<Vec<u8>> {
        let files = lock(&self.files);
        files.get(name).map(|bytes| lock(bytes).clone())
    }

    /// Replaces the bytes of `name` (creating it), for tests that forge damage.
    pub fn set_contents(&self, name: &str, data: Vec<u8>) {
        lock(&self.files).insert(name.to_owned(), Arc::new(Mutex::new(data)));
    }

    /// Changes one byte of `name` with `xor`; false if there is no such file or byte.
    pub fn flip(&self, name: &str, offset: u64, xor: u8) -> bool {
        let files = lock(&self.files);
        let Some(bytes) = files.get(name) else {
            return false;
        };
        let mut bytes = lock(bytes);
        match usize::try_from(offset)
            .ok()
            .and_then(|offset| bytes.get_mut(offset))
        {
            Some(byte) => {
                *byte ^= xor;
                true
            }
            None => false,
        }
    }
}

impl Storage for MemoryStorage {
    type File = MemoryFile;

    fn create(&self, name: &str) -> io::Result<MemoryFile> {
        let mut files = lock(&self.files);
        if files.contains_key(name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{name:?} exists"),
            ));
        }
        let bytes = Bytes::default();
        files.insert(name.to_owned(), bytes.clone());
        Ok(MemoryFile { bytes })
    }

    fn open(&self, name: &str) -> io::Result<MemoryFile> {
        let files = lock(&self.files);
        let bytes = files.get(name).ok_or_else(|| not_found(name))?;
        Ok(MemoryFile {
            bytes: bytes.clone(),
        })
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(lock(&self.files).keys().cloned().collect())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut files = lock(&self.files);
        let bytes = files.remove(from).ok_or_else(|| not_found(from))?;
        files.insert(to.to_owned(), bytes);
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        lock(&self.files)
            .remove(name)
            .map(drop)
            .ok_or_else(|| not_found(name))
    }

    fn sync_dir(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Copies `data` into `bytes` at `offset`, zero-extending as a file does.
pub(crate) fn write_into(bytes: &mut Vec<u8>, offset: u64, data: &[u8]) -> io::Result<()> {
    let start = usize::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset beyond memory"))?;
    let end = start + data.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(data);
    Ok(())
}

/// Copies the bytes at `offset` into `buf`, or fails with `UnexpectedEof` as a file does.
pub(crate) fn read_from(bytes: &[u8], offset: u64, buf: &mut [u8]) -> io::Result<()> {
    let range = usize::try_from(offset)
        .ok()
        .and_then(|start| Some(start..start.checked_add(buf.len())?))
        .filter(|range| range.end <= bytes.len())
        .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
    buf.copy_from_slice(&bytes[range]);
    Ok(())
}

/// Resizes `bytes` to `len`, as `ftruncate` does.
pub(crate) fn resize(bytes: &mut Vec<u8>, len: u64) -> io::Result<()> {
    let len = usize::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length beyond memory"))?;
    bytes.resize(len, 0);
    Ok(())
}

impl StorageFile for MemoryFile {
    fn size(&self) -> io::Result<u64> {
        Ok(lock(&self.bytes).len() as u64)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        read_from(&lock(&self.bytes), offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        write_into(&mut lock(&self.bytes), offset, data)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        resize(&mut lock(&self.bytes), len)
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_directory() -> io::Result<()> {
        let storage = MemoryStorage::new();
        let file = storage.create("a")?;
        file.write_at(2, b"xy")?;
        assert_eq!(storage.contents("a"), Some(b"\0\0xy".to_vec()));
        assert!(storage.create("a").is_err());
        storage.rename("a", "b")?;
        assert!(storage.open("a").is_err());
        let mut buf = [0; 2];
        storage.open("b")?.read_at(2, &mut buf)?;
        assert_eq!(&buf, b"xy");
        assert!(storage.open("b")?.read_at(3, &mut buf).is_err());
        assert!(storage.flip("b", 3, 1));
        assert_eq!(storage.contents("b"), Some(b"\0\0xx".to_vec()));
        file.set_len(1)?;
        assert_eq!(storage.contents("b"), Some(vec![0]));
        storage.remove("b")?;
        assert!(storage.list()?.is_empty());
        Ok(())
    }
}
