//! The backup archive: a stream of named files, each cut into length-prefixed chunks, so that
//! a file can be written before its size is known (a snapshot is serialized as it streams).
//!
//! ```text
//! archive = magic "HEARTHBK", u32 version (1), entry*, end
//! entry   = u8 1, u16 name length, name (UTF-8), chunk*, u32 0
//! chunk   = u32 length (1 ..= MAX_CHUNK_BYTES), that many bytes
//! end     = u8 0, u64 number of entries
//! ```
//!
//! Integers are little-endian. Names are relative paths with `/` (`backup.json`,
//! `shard-0/snap-<database>-<seq>`); what they may be is the reader's caller's to check.
//! The end record is what tells a complete archive from one whose server failed midway.
//! The snapshots inside carry their own checksums (crates/store/FORMAT.md).

use std::io::{self, Read, Write};

pub const MAGIC: [u8; 8] = *b"HEARTHBK";
pub const VERSION: u32 = 1;

/// The largest chunk a writer makes and a reader accepts.
pub const MAX_CHUNK_BYTES: usize = 256 * 1024;

/// The longest entry name.
pub const MAX_NAME_BYTES: usize = 512;

const ENTRY: u8 = 1;
const END: u8 = 0;

/// Writes an archive.
pub struct ArchiveWriter<W: Write> {
    out: W,
    entries: u64,
    in_file: bool,
}

impl<W: Write> ArchiveWriter<W> {
    pub fn new(mut out: W) -> io::Result<ArchiveWriter<W>> {
        out.write_all(&MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        Ok(ArchiveWriter {
            out,
            entries: 0,
            in_file: false,
        })
    }

    pub fn begin_file(&mut self, name: &str) -> io::Result<()> {
        if self.in_file || name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot begin archive entry {name:?}"),
            ));
        }
        self.out.write_all(&[ENTRY])?;
        self.out.write_all(&(name.len() as u16).to_le_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.in_file = true;
        Ok(())
    }

    /// Appends bytes to the file begun last.
    pub fn write_chunk(&mut self, bytes: &[u8]) -> io::Result<()> {
        for chunk in bytes.chunks(MAX_CHUNK_BYTES) {
            self.out.write_all(&(chunk.len() as u32).to_le_bytes())?;
            self.out.write_all(chunk)?;
        }
        Ok(())
    }

    pub fn end_file(&mut self) -> io::Result<()> {
        self.out.write_all(&0u32.to_le_bytes())?;
        self.in_file = false;
        self.entries += 1;
        Ok(())
    }

    /// A whole file in one call.
    pub fn file(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.begin_file(name)?;
        self.write_chunk(bytes)?;
        self.end_file()
    }

    /// Writes the end record and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&[END])?;
        self.out.write_all(&self.entries.to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Why an archive cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("reading the backup: {0}")]
    Io(#[from] io::Error),
    #[error("not a Hearth backup archive (wrong magic bytes)")]
    NotAnArchive,
    #[error("backup archive version {0}; this build reads version {VERSION}")]
    Version(u32),
    #[error("the backup archive is damaged: {0}")]
    Damaged(String),
    #[error("the backup archive ends before its end record: the server did not finish it")]
    Truncated,
}

/// Reads an archive.
pub struct ArchiveReader<R: Read> {
    input: R,
    entries: u64,
}

