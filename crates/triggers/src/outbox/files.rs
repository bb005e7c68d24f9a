//! The outbox's files: for each declared trigger and database, `TRIGGER/DATABASE.events`, the
//! events not yet confirmed by the receiver (one line each: `SEQ TIME_MS ID EVENT`, the log
//! position of its record, when the outbox took it, its CloudEvent id and the event as
//! JSON), and `TRIGGER/DATABASE.pos`, how far the receiver confirmed and whether this node
//! only follows the database (a follower keeps the events for a failover and delivers none).
//!
//! Offsets are logical: a byte's offset since the file was first written, so that dropping
//! the confirmed head of a file (`compact`) does not move what a delivery thread holds.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A file's confirmed head is dropped once it is this large and half the file.
pub const COMPACT_BYTES: u64 = 4 * 1024 * 1024;

/// The most bytes a delivery thread reads at once (a longer line is read whole).
pub const READ_CHUNK_BYTES: usize = 256 * 1024;

/// The longest line the outbox writes: a record's event (at most the store's
/// `MAX_TRIGGERED_BYTES`, 4 MiB; this crate does not depend on the store) and its prefix.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024 + 256;

/// One line of an events file.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub seq: u64,
    pub time_ms: u64,
    pub id: String,
    pub event: String,
    /// The logical offset just past it.
    pub end: u64,
}

/// What the outbox knows of one trigger's events for one database.
#[derive(Debug)]
pub struct EventsFile {
    pub events: PathBuf,
    pub pos: PathBuf,
    /// Logical offset of the file's first byte.
    pub base: u64,
    /// Logical offset of its end.
    pub len: u64,
    /// The log position of the last event taken (or confirmed, when the file is empty).
    pub last_seq: u64,
    /// Logical offset up to which the receiver confirmed.
    pub confirmed: u64,
    /// The log position of the last confirmed event, and how many events of that position
    /// were confirmed (a dead letter sent again is written under the last position taken,
    /// so one position may hold several).
    pub confirmed_seq: u64,
    pub confirmed_in_seq: u64,
    /// The id of the last confirmed event, and the last one this node's owner logged for its
    /// followers (`Outbox::confirmations`).
    pub confirmed_id: Option<String>,
    pub reported_id: Option<String>,
    /// Events after `confirmed`.
    pub pending: u64,
    /// This node follows the database: keep, do not deliver.
    pub following: bool,
    /// The pos file is behind.
    pub pos_dirty: bool,
    /// Written since the last sync.
    pub unsynced: bool,
    /// Created since the last sync (its directory is synced too).
    pub created: bool,
    /// When the oldest unconfirmed event was taken (ms; 0 when unknown or none).
    pub head_time_ms: u64,
    /// Failed attempts at the head event, and when to try it again.
    pub attempts: u32,
    pub retry_at: Option<std::time::Instant>,
    pub last_error: Option<String>,
}

