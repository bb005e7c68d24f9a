//! Triggers declared by the operator (`hearth serve --triggers FILE`, docs/triggers.md): a
//! path pattern, the kind of change, which databases, and where the events go: an HTTP
//! endpoint taking CloudEvents, or a NATS JetStream subject. Unlike the Functions emulator's
//! registrations, their events are logged with the write that made them and delivered at
//! least once from the server's outbox (`outbox`).
//!
//! ```json
//! {"triggers": {
//!   "notify": {"path": "/rooms/{room}/messages/{id}", "event": "created",
//!              "http": {"url": "https://example.com/hook", "headers": {"authorization": "Bearer s"}}},
//!   "index":  {"path": "/posts/{id}", "databases": ["blog"],
//!              "nats": {"url": "nats://127.0.0.1:4222", "subject": "hearth.posts"}}
//! }}
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_sync::triggers::{PathPattern, Trigger, TriggerChange, TriggerOn};
use hearth_sync::AuthState;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::event::{delta, rfc3339};
use crate::registration::Databases;

/// The most triggers one file declares: each has a delivery thread of its own.
pub const MAX_DECLARED_TRIGGERS: usize = 100;

/// The most bytes of a triggers file.
pub const MAX_DECLARATION_BYTES: usize = 1024 * 1024;

/// The longest name of a declared trigger (letters, digits, `-` and `_`): it names a
/// directory of the outbox and a label of `/metrics`.
pub const MAX_TRIGGER_NAME_BYTES: usize = 64;

/// Attempts at one event, by default, before it goes to the dead letters: with the backoff
/// (`outbox::deliver::backoff`), about four minutes of a receiver failing.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 30;

/// The most events one delivery carries (an HTTP post in CloudEvents' batched mode, or NATS
/// publishes sent back to back before their acknowledgements are awaited).
pub const MAX_BATCH_SIZE: usize = 1000;

/// Events per delivery by default: over HTTP one (a structured CloudEvent, what a function
/// expects), over NATS a hundred (each still a message of its own).
const DEFAULT_HTTP_BATCH: usize = 1;
const DEFAULT_NATS_BATCH: usize = 100;

/// The most attempts a trigger may ask for.
pub const MAX_ATTEMPTS: u32 = 10_000;

/// How long an HTTP receiver may take to answer, by default and at most.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(600);

/// Where a trigger's events go.
#[derive(Debug, Clone, PartialEq)]
pub enum Destination {
    /// `POST url`, the event as a structured CloudEvent
    /// (`content-type: application/cloudevents+json`); any 2xx confirms it.
    Http {
        url: String,
        headers: Vec<(String, String)>,
        timeout: Duration,
    },
    /// A JetStream publish to `subject` (a stream must take it), with the event's id as
    /// `Nats-Msg-Id`; the stream's acknowledgement confirms it.
    Nats { url: String, subject: String },
}

/// One declared trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    /// What the databases match, named after the declaration.
    pub trigger: Trigger,
    pub databases: Databases,
    /// The CloudEvent type of its events (`google.firebase.database.ref.v1.written`, ...).
    pub event_type: &'static str,
    pub destination: Destination,
    pub max_attempts: u32,
    /// Events per delivery, at most.
    pub batch_size: usize,
}