impl<R: Read> ArchiveReader<R> {
    pub fn new(mut input: R) -> Result<ArchiveReader<R>, ArchiveError> {
        let mut head = [0u8; 12];
        read_exact(&mut input, &mut head)?;
        if head[..8] != MAGIC {
            return Err(ArchiveError::NotAnArchive);
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if version != VERSION {
            return Err(ArchiveError::Version(version));
        }
        Ok(ArchiveReader { input, entries: 0 })
    }

    /// The name of the next file, or `None` at a valid end record. The file's bytes must be
    /// read with [`ArchiveReader::copy_file`] before the next call.
    pub fn next_file(&mut self) -> Result<Option<String>, ArchiveError> {
        let mut kind = [0u8; 1];
        read_exact(&mut self.input, &mut kind)?;
        match kind[0] {
            END => {
                let mut count = [0u8; 8];
                read_exact(&mut self.input, &mut count)?;
                if u64::from_le_bytes(count) != self.entries {
                    return Err(ArchiveError::Damaged(
                        "the end record counts another number of files".into(),
                    ));
                }
                Ok(None)
            }
            ENTRY => {
                let mut length = [0u8; 2];
                read_exact(&mut self.input, &mut length)?;
                let length = usize::from(u16::from_le_bytes(length));
                if length == 0 || length > MAX_NAME_BYTES {
                    return Err(ArchiveError::Damaged(format!("a name of {length} bytes")));
                }
                let mut name = vec![0u8; length];
                read_exact(&mut self.input, &mut name)?;
                let name = String::from_utf8(name)
                    .map_err(|_| ArchiveError::Damaged("a name that is not UTF-8".into()))?;
                self.entries += 1;
                Ok(Some(name))
            }
            other => Err(ArchiveError::Damaged(format!(
                "unknown record kind {other}"
            ))),
        }
    }

    /// Copies the current file's bytes to `out`; returns their count.
    pub fn copy_file(&mut self, out: &mut impl Write) -> Result<u64, ArchiveError> {
        let mut buffer = Vec::new();
        let mut total = 0u64;
        loop {
            let mut length = [0u8; 4];
            read_exact(&mut self.input, &mut length)?;
            let length = u32::from_le_bytes(length) as usize;
            if length == 0 {
                return Ok(total);
            }
            if length > MAX_CHUNK_BYTES {
                return Err(ArchiveError::Damaged(format!("a chunk of {length} bytes")));
            }
            buffer.resize(length, 0);
            read_exact(&mut self.input, &mut buffer)?;
            out.write_all(&buffer)?;
            total += length as u64;
        }
    }
}

/// `read_exact`, with an early end reported as a truncated archive.
fn read_exact(input: &mut impl Read, buffer: &mut [u8]) -> Result<(), ArchiveError> {
    input.read_exact(buffer).map_err(|error| {
        if error.kind() == io::ErrorKind::UnexpectedEof {
            ArchiveError::Truncated
        } else {
            ArchiveError::Io(error)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive() -> Vec<u8> {
        let mut writer = ArchiveWriter::new(Vec::new()).expect("in memory");
        writer.file("backup.json", b"{}").expect("in memory");
        writer
            .begin_file("shard-0/snap-a-00000000000000000001")
            .expect("in memory");
        writer
            .write_chunk(&vec![7u8; MAX_CHUNK_BYTES + 5])
            .expect("in memory");
        writer.write_chunk(b"tail").expect("in memory");
        writer.end_file().expect("in memory");
        writer.file("empty", b"").expect("in memory");
        writer.finish().expect("in memory")
    }

    #[test]
    fn files_round_trip() {
        let bytes = archive();
        let mut reader = ArchiveReader::new(&bytes[..]).expect("an archive");
        let mut files = Vec::new();
        while let Some(name) = reader.next_file().expect("a record") {
            let mut content = Vec::new();
            reader.copy_file(&mut content).expect("a file");
            files.push((name, content));
        }
        assert_eq!(files.len(), 3);
        assert_eq!(files[0], ("backup.json".to_owned(), b"{}".to_vec()));
        assert_eq!(files[1].1.len(), MAX_CHUNK_BYTES + 9);
        assert!(files[1].1.ends_with(b"tail"));
        assert!(files[2].1.is_empty());
    }

    #[test]
    fn a_cut_archive_is_refused_wherever_it_ends() {
        let bytes = archive();
        // Every end near the head and the tail, and a sample in between.
        let ends =
            (0..bytes.len()).filter(|end| *end < 64 || end % 997 == 0 || end + 64 > bytes.len());
        for end in ends {
            let outcome = ArchiveReader::new(&bytes[..end]).and_then(|mut reader| {
                while reader.next_file()?.is_some() {
                    reader.copy_file(&mut io::sink())?;
                }
                Ok(())
            });
            assert!(outcome.is_err(), "cut at {end} accepted");
        }
    }

    #[test]
    fn damage_is_named() {
        let mut bytes = archive();
        bytes[0] = b'X';
        assert!(matches!(
            ArchiveReader::new(&bytes[..]),
            Err(ArchiveError::NotAnArchive)
        ));
        let mut bytes = archive();
        bytes[12] = 9;
        let mut reader = ArchiveReader::new(&bytes[..]).expect("the head is fine");
        assert!(matches!(reader.next_file(), Err(ArchiveError::Damaged(_))));
    }
}
