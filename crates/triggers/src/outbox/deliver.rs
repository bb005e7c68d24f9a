//! The delivery thread of one declared trigger: the oldest unconfirmed event of each of its
//! databases in turn (so a database whose receiver fails waits alone), one at a time, in
//! log order; a failure waits [`backoff`] before the same event is tried again, and after
//! `maxAttempts` the event goes to the dead letters and the next one follows.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::dead::{DeadLetter, MAX_DEAD_LETTER_BYTES};
use super::files::Line;
use super::{now_ms, Shared};
use crate::declared::Destination;
use crate::nats::NatsPublisher;

/// The first wait after a failure; each next one doubles, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The wait before attempt `attempts + 1`, with a fifth of it left to chance so that
/// receivers coming back are not all hit at once.
pub fn backoff(attempts: u32) -> Duration {
    let exp = FIRST_BACKOFF.saturating_mul(1u32 << attempts.saturating_sub(1).min(16));
    let base = exp.min(MAX_BACKOFF);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = base.mul_f64(f64::from(nanos % 1000) / 5000.0);
    base - jitter
}

/// Delivers trigger `index`'s events until the outbox stops or another thread replaces this
/// one (`generation` is its number: a new declaration of the trigger starts the next).
pub(crate) fn run(shared: &Shared, index: usize, generation: u64) {
    let trigger = shared.trigger(index);
    let declared = trigger.declared();
    let mut sender = Sender::new(&declared);
    let mut last: Option<Arc<str>> = None;
    let current = || trigger.is_live() && trigger.thread.load(Ordering::Relaxed) == generation;
    while !shared.stopping.load(Ordering::Relaxed) && current() {
        let (database, lines) = {
            let mut files = shared.files();
            let now = Instant::now();
            let mut ready: Vec<Arc<str>> = Vec::new();
            let mut soonest: Option<Instant> = None;
            for ((t, database), file) in files.iter() {
                if *t != index || file.following || file.pending == 0 {
                    continue;
                }
                match file.retry_at {
                    Some(at) if at > now => soonest = Some(soonest.map_or(at, |s| s.min(at))),
                    _ => ready.push(database.clone()),
                }
            }
            // The first ready database after the one served last, in name order.
            let next = ready
                .iter()
                .find(|d| last.as_ref().is_some_and(|l| *d > l))
                .or(ready.first())
                .cloned();
            let Some(database) = next else {
                let wait = soonest.map_or(Duration::from_secs(1), |s| s - now);
                let _ = trigger
                    .wake
                    .wait_timeout(files, wait.min(Duration::from_secs(1)));
                continue;
            };
            let Some(file) = files.get_mut(&(index, database.clone())) else {
                continue;
            };
            match file.read_pending() {
                Ok(lines) => {
                    if let Some(first) = lines.first() {
                        file.head_time_ms = first.time_ms;
                    }
                    (database, lines)
                }
                Err(error) => {
                    warn!(trigger = %declared.trigger.name, %database, %error, "trigger events not read");
                    file.retry_at = Some(now + MAX_BACKOFF);
                    file.last_error = Some(error.to_string());
                    continue;
                }
            }
        };
        last = Some(database.clone());
        let mut next = 0;
        // A new declaration of the trigger replaced this thread: the rest of the chunk is the
        // new thread's (it reads from the confirmed position).
        while next < lines.len() && current() {
            let group = &lines[next..(next + sender.batch).min(lines.len())];
            let outcome = sender.send(&database, group);
            let counters = &trigger.counters;
            let after = |i: usize| lines.get(next + i + 1).map(|l| l.time_ms);
            let confirm = |files: &mut super::FilesMap| {
                if let Some(file) = files.get_mut(&(index, database.clone())) {
                    for (i, line) in group.iter().enumerate() {
                        file.confirm(line, after(i));
                    }
                }
            };
            let error = match outcome {
                Ok(()) => {
                    counters
                        .delivered
                        .fetch_add(group.len() as u64, Ordering::Relaxed);
                    confirm(&mut shared.files());
                    next += group.len();
                    continue;
                }
                Err(error) => error,
            };
            counters.failed.fetch_add(1, Ordering::Relaxed);
            let attempts = {
                let mut files = shared.files();
                let Some(file) = files.get_mut(&(index, database.clone())) else {
                    break;
                };
                file.attempts += 1;
                debug!(trigger = %declared.trigger.name, %database, attempts = file.attempts, %error, "trigger events not delivered");
                if file.attempts < declared.max_attempts {
                    file.retry_at = Some(Instant::now() + backoff(file.attempts));
                    file.last_error = Some(error);
                    break;
                }
                file.attempts
            };
            // Every event the failed attempts carried goes to the dead letters: written (and
            // synced) with no other lock held, then confirmed.
            // Those past the dead letters' limit are dropped instead.
            let mut full = 0u64;
            let written = {
                let dead = trigger.dead.lock().unwrap_or_else(|p| p.into_inner());
                group.iter().try_for_each(|line| {
                    let kept = dead.add(&DeadLetter {
                        database: database.to_string(),
                        seq: line.seq,
                        id: line.id.clone(),
                        attempts,
                        error: error.clone(),
                        dead_at_ms: now_ms(),
                        event: line.event.clone(),
                    })?;
                    full += u64::from(!kept);
                    Ok::<(), std::io::Error>(())
                })
            };
            match written {
                Ok(()) => {
                    let kept = group.len() as u64 - full;
                    counters.dead.fetch_add(kept, Ordering::Relaxed);
                    counters.dead_held.fetch_add(kept, Ordering::Relaxed);
                    counters.dropped.fetch_add(full, Ordering::Relaxed);
                    if full > 0 {
                        warn!(trigger = %declared.trigger.name, %database, events = full, limit = MAX_DEAD_LETTER_BYTES, "trigger events dropped: the dead letters are full");
                    }
                    warn!(trigger = %declared.trigger.name, %database, events = kept, %error, "trigger events moved to the dead letters");
                    confirm(&mut shared.files());
                    next += group.len();
                }
                Err(write) => {
                    // Some may be in the dead letters already: they would be there twice
                    // rather than lost.
                    warn!(trigger = %declared.trigger.name, %database, error = %write, "dead letters not written: the events stay");
                    let mut files = shared.files();
                    if let Some(file) = files.get_mut(&(index, database.clone())) {
                        file.retry_at = Some(Instant::now() + MAX_BACKOFF);
                        file.last_error = Some(error);
                    }
                    break;
                }
            }
        }
    }
}