/// Why a triggers file was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DeclarationError {
    #[error("the triggers file is {0} bytes, more than {MAX_DECLARATION_BYTES}")]
    TooLarge(usize),
    #[error("the triggers file is not valid: {0}")]
    Json(String),
    #[error("the triggers file declares {0} triggers, more than {MAX_DECLARED_TRIGGERS}")]
    TooMany(usize),
    #[error("trigger {name:?}: {reason}")]
    Trigger { name: String, reason: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Each read as an [`Entry`] on its own, so that an error names its trigger.
    triggers: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    path: String,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    databases: Option<Value>,
    #[serde(default)]
    http: Option<Http>,
    #[serde(default)]
    nats: Option<Nats>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    batch_size: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Http {
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Nats {
    url: String,
    subject: String,
}

/// The kinds of change, by the name a declaration gives them, with their CloudEvent type.
const EVENTS: [(&str, TriggerOn, &str); 4] = [
    (
        "written",
        TriggerOn::Write,
        "google.firebase.database.ref.v1.written",
    ),
    (
        "created",
        TriggerOn::Create,
        "google.firebase.database.ref.v1.created",
    ),
    (
        "updated",
        TriggerOn::Update,
        "google.firebase.database.ref.v1.updated",
    ),
    (
        "deleted",
        TriggerOn::Delete,
        "google.firebase.database.ref.v1.deleted",
    ),
];

/// Reads a triggers file (`bytes`), every trigger checked.
pub fn parse(bytes: &[u8]) -> Result<Vec<Declared>, DeclarationError> {
    if bytes.len() > MAX_DECLARATION_BYTES {
        return Err(DeclarationError::TooLarge(bytes.len()));
    }
    let file: File =
        serde_json::from_slice(bytes).map_err(|e| DeclarationError::Json(e.to_string()))?;
    if file.triggers.len() > MAX_DECLARED_TRIGGERS {
        return Err(DeclarationError::TooMany(file.triggers.len()));
    }
    file.triggers
        .into_iter()
        .map(|(name, entry)| {
            serde_json::from_value::<Entry>(entry)
                .map_err(|error| error.to_string())
                .and_then(|entry| declared(&name, entry))
                .map_err(|reason| DeclarationError::Trigger { name, reason })
        })
        .collect()
}

fn declared(name: &str, entry: Entry) -> Result<Declared, String> {
    let name_ok = !name.is_empty()
        && name.len() <= MAX_TRIGGER_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(format!(
            "a trigger's name is 1 to {MAX_TRIGGER_NAME_BYTES} letters, digits, '-' or '_'"
        ));
    }
    let pattern = PathPattern::parse(&entry.path).map_err(|e| e.to_string())?;
    let event = entry.event.as_deref().unwrap_or("written");
    let Some(&(_, on, event_type)) = EVENTS.iter().find(|(word, _, _)| *word == event) else {
        return Err(format!(
            "event is one of written, created, updated, deleted, not {event:?}"
        ));
    };
    let databases = match entry.databases {
        None => Databases::All,
        Some(Value::String(all)) if all == "*" => Databases::All,
        Some(Value::String(one)) => Databases::Named(checked_database(&one)?),
        Some(Value::Array(names)) => match names.as_slice() {
            [Value::String(one)] => Databases::Named(checked_database(one)?),
            _ => return Err("databases is \"*\" or one database's name".into()),
        },
        Some(_) => return Err("databases is \"*\" or one database's name".into()),
    };
    let destination = match (entry.http, entry.nats) {
        (Some(http), None) => http_destination(http)?,
        (None, Some(nats)) => nats_destination(nats)?,
        _ => return Err("a trigger has exactly one destination, http or nats".into()),
    };
    let batch_size = entry.batch_size.unwrap_or(match destination {
        Destination::Http { .. } => DEFAULT_HTTP_BATCH,
        Destination::Nats { .. } => DEFAULT_NATS_BATCH,
    });
    if !(1..=MAX_BATCH_SIZE).contains(&batch_size) {
        return Err(format!("batchSize is between 1 and {MAX_BATCH_SIZE}"));
    }
    let max_attempts = entry.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
    if !(1..=MAX_ATTEMPTS).contains(&max_attempts) {
        return Err(format!("maxAttempts is between 1 and {MAX_ATTEMPTS}"));
    }
    Ok(Declared {
        trigger: Trigger {
            name: Arc::from(name),
            pattern,
            on,
        },
        databases,
        event_type,
        destination,
        max_attempts,
        batch_size,
    })
}

/// The server's rule for a database's name (`hearth_ground::namespace::validate`, which this
/// crate cannot reach: the ground depends on it).
fn checked_database(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(name.to_owned())
    } else {
        Err(format!("{name:?} is not a database's name"))
    }
}