impl EventsFile {
    /// Opens (or starts) the files of `database` in `dir`: a torn last line is cut, and the
    /// events before the confirmed position are skipped.
    pub fn open(dir: &Path, database: &str) -> io::Result<EventsFile> {
        let events = dir.join(format!("{database}.events"));
        let pos = dir.join(format!("{database}.pos"));
        let (confirmed_seq, confirmed_in_seq, base, following) = read_pos(&pos);
        let mut file = EventsFile {
            events,
            pos,
            base,
            len: base,
            last_seq: confirmed_seq,
            confirmed: base,
            confirmed_seq,
            confirmed_in_seq,
            confirmed_id: None,
            reported_id: None,
            pending: 0,
            following,
            pos_dirty: false,
            unsynced: false,
            created: false,
            head_time_ms: 0,
            attempts: 0,
            retry_at: None,
            last_error: None,
        };
        let bytes = match fs::read(&file.events) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(error),
        };
        let mut whole = 0;
        let mut offset = 0;
        let mut in_seq = 0;
        while let Some(newline) = bytes[offset..].iter().position(|&b| b == b'\n') {
            let end = offset + newline + 1;
            let Some(line) = parse_line(&bytes[offset..end - 1], base + end as u64) else {
                break;
            };
            let confirmed = line.seq < confirmed_seq
                || (line.seq == confirmed_seq && in_seq < confirmed_in_seq);
            if line.seq == confirmed_seq {
                in_seq += 1;
            }
            if confirmed && file.pending == 0 {
                file.confirmed = line.end;
            } else {
                file.pending += 1;
                if file.head_time_ms == 0 {
                    file.head_time_ms = line.time_ms;
                }
            }
            file.last_seq = file.last_seq.max(line.seq);
            whole = end;
            offset = end;
        }
        if whole < bytes.len() {
            // A crash tore the last line: its record is still in the log, which hands it over
            // again.
            OpenOptions::new()
                .write(true)
                .open(&file.events)?
                .set_len(whole as u64)?;
        }
        file.len = base + whole as u64;
        Ok(file)
    }

    /// Appends `lines` (already formatted) after the file's end.
    pub fn append(&mut self, lines: &[u8], count: u64, first_time_ms: u64) -> io::Result<()> {
        if !self.events.exists() {
            // Its name in the directory must be on disk too (`sync`).
            self.created = true;
        }
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.events)?;
        if let Err(error) = out.write_all(lines) {
            // A part written (a full disk) would sit before the next lines and read as a
            // damaged one: cut back to the last whole line.
            let _ = out.set_len(self.len - self.base);
            return Err(error);
        }
        self.len += lines.len() as u64;
        if self.pending == 0 {
            self.head_time_ms = first_time_ms;
        }
        self.pending += count;
        self.unsynced = true;
        Ok(())
    }

    pub fn sync(&mut self) -> io::Result<()> {
        if self.unsynced {
            File::open(&self.events)?.sync_data()?;
            self.unsynced = false;
        }
        if self.created {
            if let Some(dir) = self.events.parent() {
                File::open(dir)?.sync_all()?;
            }
            self.created = false;
        }
        Ok(())
    }

    /// The lines after the confirmed position, about [`READ_CHUNK_BYTES`] of them.
    pub fn read_pending(&self) -> io::Result<Vec<Line>> {
        if self.pending == 0 {
            return Ok(Vec::new());
        }
        let mut file = File::open(&self.events)?;
        file.seek(SeekFrom::Start(self.confirmed - self.base))?;
        let available = (self.len - self.confirmed) as usize;
        let mut want = available.min(READ_CHUNK_BYTES);
        let mut bytes = Vec::new();
        loop {
            bytes.resize(want, 0);
            file.read_exact(&mut bytes)?;
            if bytes.contains(&b'\n') || want == available {
                break;
            }
            // One line longer than a chunk: read it whole.
            let more = (want * 2).min(available).min(MAX_LINE_BYTES);
            if more == want {
                break;
            }
            want = more;
            file.seek(SeekFrom::Start(self.confirmed - self.base))?;
        }
        self.whole_lines(&bytes)
    }

    /// The whole lines of `bytes`, read from the confirmed position (a part after the last
    /// newline is left out).
    fn whole_lines(&self, bytes: &[u8]) -> io::Result<Vec<Line>> {
        let mut lines = Vec::new();
        let mut offset = 0;
        while let Some(newline) = bytes[offset..].iter().position(|&b| b == b'\n') {
            let end = offset + newline + 1;
            let line = parse_line(&bytes[offset..end - 1], self.confirmed + end as u64)
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: a damaged line", self.events.display()),
                    )
                })?;
            lines.push(line);
            offset = end;
        }
        Ok(lines)
    }

    /// The receiver confirmed `line` (or it went to the dead letters).
    pub fn confirm(&mut self, line: &Line, next_time_ms: Option<u64>) {
        if line.end <= self.confirmed {
            // Confirmed already (a delivery thread replaced while it was sending it).
            return;
        }
        self.confirmed = line.end;
        if line.seq == self.confirmed_seq {
            self.confirmed_in_seq += 1;
        } else {
            self.confirmed_seq = line.seq;
            self.confirmed_in_seq = 1;
        }
        self.pending = self.pending.saturating_sub(1);
        self.head_time_ms = if self.pending == 0 {
            0
        } else {
            next_time_ms.unwrap_or(self.head_time_ms)
        };
        self.attempts = 0;
        self.retry_at = None;
        self.last_error = None;
        self.pos_dirty = true;
        self.confirmed_id = Some(line.id.clone());
    }

    /// Drops the events up to the one with id `through` (in log order), which the owner's
    /// receiver confirmed: what a follower keeps is then only what a failover must send
    /// again. Returns how many went.
    /// The ids of the events are in log order, but for a dead letter sent again (at the end,
    /// with its old id): the drop stops there too, since the owner confirms in its file's
    /// order and may not have sent it yet.
    pub fn drop_through(&mut self, through: &str) -> io::Result<u64> {
        let Some(limit) = id_order(through) else {
            return Ok(0);
        };
        let mut previous = None;
        self.drop_while(|line| {
            let Some(order) = id_order(&line.id).filter(|order| *order <= limit) else {
                return false;
            };
            if previous.is_some_and(|previous| order < previous) {
                return false;
            }
            previous = Some(order);
            true
        })
    }

    /// Drops every event kept: a full copy of the database came from its owner, with the
    /// owner's own unconfirmed events in place of these. Returns how many went.
    pub fn drop_all(&mut self) -> io::Result<u64> {
        self.drop_while(|_| true)
    }

    /// Confirms the events from the head for as long as `go_on` says; how many went.
    fn drop_while(&mut self, mut go_on: impl FnMut(&Line) -> bool) -> io::Result<u64> {
        let mut dropped = 0;
        loop {
            let lines = self.read_pending()?;
            if lines.is_empty() {
                return Ok(dropped);
            }
            for line in &lines {
                if !go_on(line) {
                    return Ok(dropped);
                }
                self.confirm(line, None);
                dropped += 1;
            }
        }
    }

    /// Every line after the confirmed position, or `None` when they are more than `budget`
    /// bytes (a full copy of the database carries them to its follower).
    pub fn read_all_pending(&self, budget: u64) -> io::Result<Option<Vec<Line>>> {
        if self.pending == 0 {
            return Ok(Some(Vec::new()));
        }
        let size = self.len - self.confirmed;
        if size > budget {
            return Ok(None);
        }
        let mut file = File::open(&self.events)?;
        file.seek(SeekFrom::Start(self.confirmed - self.base))?;
        let mut bytes = vec![0; size as usize];
        file.read_exact(&mut bytes)?;
        self.whole_lines(&bytes).map(Some)
    }

    /// Writes the pos file (renamed over the old one): the log position of the last event
    /// confirmed (and how many of that position), and the logical offset of the events
    /// file's start (any base reads the same: lines are told apart by their positions).
    pub fn write_pos(&mut self) -> io::Result<()> {
        let tmp = self.pos.with_extension("pos.tmp");
        let text = format!(
            "confirmed {} {}\nbase {}\nfollowing {}\n",
            self.confirmed_seq,
            self.confirmed_in_seq,
            self.base,
            u8::from(self.following)
        );
        fs::write(&tmp, text)?;
        fs::rename(&tmp, &self.pos)?;
        self.pos_dirty = false;
        Ok(())
    }

    /// Drops the confirmed head once it is large: the rest is copied to a new file renamed
    /// over the old one. Returns whether it did.
    pub fn compact(&mut self) -> io::Result<bool> {
        let head = self.confirmed - self.base;
        let size = self.len - self.base;
        if head < COMPACT_BYTES || head * 2 < size {
            return Ok(false);
        }
        let tmp = self.events.with_extension("events.tmp");
        {
            let mut from = File::open(&self.events)?;
            from.seek(SeekFrom::Start(head))?;
            let mut to = File::create(&tmp)?;
            io::copy(&mut from, &mut to)?;
            to.sync_data()?;
        }
        // The new file holds no confirmed line: the pos file says so before the new file
        // takes the old one's place, so that a crash in between finds the old file with no
        // line of the last confirmed position counted as confirmed (sent again), never the
        // new one with lines counted that are not (a dead letter sent again is written
        // under that position).
        let (base, in_seq) = (self.base, self.confirmed_in_seq);
        self.base = self.confirmed;
        self.confirmed_in_seq = 0;
        let renamed = self
            .write_pos()
            .and_then(|()| fs::rename(&tmp, &self.events));
        if let Err(error) = renamed {
            self.base = base;
            self.confirmed_in_seq = in_seq;
            self.pos_dirty = true;
            return Err(error);
        }
        self.unsynced = false;
        Ok(true)
    }
}