/// Where one trigger's events go, with its connection, and how many leave at once.
struct Sender {
    trigger: Arc<str>,
    batch: usize,
    to: To,
}

enum To {
    Http {
        agent: ureq::Agent,
        url: String,
        headers: Vec<(String, String)>,
    },
    Nats {
        url: String,
        subject: String,
        timeout: Duration,
        connection: Option<NatsPublisher>,
    },
}

impl Sender {
    fn new(declared: &crate::declared::Declared) -> Sender {
        Sender {
            trigger: declared.trigger.name.clone(),
            batch: declared.batch_size.max(1),
            to: To::new(&declared.destination),
        }
    }

    /// Sends `lines`' events (one, or a batch); `Ok` once the receiver confirmed them all.
    fn send(&mut self, database: &str, lines: &[Line]) -> Result<(), String> {
        match &mut self.to {
            To::Http {
                agent,
                url,
                headers,
            } => {
                // One event alone is a structured CloudEvent; several, CloudEvents' batched
                // mode (a JSON array).
                let (content_type, body) = match lines {
                    [line] => (
                        "application/cloudevents+json; charset=utf-8",
                        line.event.clone(),
                    ),
                    _ => {
                        let mut body = String::from("[");
                        for (i, line) in lines.iter().enumerate() {
                            if i > 0 {
                                body.push(',');
                            }
                            body.push_str(&line.event);
                        }
                        body.push(']');
                        ("application/cloudevents-batch+json; charset=utf-8", body)
                    }
                };
                let mut request = agent
                    .post(url.as_str())
                    .header("content-type", content_type);
                for (name, value) in headers.iter() {
                    request = request.header(name.as_str(), value.as_str());
                }
                let response = request.send(body).map_err(|e| e.to_string())?;
                if !response.status().is_success() {
                    return Err(format!("http status: {}", response.status()));
                }
                Ok(())
            }
            To::Nats {
                url,
                subject,
                timeout,
                connection,
            } => {
                if connection.is_none() {
                    *connection =
                        Some(NatsPublisher::connect(url, *timeout).map_err(|e| e.to_string())?);
                }
                let Some(publisher) = connection.as_mut() else {
                    return Err("not connected".into());
                };
                // The event's id is unique within its database (its source): the stream's
                // duplicate window must not take another database's or trigger's for a
                // repeat.
                let ids: Vec<String> = lines
                    .iter()
                    .map(|line| format!("{}.{database}.{}", self.trigger, line.id))
                    .collect();
                let messages: Vec<(&str, &[u8])> = ids
                    .iter()
                    .zip(lines)
                    .map(|(id, line)| (id.as_str(), line.event.as_bytes()))
                    .collect();
                match publisher.publish_many(subject, &messages) {
                    Ok(_) => Ok(()),
                    Err(error) => {
                        // A new connection for the next attempt.
                        *connection = None;
                        Err(error.to_string())
                    }
                }
            }
        }
    }
}

impl To {
    fn new(destination: &Destination) -> To {
        match destination {
            Destination::Http {
                url,
                headers,
                timeout,
            } => To::Http {
                // No redirect is followed: ureq would turn a POST into a GET without its body
                // on a 301-303 (and a 2xx to that GET is no delivery), and send the declared
                // headers to whatever host the redirect names. A 3xx is a failure.
                agent: ureq::Agent::config_builder()
                    .timeout_global(Some(*timeout))
                    .http_status_as_error(true)
                    .max_redirects(0)
                    .build()
                    .into(),
                url: url.clone(),
                headers: headers.clone(),
            },
            Destination::Nats { url, subject } => To::Nats {
                url: url.clone(),
                subject: subject.clone(),
                timeout: Duration::from_secs(10),
                connection: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_bound() {
        assert!(backoff(1) <= FIRST_BACKOFF && backoff(1) >= FIRST_BACKOFF.mul_f64(0.8));
        assert!(backoff(4) <= FIRST_BACKOFF * 8 && backoff(4) >= FIRST_BACKOFF.mul_f64(6.4));
        assert!(backoff(40) <= MAX_BACKOFF && backoff(40) >= MAX_BACKOFF.mul_f64(0.8));
    }
}
