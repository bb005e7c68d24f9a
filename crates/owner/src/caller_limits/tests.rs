//! Tests of `caller_limits` against the engine: writes, bytes, listens and connections per
//! caller, keyed as the rules say, admins never counted.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use hearth_query::QueryParams;
use hearth_rules::Rules;
use hearth_sync::{Access, AuthState, Database, Effects, Request};
use hearth_tree::Path;
use serde_json::json;

use super::*;

const RULES: &str = r#"{"rules": {
    ".read": true, ".write": true,
    ".limits": {"connections": 2, "listens": 3},
    "rooms": {"$room": {"messages": {".limits": {"writes": "2/s", "bytes": "1kb/min"}}}},
    "typing": {".limits": {"writes": "1/s", "per": "client.address"}}
}}"#;

fn database() -> Database {
    let mut database = Database::new();
    let rules = Rules::parse(RULES).expect("valid rules");
    database.set_access(Access::Rules(Arc::new(rules)), 0, &mut Effects::new());
    database
}

/// Limits that follow the sessions, as they do once the rules declare limits.
fn following() -> CallerLimits {
    let mut limits = CallerLimits::default();
    limits.start([]);
    limits
}

fn path(text: &str) -> Path {
    Path::parse(text).expect("path")
}

fn address(last: u8) -> Option<IpAddr> {
    Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
}

/// Session `conn` listens at `at` in the engine.
fn listen(database: &mut Database, conn: u64, at: &str) {
    let reply = database.handle(
        conn,
        Request::Listen {
            path: path(at),
            query: QueryParams::default(),
            query_wire: None,
            tag: None,
            hash: None,
        },
        0,
        &mut Effects::new(),
    );
    assert!(reply.is_ok(), "{reply:?}");
}

fn user(uid: &str, at: Option<IpAddr>) -> Identity {
    Identity::of(&AuthState::User(json!({"uid": uid})), at)
}

#[test]
fn writes_and_bytes_are_counted_per_user_and_declaration() {
    let database = database();
    let mut limits = following();
    let (alice, bob) = (user("alice", address(1)), user("bob", address(1)));
    let messages = path("/rooms/r1/messages/m");
    limits
        .admit_write(&database, &alice, &messages, 10, 0)
        .expect("first");
    // Another room shares the declaration: the count is the caller's across rooms.
    limits
        .admit_write(&database, &alice, &path("/rooms/r2/messages/m"), 10, 0)
        .expect("second");
    let refused = limits
        .admit_write(&database, &alice, &messages, 10, 0)
        .expect_err("third");
    assert_eq!(refused.kind, LimitKind::Writes);
    assert!(
        refused.message.contains("user alice"),
        "{}",
        refused.message
    );
    assert!(
        refused
            .message
            .contains("/rules/rooms/$room/messages/.limits"),
        "{}",
        refused.message
    );
    // Bob, from the same address, is not touched; nor is a path without limits.
    limits
        .admit_write(&database, &bob, &messages, 10, 0)
        .expect("bob");
    limits
        .admit_write(&database, &alice, &path("/elsewhere"), 10, 0)
        .expect("unlimited");
    // Half a second gives one write back.
    limits
        .admit_write(&database, &alice, &messages, 10, 500)
        .expect("refilled");
    // Bytes: a minute's worth, then refused.
    limits
        .admit_write(&database, &bob, &messages, 1_000, 5_000)
        .expect("within the bytes");
    let bytes = limits
        .admit_write(&database, &bob, &messages, 100, 5_000)
        .expect_err("bytes");
    assert_eq!(bytes.kind, LimitKind::Bytes);
    // The refused write took no write either: bob still has his second.
    limits
        .admit_write(&database, &bob, &messages, 10, 5_000)
        .expect("writes left");
    // A write larger than a minute's bytes never passes.
    let never = limits
        .admit_write(&database, &alice, &messages, 2_000, 600_000)
        .expect_err("never");
    assert_eq!(never.kind, LimitKind::Bytes);
}

#[test]
fn a_write_above_a_limited_location_counts_against_it() {
    let database = database();
    let mut limits = following();
    let alice = user("alice", address(1));
    limits
        .admit_write(&database, &alice, &path("/rooms"), 1, 0)
        .expect("one");
    limits
        .admit_write(&database, &alice, &path("/"), 1, 0)
        .expect("two");
    assert!(limits
        .admit_write(&database, &alice, &path("/rooms/r1"), 1, 0)
        .is_err());
}

