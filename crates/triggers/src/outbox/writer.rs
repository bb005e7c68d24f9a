//! The outbox's writer thread: the only one that appends to the events files, syncs them,
//! writes the confirmed positions and drops confirmed heads (`super`, decision 70).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;

use tracing::{error, warn};

use super::files::{format_line, EventsFile};
use super::{
    now_ms, record_text, DeadLetter, Handed, Job, Shared, CONFIRMED, COPY_RESET, MAX_OUTBOX_BYTES,
    TICK,
};

/// The writer thread: until every [`Outbox`] is dropped.
pub(super) fn write_all(shared: &Shared, jobs: &Receiver<Job>) {
    loop {
        match jobs.recv_timeout(TICK) {
            Ok(Job::Take(events)) => {
                // The triggers declared now (a declaration may change between two batches).
                let names: HashMap<Arc<str>, usize> = shared
                    .live()
                    .into_iter()
                    .map(|(i, t)| (t.declared().trigger.name.clone(), i))
                    .collect();
                take(shared, &names, events);
            }
            Ok(Job::Sync(done)) => {
                let _ = done.send(sync_all(shared));
            }
            Ok(Job::Ownership {
                database,
                following,
            }) => own(shared, &database, following),
            Ok(Job::Again {
                trigger,
                letters,
                done,
            }) => {
                let _ = done.send(again(shared, trigger, letters));
            }
            Ok(Job::Unconfirmed {
                database,
                budget,
                done,
            }) => {
                let _ = done.send(unconfirmed(shared, &database, budget));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        tick(shared);
    }
    tick(shared);
    shared.stopping.store(true, Ordering::Relaxed);
    for trigger in shared.all() {
        trigger.wake.notify_all();
    }
}

pub(super) fn file_of<'a>(
    files: &'a mut BTreeMap<(usize, Arc<str>), EventsFile>,
    shared: &Shared,
    trigger: usize,
    database: &Arc<str>,
) -> std::io::Result<&'a mut EventsFile> {
    let key = (trigger, database.clone());
    if !files.contains_key(&key) {
        let mut file = EventsFile::open(&shared.trigger(trigger).dir, database)?;
        let following = shared.follows(database);
        if file.following != following {
            file.following = following;
            file.pos_dirty = true;
        }
        files.insert(key.clone(), file);
    }
    files
        .get_mut(&key)
        .ok_or_else(|| std::io::Error::other("events file not kept"))
}

