//! A trigger as the Firebase Functions emulator registers it with its database emulator:
//! `POST /.settings/functionTriggers.json`, one JSON object per trigger, as firebase-tools
//! builds it (`functionsEmulator`'s database attributes):
//!
//! - Cloud Functions v1 (`functions.database.ref(..).onWrite`), with `?ns=` naming the
//!   database: `{"name": "projects/P/locations/_/functions/KEY", "path": "/rooms/{id}",
//!   "event": "providers/google.firebase.database/eventTypes/ref.write", "topic": ..}`;
//! - v2 (`onValueWritten`), for every database its `namespacePattern` admits:
//!   `{"name": "projects/P/locations/REGION/triggers/KEY", "path": "rooms/{id}", "event":
//!   "google.firebase.database.ref.v1.written", "topic": .., "namespacePattern": "*"}`.
//!
//! The name's project and last segment say where its events go
//! (`/functions/projects/P/triggers/KEY` on the Functions emulator).

use std::sync::Arc;

use hearth_sync::triggers::{PathPattern, PatternError, Trigger, TriggerOn};
use serde::Deserialize;

/// The most bytes of a registration's body (its name, pattern and event type).
pub const MAX_REGISTRATION_BYTES: usize = 16 * 1024;

/// The event types of Cloud Functions v1, by what they admit.
const V1_EVENTS: [(&str, TriggerOn); 4] = [
    (
        "providers/google.firebase.database/eventTypes/ref.write",
        TriggerOn::Write,
    ),
    (
        "providers/google.firebase.database/eventTypes/ref.create",
        TriggerOn::Create,
    ),
    (
        "providers/google.firebase.database/eventTypes/ref.update",
        TriggerOn::Update,
    ),
    (
        "providers/google.firebase.database/eventTypes/ref.delete",
        TriggerOn::Delete,
    ),
];

/// The event types of Cloud Functions v2.
const V2_EVENTS: [(&str, TriggerOn); 4] = [
    ("google.firebase.database.ref.v1.written", TriggerOn::Write),
    ("google.firebase.database.ref.v1.created", TriggerOn::Create),
    ("google.firebase.database.ref.v1.updated", TriggerOn::Update),
    ("google.firebase.database.ref.v1.deleted", TriggerOn::Delete),
];

/// Which databases a registration is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Databases {
    /// One, by name.
    Named(String),
    /// Every database (a v2 `namespacePattern` of `*`).
    All,
}

impl Databases {
    pub fn admits(&self, namespace: &str) -> bool {
        match self {
            Databases::Named(name) => name == namespace,
            Databases::All => true,
        }
    }
}

/// The shape of the events a registration's receiver takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Cloud Functions v1: a legacy event (`eventType`, `resource`, `data.data`,
    /// `data.delta`).
    V1,
    /// Cloud Functions v2: a CloudEvent.
    V2,
}

/// A registered trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// The trigger: its name is the registration's.
    pub trigger: Trigger,
    pub databases: Databases,
    pub api: Api,
    /// The event type as registered, which its events carry back.
    pub event: String,
    /// The Functions emulator's project and trigger key (`/functions/projects/P/triggers/KEY`).
    pub project: String,
    pub key: String,
}

/// Why a registration was refused (the Functions emulator shows the text).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistrationError {
    #[error("the trigger is not JSON of the Functions emulator's shape: {0}")]
    Json(String),
    #[error("the trigger's name {0:?} is not projects/PROJECT/locations/LOCATION/(functions|triggers)/KEY")]
    Name(String),
    #[error("unknown database event type {0:?}")]
    Event(String),
    #[error("the trigger's path {path:?}: {error}")]
    Path { path: String, error: PatternError },
    #[error("namespacePattern {0:?} is not supported: use \"*\" or one database's name")]
    NamespacePattern(String),
    #[error("a v2 trigger needs its namespacePattern, a v1 trigger its database (?ns=)")]
    Database,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    name: String,
    path: String,
    event: String,
    namespace_pattern: Option<String>,
}

impl Registration {
    /// Reads a registration's body; `namespace` is the request's database (`?ns=`), which a
    /// v1 trigger is for.
    pub fn parse(body: &[u8], namespace: Option<&str>) -> Result<Registration, RegistrationError> {
        let body: Body = serde_json::from_slice(body)
            .map_err(|error| RegistrationError::Json(error.to_string()))?;
        let (project, key) = name_parts(&body.name)?;
        let (api, on) = event_type(&body.event)?;
        let databases = match (api, body.namespace_pattern.as_deref(), namespace) {
            (Api::V2, Some("*"), _) => Databases::All,
            (Api::V2, Some(pattern), _) if is_database_name(pattern) => {
                Databases::Named(pattern.to_owned())
            }
            (Api::V2, Some(pattern), _) => {
                return Err(RegistrationError::NamespacePattern(pattern.to_owned()))
            }
            (Api::V1, _, Some(namespace)) => Databases::Named(namespace.to_owned()),
            _ => return Err(RegistrationError::Database),
        };
        let pattern = PathPattern::parse(&body.path).map_err(|error| RegistrationError::Path {
            path: body.path.clone(),
            error,
        })?;
        Ok(Registration {
            trigger: Trigger {
                name: Arc::from(body.name.as_str()),
                pattern,
                on,
            },
            databases,
            api,
            event: body.event,
            project,
            key,
        })
    }

