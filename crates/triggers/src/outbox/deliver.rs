//! The delivery thread of one declared trigger: the oldest unconfirmed event of each of its
//! databases in turn (so a database whose receiver fails waits alone), one at a time, in
//! log order; a failure waits [`backoff`] before the same event is tried again, and after
//! `maxAttempts` the event goes to the dead letters and the next one follows.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::dead::DeadLetter;
use super::files::Line;
use super::{now_ms, Shared};
use crate::declared::Destination;
use crate::nats::NatsPublisher;

/// The first wait after a failure; each next one doubles, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

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

pub(crate) fn run(shared: &Shared, index: usize) {
    let trigger = &shared.triggers[index];
    let mut sender = Sender::new(&trigger.declared.destination);
    let mut last: Option<Arc<str>> = None;
    while !shared.stopping.load(Ordering::Relaxed) {
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
                Ok(lines) => (database, lines),
                Err(error) => {
                    warn!(trigger = %trigger.declared.trigger.name, %database, %error, "trigger events not read");
                    file.retry_at = Some(now + MAX_BACKOFF);
                    file.last_error = Some(error.to_string());
                    continue;
                }
            }
        };
        last = Some(database.clone());
        for (i, line) in lines.iter().enumerate() {
            let outcome = sender.send(line);
            let counters = &trigger.counters;
            let mut files = shared.files();
            let Some(file) = files.get_mut(&(index, database.clone())) else {
                break;
            };
            match outcome {
                Ok(()) => {
                    counters.delivered.fetch_add(1, Ordering::Relaxed);
                    file.confirm(line, lines.get(i + 1).map(|l| l.time_ms));
                }
                Err(error) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    file.attempts += 1;
                    debug!(trigger = %trigger.declared.trigger.name, %database, attempts = file.attempts, %error, "trigger event not delivered");
                    if file.attempts < trigger.declared.max_attempts {
                        file.retry_at = Some(Instant::now() + backoff(file.attempts));
                        file.last_error = Some(error);
                        break;
                    }
                    let letter = DeadLetter {
                        database: database.to_string(),
                        seq: line.seq,
                        id: line.id.clone(),
                        attempts: file.attempts,
                        error: error.clone(),
                        dead_at_ms: now_ms(),
                        event: line.event.clone(),
                    };
                    let dead = trigger.dead.lock().unwrap_or_else(|p| p.into_inner());
                    match dead.add(&letter) {
                        Ok(()) => {
                            counters.dead.fetch_add(1, Ordering::Relaxed);
                            warn!(trigger = %trigger.declared.trigger.name, %database, id = %line.id, %error, "trigger event moved to the dead letters");
                            file.confirm(line, lines.get(i + 1).map(|l| l.time_ms));
                        }
                        Err(write) => {
                            warn!(trigger = %trigger.declared.trigger.name, %database, error = %write, "dead letter not written: the event stays");
                            file.retry_at = Some(Instant::now() + MAX_BACKOFF);
                            file.last_error = Some(error);
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// Where one trigger's events go, with its connection.
enum Sender {
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
    fn new(destination: &Destination) -> Sender {
        match destination {
            Destination::Http {
                url,
                headers,
                timeout,
            } => Sender::Http {
                agent: ureq::Agent::config_builder()
                    .timeout_global(Some(*timeout))
                    .http_status_as_error(true)
                    .build()
                    .into(),
                url: url.clone(),
                headers: headers.clone(),
            },
            Destination::Nats { url, subject } => Sender::Nats {
                url: url.clone(),
                subject: subject.clone(),
                timeout: Duration::from_secs(10),
                connection: None,
            },
        }
    }

    /// Sends `line`'s event; `Ok` once the receiver confirmed it.
    fn send(&mut self, line: &Line) -> Result<(), String> {
        match self {
            Sender::Http {
                agent,
                url,
                headers,
            } => {
                let mut request = agent.post(url.as_str()).header(
                    "content-type",
                    "application/cloudevents+json; charset=utf-8",
                );
                for (name, value) in headers.iter() {
                    request = request.header(name.as_str(), value.as_str());
                }
                request
                    .send(line.event.as_str())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            Sender::Nats {
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
                match publisher.publish(subject, &line.id, line.event.as_bytes()) {
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
