//! The audit files of one database: `<audit dir>/<database>/<YYYY-MM-DD>.jsonl`, one line per
//! entry in log order, each with its log position (`seq`).
//!
//! A line goes to the file of its entry's day, or to the newest file if that is later (a clock
//! set back), so that positions only grow from file to file and the last line of the newest
//! file is the last entry copied: what a copy from the log after a crash starts after. A line
//! torn by a crash is cut when the file is next opened; the log still holds its entry.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::entry::{date_of_day, day_of_date, tombstone, AuditQuery, LineFacts, DAY_MS};

/// Bytes read from the end of the newest file to find its last line: longer than any line
/// (an entry is at most `hearth_store::MAX_AUDIT_BYTES`, 1 MiB, plus its position).
const TAIL_BYTES: u64 = 2 * 1024 * 1024;

/// The most bytes of lines one query answers (beside [`crate::MAX_QUERY_LINES`]).
pub const MAX_QUERY_BYTES: usize = 16 * 1024 * 1024;

/// The directory of `database` under `root`: its name when that is a plain file name, else
/// its bytes in hex after `x-` (a name the server accepts may hold characters a file
/// system treats specially).
pub(crate) fn database_dir(root: &Path, database: &str) -> PathBuf {
    let plain = !database.is_empty()
        && !database.starts_with('.')
        && !database.starts_with("x-")
        && database
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'));
    if plain {
        return root.join(database);
    }
    let hex: String = database.bytes().map(|byte| format!("{byte:02x}")).collect();
    root.join(format!("x-{hex}"))
}

/// The audit files of one database, as the trail's thread keeps them.
pub(crate) struct DatabaseFiles {
    dir: PathBuf,
    /// The day of the newest file, if there is one.
    newest: Option<u64>,
    /// The position of the last line written.
    last_seq: u64,
    /// The newest file, open for appending, and whether it has lines not yet synced.
    open: Option<(u64, File)>,
    /// Lines appended to the open file and not yet written: a batch leaves with one write.
    buffer: Vec<u8>,
    dirty: bool,
    /// Whether a file was created since the directory was last synced.
    dir_dirty: bool,
}

impl DatabaseFiles {
    /// The files of the database whose directory is `dir` (made on the first line), with a
    /// torn last line cut.
    pub(crate) fn open(dir: PathBuf) -> io::Result<DatabaseFiles> {
        let mut files = DatabaseFiles {
            dir,
            newest: None,
            last_seq: 0,
            open: None,
            buffer: Vec::new(),
            dirty: false,
            dir_dirty: false,
        };
        for (day, path) in files.days()?.into_iter().rev() {
            files.newest = files.newest.or(Some(day));
            if let Some(seq) = last_line_seq(&path)? {
                files.last_seq = seq;
                break;
            }
        }
        Ok(files)
    }