#[test]
fn per_address_counts_everyone_behind_one_address_and_anonymous_callers_by_address() {
    let database = database();
    let mut limits = following();
    let typing = path("/typing/x");
    limits
        .admit_write(&database, &user("alice", address(1)), &typing, 1, 0)
        .expect("alice");
    let refused = limits
        .admit_write(&database, &user("bob", address(1)), &typing, 1, 0)
        .expect_err("same address");
    assert!(
        refused.message.contains("client address 10.0.0.1"),
        "{}",
        refused.message
    );
    limits
        .admit_write(&database, &user("bob", address(2)), &typing, 1, 0)
        .expect("another address");
    // Anonymous callers under a per-user declaration are counted by their address.
    let anonymous = |at| Identity::of(&AuthState::Anonymous, at);
    let messages = path("/rooms/r/messages/m");
    for _ in 0..2 {
        limits
            .admit_write(&database, &anonymous(address(3)), &messages, 1, 0)
            .expect("within");
    }
    let refused = limits
        .admit_write(&database, &anonymous(address(3)), &messages, 1, 0)
        .expect_err("past");
    assert!(
        refused.message.contains("anonymous callers from 10.0.0.3"),
        "{}",
        refused.message
    );
    limits
        .admit_write(&database, &anonymous(address(4)), &messages, 1, 0)
        .expect("elsewhere");
}

#[test]
fn admins_and_databases_without_limits_are_never_counted() {
    let database = database();
    let mut limits = following();
    let admin = Identity::of(&AuthState::Admin, address(1));
    for _ in 0..100 {
        limits
            .admit_write(&database, &admin, &path("/typing/x"), 1, 0)
            .expect("admin");
    }
    let open = Database::new();
    for _ in 0..100 {
        limits
            .admit_write(&open, &user("a", None), &path("/typing/x"), 1, 0)
            .expect("no rules");
    }
    assert_eq!(limits.counted(), 0);
}

