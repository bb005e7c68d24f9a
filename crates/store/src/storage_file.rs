//! The real backend: files in one directory through `std::fs`, synced with fdatasync.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::storage::{Storage, StorageFile};

/// A directory on a real file system.
#[derive(Debug, Clone)]
pub struct FileStorage {
    dir: PathBuf,
}

impl FileStorage {
    /// Uses `dir`, creating it (and its parents) if needed.
    pub fn open(dir: impl AsRef<Path>) -> io::Result<FileStorage> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        Ok(FileStorage { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &str) -> io::Result<PathBuf> {
        // Names come from the store itself; refusing separators keeps every file inside `dir`
        // even if a caller passes a hostile database name past validation.
        if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid file name {name:?}"),
            ));
        }
        Ok(self.dir.join(name))
    }
}

/// A file of a [`FileStorage`].
#[derive(Debug)]
pub struct RealFile {
    file: File,
}

impl Storage for FileStorage {
    type File = RealFile;

    fn create(&self, name: &str) -> io::Result<RealFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(self.path(name)?)?;
        Ok(RealFile { file })
    }

    fn open(&self, name: &str) -> io::Result<RealFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.path(name)?)?;
        Ok(RealFile { file })
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            // A name that is not UTF-8 was not written by the store; recovery ignores it.
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        fs::rename(self.path(from)?, self.path(to)?)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.path(name)?)
    }

    fn sync_dir(&self) -> io::Result<()> {
        sync_directory(&self.dir)
    }
}

/// fsync of the directory itself, which is what makes a creation, rename or removal durable.
#[cfg(unix)]
fn sync_directory(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Windows cannot open a directory as a file; NTFS journals directory changes itself.
#[cfg(not(unix))]
fn sync_directory(_dir: &Path) -> io::Result<()> {
    Ok(())
}

impl StorageFile for RealFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        read_exact_at(&self.file, offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        write_all_at(&self.file, offset, data)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(unix)]
fn write_all_at(file: &File, offset: u64, data: &[u8]) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, data, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(windows)]
fn write_all_at(file: &File, mut offset: u64, mut data: &[u8]) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !data.is_empty() {
        match file.seek_write(data, offset)? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => {
                data = &data[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip_through_the_directory() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let storage = FileStorage::open(dir.path().join("shard-0"))?;
        let file = storage.create("a")?;
        file.write_at(4, b"data")?;
        file.sync_data()?;
        assert_eq!(file.size()?, 8);
        let mut buf = [0xff; 8];
        file.read_at(0, &mut buf)?;
        assert_eq!(&buf, b"\0\0\0\0data");
        assert!(storage.create("a").is_err(), "create never truncates");
        storage.rename("a", "b")?;
        storage.sync_dir()?;
        assert_eq!(storage.list()?, vec!["b".to_owned()]);
        let reopened = storage.open("b")?;
        assert_eq!(
            reopened.read_at(6, &mut buf).map_err(|e| e.kind()),
            Err(io::ErrorKind::UnexpectedEof)
        );
        storage.remove("b")?;
        assert!(storage.list()?.is_empty());
        assert!(storage.open("../escape").is_err());
        Ok(())
    }
}