    /// Every file's day and path, oldest first.
    pub(crate) fn days(&self) -> io::Result<Vec<(u64, PathBuf)>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut days = BTreeMap::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(date) = name.to_str().and_then(|name| name.strip_suffix(".jsonl")) else {
                continue;
            };
            if let Some(day) = day_of_date(date) {
                days.insert(day, entry.path());
            }
        }
        Ok(days.into_iter().collect())
    }

    #[cfg(test)]
    pub(crate) fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Appends `line` (ending in a newline) of the entry at `seq` made at `time`; an entry at
    /// or before the last position written is already here and skipped. Returns whether it
    /// was written.
    pub(crate) fn append(&mut self, seq: u64, time: u64, line: &str) -> io::Result<bool> {
        if seq <= self.last_seq {
            return Ok(false);
        }
        let day = (time / DAY_MS).max(self.newest.unwrap_or(0));
        if self.open.as_ref().is_none_or(|(open, _)| *open != day) {
            // The lines before go to the file they belong to.
            self.sync()?;
            fs::create_dir_all(&self.dir)?;
            let path = self.dir.join(format!("{}.jsonl", date_of_day(day)));
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            self.open = Some((day, file));
            self.newest = Some(day);
            self.dir_dirty = true;
        }
        self.buffer.extend_from_slice(line.as_bytes());
        self.last_seq = seq;
        Ok(true)
    }

    /// Writes the lines appended so far to the open file (not synced).
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        if let Some((_, file)) = &mut self.open {
            file.write_all(&self.buffer)?;
            self.dirty = true;
        }
        self.buffer.clear();
        Ok(())
    }

    /// Makes every line appended so far durable.
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        if self.dirty {
            if let Some((_, file)) = &self.open {
                file.sync_data()?;
            }
            self.dirty = false;
        }
        if self.dir_dirty {
            sync_dir(&self.dir)?;
            self.dir_dirty = false;
        }
        Ok(())
    }

    /// The lines that `query` asks for, in log order, within its limit and
    /// [`MAX_QUERY_BYTES`].
    pub(crate) fn query(&mut self, query: &AuditQuery, out: &mut String) -> io::Result<usize> {
        self.flush()?;
        let first_day = query.since.map_or(0, |since| since / DAY_MS);
        let mut found = 0;
        for (day, path) in self.days()? {
            if day < first_day {
                continue;
            }
            // Line by line: a day's file may be far larger than memory.
            let mut lines = BufReader::new(File::open(&path)?);
            let mut line = String::new();
            loop {
                line.clear();
                if read_line(&mut lines, &mut line)? == 0 {
                    break;
                }
                if found >= query.limit || out.len() + line.len() + 1 > MAX_QUERY_BYTES {
                    return Ok(found);
                }
                let Ok(facts) = serde_json::from_str::<LineFacts>(&line) else {
                    continue;
                };
                if query.matches(&facts) {
                    out.push_str(line.trim_end_matches('\n'));
                    out.push('\n');
                    found += 1;
                }
            }
        }
        Ok(found)
    }

    /// Replaces every line of `uid` by a tombstone that keeps its position only; returns how
    /// many. Each changed file is rewritten whole and renamed over the old one.
    pub(crate) fn erase(&mut self, uid: &str) -> io::Result<u64> {
        self.sync()?;
        // The open file is about to be replaced: appends must go to the new one.
        self.open = None;
        let mut erased = 0;
        for (_, path) in self.days()? {
            // Streamed into a file beside it, which replaces it only if a line changed.
            let temporary = path.with_extension("jsonl.tmp");
            let mut kept = BufWriter::new(File::create(&temporary)?);
            let mut lines = BufReader::new(File::open(&path)?);
            let mut line = String::new();
            let mut changed = 0;
            loop {
                line.clear();
                if read_line(&mut lines, &mut line)? == 0 {
                    break;
                }
                match serde_json::from_str::<LineFacts>(&line) {
                    Ok(facts) if !facts.erased && facts.uid.as_deref() == Some(uid) => {
                        kept.write_all(tombstone(facts.seq).as_bytes())?;
                        changed += 1;
                    }
                    _ => kept.write_all(line.as_bytes())?,
                }
            }
            let file = kept.into_inner().map_err(|error| error.into_error())?;
            if changed == 0 {
                drop(file);
                fs::remove_file(&temporary)?;
                continue;
            }
            file.sync_data()?;
            fs::rename(&temporary, &path)?;
            erased += changed;
        }
        if erased > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(erased)
    }

    /// Removes the files of days before `oldest`; returns how many.
    pub(crate) fn prune(&mut self, oldest: u64) -> io::Result<usize> {
        let mut removed = 0;
        for (day, path) in self.days()? {
            // The newest file stays, whatever its day: its last line is where copying resumes.
            if day >= oldest || Some(day) == self.newest {
                continue;
            }
            fs::remove_file(&path)?;
            removed += 1;
        }
        if removed > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(removed)
    }
}