fn take(shared: &Shared, names: &HashMap<Arc<str>, usize>, events: Vec<Handed>) {
    if shared.broken.load(Ordering::Relaxed) {
        // A batch was lost since the start: the log keeps every event from then on (its
        // segments are not dropped) and hands them over at the next start; taking later ones
        // now would make that start skip the lost batch as already kept.
        return;
    }
    let now = now_ms();
    // The new lines of each file, written at once.
    // With the last position each batch holds.
    let mut batches: BTreeMap<(usize, Arc<str>), Batch> = BTreeMap::new();
    // Bytes each trigger keeps unconfirmed, with this batch's.
    let mut kept: HashMap<usize, u64> = HashMap::new();
    let mut files = shared.files();
    for handed in events {
        let mut parts = handed.text.splitn(3, '\n');
        let (Some(name), Some(id), Some(event)) = (parts.next(), parts.next(), parts.next()) else {
            warn!(database = %handed.database, "a trigger event record without its parts");
            continue;
        };
        let Some(&trigger) = names.get(name) else {
            // Declared when the write was made, and not any more.
            continue;
        };
        if id == COPY_RESET {
            // A full copy from the owner: its unconfirmed events follow and replace these.
            copy_reset(&mut files, &mut batches, trigger, &handed);
            // What the trigger keeps is counted again.
            kept.remove(&trigger);
            continue;
        }
        if id == CONFIRMED {
            // The owner's receiver confirmed these: a follower keeps them no longer. (The
            // owner itself, and this node once it owns the database, has its own positions.)
            if let Some(file) = files.get_mut(&(trigger, handed.database.clone())) {
                if file.following {
                    if let Err(error) = file.drop_through(event) {
                        warn!(database = %handed.database, %error, "confirmed trigger events not dropped");
                    }
                }
            }
            continue;
        }
        let file = match file_of(&mut files, shared, trigger, &handed.database) {
            Ok(file) => file,
            Err(error) => {
                error!(trigger = name, database = %handed.database, %error, "trigger events file: the log keeps the events until the next start");
                shared.broken.store(true, Ordering::Relaxed);
                return;
            }
        };
        let batch = batches
            .entry((trigger, handed.database.clone()))
            .or_default();
        // Already kept (the log hands over at a start what it still holds).
        if handed.seq <= file.last_seq.max(batch.last_seq) {
            continue;
        }
        let state = shared.trigger(trigger);
        let counters = &state.counters;
        let kept = kept.entry(trigger).or_insert_with(|| {
            files
                .iter()
                .filter(|((t, _), _)| *t == trigger)
                .map(|(_, file)| file.len - file.confirmed)
                .sum()
        });
        *kept += (event.len() + id.len() + 48) as u64;
        if *kept > MAX_OUTBOX_BYTES {
            let dropped = counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                warn!(
                    trigger = name,
                    dropped, "trigger event dropped: its outbox holds {MAX_OUTBOX_BYTES} bytes"
                );
            }
            continue;
        }
        batch.last_seq = handed.seq;
        format_line(&mut batch.lines, handed.seq, now, id, event);
        batch.count += 1;
    }
    for ((trigger, database), batch) in batches {
        if batch.count == 0 {
            continue;
        }
        let Some(file) = files.get_mut(&(trigger, database.clone())) else {
            continue;
        };
        match file.append(&batch.lines, batch.count, now) {
            Ok(()) => {
                // Only once written: an event not written is one the log must keep.
                file.last_seq = batch.last_seq;
                let counters = &shared.trigger(trigger).counters;
                counters.taken.fetch_add(batch.count, Ordering::Relaxed);
            }
            Err(error) => {
                error!(%database, %error, "trigger events not written: the log keeps them until the next start");
                shared.broken.store(true, Ordering::Relaxed);
            }
        }
        shared.trigger(trigger).wake.notify_all();
    }
}

/// Drops what this node kept of a database it follows for `trigger`: a full copy came, and
/// the owner's unconfirmed events follow it. A reset the log hands over again at a start is
/// older than the events taken after it, and skipped.
fn copy_reset(
    files: &mut BTreeMap<(usize, Arc<str>), EventsFile>,
    batches: &mut BTreeMap<(usize, Arc<str>), Batch>,
    trigger: usize,
    handed: &Handed,
) {
    let key = (trigger, handed.database.clone());
    let Some(file) = files.get_mut(&key).filter(|file| file.following) else {
        return;
    };
    if handed.seq <= file.last_seq {
        // Handed over again at a start: what came after it stays.
        return;
    }
    // The events of this batch before the reset go with the file's.
    if let Some(batch) = batches.remove(&key) {
        file.last_seq = file.last_seq.max(batch.last_seq);
    }
    if let Err(error) = file.drop_all() {
        warn!(database = %handed.database, %error, "trigger events kept before a full copy not dropped");
    }
    // What is written from now on (a dead letter sent again too) sits at or after the reset,
    // so that the log handing the reset over again at a start never drops it.
    file.last_seq = file.last_seq.max(handed.seq);
}

