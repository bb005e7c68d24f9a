//! The fault-injecting backend: memory with failures on demand and a model of what a crash
//! leaves on disk.
//!
//! Every file keeps two images. The *live* image is what reads see (the page cache). The
//! *durable* image is what survives a power loss: `sync_data` moves the writes made since the
//! last sync into it. Directory entries are kept the same way: creations, renames and
//! removals reach the durable directory at `sync_dir`.
//!
//! [`FaultStorage::crash`] builds the disk a power loss could leave: the durable images, plus
//! any mix of the unsynced writes (each one applied whole, lost, or torn at sector granularity,
//! in any combination), plus a prefix of the unsynced directory changes (journaling file
//! systems commit metadata in order). A failed `sync_data` drops the unsynced writes from the
//! durable path for good while reads still see them, which is what Linux does after a
//! writeback error and why a writer must never retry a failed sync and trust the result.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use crate::storage::{Storage, StorageFile};
use crate::storage_memory::{lock, read_from, resize, write_into};

/// The unit a torn write is made of: a sector is written whole or not at all.
pub const SECTOR_BYTES: usize = 512;

/// The failure to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// ENOSPC.
    NoSpace,
    /// EIO.
    Io,
    /// The call fails and changes nothing, not even what a failed sync would drop: as if the
    /// process stopped just before it. Inject it, let the code under test run into it, then
    /// take a [`FaultStorage::crash`] image to see what a power loss at that point leaves.
    Halt,
}

/// The call that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    Create,
    Write,
    SetLen,
    Sync,
    Rename,
    Remove,
    SyncDir,
}

/// A failure plan: calls at `point` succeed `skip` times, then fail with `fault` `times` times
/// (forever when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    pub point: FaultPoint,
    pub fault: Fault,
    pub skip: u64,
    pub times: Option<u64>,
}

impl FaultRule {
    /// The next call at `point` fails once.
    pub fn once(point: FaultPoint, fault: Fault) -> FaultRule {
        FaultRule {
            point,
            fault,
            skip: 0,
            times: Some(1),
        }
    }

    /// Every call at `point` fails until the rules are cleared.
    pub fn always(point: FaultPoint, fault: Fault) -> FaultRule {
        FaultRule {
            point,
            fault,
            skip: 0,
            times: None,
        }
    }

    /// Lets `calls` calls succeed before failing.
    pub fn after(mut self, calls: u64) -> FaultRule {
        self.skip = calls;
        self
    }
}

#[derive(Debug, Clone)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Clone, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

#[derive(Debug, Clone)]
enum DirChange {
    Link { name: String, inode: usize },
    Unlink { name: String },
    Rename { from: String, to: String },
}

/// A failure a rule decided on.
struct Injected(Fault);

impl From<Injected> for io::Error {
    fn from(injected: Injected) -> io::Error {
        match injected.0 {
            Fault::NoSpace => io::Error::new(io::ErrorKind::StorageFull, "injected ENOSPC"),
            Fault::Io => io::Error::other("injected EIO"),
            Fault::Halt => io::Error::other("halted before the call"),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    inodes: Vec<Inode>,
    live: BTreeMap<String, usize>,
    durable: BTreeMap<String, usize>,
    unsynced_dir: Vec<DirChange>,
    rules: Vec<FaultRule>,
    injected: u64,
    counts: CallCounts,
}

/// How many calls that cost IO the storage has seen (successful or not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub writes: u64,
    pub syncs: u64,
    pub dir_syncs: u64,
}

/// A directory with injectable failures and crash images. Clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct FaultStorage {
    state: Arc<Mutex<State>>,
}

/// A file of a [`FaultStorage`].
#[derive(Debug)]
pub struct FaultFile {
    state: Arc<Mutex<State>>,
    inode: usize,
}

