use super::*;

const UP: (u64, bool) = (1, true);

fn name(text: &str) -> Rc<str> {
    Rc::from(text)
}

#[test]
fn a_timeout_releases_nothing_until_the_follower_leaves_the_set() {
    let a = name("a");
    let mut shipper = Shipper::new(true, 2).with_sets();
    shipper.prepare(1, UP, "a");
    shipper.shipped(1, 5, 100, 1_000, true, Some(&a));
    shipper.check_timeouts(1_001 + ACK_TIMEOUT_MS);
    assert_eq!(
        shipper.take_events(),
        vec![Event::Degraded(1, Degraded::AckTimeout)]
    );
    assert_eq!(shipper.position(9), 4, "given up, yet still held");
    assert_eq!(shipper.held_databases(), vec![a.clone()]);
    // etcd still names it: nothing changes.
    assert!(!shipper.release_excluded(|_, _| true));
    assert_eq!(shipper.position(9), 4);
    // Out of the set: released.
    assert!(shipper.release_excluded(|_, _| false));
    assert_eq!(shipper.position(9), 9);
    assert!(shipper.held_databases().is_empty());
}

#[test]
fn a_lost_link_keeps_its_held_records_back_until_the_member_leaves() {
    let a = name("a");
    let mut shipper = Shipper::new(true, 2).with_sets();
    shipper.prepare(1, UP, "a");
    shipper.shipped(1, 5, 100, 0, true, Some(&a));
    shipper.shipped(1, 6, 100, 0, false, Some(&a));
    assert_eq!(shipper.prepare(1, (1, false), "a"), Ship::Skip);
    assert_eq!(shipper.position(9), 4, "record 5 never reached the member");
    // A new connection changes nothing for what the old one lost.
    assert_eq!(shipper.prepare(1, (2, true), "a"), Ship::Copy);
    assert_eq!(shipper.position(9), 4);
    assert!(shipper.release_excluded(|_, node| node != 1));
    assert_eq!(shipper.position(9), 9);
}

#[test]
fn a_record_kept_from_a_member_waits_and_can_be_abandoned() {
    let (a, b) = (name("a"), name("b"));
    let mut shipper = Shipper::new(true, 3).with_sets();
    shipper.block(7, 2, &a);
    shipper.prepare(1, UP, "b");
    shipper.shipped(1, 8, 10, 0, true, Some(&b));
    assert_eq!(shipper.position(9), 6);
    assert_eq!(shipper.held_databases(), vec![a.clone(), b.clone()]);
    assert_eq!(shipper.abandon("a"), vec![7]);
    assert_eq!(shipper.position(9), 7, "b's record still waits for node 1");
    shipper.acknowledged(1, &[8]);
    assert_eq!(shipper.position(9), 9);
}

#[test]
fn without_sets_a_given_up_follower_stops_holding_at_once() {
    let a = name("a");
    let mut shipper = Shipper::new(true, 2);
    shipper.prepare(1, UP, "a");
    shipper.shipped(1, 5, 100, 1_000, true, Some(&a));
    shipper.block(6, 1, &a);
    shipper.check_timeouts(1_001 + ACK_TIMEOUT_MS);
    assert_eq!(shipper.position(9), 9);
}

#[test]
fn a_healthy_member_has_the_current_copy_and_keeps_up() {
    let a = name("a");
    let mut shipper = Shipper::new(true, 2).with_sets();
    assert!(!shipper.healthy(1, "a"));
    shipper.prepare(1, UP, "a");
    assert!(shipper.healthy(1, "a"));
    shipper.shipped(1, 5, 100, 0, true, Some(&a));
    shipper.check_timeouts(1 + ACK_TIMEOUT_MS);
    assert!(!shipper.healthy(1, "a"));
    shipper.acknowledged(1, &[5]);
    assert!(shipper.healthy(1, "a"));
}

#[test]
fn a_replaced_connection_takes_a_member_with_lost_records_out_without_a_degradation() {
    let a = name("a");
    let mut shipper = Shipper::new(true, 2).with_sets();
    shipper.prepare(1, UP, "a");
    shipper.shipped(1, 5, 100, 0, true, Some(&a));
    shipper.prepare(1, UP, "b");
    // The next connection is up before the shard looks again: the link never read as down.
    assert_eq!(shipper.prepare(1, (2, true), "a"), Ship::Copy);
    assert!(shipper.take_events().is_empty(), "no follower was lost");
    assert_eq!(
        shipper.position(9),
        4,
        "record 5 went with the old connection"
    );
    // Its copy is current again, yet record 5 never reaches it: it must leave a's set.
    assert!(!shipper.healthy(1, "a"));
    assert_eq!(shipper.prepare(1, (2, true), "b"), Ship::Copy);
    assert!(shipper.healthy(1, "b"), "nothing of b was lost");
    assert!(shipper.release_excluded(|namespace, _| namespace != "a"));
    assert_eq!(shipper.position(9), 9);
    assert!(shipper.healthy(1, "a"), "it may join a's set again");
}
