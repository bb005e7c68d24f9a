use super::*;

const UP: (u64, bool) = (1, true);

#[test]
fn acknowledgements_wait_for_the_first_unacknowledged_record() {
    let mut shipper = Shipper::new(true, 3);
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Copy);
    shipper.shipped(1, 5, 100, 0, true, None);
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Record);
    shipper.shipped(1, 6, 10, 0, true, None);
    assert_eq!(shipper.prepare(2, UP, "b"), Ship::Copy);
    shipper.shipped(2, 7, 10, 0, true, None);
    assert_eq!(shipper.position(9), 4);
    // Acknowledged out of order: the position moves only past the first.
    shipper.acknowledged(1, &[6]);
    assert_eq!(shipper.position(9), 4);
    shipper.acknowledged(1, &[5]);
    assert_eq!(shipper.position(9), 6);
    assert_eq!(shipper.position(3), 3, "never past the local disk");
    shipper.acknowledged(2, &[7]);
    assert_eq!(shipper.position(9), 9);
    assert!(shipper.take_events().is_empty());
}

#[test]
fn asynchronous_replication_never_holds() {
    let mut shipper = Shipper::new(false, 2);
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Copy);
    shipper.shipped(1, 5, 100, 0, true, None);
    assert_eq!(shipper.position(9), 9);
    assert_eq!(shipper.lag(1), (1, 100, false));
}

#[test]
fn a_lost_link_stops_the_wait_and_a_new_one_starts_with_copies() {
    let mut shipper = Shipper::new(true, 2);
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Copy);
    shipper.shipped(1, 5, 100, 0, true, None);
    assert_eq!(shipper.position(9), 4);
    assert_eq!(shipper.prepare(1, (1, false), "a"), Ship::Skip);
    assert_eq!(shipper.position(9), 9);
    assert_eq!(
        shipper.take_events(),
        vec![Event::Degraded(1, Degraded::LinkDown)]
    );
    // An acknowledgement of the old connection changes nothing.
    shipper.acknowledged(1, &[5]);
    assert_eq!(shipper.prepare(1, (2, true), "a"), Ship::Copy);
    assert_eq!(shipper.take_events(), vec![Event::CaughtUp(1)]);
    shipper.shipped(1, 8, 100, 0, true, None);
    assert_eq!(shipper.position(9), 7, "waits again");
}

#[test]
fn a_silent_follower_is_waited_for_a_bounded_time() {
    let mut shipper = Shipper::new(true, 2);
    shipper.prepare(1, UP, "a");
    shipper.shipped(1, 5, 100, 1_000, true, None);
    shipper.check_timeouts(1_000 + ACK_TIMEOUT_MS);
    assert_eq!(shipper.position(9), 4);
    shipper.check_timeouts(1_001 + ACK_TIMEOUT_MS);
    assert_eq!(shipper.position(9), 9);
    // Until it has caught up, new records do not hold either.
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Record);
    shipper.shipped(1, 10, 100, 5_000, true, None);
    assert_eq!(shipper.position(12), 12);
    shipper.acknowledged(1, &[5, 10]);
    assert_eq!(
        shipper.take_events(),
        vec![Event::Degraded(1, Degraded::AckTimeout), Event::CaughtUp(1)]
    );
    shipper.prepare(1, UP, "a");
    shipper.shipped(1, 13, 100, 6_000, true, None);
    assert_eq!(shipper.position(14), 12);
}

#[test]
fn a_catch_up_copy_holds_nothing_and_its_records_follow_it() {
    let mut shipper = Shipper::new(true, 2);
    assert!(shipper.follow_link(1, UP));
    shipper.copied(1, "a");
    shipper.shipped(1, u64::MAX, 500, 0, false, None);
    assert_eq!(shipper.position(9), 9);
    assert_eq!(shipper.lag(1), (1, 500, false));
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Record);
    shipper.acknowledged(1, &[u64::MAX]);
    assert_eq!(shipper.lag(1), (0, 0, false));
}

#[test]
fn a_follower_too_far_behind_gets_nothing_more_until_it_catches_up() {
    let mut shipper = Shipper::new(true, 2);
    shipper.prepare(1, UP, "a");
    shipper.shipped(1, 5, MAX_IN_FLIGHT_BYTES + 1, 0, true, None);
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Skip);
    assert_eq!(shipper.position(9), 9);
    shipper.acknowledged(1, &[5]);
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Copy, "a copy again");
}

#[test]
fn a_follower_is_caught_up_once_it_acknowledged_the_database_and_every_copy() {
    let mut shipper = Shipper::new(true, 2);
    assert!(!shipper.caught_up(1, "a", 5), "no copy yet");
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Copy);
    shipper.shipped(1, 5, 10, 0, true, None);
    shipper.shipped(1, 7, 10, 0, true, None);
    assert!(!shipper.caught_up(1, "a", 5));
    shipper.acknowledged(1, &[5]);
    assert!(shipper.caught_up(1, "a", 5), "record 7 comes after");
    assert!(!shipper.caught_up(1, "a", 7));
    // A copy made without a write, in flight: not caught up whatever the position.
    shipper.shipped(1, u64::MAX, 10, 0, false, None);
    shipper.acknowledged(1, &[7]);
    assert!(!shipper.caught_up(1, "a", 7));
    shipper.acknowledged(1, &[u64::MAX]);
    assert!(shipper.caught_up(1, "a", 7));
    assert!(
        !shipper.caught_up(1, "b", 7),
        "another database has no copy there"
    );
}

#[test]
fn a_follower_that_changes_gets_a_copy_and_so_does_the_old_one_when_it_returns() {
    let mut shipper = Shipper::new(true, 3);
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Copy);
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Record);
    assert!(shipper.has_copy(1, "a"));
    // A node joined and placement names it: the records written from now on go there.
    assert_eq!(shipper.prepare(2, UP, "a"), Ship::Copy);
    assert_eq!(shipper.prepare(2, UP, "a"), Ship::Record);
    assert!(!shipper.has_copy(1, "a"));
    // It left again: node 1 missed what node 2 got, so it starts from a copy.
    assert_eq!(shipper.prepare(1, UP, "a"), Ship::Copy);
    // Another database's copy on node 2 is untouched by the first one's moves.
    assert_eq!(shipper.prepare(2, UP, "b"), Ship::Copy);
    assert_eq!(
        shipper.prepare(1, (2, true), "a"),
        Ship::Copy,
        "a new connection"
    );
    assert!(shipper.has_copy(2, "b"));
}

#[test]
fn a_link_never_up_is_told_apart_from_one_lost() {
    let mut shipper = Shipper::new(true, 2);
    assert!(!shipper.follow_link(1, (0, false)));
    assert_eq!(
        shipper.take_events(),
        vec![Event::Degraded(1, Degraded::LinkNotUpYet)],
        "decided with the generation seen then, whatever the link is when it is reported"
    );
    assert!(shipper.follow_link(1, (1, true)));
    assert_eq!(shipper.take_events(), vec![Event::CaughtUp(1)]);
}
