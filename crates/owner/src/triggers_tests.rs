use std::rc::Rc;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use hearth_config::ServeConfig;
use hearth_triggers::deliver::queue;
use hearth_triggers::ServerTriggers;
use serde_json::json;

use super::*;
use crate::rest::execute::tests::{call, json_body};

fn owner_delivering() -> (Rc<Owner>, Receiver<Delivery>) {
    let mut config = ServeConfig::for_tests(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let (sink, deliveries) = queue(100);
    config.triggers = ServerTriggers {
        registry: Arc::default(),
        sink: Some(sink),
        outbox: None,
        declaration: None,
    };
    (Owner::for_tests(config), deliveries)
}

const V1_WRITE: &str = r#"{"name":"projects/p/locations/_/functions/us-central1-onMsg-0",
    "path":"/rooms/{room}/messages/{id}",
    "event":"providers/google.firebase.database/eventTypes/ref.write",
    "topic":"projects/p/topics/us-central1-onMsg-0"}"#;

const OWNER: (&str, &str) = ("authorization", "Bearer owner");

#[test]
fn only_an_admin_registers_a_trigger() {
    let (owner, _) = owner_delivering();
    let url = "/.settings/functionTriggers.json?ns=db";
    let refused = call(&owner, "POST", url, &[], Some(V1_WRITE));
    assert_eq!(refused.status, 401);
    let taken = call(&owner, "POST", url, &[OWNER], Some(V1_WRITE));
    assert_eq!(taken.status, 200);
    assert_eq!(json_body(&taken), json!({"status": "ok"}));
    let bad = call(&owner, "POST", url, &[OWNER], Some("{\"name\":\"x\"}"));
    assert_eq!(bad.status, 400);
    let listed = call(&owner, "GET", url, &[OWNER], None);
    assert_eq!(json_body(&listed)[0]["path"], "/rooms/{room}/messages/{id}");
}

#[test]
fn a_write_hands_each_changed_path_to_the_delivery_thread() {
    let (owner, deliveries) = owner_delivering();
    let url = "/.settings/functionTriggers.json?ns=db";
    assert_eq!(
        call(&owner, "POST", url, &[OWNER], Some(V1_WRITE)).status,
        200
    );
    let put = call(
        &owner,
        "PUT",
        "/rooms/r1.json?ns=db",
        &[],
        Some(r#"{"messages":{"m1":"a","m2":"b"}}"#),
    );
    assert_eq!(put.status, 200);
    let got: Vec<(String, serde_json::Value)> = deliveries
        .try_iter()
        .map(|d| {
            assert_eq!(d.namespace, "db");
            assert!(d.change.before.is_empty());
            (d.change.path.to_string(), d.change.after.to_json(false))
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("/rooms/r1/messages/m1".to_owned(), json!("a")),
            ("/rooms/r1/messages/m2".to_owned(), json!("b")),
        ]
    );
    // Another database has no v1 trigger of this one's.
    call(
        &owner,
        "PUT",
        "/rooms/r1/messages/m1.json?ns=other",
        &[],
        Some("1"),
    );
    assert_eq!(deliveries.try_iter().count(), 0);
}

#[test]
fn an_admins_import_may_skip_the_triggers_and_nobody_elses() {
    let (owner, deliveries) = owner_delivering();
    let url = "/.settings/functionTriggers.json?ns=db";
    assert_eq!(
        call(&owner, "POST", url, &[OWNER], Some(V1_WRITE)).status,
        200
    );
    let import = "/.json?ns=db&disableTriggers=true&writeSizeLimit=unlimited";
    let body = Some(r#"{"rooms":{"r1":{"messages":{"m1":"a"}}}}"#);
    assert_eq!(call(&owner, "PUT", import, &[OWNER], body).status, 200);
    assert_eq!(deliveries.try_iter().count(), 0, "the import is quiet");
    let client = "/rooms/r1/messages/m2.json?ns=db&disableTriggers=true";
    assert_eq!(call(&owner, "PUT", client, &[], Some("\"b\"")).status, 200);
    assert_eq!(deliveries.try_iter().count(), 1, "a client's write is not");
}