    pub fn name(&self) -> &Arc<str> {
        &self.trigger.name
    }
}

/// `projects/P/locations/L/functions/KEY` (v1) or `projects/P/locations/L/triggers/KEY` (v2):
/// the project and the key.
fn name_parts(name: &str) -> Result<(String, String), RegistrationError> {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        ["projects", project, "locations", _, "functions" | "triggers", key]
            if !project.is_empty()
                && !key.is_empty()
                && is_url_safe(project)
                && is_url_safe(key) =>
        {
            Ok(((*project).to_owned(), (*key).to_owned()))
        }
        _ => Err(RegistrationError::Name(name.to_owned())),
    }
}

fn event_type(event: &str) -> Result<(Api, TriggerOn), RegistrationError> {
    if let Some((_, on)) = V1_EVENTS.iter().find(|(name, _)| *name == event) {
        return Ok((Api::V1, *on));
    }
    if let Some((_, on)) = V2_EVENTS.iter().find(|(name, _)| *name == event) {
        return Ok((Api::V2, *on));
    }
    Err(RegistrationError::Event(event.to_owned()))
}

/// A project or trigger key goes into the delivery's URL path as it is.
fn is_url_safe(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

fn is_database_name(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_registration_is_for_its_database() {
        let body = br#"{"name":"projects/demo-p/locations/_/functions/us-central1-onMsg-0",
            "path":"/rooms/{id}","event":"providers/google.firebase.database/eventTypes/ref.create",
            "topic":"projects/demo-p/topics/us-central1-onMsg-0"}"#;
        let registration = Registration::parse(body, Some("demo-p")).expect("parses");
        assert_eq!(registration.api, Api::V1);
        assert_eq!(registration.trigger.on, TriggerOn::Create);
        assert_eq!(registration.databases, Databases::Named("demo-p".into()));
        assert_eq!(registration.project, "demo-p");
        assert_eq!(registration.key, "us-central1-onMsg-0");
        assert_eq!(registration.trigger.pattern.to_string(), "/rooms/{id}");
        assert!(Registration::parse(body, None).is_err(), "v1 needs ?ns=");
    }

    #[test]
    fn a_v2_registration_is_for_the_databases_its_pattern_admits() {
        let body = br#"{"name":"projects/demo-p/locations/us-central1/triggers/us-central1-w-0",
            "path":"rooms/{id}/messages/{m}","event":"google.firebase.database.ref.v1.written",
            "topic":"t","namespacePattern":"*"}"#;
        let registration = Registration::parse(body, None).expect("parses");
        assert_eq!(registration.api, Api::V2);
        assert_eq!(registration.databases, Databases::All);
        assert_eq!(registration.trigger.on, TriggerOn::Write);
        let named = br#"{"name":"projects/p/locations/l/triggers/k","path":"a",
            "event":"google.firebase.database.ref.v1.deleted","namespacePattern":"my-db"}"#;
        let registration = Registration::parse(named, Some("other")).expect("parses");
        assert_eq!(registration.databases, Databases::Named("my-db".into()));
    }

    #[test]
    fn malformed_registrations_are_refused() {
        let cases: [&[u8]; 6] = [
            b"[]",
            br#"{"name":"x","path":"/a","event":"google.firebase.database.ref.v1.written","namespacePattern":"*"}"#,
            br#"{"name":"projects/p/locations/l/triggers/k","path":"/a","event":"ref.write","namespacePattern":"*"}"#,
            br#"{"name":"projects/p/locations/l/triggers/k","path":"/a/{b=**}","event":"google.firebase.database.ref.v1.written","namespacePattern":"*"}"#,
            br#"{"name":"projects/p/locations/l/triggers/k","path":"/a","event":"google.firebase.database.ref.v1.written","namespacePattern":"db-*"}"#,
            br#"{"name":"projects/p/locations/l/triggers/k/../x","path":"/a","event":"google.firebase.database.ref.v1.written","namespacePattern":"*"}"#,
        ];
        for body in cases {
            assert!(
                Registration::parse(body, Some("ns")).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