impl State {
    /// Fails the call if a rule says so.
    fn check(&mut self, point: FaultPoint) -> Result<(), Injected> {
        match point {
            FaultPoint::Write => self.counts.writes += 1,
            FaultPoint::Sync => self.counts.syncs += 1,
            FaultPoint::SyncDir => self.counts.dir_syncs += 1,
            _ => {}
        }
        for rule in self.rules.iter_mut().filter(|rule| rule.point == point) {
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            match &mut rule.times {
                Some(0) => continue,
                Some(times) => *times -= 1,
                None => {}
            }
            self.injected += 1;
            return Err(Injected(rule.fault));
        }
        Ok(())
    }

    fn lookup(&self, name: &str) -> io::Result<usize> {
        self.live
            .get(name)
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no file {name:?}")))
    }
}

impl FaultStorage {
    pub fn new() -> FaultStorage {
        FaultStorage::default()
    }

    /// Adds a failure plan.
    pub fn inject(&self, rule: FaultRule) {
        lock(&self.state).rules.push(rule);
    }

    /// Removes every failure plan.
    pub fn clear_faults(&self) {
        lock(&self.state).rules.clear();
    }

    /// How many failures have been injected so far.
    pub fn injected(&self) -> u64 {
        lock(&self.state).injected
    }

    /// How many writes and syncs were asked for so far.
    pub fn counts(&self) -> CallCounts {
        lock(&self.state).counts
    }

    /// The live bytes of `name`, for tests.
    pub fn contents(&self, name: &str) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        let inode = *state.live.get(name)?;
        Some(state.inodes[inode].live.clone())
    }

    /// Changes one live byte of `name` with `xor` (as if the disk returned it damaged; the
    /// durable image changes too, so the damage survives crashes). False if there is no such
    /// byte.
    pub fn flip(&self, name: &str, offset: u64, xor: u8) -> bool {
        let mut state = lock(&self.state);
        let Some(&inode) = state.live.get(name) else {
            return false;
        };
        let Ok(at) = usize::try_from(offset) else {
            return false;
        };
        let inode = &mut state.inodes[inode];
        let mut flipped = false;
        for image in [&mut inode.live, &mut inode.durable] {
            if let Some(byte) = image.get_mut(at) {
                *byte ^= xor;
                flipped = true;
            }
        }
        flipped
    }

    /// The disk a power loss leaves now, chosen by `seed` among all the outcomes the model
    /// allows (see the module documentation). The result has no failure plans.
    pub fn crash(&self, seed: u64) -> FaultStorage {
        let mut random = SplitMix64(seed);
        let state = lock(&self.state);
        let mut directory = state.durable.clone();
        let applied = random.below(state.unsynced_dir.len() as u64 + 1) as usize;
        for change in &state.unsynced_dir[..applied] {
            apply_dir_change(&mut directory, change);
        }
        let files = directory.into_iter().map(|(name, inode)| {
            let inode = &state.inodes[inode];
            let mut image = inode.durable.clone();
            for pending in &inode.pending {
                replay_torn(&mut image, pending, &mut random);
            }
            (name, image)
        });
        FaultStorage::with_files(files)
    }

    /// The disk a power loss leaves when no unsynced write or directory change made it.
    pub fn crash_losing_unsynced(&self) -> FaultStorage {
        let state = lock(&self.state);
        let files = state
            .durable
            .iter()
            .map(|(name, &inode)| (name.clone(), state.inodes[inode].durable.clone()));
        FaultStorage::with_files(files)
    }

    fn with_files(files: impl Iterator<Item = (String, Vec<u8>)>) -> FaultStorage {
        let mut state = State::default();
        for (name, image) in files {
            state.live.insert(name.clone(), state.inodes.len());
            state.durable.insert(name, state.inodes.len());
            state.inodes.push(Inode {
                live: image.clone(),
                durable: image,
                pending: Vec::new(),
            });
        }
        FaultStorage {
            state: Arc::new(Mutex::new(state)),
        }
    }
}