fn http_destination(http: Http) -> Result<Destination, String> {
    if !(http.url.starts_with("http://") || http.url.starts_with("https://")) {
        return Err("http.url starts with http:// or https://".into());
    }
    if http.url.parse::<ureq::http::Uri>().is_err() {
        return Err(format!("http.url {:?} is not a URL", http.url));
    }
    let timeout = match http.timeout_seconds {
        None => DEFAULT_HTTP_TIMEOUT,
        Some(seconds) if (1..=MAX_HTTP_TIMEOUT.as_secs()).contains(&seconds) => {
            Duration::from_secs(seconds)
        }
        Some(_) => {
            return Err(format!(
                "http.timeoutSeconds is between 1 and {}",
                MAX_HTTP_TIMEOUT.as_secs()
            ))
        }
    };
    let mut headers = Vec::new();
    for (header, value) in http.headers {
        let name_ok = ureq::http::HeaderName::from_bytes(header.as_bytes()).is_ok();
        let value_ok = ureq::http::HeaderValue::from_str(&value).is_ok();
        if !name_ok || !value_ok {
            return Err(format!("http.headers: {header:?} is not a valid header"));
        }
        headers.push((header, value));
    }
    Ok(Destination::Http {
        url: http.url,
        headers,
        timeout,
    })
}

fn nats_destination(nats: Nats) -> Result<Destination, String> {
    if !nats.url.starts_with("nats://") {
        return Err("nats.url starts with nats://".into());
    }
    let subject_ok = !nats.subject.is_empty()
        && nats.subject.len() <= 256
        && nats
            .subject
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'*' && b != b'>');
    if !subject_ok {
        return Err("nats.subject is a subject without spaces or wildcards".into());
    }
    Ok(Destination::Nats {
        url: nats.url,
        subject: nats.subject,
    })
}

