//! What the outbox shows of each trigger: `/.admin/triggers`, `hearth triggers status` and
//! `/metrics`.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use super::Shared;
use crate::declared::Destination;

/// One trigger's figures for `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerMetrics {
    pub name: String,
    pub taken: u64,
    pub delivered: u64,
    pub failed: u64,
    /// Events moved to the dead letters since the start.
    pub dead: u64,
    /// Dead letters held now.
    pub dead_held: u64,
    pub dropped: u64,
    /// Events not yet confirmed, of the databases this node delivers.
    pub pending: u64,
    /// Age of the oldest of them (0 when none).
    pub lag_seconds: f64,
}

pub fn metrics(shared: &Shared, now_ms: u64) -> Vec<TriggerMetrics> {
    let live = shared.live();
    let files = shared.files();
    figures(&live, &files, now_ms)
}

/// The figures of `live`'s triggers, from `files`.
fn figures(
    live: &[(usize, std::sync::Arc<super::TriggerState>)],
    files: &super::FilesMap,
    now_ms: u64,
) -> Vec<TriggerMetrics> {
    live.iter()
        .map(|(index, trigger)| {
            let index = *index;
            let mut pending = 0;
            let mut oldest = 0;
            for ((t, _), file) in files.iter() {
                if *t != index || file.following || file.pending == 0 {
                    continue;
                }
                pending += file.pending;
                if file.head_time_ms > 0 && (oldest == 0 || file.head_time_ms < oldest) {
                    oldest = file.head_time_ms;
                }
            }
            let counters = &trigger.counters;
            TriggerMetrics {
                name: trigger.declared().trigger.name.to_string(),
                taken: counters.taken.load(Ordering::Relaxed),
                delivered: counters.delivered.load(Ordering::Relaxed),
                failed: counters.failed.load(Ordering::Relaxed),
                dead: counters.dead.load(Ordering::Relaxed),
                dead_held: counters.dead_held.load(Ordering::Relaxed),
                dropped: counters.dropped.load(Ordering::Relaxed),
                pending,
                lag_seconds: if oldest == 0 {
                    0.0
                } else {
                    now_ms.saturating_sub(oldest) as f64 / 1000.0
                },
            }
        })
        .collect()
}

pub fn status(shared: &Shared, now_ms: u64) -> Value {
    // One snapshot of the list for both, so that no figure is put under another's name.
    let live = shared.live();
    let files = shared.files();
    let figures = figures(&live, &files, now_ms);
    let now = std::time::Instant::now();
    let triggers: Vec<Value> = live
        .into_iter()
        .zip(figures)
        .map(|((index, trigger), figures)| {
            let declared = trigger.declared();
            let destination = match &declared.destination {
                Destination::Http { url, .. } => json!({"http": without_credentials(url)}),
                Destination::Nats { url, subject } => {
                    json!({"nats": without_credentials(url), "subject": subject})
                }
            };
            let databases: Vec<Value> = files
                .iter()
                .filter(|((t, _), _)| *t == index)
                .map(|((_, database), file)| {
                    json!({
                        "database": &**database,
                        "pending": file.pending,
                        "lastTaken": file.last_seq,
                        "lastConfirmed": file.confirmed_seq,
                        "following": file.following,
                        "attempts": file.attempts,
                        "lastError": file.last_error,
                        "retryInMs": file.retry_at.map(|at| at.saturating_duration_since(now).as_millis() as u64),
                    })
                })
                .collect();
            json!({
                "name": &*declared.trigger.name,
                "path": declared.trigger.pattern.to_string(),
                "event": declared.event_type,
                "destination": destination,
                "maxAttempts": declared.max_attempts,
                "taken": figures.taken,
                "delivered": figures.delivered,
                "failed": figures.failed,
                "deadLetters": figures.dead_held,
                "dropped": figures.dropped,
                "pending": figures.pending,
                "lagSeconds": figures.lag_seconds,
                "databases": databases,
            })
        })
        .collect();
    json!({ "triggers": triggers })
}

/// `url` with the credentials before its host (`user:pass@`, `token@`) and the values of its
/// query shown as `***`: the status is for operators, the credentials stay in the triggers
/// file.
pub fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("***{}", &authority[at..]),
        None => authority.to_owned(),
    };
    // A query often carries a token (`?key=...`): its values are not shown either.
    let after = match after.split_once('?') {
        Some((path, query)) => {
            let query = query.split('#').next().unwrap_or_default();
            let names: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) => format!("{name}=***"),
                    None => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", names.join("&"))
        }
        None => after.to_owned(),
    };
    format!("{scheme}://{authority}{after}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_not_shown() {
        assert_eq!(
            without_credentials("nats://u:p@h:4222"),
            "nats://***@h:4222"
        );
        assert_eq!(without_credentials("nats://token@h"), "nats://***@h");
        assert_eq!(without_credentials("http://h/x?a=b@c"), "http://h/x?a=***");
        assert_eq!(
            without_credentials("https://h/hook?key=s3cret&v=2#top"),
            "https://h/hook?key=***&v=***"
        );
        assert_eq!(
            without_credentials("https://h/hook?flag"),
            "https://h/hook?flag"
        );
        assert_eq!(
            without_credentials("https://u:p@h/hook"),
            "https://***@h/hook"
        );
        assert_eq!(without_credentials("nats://h:4222"), "nats://h:4222");
    }
}
