//! The event a Cloud Function receives for one change, as the Firebase SDKs read it:
//! `data` is the value before, `delta` what changed, and the SDK computes the value after as
//! `data` with `delta` merged in (`applyChange`: an object merges key by key, a `null`
//! removes the key, anything else replaces). So `delta` holds every changed key, with `null`
//! for a key that is gone, and is the whole new value where `data` was not an object.

use std::sync::Arc;

use hearth_sync::triggers::TriggerChange;
use hearth_sync::AuthState;
use hearth_tree::{Key, Node, Path};
use serde_json::{json, Map, Value};

use crate::registration::{Api, Registration};

/// One change for one trigger, with what its event names.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub namespace: String,
    pub change: TriggerChange,
    /// Unique to the change: its log position and its place among the write's changes.
    pub event_id: String,
    /// When the write was applied (milliseconds since the epoch).
    pub time_ms: u64,
    /// Who wrote, shared by the changes of one write.
    pub writer: Arc<AuthState>,
}

/// The body of `delivery`'s event for `registration`'s receiver.
pub fn event_body(registration: &Registration, delivery: &Delivery) -> Value {
    let change = &delivery.change;
    let before = change.before.to_json(false);
    let delta = delta(&change.before, &change.after);
    let time = rfc3339(delivery.time_ms);
    let path = slash_path(&change.path);
    match registration.api {
        // A legacy event, flat (firebase-functions v1 `cloud-functions`): the resource is the
        // trigger's path with its wildcards filled, from which the SDK reads the params by
        // position.
        Api::V1 => json!({
            "eventId": delivery.event_id,
            "timestamp": time,
            "eventType": registration.event,
            "resource": format!("projects/_/instances/{}/refs{}", delivery.namespace, path),
            "auth": v1_auth(&delivery.writer),
            "data": {"data": before, "delta": delta},
        }),
        // A structured CloudEvent (firebase-functions v2 `database`).
        Api::V2 => json!({
            "specversion": "1.0",
            "id": delivery.event_id,
            "source": format!(
                "//firebasedatabase.googleapis.com/projects/_/locations/us-central1/instances/{}",
                delivery.namespace
            ),
            "type": registration.event,
            "time": time,
            "subject": format!("refs{path}"),
            "instance": delivery.namespace,
            "ref": path.trim_start_matches('/'),
            "location": "us-central1",
            "firebasedatabasehost": "firebaseio.com",
            "authtype": v2_auth_type(&delivery.writer),
            "authid": uid(&delivery.writer),
            "data": {
                "@type": "type.googleapis.com/google.events.firebase.database.v1.ReferenceEventData",
                "data": before,
                "delta": delta,
            },
        }),
    }
}

/// The writer as v1 events carry it: an admin, a user with the rules' `auth` variable, or
/// nobody.
fn v1_auth(writer: &AuthState) -> Value {
    match writer {
        AuthState::Admin => json!({"admin": true}),
        AuthState::User(variable) => json!({"admin": false, "variable": variable}),
        AuthState::Anonymous => json!({"admin": false}),
    }
}

/// The writer's kind as v2 events carry it.
pub(crate) fn v2_auth_type(writer: &AuthState) -> &'static str {
    match writer {
        AuthState::Admin => "admin",
        AuthState::User(_) => "app_user",
        AuthState::Anonymous => "unauthenticated",
    }
}

/// A user's uid (`authid`); `null` for an admin or nobody.
pub(crate) fn uid(writer: &AuthState) -> Value {
    match writer {
        AuthState::User(variable) => variable.get("uid").cloned().unwrap_or(Value::Null),
        AuthState::Admin | AuthState::Anonymous => Value::Null,
    }
}

/// What changed from `before` to `after`, in the form the SDKs merge into `before`.
pub fn delta(before: &Node, after: &Node) -> Value {
    if after.is_empty() {
        return Value::Null;
    }
    if before.child_count() == 0 || after.child_count() == 0 {
        return after.to_json(false);
    }
    let mut out = Map::new();
    for (key, child) in after.children() {
        let old = before.child(&key);
        if !old.same_stored(&child) && old != *child {
            out.insert(key.as_str().to_owned(), delta(&old, &child));
        }
    }
    for (key, _) in before.children() {
        if after.child(&key).is_empty() {
            out.insert(key.as_str().to_owned(), Value::Null);
        }
    }
    Value::Object(out)
}