fn apply_dir_change(directory: &mut BTreeMap<String, usize>, change: &DirChange) {
    match change {
        DirChange::Link { name, inode } => {
            directory.insert(name.clone(), *inode);
        }
        DirChange::Unlink { name } => {
            directory.remove(name);
        }
        DirChange::Rename { from, to } => {
            if let Some(inode) = directory.remove(from) {
                directory.insert(to.clone(), inode);
            }
        }
    }
}

/// Applies an unsynced change to a crash image: whole, not at all, or (for writes) sector by
/// sector at random.
fn replay_torn(image: &mut Vec<u8>, pending: &Pending, random: &mut SplitMix64) {
    match (pending, random.below(3)) {
        (_, 0) => {}
        (Pending::SetLen(len), _) => {
            // A failed resize of memory only happens for absurd lengths, never in tests.
            let _ = resize(image, *len);
        }
        (Pending::Write { offset, data }, 1) => {
            let _ = write_into(image, *offset, data);
        }
        (Pending::Write { offset, data }, _) => {
            for (index, sector) in data.chunks(SECTOR_BYTES).enumerate() {
                if random.below(2) == 1 {
                    let at = offset + (index * SECTOR_BYTES) as u64;
                    let _ = write_into(image, at, sector);
                }
            }
        }
    }
}

impl Storage for FaultStorage {
    type File = FaultFile;

    fn create(&self, name: &str) -> io::Result<FaultFile> {
        let mut state = lock(&self.state);
        state.check(FaultPoint::Create)?;
        if state.live.contains_key(name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{name:?} exists"),
            ));
        }
        let inode = state.inodes.len();
        state.inodes.push(Inode::default());
        state.live.insert(name.to_owned(), inode);
        state.unsynced_dir.push(DirChange::Link {
            name: name.to_owned(),
            inode,
        });
        Ok(FaultFile {
            state: self.state.clone(),
            inode,
        })
    }

    fn open(&self, name: &str) -> io::Result<FaultFile> {
        let inode = lock(&self.state).lookup(name)?;
        Ok(FaultFile {
            state: self.state.clone(),
            inode,
        })
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(lock(&self.state).live.keys().cloned().collect())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut state = lock(&self.state);
        state.check(FaultPoint::Rename)?;
        let inode = state.lookup(from)?;
        state.live.remove(from);
        state.live.insert(to.to_owned(), inode);
        state.unsynced_dir.push(DirChange::Rename {
            from: from.to_owned(),
            to: to.to_owned(),
        });
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut state = lock(&self.state);
        state.check(FaultPoint::Remove)?;
        state.lookup(name)?;
        state.live.remove(name);
        state.unsynced_dir.push(DirChange::Unlink {
            name: name.to_owned(),
        });
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut state = lock(&self.state);
        state.check(FaultPoint::SyncDir)?;
        state.durable = state.live.clone();
        state.unsynced_dir.clear();
        Ok(())
    }
}

