//! A trigger's dead letters, `TRIGGER/dead.jsonl`: the events its receiver refused
//! `maxAttempts` times, one JSON object per line (`database`, `seq`, `id`, `attempts`,
//! `error`, `deadAt` and the `event`), kept until an operator sends them again or drops them.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The most bytes of dead letters one listing returns.
pub const MAX_LISTED_BYTES: usize = 16 * 1024 * 1024;

/// The most bytes of dead letters one trigger keeps: past this, an event that fails every
/// attempt is dropped, counted and logged instead (nobody has looked for long).
pub const MAX_DEAD_LETTER_BYTES: u64 = 1024 * 1024 * 1024;

/// One dead letter.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    pub database: String,
    pub seq: u64,
    pub id: String,
    pub attempts: u32,
    pub error: String,
    pub dead_at_ms: u64,
    /// The event, as JSON text.
    pub event: String,
}

impl DeadLetter {
    fn line(&self) -> String {
        format!(
            "{{\"database\":{},\"seq\":{},\"id\":{},\"attempts\":{},\"error\":{},\"deadAt\":{},\"event\":{}}}\n",
            Value::String(self.database.clone()),
            self.seq,
            Value::String(self.id.clone()),
            self.attempts,
            Value::String(self.error.clone()),
            self.dead_at_ms,
            self.event
        )
    }

    fn parse(line: &str) -> Option<DeadLetter> {
        let value: Value = serde_json::from_str(line).ok()?;
        Some(DeadLetter {
            database: value.get("database")?.as_str()?.to_owned(),
            seq: value.get("seq")?.as_u64()?,
            id: value.get("id")?.as_str()?.to_owned(),
            attempts: u32::try_from(value.get("attempts")?.as_u64()?).ok()?,
            error: value.get("error")?.as_str()?.to_owned(),
            dead_at_ms: value.get("deadAt")?.as_u64()?,
            event: value.get("event")?.to_string(),
        })
    }
}

/// The dead letters file of one trigger.
#[derive(Debug)]
pub struct DeadLetters {
    path: PathBuf,
}

impl DeadLetters {
    pub fn new(dir: &Path) -> DeadLetters {
        DeadLetters {
            path: dir.join("dead.jsonl"),
        }
    }

    /// Appends `letter`, on disk before it returns (its event is then confirmed); `false`
    /// when the file already holds [`MAX_DEAD_LETTER_BYTES`] (it is not written).
    pub fn add(&self, letter: &DeadLetter) -> io::Result<bool> {
        self.add_within(letter, MAX_DEAD_LETTER_BYTES)
    }

    fn add_within(&self, letter: &DeadLetter, limit: u64) -> io::Result<bool> {
        let held = match fs::metadata(&self.path) {
            Ok(metadata) => metadata.len(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => 0,
            Err(error) => return Err(error),
        };
        if held >= limit {
            return Ok(false);
        }
        let created = !self.path.exists();
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        if let Err(error) = file.write_all(letter.line().as_bytes()) {
            // A part written (a full disk) would join the next letter into a damaged line.
            let _ = file.set_len(held);
            return Err(error);
        }
        file.sync_data()?;
        if let (true, Some(dir)) = (created, self.path.parent()) {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(true)
    }

    /// Every dead letter (a torn line is skipped), within [`MAX_LISTED_BYTES`].
    pub fn all(&self) -> io::Result<Vec<DeadLetter>> {
        let text = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut out = Vec::new();
        let mut bytes = 0;
        for line in String::from_utf8_lossy(&text).lines() {
            bytes += line.len();
            if bytes > MAX_LISTED_BYTES {
                break;
            }
            out.extend(DeadLetter::parse(line));
        }
        Ok(out)
    }

    /// How many there are.
    pub fn count(&self) -> u64 {
        match fs::read(&self.path) {
            Ok(bytes) => bytes.iter().filter(|&&b| b == b'\n').count() as u64,
            Err(_) => 0,
        }
    }

    /// Removes the first `count` (those a listing returned, in order): the file is rewritten
    /// without them, renamed over the old one.
    pub fn remove_first(&self, count: usize) -> io::Result<()> {
        self.replace_first(count, &[])
    }

    /// Replaces the first `count` with `kept` (some of them, in order): the file is
    /// rewritten, renamed over the old one.
    pub fn replace_first(&self, count: usize, kept: &[DeadLetter]) -> io::Result<()> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(error),
        };
        let mut start = 0;
        for _ in 0..count {
            match bytes[start..].iter().position(|&b| b == b'\n') {
                Some(newline) => start += newline + 1,
                None => {
                    start = bytes.len();
                    break;
                }
            }
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        {
            let mut out = fs::File::create(&tmp)?;
            for letter in kept {
                out.write_all(letter.line().as_bytes())?;
            }
            out.write_all(&bytes[start..])?;
            out.sync_data()?;
        }
        fs::rename(&tmp, &self.path)
    }

    /// Removes them all.
    pub fn clear(&self) -> io::Result<()> {
        match fs::remove_file(&self.path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letters_round_trip() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let dead = DeadLetters::new(dir.path());
        let letter = DeadLetter {
            database: "chat".into(),
            seq: 12,
            id: "0.12.0".into(),
            attempts: 3,
            error: "http status: 500 \"x\"".into(),
            dead_at_ms: 99,
            // Keys in order: the listing reads the event as JSON (its key order is not kept).
            event: r#"{"data":{"data":null,"delta":1},"id":"0.12.0"}"#.into(),
        };
        assert!(dead.add(&letter)?);
        assert!(dead.add(&letter)?);
        assert_eq!(dead.count(), 2);
        assert_eq!(dead.all()?, vec![letter.clone(), letter.clone()]);
        let mut third = letter.clone();
        third.id = "0.13.0".into();
        assert!(dead.add(&third)?);
        dead.remove_first(2)?;
        assert_eq!(dead.all()?, vec![third.clone()]);
        let mut fourth = letter.clone();
        fourth.id = "0.14.0".into();
        assert!(dead.add(&fourth)?);
        assert!(dead.add(&letter)?);
        // The first two read, one of them kept: the third read stays after it.
        dead.replace_first(2, std::slice::from_ref(&third))?;
        assert_eq!(dead.all()?, vec![third.clone(), letter.clone()]);
        dead.clear()?;
        assert_eq!(dead.all()?, Vec::new());
        Ok(())
    }

    #[test]
    fn a_full_file_takes_no_more() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let dead = DeadLetters::new(dir.path());
        let letter = DeadLetter {
            database: "chat".into(),
            seq: 1,
            id: "0.1.0".into(),
            attempts: 1,
            error: "refused".into(),
            dead_at_ms: 1,
            event: "{}".into(),
        };
        assert!(dead.add_within(&letter, 100)?, "an empty file takes one");
        assert!(dead.add_within(&letter, 100)?, "under the limit");
        assert!(!dead.add_within(&letter, 100)?, "at the limit");
        assert_eq!(dead.count(), 2);
        Ok(())
    }
}