/// The CloudEvent of one change for a declared trigger, as firebase-functions v2 reads a
/// database event (`data` the value before, `delta` what changed), with `id` unique to the
/// change: the text its log record carries, and what the receiver gets.
pub fn cloud_event(
    declared: &Declared,
    namespace: &str,
    change: &TriggerChange,
    id: &str,
    time_ms: u64,
    writer: &AuthState,
) -> String {
    let path = crate::event::slash_path(&change.path);
    let params: serde_json::Map<String, Value> = change
        .params
        .iter()
        .map(|(name, value)| (name.to_string(), Value::String(value.clone())))
        .collect();
    json!({
        "specversion": "1.0",
        "id": id,
        "source": format!(
            "//firebasedatabase.googleapis.com/projects/_/locations/us-central1/instances/{namespace}"
        ),
        "type": declared.event_type,
        "time": rfc3339(time_ms),
        "subject": format!("refs{path}"),
        "datacontenttype": "application/json",
        "instance": namespace,
        "ref": path.trim_start_matches('/'),
        "location": "us-central1",
        "firebasedatabasehost": "firebaseio.com",
        "authtype": crate::event::v2_auth_type(writer),
        "authid": crate::event::uid(writer),
        "trigger": &*declared.trigger.name,
        "params": params,
        "data": {
            "@type": "type.googleapis.com/google.events.firebase.database.v1.ReferenceEventData",
            "data": change.before.to_json(false),
            "delta": delta(&change.before, &change.after),
        },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_declares_http_and_nats_triggers() {
        let file = br#"{"triggers": {
            "notify": {"path": "/rooms/{room}/messages/{id}", "event": "created",
                       "http": {"url": "http://127.0.0.1:9/hook", "headers": {"authorization": "Bearer s"}}},
            "index": {"path": "posts/{id}", "databases": "blog", "maxAttempts": 3,
                      "nats": {"url": "nats://127.0.0.1:4222", "subject": "hearth.posts"}}
        }}"#;
        let declared = parse(file).expect("valid");
        assert_eq!(declared.len(), 2);
        let index = &declared[0];
        assert_eq!(&*index.trigger.name, "index");
        assert_eq!(index.databases, Databases::Named("blog".into()));
        assert_eq!(index.max_attempts, 3);
        assert_eq!(
            index.batch_size, 100,
            "NATS publishes a hundred at once by default"
        );
        assert_eq!(index.event_type, "google.firebase.database.ref.v1.written");
        let notify = &declared[1];
        assert_eq!(notify.trigger.on, TriggerOn::Create);
        assert_eq!(notify.databases, Databases::All);
        assert!(
            matches!(&notify.destination, Destination::Http { headers, .. } if headers.len() == 1)
        );
    }

    #[test]
    fn mistakes_are_named() {
        let refused = |text: &str| parse(text.as_bytes()).expect_err("refused").to_string();
        assert!(
            refused(r#"{"triggers": {"a b": {"path": "/x", "http": {"url": "http://h"}}}}"#)
                .contains("name")
        );
        assert!(refused(r#"{"triggers": {"a": {"path": "/x"}}}"#).contains("one destination"));
        assert!(refused(
            r#"{"triggers": {"a": {"path": "/x", "event": "changed", "http": {"url": "http://h"}}}}"#
        )
        .contains("written, created"));
        assert!(
            refused(r#"{"triggers": {"a": {"path": "/x", "http": {"url": "ftp://h"}}}}"#)
                .contains("http://")
        );
        assert!(refused(
            r#"{"triggers": {"a": {"path": "/x", "nats": {"url": "nats://h", "subject": "a.>"}}}}"#
        )
        .contains("wildcards"));
        assert!(refused(r#"{"triggers": {"a": {"path": "/x", "htp": {}}}}"#).contains("htp"));
        // A field unknown to a trigger names the trigger.
        let unknown = refused(
            r#"{"triggers": {"ok": {"path": "/x", "http": {"url": "http://h"}},
                             "fresh": {"path": "/y", "retries": 3, "http": {"url": "http://h"}}}}"#,
        );
        assert!(
            unknown.starts_with("trigger \"fresh\": unknown field `retries`"),
            "{unknown}"
        );
        assert!(refused(
            r#"{"triggers": {"a": {"path": "/x", "batchSize": 0, "http": {"url": "http://h"}}}}"#
        )
        .contains("batchSize"));
        assert!(refused(
            r#"{"triggers": {"a": {"path": "/{a=**}", "http": {"url": "http://h"}}}}"#
        )
        .contains("a"));
    }

    #[test]
    fn the_event_carries_the_change_as_the_sdk_reads_it() {
        let declared = parse(
            br#"{"triggers": {"t": {"path": "/rooms/{room}", "http": {"url": "http://h/x"}}}}"#,
        )
        .expect("valid")
        .remove(0);
        let change = TriggerChange {
            trigger: "t".into(),
            path: hearth_tree::Path::parse("/rooms/r1").expect("path"),
            params: vec![("room".into(), "r1".into())],
            before: hearth_tree::Node::from_json(&json!({"a": 1, "b": 2})).expect("node"),
            after: hearth_tree::Node::from_json(&json!({"a": 1, "c": 3})).expect("node"),
        };
        let text = cloud_event(&declared, "chat", &change, "0.7.0", 0, &AuthState::Admin);
        let event: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(event["id"], "0.7.0");
        assert_eq!(event["ref"], "rooms/r1");
        assert_eq!(event["instance"], "chat");
        assert_eq!(event["params"], json!({"room": "r1"}));
        assert_eq!(event["authtype"], "admin");
        assert_eq!(event["data"]["data"], json!({"a": 1, "b": 2}));
        assert_eq!(event["data"]["delta"], json!({"b": null, "c": 3}));
        assert!(!text.contains('\n'), "one line");
    }
}
