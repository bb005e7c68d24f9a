//! Cost of one permission check against a realistic chat-app rules file (about 25 rules:
//! auth.uid ownership, membership lookups through `root.child(...)`, `hasChildren`, string
//! lengths, a regex, wildcards and `$other` guards).
//!
//! `cargo bench -p hearth-rules --bench eval`. Under `cargo test --benches` each benchmark
//! runs once as a smoke test.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use hearth_rules::Rules;
use hearth_tree::{Node, Path};
use serde_json::{json, Map, Value};

const RULES: &str = r#"{
  // A chat app: profiles, rooms with members, and messages.
  "rules": {
    ".read": false,
    ".write": false,
    "users": {
      "$uid": {
        ".read": "auth != null",
        ".write": "auth != null && auth.uid === $uid",
        ".validate": "newData.hasChildren(['name', 'createdAt'])",
        "name": { ".validate": "newData.isString() && newData.val().length > 0 && newData.val().length <= 50" },
        "createdAt": { ".validate": "newData.isNumber() && newData.val() <= now" },
        "status": { ".validate": "newData.isString() && newData.val().matches(/^(online|away|offline)$/)" },
        "$other": { ".validate": false }
      }
    },
    "rooms": {
      "$roomId": {
        ".read": "auth != null && root.child('members/' + $roomId + '/' + auth.uid).exists()",
        ".write": "auth != null && (!data.exists() || data.child('owner').val() === auth.uid)",
        ".validate": "newData.hasChildren(['title', 'owner'])",
        "title": { ".validate": "newData.isString() && newData.val().length <= 100" },
        "owner": { ".validate": "newData.val() === auth.uid || data.exists()" }
      }
    },
    "members": {
      "$roomId": {
        "$uid": {
          ".write": "auth != null && root.child('rooms/' + $roomId + '/owner').val() === auth.uid",
          ".validate": "newData.isBoolean()"
        }
      }
    },
    "messages": {
      "$roomId": {
        ".read": "auth != null && root.child('members/' + $roomId + '/' + auth.uid).exists()",
        ".indexOn": ["timestamp"],
        "$messageId": {
          ".write": "auth != null && root.child('members/' + $roomId + '/' + auth.uid).exists() && (!data.exists() || data.child('author').val() === auth.uid)",
          ".validate": "newData.hasChildren(['author', 'text', 'timestamp'])",
          "author": { ".validate": "newData.val() === auth.uid" },
          "text": { ".validate": "newData.isString() && newData.val().length > 0 && newData.val().length <= 1000" },
          "timestamp": { ".validate": "newData.isNumber() && newData.val() <= now" },
          "edited": { ".validate": "newData.isBoolean()" },
          "$other": { ".validate": false }
        }
      }
    }
  }
}"#;

const NOW: u64 = 1_700_000_000_000;

fn path(s: &str) -> Path {
    Path::parse(s).expect("valid bench path")
}

/// A database with 10 rooms of 20 members and 100 messages each.
fn database() -> Node {
    let mut rooms = Map::new();
    let mut members = Map::new();
    let mut messages = Map::new();
    for r in 0..10 {
        let room = format!("room{r}");
        rooms.insert(
            room.clone(),
            json!({"title": format!("Room {r}"), "owner": "user0"}),
        );
        let list: Map<String, Value> = (0..20).map(|u| (format!("user{u}"), json!(true))).collect();
        members.insert(room.clone(), Value::Object(list));
        let log: Map<String, Value> = (0..100)
            .map(|m| {
                let message = json!({
                    "author": format!("user{}", m % 20),
                    "text": format!("message number {m} in room {r}"),
                    "timestamp": NOW - 1000 * (100 - m),
                });
                (format!("-Nmsg{m:05}"), message)
            })
            .collect();
        messages.insert(room, Value::Object(log));
    }
    Node::from_json(&json!({"rooms": rooms, "members": members, "messages": messages}))
        .expect("valid bench data")
}

fn auth(uid: &str) -> Value {
    json!({"uid": uid, "provider": "password", "token": {"sub": uid, "email_verified": true,
           "firebase": {"sign_in_provider": "password"}}})
}

fn bench(c: &mut Criterion) {
    let rules = Rules::parse(RULES).expect("valid bench rules");
    let old = database();
    let target = path("/messages/room3/-Nmsg99999");
    let message = json!({"author": "user7", "text": "hello, world", "timestamp": NOW - 5});
    let new = old.set(&target, Node::from_json(&message).expect("valid message"));
    let member = auth("user7");
    let stranger = auth("mallory");

    assert!(rules
        .can_write(&old, &new, &target, &member, NOW)
        .is_allowed());
    assert!(!rules
        .can_write(&old, &new, &target, &stranger, NOW)
        .is_allowed());

    c.bench_function("write_message_allowed", |b| {
        b.iter(|| {
            black_box(rules.can_write(
                black_box(&old),
                black_box(&new),
                black_box(&target),
                black_box(&member),
                NOW,
            ))
        })
    });
    c.bench_function("write_message_denied", |b| {
        b.iter(|| black_box(rules.can_write(&old, &new, &target, black_box(&stranger), NOW)))
    });

    let profile_path = path("/users/user7");
    let profile = json!({"name": "Seven", "createdAt": NOW - 10, "status": "online"});
    let with_profile = old.set(
        &profile_path,
        Node::from_json(&profile).expect("valid profile"),
    );
    assert!(rules
        .can_write(&old, &with_profile, &profile_path, &member, NOW)
        .is_allowed());
    c.bench_function("write_profile_with_regex", |b| {
        b.iter(|| black_box(rules.can_write(&old, &with_profile, &profile_path, &member, NOW)))
    });

    let room_messages = path("/messages/room3");
    assert!(rules
        .can_read(&old, &room_messages, &member, None, NOW)
        .is_allowed());
    c.bench_function("read_room_messages", |b| {
        b.iter(|| black_box(rules.can_read(&old, black_box(&room_messages), &member, None, NOW)))
    });

    c.bench_function("parse_rules_document", |b| {
        b.iter(|| black_box(Rules::parse(black_box(RULES))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
