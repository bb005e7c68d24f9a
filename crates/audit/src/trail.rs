//! The trail's thread: it alone writes, reads and removes the audit files, so that appends,
//! queries, erasures and retention never race. The shards hand it entries once their log
//! records are durable and never wait for it; the log keeps every entry until the thread has
//! synced it (the owner asks [`AuditTrail::sync`] before it removes log segments).

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;
use tracing::warn;

use crate::entry::{line_of, AuditQuery, DAY_MS};
use crate::files::{database_dir, DatabaseFiles};

/// Days an audited database's entries are kept when its settings name none.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;

/// The longest retention a database may set (ten years).
pub const MAX_RETENTION_DAYS: u32 = 3_650;

/// How often the thread applies every known database's retention, beside each database's
/// first append of a day.
const PRUNE_EVERY: Duration = Duration::from_secs(3_600);

/// Most databases whose newest file stays open between appends; past it all are closed.
const MAX_OPEN_DATABASES: usize = 256;

/// Why the trail could not answer.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the audit files of {database} cannot be used: {source}")]
    Io { database: String, source: io::Error },
    #[error("the audit trail's thread has stopped")]
    Stopped,
}

/// An audit entry leaving the log: its position and its record's text.
#[derive(Debug, Clone)]
pub struct Copied {
    pub database: Arc<str>,
    pub seq: u64,
    pub entry: Arc<str>,
}

/// The numbers `/metrics` shows of the trail.
#[derive(Debug, Default)]
pub struct TrailStats {
    /// Entries written to the files.
    pub written: AtomicU64,
    /// Entries handed to the thread.
    pub handed: AtomicU64,
    /// Appends, syncs or prunes that failed (each logged).
    pub failures: AtomicU64,
    /// Entries replaced by tombstones.
    pub erased: AtomicU64,
}

enum Job {
    Append(Vec<Copied>),
    Retain {
        database: Arc<str>,
        days: u32,
    },
    Sync(mpsc::Sender<bool>),
    Query {
        database: String,
        query: AuditQuery,
        reply: oneshot::Sender<Result<String, AuditError>>,
    },
    Erase {
        database: String,
        uid: String,
        reply: oneshot::Sender<Result<u64, AuditError>>,
    },
}

/// The server's audit trail: a handle on its thread, cloned into every shard.
#[derive(Debug, Clone)]
pub struct AuditTrail {
    jobs: mpsc::Sender<Job>,
    stats: Arc<TrailStats>,
}

impl AuditTrail {
    /// Starts the thread that keeps the audit files under `root` (`<data dir>/audit`). A
    /// database's old files are removed once its owner told how long it keeps them
    /// ([`AuditTrail::retain`]).
    pub fn start(root: PathBuf) -> io::Result<AuditTrail> {
        let (jobs, receiver) = mpsc::channel();
        let stats = Arc::new(TrailStats::default());
        let mut keeper = Keeper {
            root,
            databases: HashMap::new(),
            broken: HashSet::new(),
            retention: HashMap::new(),
            pruned_day: HashMap::new(),
            stats: stats.clone(),
        };
        thread::Builder::new()
            .name("hearth-audit".into())
            .spawn(move || keeper.run(receiver))?;
        Ok(AuditTrail { jobs, stats })
    }

    pub fn stats(&self) -> &TrailStats {
        &self.stats
    }

    /// Hands durable entries to the thread, in log order per database. Never waits.
    pub fn append(&self, entries: Vec<Copied>) {
        if entries.is_empty() {
            return;
        }
        self.stats
            .handed
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        let _ = self.jobs.send(Job::Append(entries));
    }

    /// `database` keeps its entries `days` days (its settings changed, or it was loaded).
    pub fn retain(&self, database: Arc<str>, days: u32) {
        let _ = self.jobs.send(Job::Retain { database, days });
    }

    /// Waits, on this thread, until every entry handed so far is written and synced: `true`
    /// when the log may then let go of them; `false` when a file failed to take one since
    /// the start (the log must keep them for the next start to copy), or the thread stopped.
    pub fn sync(&self) -> bool {
        let (done, wait) = mpsc::channel();
        if self.jobs.send(Job::Sync(done)).is_err() {
            return false;
        }
        wait.recv().unwrap_or(false)
    }

    /// The lines of `database`'s trail that `query` asks for, as JSON lines.
    pub async fn query(&self, database: &str, query: AuditQuery) -> Result<String, AuditError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Query {
                database: database.to_owned(),
                query,
                reply,
            })
            .map_err(|_| AuditError::Stopped)?;
        answer.await.map_err(|_| AuditError::Stopped)?
    }

    /// Erases every entry of `uid` from `database`'s trail; returns how many.
    pub async fn erase(&self, database: &str, uid: &str) -> Result<u64, AuditError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Erase {
                database: database.to_owned(),
                uid: uid.to_owned(),
                reply,
            })
            .map_err(|_| AuditError::Stopped)?;
        answer.await.map_err(|_| AuditError::Stopped)?
    }
}