pub(crate) fn slash_path(path: &Path) -> String {
    let mut out = String::new();
    for key in path.keys() {
        out.push('/');
        out.push_str(Key::as_str(key));
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// `2026-11-29T15:04:05.123Z`.
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000
    )
}

/// The calendar date of a day since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(value: Value) -> Node {
        Node::from_json(&value).expect("valid")
    }

    /// firebase-functions' `applyChange`, as the SDK runs it.
    fn apply_change(src: &Value, delta: &Value) -> Value {
        match (src, delta) {
            (Value::Object(src), Value::Object(delta)) => {
                let mut out = Map::new();
                for (key, value) in src {
                    if !delta.contains_key(key) && !value.is_null() {
                        out.insert(key.clone(), value.clone());
                    }
                }
                for (key, value) in delta {
                    if !value.is_null() {
                        let old = src.get(key).unwrap_or(&Value::Null);
                        out.insert(key.clone(), apply_change(old, value));
                    }
                }
                Value::Object(out)
            }
            _ => delta.clone(),
        }
    }

    #[test]
    fn the_sdk_rebuilds_the_value_after_from_before_and_delta() {
        let cases = [
            (json!(null), json!({"a": 1})),
            (json!({"a": 1}), json!(null)),
            (
                json!({"a": 1, "b": {"c": 2, "d": 3}}),
                json!({"a": 1, "b": {"c": 4}}),
            ),
            (json!({"a": {"x": 1}}), json!({"a": "leaf"})),
            (json!("leaf"), json!({"a": {"x": 1}})),
            (json!({"a": 1, "b": 2}), json!({"c": 3})),
        ];
        for (before, after) in cases {
            let (b, a) = (node(before.clone()), node(after.clone()));
            let delta = delta(&b, &a);
            let rebuilt = apply_change(&b.to_json(false), &delta);
            assert_eq!(
                rebuilt,
                a.to_json(false),
                "{before} -> {after}: delta {delta}"
            );
        }
        let unchanged = delta(
            &node(json!({"a": 1, "b": 2})),
            &node(json!({"a": 1, "b": 5})),
        );
        assert_eq!(unchanged, json!({"b": 5}), "only what changed");
    }

    fn delivery(writer: AuthState) -> Delivery {
        Delivery {
            namespace: "db".into(),
            change: TriggerChange {
                trigger: "t".into(),
                path: Path::parse("/rooms/r1").expect("path"),
                params: Vec::new(),
                before: Node::empty(),
                after: node(json!({"a": 1})),
            },
            event_id: "0-7-0".into(),
            time_ms: 0,
            writer: Arc::new(writer),
        }
    }

    fn registration(body: &str, ns: Option<&str>) -> Registration {
        Registration::parse(body.as_bytes(), ns).expect("parses")
    }

    #[test]
    fn events_name_the_writer_as_each_sdk_reads_it() {
        let v1 = registration(
            r#"{"name":"projects/p/locations/_/functions/k","path":"/rooms/{id}",
            "event":"providers/google.firebase.database/eventTypes/ref.create"}"#,
            Some("db"),
        );
        let v2 = registration(
            r#"{"name":"projects/p/locations/l/triggers/k","path":"rooms/{id}",
            "event":"google.firebase.database.ref.v1.created","namespacePattern":"*"}"#,
            None,
        );
        let ada = AuthState::User(json!({"uid": "ada", "token": {"sub": "ada"}}));
        let body = event_body(&v1, &delivery(ada.clone()));
        assert_eq!(
            body["auth"],
            json!({"admin": false, "variable": {"uid": "ada", "token": {"sub": "ada"}}})
        );
        assert_eq!(body["resource"], "projects/_/instances/db/refs/rooms/r1");
        assert_eq!(
            body["eventType"],
            "providers/google.firebase.database/eventTypes/ref.create"
        );
        assert_eq!(body["data"], json!({"data": null, "delta": {"a": 1}}));
        assert_eq!(
            event_body(&v1, &delivery(AuthState::Admin))["auth"],
            json!({"admin": true})
        );
        let body = event_body(&v2, &delivery(ada));
        assert_eq!(
            (&body["authtype"], &body["authid"]),
            (&json!("app_user"), &json!("ada"))
        );
        assert_eq!(
            (&body["ref"], &body["instance"]),
            (&json!("rooms/r1"), &json!("db"))
        );
        assert_eq!(body["data"]["delta"], json!({"a": 1}));
        let body = event_body(&v2, &delivery(AuthState::Anonymous));
        assert_eq!(body["authtype"], "unauthenticated");
    }

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_396_645_123), "2026-12-04T15:04:05.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