/// An event id's place in its database's history: `EPOCH.POSITION.INDEX`.
pub fn id_order(id: &str) -> Option<(u64, u64, u64)> {
    let mut parts = id.split('.').map(|part| part.parse::<u64>().ok());
    let order = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(order)
}

/// `SEQ TIME_MS ID EVENT` (`end` is the logical offset past its newline).
pub fn parse_line(bytes: &[u8], end: u64) -> Option<Line> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut parts = text.splitn(4, ' ');
    let seq = parts.next()?.parse().ok()?;
    let time_ms = parts.next()?.parse().ok()?;
    let id = parts.next()?.to_owned();
    let event = parts.next()?;
    if !event.starts_with('{') || !event.ends_with('}') {
        return None;
    }
    Some(Line {
        seq,
        time_ms,
        id,
        event: event.to_owned(),
        end,
    })
}

/// Formats one line.
pub fn format_line(out: &mut Vec<u8>, seq: u64, time_ms: u64, id: &str, event: &str) {
    out.extend_from_slice(format!("{seq} {time_ms} {id} ").as_bytes());
    out.extend_from_slice(event.as_bytes());
    out.push(b'\n');
}

/// The confirmed log position (and how many of it), base and following flag of a pos file;
/// zeros when absent or unreadable (everything in the events file is then delivered again:
/// at least once).
fn read_pos(path: &Path) -> (u64, u64, u64, bool) {
    let Ok(text) = fs::read_to_string(path) else {
        return (0, 0, 0, false);
    };
    let (mut confirmed, mut in_seq, mut base, mut following) = (0, 0, 0, false);
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("confirmed", n)) => {
                let mut numbers = n.split(' ').map(|n| n.parse().unwrap_or(0));
                confirmed = numbers.next().unwrap_or(0);
                in_seq = numbers.next().unwrap_or(1);
            }
            Some(("base", n)) => base = n.parse().unwrap_or(0),
            Some(("following", n)) => following = n == "1",
            _ => {}
        }
    }
    (confirmed, in_seq, base, following)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(events: &[(u64, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (seq, event) in events {
            format_line(&mut out, *seq, 7, &format!("0.{seq}.0"), event);
        }
        out
    }

    #[test]
    fn events_resume_after_the_confirmed_one_and_a_torn_line_is_cut() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut file = EventsFile::open(dir.path(), "db")?;
        file.append(
            &lines(&[(3, "{\"a\":1}"), (5, "{\"a\":2}"), (9, "{}")]),
            3,
            7,
        )?;
        let read = file.read_pending()?;
        assert_eq!(read.iter().map(|l| l.seq).collect::<Vec<_>>(), [3, 5, 9]);
        file.confirm(&read[0], Some(read[1].time_ms));
        file.write_pos()?;
        // A torn line after the others.
        OpenOptions::new()
            .append(true)
            .open(&file.events)?
            .write_all(b"12 7 0.12.0 {\"tor")?;
        let reopened = EventsFile::open(dir.path(), "db")?;
        assert_eq!(reopened.pending, 2);
        assert_eq!(reopened.last_seq, 9);
        let read = reopened.read_pending()?;
        assert_eq!(read.iter().map(|l| l.seq).collect::<Vec<_>>(), [5, 9]);
        assert_eq!(read[0].event, "{\"a\":2}");
        assert_eq!(read[0].id, "0.5.0");
        Ok(())
    }

    #[test]
    fn dead_letters_sent_again_survive_a_compaction_and_a_restart() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut file = EventsFile::open(dir.path(), "db")?;
        let big = format!("{{\"x\":\"{}\"}}", "a".repeat(1 << 20));
        let batch: Vec<(u64, &str)> = (1..=6).map(|seq| (seq, big.as_str())).collect();
        file.append(&lines(&batch), 6, 7)?;
        while let Some(line) = file.read_pending()?.first().cloned() {
            file.confirm(&line, None);
        }
        assert_eq!((file.confirmed_seq, file.confirmed_in_seq), (6, 1));
        // Two dead letters sent again, under the last position taken.
        let mut again = Vec::new();
        format_line(&mut again, 6, 7, "0.2.0", "{\"again\":1}");
        format_line(&mut again, 6, 7, "0.3.0", "{\"again\":2}");
        file.append(&again, 2, 7)?;
        assert!(file.compact()?);
        let reopened = EventsFile::open(dir.path(), "db")?;
        assert_eq!(reopened.pending, 2, "both still to be delivered");
        let ids: Vec<String> = reopened.read_pending()?.into_iter().map(|l| l.id).collect();
        assert_eq!(ids, ["0.2.0", "0.3.0"]);
        Ok(())
    }

    #[test]
    fn a_follower_drops_what_the_owner_confirmed() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut file = EventsFile::open(dir.path(), "db")?;
        let mut out = Vec::new();
        for (seq, id) in [(3, "1.9.0"), (4, "1.9.1"), (6, "1.12.0"), (8, "2.3.0")] {
            format_line(&mut out, seq, 7, id, "{}");
        }
        file.append(&out, 4, 7)?;
        assert_eq!(file.drop_through("1.9.1")?, 2);
        assert_eq!(file.drop_through("1.9.1")?, 0, "again: nothing more");
        assert_eq!(file.drop_through("not an id")?, 0);
        assert_eq!(file.drop_through("1.100.0")?, 1, "the next epoch stays");
        assert_eq!(file.read_pending()?[0].id, "2.3.0");
        // A dead letter sent again on the owner comes after newer events, with its old id: the
        // owner confirms in its file's order, so the drop stops at it.
        let mut out = Vec::new();
        format_line(&mut out, 9, 7, "2.4.0", "{}");
        format_line(&mut out, 9, 7, "1.5.0", "{}");
        format_line(&mut out, 10, 7, "2.6.0", "{}");
        file.append(&out, 3, 7)?;
        assert_eq!(file.drop_through("2.6.0")?, 2, "2.3.0 and 2.4.0");
        assert_eq!(file.read_pending()?[0].id, "1.5.0");
        assert_eq!(id_order("1.2.3"), Some((1, 2, 3)));
        assert_eq!(id_order("1.2"), None);
        Ok(())
    }

    #[test]
    fn a_large_confirmed_head_is_dropped_without_moving_offsets() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut file = EventsFile::open(dir.path(), "db")?;
        let big = format!("{{\"x\":\"{}\"}}", "a".repeat(1 << 20));
        let batch: Vec<(u64, &str)> = (1..=6).map(|seq| (seq, big.as_str())).collect();
        file.append(&lines(&batch), 6, 7)?;
        for _ in 0..5 {
            let read = file.read_pending()?;
            file.confirm(&read[0], None);
        }
        let last = file.read_pending()?;
        assert_eq!(last[0].seq, 6);
        file.write_pos()?;
        assert!(file.compact()?);
        assert!(fs::metadata(&file.events)?.len() < 2 << 20);
        file.write_pos()?;
        // The line read before the compaction is still confirmed by its offset.
        file.confirm(&last[0], None);
        assert_eq!(file.pending, 0);
        file.write_pos()?;
        let reopened = EventsFile::open(dir.path(), "db")?;
        assert_eq!((reopened.pending, reopened.last_seq), (0, 6));
        Ok(())
    }
}