/// What [`super::Outbox::unconfirmed`] answers.
fn unconfirmed(shared: &Shared, database: &Arc<str>, budget: u64) -> Option<Vec<String>> {
    if shared.broken.load(Ordering::Relaxed) {
        // Events since the failed append are only in the log: the files are not all of them.
        warn!(%database, "the trigger outbox failed to write since the start: a full copy carries no events, its follower keeps its own");
        return None;
    }
    let files = shared.files();
    let mut texts = Vec::new();
    let mut left = budget;
    for (index, trigger) in shared.live() {
        let lines = match files
            .get(&(index, database.clone()))
            .map_or(Ok(Some(Vec::new())), |file| file.read_all_pending(left))
        {
            Ok(Some(lines)) => lines,
            Ok(None) => {
                warn!(%database, budget, "more unconfirmed trigger events than a full copy carries: its follower keeps its own");
                return None;
            }
            Err(error) => {
                warn!(%database, %error, "unconfirmed trigger events not read for a full copy");
                return None;
            }
        };
        let name = trigger.declared().trigger.name.clone();
        texts.push(record_text(&name, COPY_RESET, ""));
        for line in lines {
            let text = record_text(&name, &line.id, &line.event);
            left = left.saturating_sub(text.len() as u64 + super::RECORD_OVERHEAD);
            texts.push(text);
        }
    }
    Some(texts)
}

/// The new lines of one events file, taken in one batch.
#[derive(Default)]
struct Batch {
    lines: Vec<u8>,
    count: u64,
    last_seq: u64,
}

fn sync_all(shared: &Shared) -> bool {
    let mut files = shared.files();
    // A batch that was not written: its events are only in the log, which must keep them
    // until a start hands them over again.
    let mut ok = !shared.broken.load(Ordering::Relaxed);
    for ((_, database), file) in files.iter_mut() {
        if let Err(error) = file.sync() {
            error!(%database, %error, "trigger events not synced");
            ok = false;
        }
    }
    ok
}

/// Notes whether this node follows `database`: the files it has now, and those its first
/// events will make (so an outbox keeps no file for the databases nobody writes a matching
/// path of, only their role).
fn own(shared: &Shared, database: &Arc<str>, following: bool) {
    shared.note_following(database, following);
    let triggers = shared.all();
    let mut files = shared.files();
    for (index, trigger) in triggers.iter().enumerate() {
        if let Some(file) = files.get_mut(&(index, database.clone())) {
            if file.following != following {
                file.following = following;
                file.pos_dirty = true;
            }
        }
        trigger.wake.notify_all();
    }
}

fn again(shared: &Shared, trigger: usize, letters: Vec<DeadLetter>) -> std::io::Result<()> {
    if shared.broken.load(Ordering::Relaxed) {
        return Err(std::io::Error::other(
            "the trigger outbox failed to write since the start: restart the server first",
        ));
    }
    let mut files = shared.files();
    let mut by_database: BTreeMap<Arc<str>, Vec<DeadLetter>> = BTreeMap::new();
    for letter in letters {
        by_database
            .entry(Arc::from(letter.database.as_str()))
            .or_default()
            .push(letter);
    }
    let now = now_ms();
    for (database, letters) in by_database {
        let file = file_of(&mut files, shared, trigger, &database)?;
        // Under the last position taken: the log never hands over an older one again, and
        // the confirmed count of a position tells them apart.
        let seq = file.last_seq.max(file.confirmed_seq);
        let mut lines = Vec::new();
        for letter in &letters {
            format_line(&mut lines, seq, now, &letter.id, &letter.event);
        }
        file.last_seq = seq;
        file.append(&lines, letters.len() as u64, now)?;
        file.sync()?;
    }
    shared.trigger(trigger).wake.notify_all();
    Ok(())
}

/// Writes the confirmed positions that moved, and drops large confirmed heads.
fn tick(shared: &Shared) {
    let mut files = shared.files();
    for ((_, database), file) in files.iter_mut() {
        let result = file.compact().and_then(|compacted| {
            if compacted || file.pos_dirty {
                file.write_pos()
            } else {
                Ok(())
            }
        });
        if let Err(error) = result {
            warn!(%database, %error, "trigger position not written");
        }
    }
}