/// The thread's state: the files of each database it touched.
struct Keeper {
    root: PathBuf,
    databases: HashMap<Arc<str>, DatabaseFiles>,
    /// Databases whose files failed to take an entry: nothing more is written to them until
    /// the next start, so that their lines keep no gap (a start copies from the log what
    /// follows their last line), and the log keeps its segments meanwhile (`sync`).
    broken: HashSet<Arc<str>>,
    retention: HashMap<Arc<str>, u32>,
    /// The day each database's retention was last applied.
    pruned_day: HashMap<Arc<str>, u64>,
    stats: Arc<TrailStats>,
}

impl Keeper {
    fn run(&mut self, jobs: mpsc::Receiver<Job>) {
        loop {
            let job = match jobs.recv_timeout(PRUNE_EVERY) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.prune_all();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            match job {
                Job::Append(entries) => self.append(entries),
                Job::Retain { database, days } => {
                    self.retention.insert(database.clone(), days);
                    self.pruned_day.remove(&database);
                    self.prune(&database);
                }
                Job::Sync(done) => {
                    self.sync_all();
                    let _ = done.send(self.broken.is_empty());
                }
                Job::Query {
                    database,
                    query,
                    reply,
                } => {
                    let _ = reply.send(self.query(&database, &query));
                }
                Job::Erase {
                    database,
                    uid,
                    reply,
                } => {
                    let _ = reply.send(self.erase(&database, &uid));
                }
            }
        }
        self.sync_all();
    }

    fn files(&mut self, database: &Arc<str>) -> io::Result<&mut DatabaseFiles> {
        if !self.databases.contains_key(database) {
            // Closing them all writes and syncs their lines first.
            if self.databases.len() >= MAX_OPEN_DATABASES {
                self.sync_all();
                self.databases.clear();
            }
            let files = DatabaseFiles::open(database_dir(&self.root, database))?;
            self.databases.insert(database.clone(), files);
        }
        self.databases
            .get_mut(database)
            .ok_or_else(|| io::Error::other("the database's files were just opened"))
    }

