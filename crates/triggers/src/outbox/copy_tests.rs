//! A full copy of a database carries its owner's unconfirmed trigger events
//! (`Outbox::unconfirmed`), and the follower's outbox keeps those in place of its own.

use std::sync::Arc;

use super::{Handed, Outbox};
use crate::declared::{parse, Declared};

const DECLARED: &[u8] =
    br#"{"triggers":{"items":{"path":"/items/{id}","http":{"url":"http://127.0.0.1:9/hook"}}}}"#;

/// An outbox in a cluster: it follows every database until told it owns one, so nothing is
/// delivered.
fn following_outbox(dir: &std::path::Path) -> Outbox {
    let declared: Vec<Arc<Declared>> = parse(DECLARED)
        .expect("declared")
        .into_iter()
        .map(Arc::new)
        .collect();
    Outbox::open(dir, &declared, true).expect("opened")
}

fn handed(seq: u64, text: &str) -> Handed {
    Handed {
        database: Arc::from("db"),
        seq,
        text: Arc::from(text),
    }
}

fn event(id: &str) -> String {
    format!("items\n{id}\n{{\"id\":\"{id}\"}}")
}

/// The ids the outbox would send in a copy of `db`, its reset first.
fn kept(outbox: &Outbox) -> Vec<String> {
    outbox
        .unconfirmed("db", 1 << 20)
        .expect("read")
        .iter()
        .map(|text| text.split('\n').nth(1).unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_unconfirmed_events_follow_a_reset_and_stay_within_the_budget() {
    let dir = tempfile::tempdir().expect("dir");
    let outbox = following_outbox(dir.path());
    assert_eq!(kept(&outbox), ["="], "a reset even with nothing kept");
    outbox.take(vec![
        handed(10, &event("1.10.0")),
        handed(11, &event("1.11.0")),
    ]);
    let texts = outbox.unconfirmed("db", 1 << 20).expect("read");
    assert_eq!(
        texts,
        ["items\n=\n".to_owned(), event("1.10.0"), event("1.11.0")]
    );
    assert_eq!(outbox.unconfirmed("db", 40), None, "more than the budget");
    assert_eq!(
        outbox.unconfirmed("other", 40).expect("read"),
        ["items\n=\n"],
        "another database"
    );
}

#[test]
fn a_copy_replaces_what_a_follower_kept_and_a_start_hands_it_over_again_harmlessly() {
    let dir = tempfile::tempdir().expect("dir");
    let outbox = following_outbox(dir.path());
    let before = vec![handed(10, &event("1.10.0")), handed(11, &event("1.11.0"))];
    outbox.take(before.clone());
    // The copy: the owner's receiver confirmed 1.10.0, and 1.12.0 was made meanwhile.
    let copy = vec![
        handed(20, "items\n=\n"),
        handed(21, &event("1.11.0")),
        handed(22, &event("1.12.0")),
    ];
    outbox.take(copy.clone());
    assert_eq!(kept(&outbox), ["=", "1.11.0", "1.12.0"]);
    // A start hands over every record the log still holds: nothing changes.
    outbox.take(before.into_iter().chain(copy).collect());
    assert_eq!(kept(&outbox), ["=", "1.11.0", "1.12.0"]);
    // After a restart of the outbox itself, too.
    drop(outbox);
    let outbox = following_outbox(dir.path());
    assert_eq!(kept(&outbox), ["=", "1.11.0", "1.12.0"]);
}

#[test]
fn a_reset_in_the_same_batch_drops_the_events_before_it() {
    let dir = tempfile::tempdir().expect("dir");
    let outbox = following_outbox(dir.path());
    outbox.take(vec![
        handed(10, &event("1.10.0")),
        handed(20, "items\n=\n"),
        handed(21, &event("1.12.0")),
    ]);
    assert_eq!(kept(&outbox), ["=", "1.12.0"]);
    // A reset with nothing after it leaves nothing.
    outbox.take(vec![handed(30, "items\n=\n")]);
    assert_eq!(kept(&outbox), ["="]);
    outbox.take(vec![handed(31, &event("2.31.0"))]);
    assert_eq!(kept(&outbox), ["=", "2.31.0"]);
}

#[test]
fn an_owned_database_keeps_its_events_at_a_reset() {
    let dir = tempfile::tempdir().expect("dir");
    let outbox = following_outbox(dir.path());
    outbox.set_following("db", false);
    // Delivered to an address nothing listens on: the events stay unconfirmed.
    outbox.take(vec![handed(10, &event("1.10.0"))]);
    outbox.take(vec![handed(20, "items\n=\n")]);
    assert_eq!(kept(&outbox), ["=", "1.10.0"]);
}

#[test]
fn dead_letters_of_a_database_another_node_owns_stay_at_a_retry() {
    let dir = tempfile::tempdir().expect("dir");
    let declared: Vec<Arc<Declared>> = parse(
        br#"{"triggers":{"items":{"path":"/items/{id}","maxAttempts":1,"http":{"url":"http://127.0.0.1:9/hook"}}}}"#,
    )
    .expect("declared")
    .into_iter()
    .map(Arc::new)
    .collect();
    let outbox = Outbox::open(dir.path(), &declared, true).expect("opened");
    outbox.set_following("db", false);
    // Nothing listens on port 9: its one attempt fails and the event is a dead letter.
    outbox.take(vec![handed(10, &event("1.10.0"))]);
    let dead = || {
        outbox
            .dead_letters("items")
            .expect("declared")
            .expect("read")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while dead().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no dead letter");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Another node owns the database now: sent again here, it would only be dropped.
    outbox.set_following("db", true);
    assert!(
        outbox.sync(),
        "the ownership is the writer's before the retry"
    );
    let answer = outbox.retry_dead_letters("items").expect("declared");
    assert_eq!(answer.expect("retried"), (0, 1));
    assert_eq!(dead().len(), 1, "kept");
    // Owned again: it goes back to the database's events.
    outbox.set_following("db", false);
    assert!(outbox.sync());
    let answer = outbox.retry_dead_letters("items").expect("declared");
    assert_eq!(answer.expect("retried"), (1, 0));
}

#[test]
fn nothing_from_before_a_reset_comes_back_after_it() {
    let dir = tempfile::tempdir().expect("dir");
    let outbox = following_outbox(dir.path());
    outbox.take(vec![handed(10, &event("1.10.0"))]);
    outbox.take(vec![handed(20, "items\n=\n")]);
    assert_eq!(kept(&outbox), ["="]);
    // Records from before the reset, handed over again: they went with it.
    outbox.take(vec![
        handed(10, &event("1.10.0")),
        handed(12, &event("1.12.0")),
    ]);
    assert_eq!(kept(&outbox), ["="]);
    outbox.take(vec![handed(21, &event("1.21.0"))]);
    assert_eq!(kept(&outbox), ["=", "1.21.0"]);
}