impl StorageFile for FaultFile {
    fn size(&self) -> io::Result<u64> {
        Ok(lock(&self.state).inodes[self.inode].live.len() as u64)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        read_from(&lock(&self.state).inodes[self.inode].live, offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut state = lock(&self.state);
        state.check(FaultPoint::Write)?;
        let inode = &mut state.inodes[self.inode];
        write_into(&mut inode.live, offset, data)?;
        inode.pending.push(Pending::Write {
            offset,
            data: data.to_vec(),
        });
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = lock(&self.state);
        state.check(FaultPoint::SetLen)?;
        let inode = &mut state.inodes[self.inode];
        resize(&mut inode.live, len)?;
        inode.pending.push(Pending::SetLen(len));
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = lock(&self.state);
        let outcome = state.check(FaultPoint::Sync);
        let inode = &mut state.inodes[self.inode];
        if let Err(Injected(Fault::Halt)) = outcome {
            return Err(Injected(Fault::Halt).into());
        }
        let pending = std::mem::take(&mut inode.pending);
        // On failure the unsynced writes are forgotten, not kept for a later sync: the kernel
        // marks the pages it failed to write back as clean.
        outcome?;
        for change in &pending {
            match change {
                Pending::Write { offset, data } => write_into(&mut inode.durable, *offset, data)?,
                Pending::SetLen(len) => resize(&mut inode.durable, *len)?,
            }
        }
        Ok(())
    }
}

/// A small seeded generator (SplitMix64), so that a crash image is a pure function of its seed
/// and a failing seed replays exactly. Public for simulations that drive this storage.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next number of the sequence.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next() % bound
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_synced_data_and_names_survive_a_strict_crash() -> io::Result<()> {
        let storage = FaultStorage::new();
        let synced = storage.create("synced")?;
        synced.write_at(0, b"kept")?;
        synced.sync_data()?;
        storage.sync_dir()?;
        synced.write_at(4, b"lost")?;
        let unnamed = storage.create("unnamed")?;
        unnamed.write_at(0, b"data")?;
        unnamed.sync_data()?;
        let after = storage.crash_losing_unsynced();
        assert_eq!(after.list()?, vec!["synced".to_owned()]);
        assert_eq!(after.contents("synced"), Some(b"kept".to_vec()));
        assert_eq!(storage.contents("synced"), Some(b"keptlost".to_vec()));
        Ok(())
    }

    #[test]
    fn random_crashes_keep_synced_data_and_vary_the_rest() -> io::Result<()> {
        let storage = FaultStorage::new();
        let file = storage.create("f")?;
        file.write_at(0, &[1; 1024])?;
        file.sync_data()?;
        storage.sync_dir()?;
        file.write_at(1024, &[2; 4 * SECTOR_BYTES])?;
        let mut outcomes = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let image = storage.crash(seed).contents("f").unwrap_or_default();
            assert_eq!(&image[..1024], &[1; 1024][..], "seed {seed}");
            outcomes.insert(image);
        }
        // Whole, lost, and several torn variants.
        assert!(outcomes.len() > 3, "{} outcomes", outcomes.len());
        Ok(())
    }

    #[test]
    fn a_failed_sync_loses_the_writes_for_good() -> io::Result<()> {
        let storage = FaultStorage::new();
        let file = storage.create("f")?;
        storage.sync_dir()?;
        file.write_at(0, b"data")?;
        storage.inject(FaultRule::once(FaultPoint::Sync, Fault::Io));
        assert!(file.sync_data().is_err());
        assert!(file.sync_data().is_ok(), "the retry reports success...");
        assert_eq!(storage.contents("f"), Some(b"data".to_vec()));
        let after = storage.crash_losing_unsynced();
        assert_eq!(after.contents("f"), Some(Vec::new()), "...but lost data");
        Ok(())
    }

    #[test]
    fn rules_skip_then_fail() -> io::Result<()> {
        let storage = FaultStorage::new();
        storage.inject(FaultRule::once(FaultPoint::Write, Fault::NoSpace).after(1));
        let file = storage.create("f")?;
        file.write_at(0, b"a")?;
        let error = file.write_at(1, b"b").err().map(|e| e.kind());
        assert_eq!(error, Some(io::ErrorKind::StorageFull));
        file.write_at(1, b"c")?;
        assert_eq!(storage.contents("f"), Some(b"ac".to_vec()));
        assert_eq!(storage.injected(), 1);
        Ok(())
    }

    #[test]
    fn directory_changes_survive_in_order() -> io::Result<()> {
        let storage = FaultStorage::new();
        for name in ["a", "b", "c"] {
            storage.create(name)?.sync_data()?;
        }
        for seed in 0..32 {
            let names = storage.crash(seed).list()?;
            let expected: Vec<String> = ["a", "b", "c"][..names.len()]
                .iter()
                .map(|name| name.to_string())
                .collect();
            assert_eq!(names, expected, "a prefix of the creations");
        }
        Ok(())
    }
}