/// Reads one line (with its newline) into `line`, bytes that are not UTF-8 replaced;
/// returns the bytes read, 0 at the end.
fn read_line(reader: &mut impl BufRead, line: &mut String) -> io::Result<usize> {
    let mut bytes = Vec::new();
    let read = reader.read_until(b'\n', &mut bytes)?;
    line.push_str(&String::from_utf8_lossy(&bytes));
    Ok(read)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The position of the last whole line of the file at `path`, after cutting a torn last
/// line (one without its newline: a crash in the middle of an append); `None` if it has no
/// whole line.
fn last_line_seq(path: &Path) -> io::Result<Option<u64>> {
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::with_capacity((len - start) as usize);
    file.read_to_end(&mut tail)?;
    let whole = tail
        .iter()
        .rposition(|&byte| byte == b'\n')
        .map_or(0, |at| at + 1);
    if whole < tail.len() {
        file.set_len(start + whole as u64)?;
        file.sync_data()?;
    }
    let lines = &tail[..whole];
    let last = lines[..lines.len().saturating_sub(1)]
        .iter()
        .rposition(|&byte| byte == b'\n')
        .map_or(0, |at| at + 1);
    if lines.is_empty() {
        return Ok(None);
    }
    Ok(serde_json::from_slice::<LineFacts>(&lines[last..])
        .ok()
        .map(|facts| facts.seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, uid: &str) -> String {
        format!("{{\"seq\":{seq},\"time\":0,\"path\":\"/a\",\"uid\":\"{uid}\"}}\n")
    }

    #[test]
    fn positions_resume_after_reopening_and_a_torn_line_is_cut() -> io::Result<()> {
        let root = tempfile::tempdir()?;
        let dir = database_dir(root.path(), "db");
        let mut files = DatabaseFiles::open(dir.clone())?;
        assert!(files.append(1, 0, &line(1, "ada"))?);
        assert!(files.append(3, 0, &line(3, "bob"))?);
        assert!(!files.append(3, 0, &line(3, "bob"))?, "already there");
        files.sync()?;
        drop(files);
        let path = dir.join("1970-01-01.jsonl");
        let mut torn = fs::read(&path)?;
        torn.extend_from_slice(b"{\"seq\":4,\"ti");
        fs::write(&path, &torn)?;
        let mut files = DatabaseFiles::open(dir)?;
        assert_eq!(files.last_seq(), 3);
        assert!(files.append(4, 0, &line(4, "ada"))?);
        files.flush()?;
        let text = fs::read_to_string(&path)?;
        assert_eq!(
            text,
            format!("{}{}{}", line(1, "ada"), line(3, "bob"), line(4, "ada"))
        );
        Ok(())
    }

    #[test]
    fn erasing_keeps_positions_and_queries_skip_tombstones() -> io::Result<()> {
        let root = tempfile::tempdir()?;
        let mut files = DatabaseFiles::open(database_dir(root.path(), "db"))?;
        files.append(1, 0, &line(1, "ada"))?;
        files.append(2, DAY_MS, &line(2, "bob"))?;
        files.append(3, DAY_MS, &line(3, "ada"))?;
        assert_eq!(files.erase("ada")?, 2);
        assert_eq!(files.erase("ada")?, 0);
        files.append(4, DAY_MS, &line(4, "ada"))?;
        let mut out = String::new();
        let all = AuditQuery {
            limit: 10,
            ..AuditQuery::default()
        };
        assert_eq!(files.query(&all, &mut out)?, 2);
        assert_eq!(out, format!("{}{}", line(2, "bob"), line(4, "ada")));
        let reopened = DatabaseFiles::open(database_dir(root.path(), "db"))?;
        assert_eq!(reopened.last_seq(), 4);
        Ok(())
    }

    #[test]
    fn a_late_clock_writes_to_the_newest_file_and_old_days_are_pruned() -> io::Result<()> {
        let root = tempfile::tempdir()?;
        let mut files = DatabaseFiles::open(database_dir(root.path(), "db"))?;
        files.append(1, 0, &line(1, "a"))?;
        files.append(2, 5 * DAY_MS, &line(2, "a"))?;
        files.append(3, 2 * DAY_MS, &line(3, "a"))?;
        let days: Vec<u64> = files.days()?.into_iter().map(|(day, _)| day).collect();
        assert_eq!(days, [0, 5]);
        assert_eq!(files.prune(5)?, 1);
        assert_eq!(files.prune(100)?, 0, "the newest file stays");
        let mut out = String::new();
        let query = AuditQuery {
            limit: 1,
            ..AuditQuery::default()
        };
        assert_eq!(files.query(&query, &mut out)?, 1, "the limit holds");
        assert_eq!(out, line(2, "a"));
        Ok(())
    }

    #[test]
    fn odd_names_get_a_directory_of_their_own() {
        let root = Path::new("/r");
        assert_eq!(database_dir(root, "chat-1"), Path::new("/r/chat-1"));
        assert_eq!(database_dir(root, "../x"), Path::new("/r/x-2e2e2f78"));
        assert_eq!(database_dir(root, "x-1"), Path::new("/r/x-782d31"));
    }
}