#[test]
fn connections_per_caller_follow_sign_in_and_close() {
    let mut database = database();
    let mut limits = following();
    let anonymous = Identity::of(&AuthState::Anonymous, address(1));
    // Anonymous sessions are counted at their first request for data, not at their opening:
    // users behind one address may all connect, then sign in.
    for conn in 1..=5 {
        database.connect(conn);
        limits
            .open(&database, conn, anonymous.clone())
            .expect("opened");
    }
    limits.claim(&database, 1).expect("within");
    limits.claim(&database, 2).expect("within");
    limits.claim(&database, 2).expect("counted once");
    let refused = limits.claim(&database, 3).expect_err("third");
    assert_eq!(refused.kind, LimitKind::Connections);
    assert!(
        refused
            .message
            .contains("anonymous callers from 10.0.0.1 holds 2 connections"),
        "{}",
        refused.message
    );
    limits.close(3);
    limits.close(4);
    limits.close(5);
    // Signing in moves a session from its address to its user: the address has room again.
    let alice = AuthState::User(json!({"uid": "alice"}));
    limits.signed_in(&database, 1, &alice).expect("alice");
    limits
        .open(&database, 3, anonymous.clone())
        .expect("opened");
    limits.claim(&database, 3).expect("room at the address");
    limits
        .signed_in(&database, 3, &alice)
        .expect("alice's second");
    // Alice's third session is refused when it signs in, and forgotten.
    limits
        .open(
            &database,
            4,
            Identity::of(&AuthState::Anonymous, address(9)),
        )
        .expect("anonymous");
    assert_eq!(
        limits
            .signed_in(&database, 4, &alice)
            .expect_err("third")
            .kind,
        LimitKind::Connections
    );
    limits.close(1);
    limits
        .signed_in(&database, 4, &alice)
        .expect("after one closed");
    // Per client address, a session is counted at its opening, signed in or not.
    let rules =
        Rules::parse(r#"{"rules": {".limits": {"connections": 1, "per": "client.address"}}}"#)
            .expect("valid");
    let mut by_address = Database::new();
    by_address.set_access(Access::Rules(Arc::new(rules)), 0, &mut Effects::new());
    let mut limits = following();
    limits
        .open(&by_address, 1, user("bob", address(5)))
        .expect("first");
    assert!(limits
        .open(
            &by_address,
            2,
            Identity::of(&AuthState::Anonymous, address(5))
        )
        .is_err());
    // Admins hold as many as they like.
    for conn in 10..20 {
        limits
            .open(&database, conn, Identity::of(&AuthState::Admin, address(1)))
            .expect("admin");
    }
}

#[test]
fn listens_are_counted_from_the_engine_across_the_callers_sessions() {
    let mut database = database();
    let mut limits = following();
    let alice = user("alice", address(1));
    for conn in [1, 2] {
        database.connect(conn);
        limits.open(&database, conn, alice.clone()).expect("open");
    }
    for (conn, at) in [(1, "/a"), (1, "/b"), (2, "/c")] {
        limits
            .admit_listen(&database, conn, &path(at), None)
            .expect("within");
        listen(&mut database, conn, at);
    }
    let refused = limits
        .admit_listen(&database, 2, &path("/d"), None)
        .expect_err("a fourth");
    assert_eq!(refused.kind, LimitKind::Listens);
    // An unlisten gives the room back.
    database.handle(
        1,
        Request::Unlisten {
            path: path("/a"),
            tag: None,
        },
        0,
        &mut Effects::new(),
    );
    limits
        .admit_listen(&database, 2, &path("/d"), None)
        .expect("after an unlisten");
    // Bob is counted on his own.
    database.connect(3);
    limits
        .open(&database, 3, user("bob", address(1)))
        .expect("bob");
    limits
        .admit_listen(&database, 3, &path("/a"), None)
        .expect("bob's first");
}

#[test]
fn counters_are_bounded_and_make_room_without_refusing_anyone() {
    let database = database();
    let mut limits = following();
    let typing = path("/typing/x");
    let at = |n: u32| Some(IpAddr::V4(Ipv4Addr::from(n)));
    for n in 0..MAX_COUNTED_CALLERS as u32 {
        limits
            .admit_write(&database, &user("u", at(n)), &typing, 1, 0)
            .expect("room");
    }
    // Full, and nothing has refilled: a hundredth is dropped, and the newcomer counted.
    limits
        .admit_write(&database, &user("u", at(u32::MAX)), &typing, 1, 0)
        .expect("room made");
    assert_eq!(
        limits.counted(),
        MAX_COUNTED_CALLERS - MAX_COUNTED_CALLERS / 100 + 1
    );
    // A second later every counter has refilled: a sweep drops them all.
    let fill = limits.counted() as u32;
    for n in 0..(MAX_COUNTED_CALLERS as u32 - fill) {
        limits
            .admit_write(&database, &user("u", at(1 << 31 | n)), &typing, 1, 500)
            .expect("room");
    }
    limits
        .admit_write(&database, &user("u", at(u32::MAX - 1)), &typing, 1, 1_500)
        .expect("swept");
    assert!(
        limits.counted() < MAX_COUNTED_CALLERS / 2,
        "{}",
        limits.counted()
    );
}

#[test]
fn an_ipv6_caller_is_counted_by_its_64_network() {
    let database = database();
    let mut limits = following();
    let typing = path("/typing/x");
    let v6 = |text: &str| Some(text.parse::<IpAddr>().expect("address"));
    limits
        .admit_write(&database, &user("a", v6("2001:db8:1:2::1")), &typing, 1, 0)
        .expect("first");
    let refused = limits
        .admit_write(
            &database,
            &user("b", v6("2001:db8:1:2:ffff::9")),
            &typing,
            1,
            0,
        )
        .expect_err("same /64");
    assert!(
        refused.message.contains("client address 2001:db8:1:2::/64"),
        "{}",
        refused.message
    );
    limits
        .admit_write(&database, &user("c", v6("2001:db8:1:3::1")), &typing, 1, 0)
        .expect("another /64");
}

#[test]
fn listens_follow_their_session_when_it_signs_in() {
    let mut database = database();
    let mut limits = following();
    let anonymous = Identity::of(&AuthState::Anonymous, address(1));
    database.connect(1);
    limits.open(&database, 1, anonymous).expect("open");
    for at in ["/a", "/b", "/c"] {
        limits
            .admit_listen(&database, 1, &path(at), None)
            .expect("within");
        listen(&mut database, 1, at);
    }
    // Signing in carries the three listens to alice: her next is refused, and the address
    // has its room back.
    let alice = AuthState::User(json!({"uid": "alice"}));
    limits.signed_in(&database, 1, &alice).expect("signed in");
    database.set_auth(1, alice, 0, &mut Effects::new());
    assert_eq!(
        limits
            .admit_listen(&database, 1, &path("/d"), None)
            .expect_err("alice holds three")
            .kind,
        LimitKind::Listens
    );
    database.connect(2);
    limits
        .open(
            &database,
            2,
            Identity::of(&AuthState::Anonymous, address(1)),
        )
        .expect("open");
    limits
        .admit_listen(&database, 2, &path("/e"), None)
        .expect("the address's room is back");
}

#[test]
fn sessions_are_followed_only_while_limits_are_declared_and_picked_up_when_they_come() {
    let mut database = database();
    let mut limits = CallerLimits::default();
    // Not following: nothing is kept, nothing refused.
    for conn in 1..=5 {
        limits
            .open(&database, conn, user("alice", address(1)))
            .expect("not followed");
    }
    assert!(limits.sessions.is_empty());
    // The limits come: the sessions open now are counted as who they are, not refused.
    for conn in 1..=3 {
        database.connect(conn);
    }
    limits.start((1..=3).map(|conn| (conn, user("alice", address(1)))));
    let refused = limits
        .open(&database, 4, user("alice", address(2)))
        .expect_err("alice holds 3 already");
    assert_eq!(refused.kind, LimitKind::Connections);
    limits.stop();
    assert!(!limits.tracking() && limits.sessions.is_empty() && limits.members.is_empty());
}