    fn append(&mut self, entries: Vec<Copied>) {
        let mut touched: Vec<Arc<str>> = Vec::new();
        for copied in entries {
            if touched.last() != Some(&copied.database) && !touched.contains(&copied.database) {
                touched.push(copied.database.clone());
            }
            if self.broken.contains(&copied.database) {
                continue;
            }
            let Some((line, time)) = line_of(copied.seq, &copied.entry) else {
                warn!(database = %copied.database, seq = copied.seq, "an audit record that is not an entry; skipped");
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let written = self
                .files(&copied.database)
                .and_then(|files| files.append(copied.seq, time, &line));
            match written {
                Ok(true) => {
                    self.stats.written.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(error) => {
                    warn!(database = %copied.database, %error, "an audit entry could not be written; the database's trail stops until the next start, which copies it from the log");
                    self.break_database(&copied.database);
                }
            }
            // Only a database whose retention the owner told is pruned: one whose entries
            // come from the log at start may keep more than the server's default.
            if self.retention.contains_key(&copied.database)
                && self.pruned_day.get(&copied.database) != Some(&today())
            {
                self.prune(&copied.database);
            }
        }
        // Each database's lines of the batch leave with one write.
        for database in touched {
            if let Some(files) = self.databases.get_mut(&database) {
                if let Err(error) = files.flush() {
                    warn!(%database, %error, "audit entries could not be written; the database's trail stops until the next start, which copies them from the log");
                    self.break_database(&database);
                }
            }
        }
    }

    fn sync_all(&mut self) {
        let mut failed = Vec::new();
        for (database, files) in &mut self.databases {
            if let Err(error) = files.sync() {
                warn!(%database, %error, "syncing audit files failed; the database's trail stops until the next start, which copies it from the log");
                failed.push(database.clone());
            }
        }
        for database in failed {
            self.break_database(&database);
        }
    }

    /// `database`'s files failed to take entries: none is written to them any more.
    fn break_database(&mut self, database: &Arc<str>) {
        self.stats.failures.fetch_add(1, Ordering::Relaxed);
        self.databases.remove(database);
        self.broken.insert(database.clone());
    }

    fn prune(&mut self, database: &Arc<str>) {
        let Some(days) = self.retention.get(database).copied() else {
            return;
        };
        let today = today();
        self.pruned_day.insert(database.clone(), today);
        let oldest = today.saturating_sub(u64::from(days));
        match self.files(database).and_then(|files| files.prune(oldest)) {
            Ok(0) => {}
            Ok(removed) => {
                tracing::info!(%database, removed, days, "audit files past their retention removed")
            }
            Err(error) => {
                warn!(%database, %error, "removing old audit files failed");
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn prune_all(&mut self) {
        let known: Vec<Arc<str>> = self.retention.keys().cloned().collect();
        for database in known {
            self.prune(&database);
        }
    }

    fn query(&mut self, database: &str, query: &AuditQuery) -> Result<String, AuditError> {
        let name: Arc<str> = Arc::from(database);
        let mut out = String::new();
        let io = |source| AuditError::Io {
            database: database.to_owned(),
            source,
        };
        self.files(&name)
            .and_then(|files| files.query(query, &mut out))
            .map_err(io)?;
        Ok(out)
    }

    fn erase(&mut self, database: &str, uid: &str) -> Result<u64, AuditError> {
        let name: Arc<str> = Arc::from(database);
        let erased = self
            .files(&name)
            .and_then(|files| files.erase(uid))
            .map_err(|source| AuditError::Io {
                database: database.to_owned(),
                source,
            })?;
        self.stats.erased.fetch_add(erased, Ordering::Relaxed);
        Ok(erased)
    }
}

/// Today, in days since 1970-01-01 (UTC).
fn today() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64);
    now / DAY_MS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AuditEntry;

    fn entry(time: u64, uid: &str) -> Arc<str> {
        AuditEntry {
            time,
            op: "set".into(),
            path: "/a".into(),
            paths: Vec::new(),
            uid: Some(uid.into()),
            provider: None,
            transport: "rest".into(),
            address: None,
            rules: vec!["open".into()],
        }
        .to_record()
        .into()
    }

    fn copied(seq: u64, time: u64, uid: &str) -> Copied {
        Copied {
            database: "db".into(),
            seq,
            entry: entry(time, uid),
        }
    }

    fn all() -> AuditQuery {
        AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn entries_are_kept_queried_erased_and_pruned() -> Result<(), AuditError> {
        let root = tempfile::tempdir().map_err(|source| AuditError::Io {
            database: "-".into(),
            source,
        })?;
        let now = today() * DAY_MS;
        // An old day's file, past any retention: removed at the database's first append.
        let old = root.path().join("db").join("2001-01-01.jsonl");
        std::fs::create_dir_all(old.parent().expect("a parent")).expect("a directory");
        std::fs::write(&old, "{\"seq\":0,\"time\":0,\"path\":\"/a\"}\n").expect("written");
        let trail = AuditTrail::start(root.path().to_owned()).expect("starts");
        // Entries of a database whose retention is not known yet prune nothing.
        trail.append(vec![copied(5, now, "ada")]);
        assert!(trail.sync());
        assert!(old.exists(), "kept until the retention is known");
        trail.retain("db".into(), 30);
        trail.append(vec![copied(7, now, "bob")]);
        // Handed twice (a copy from the log after a crash): kept once.
        trail.append(vec![copied(7, now, "bob"), copied(9, now, "ada")]);
        assert!(trail.sync());
        assert!(!old.exists(), "pruned");
        let lines = trail.query("db", all()).await?;
        let seqs: Vec<u64> = lines
            .lines()
            .map(|line| {
                serde_json::from_str::<serde_json::Value>(line).expect("json")["seq"]
                    .as_u64()
                    .unwrap_or(0)
            })
            .collect();
        assert_eq!(seqs, [5, 7, 9]);
        assert_eq!(trail.erase("db", "ada").await?, 2);
        let lines = trail.query("db", all()).await?;
        assert_eq!(lines.lines().count(), 1);
        assert!(lines.contains("\"bob\""));
        assert_eq!(trail.query("elsewhere", all()).await?, "");
        assert_eq!(trail.stats().written.load(Ordering::Relaxed), 3);
        Ok(())
    }

    #[test]
    fn a_database_whose_files_fail_stops_and_keeps_the_log() {
        let root = tempfile::tempdir().expect("a directory");
        // A file where the database's directory would be: nothing can be written there.
        std::fs::write(root.path().join("db"), "not a directory").expect("written");
        let trail = AuditTrail::start(root.path().to_owned()).expect("starts");
        trail.append(vec![copied(1, 0, "ada")]);
        assert!(!trail.sync(), "the log must keep the entry");
        trail.append(vec![Copied {
            database: "other".into(),
            seq: 2,
            entry: entry(0, "bob"),
        }]);
        assert!(!trail.sync(), "still, until the next start");
        assert_eq!(
            trail.stats().written.load(Ordering::Relaxed),
            1,
            "the other database's"
        );
        assert!(trail.stats().failures.load(Ordering::Relaxed) >= 1);
    }
}
