//! What the edge keeps of a session for a move (`upstream.rs`): replayed in order, the
//! replies to replays swallowed, unanswered requests answered, and the limits.

use hearth_tree::Path;
use hearth_wire::{encode_cancel, encode_reply_status};
use serde_json::{json, Value};

use crate::frames::encode_frames;
use crate::upstream::{Upstream, MAX_TRACKED_IN_FLIGHT, MOVED_UNANSWERED};

fn upstream() -> Upstream {
    Upstream::new("db".into(), "session".into())
}

fn request(r: u64, action: &str, body: Value) -> String {
    json!({"t": "d", "d": {"r": r, "a": action, "b": body}}).to_string()
}

fn reply(r: u64, status: &str) -> bytes::Bytes {
    encode_frames(encode_reply_status(r, status, ""))
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).expect("json")
}

/// The ids and actions of what a move replays.
fn replayed(texts: &[String]) -> Vec<(u64, String)> {
    texts
        .iter()
        .map(|text| {
            let message = parsed(text);
            let r = message["d"]["r"].as_u64().expect("r");
            (r, message["d"]["a"].as_str().expect("a").to_owned())
        })
        .collect()
}

#[test]
fn a_move_replays_auth_listens_and_on_disconnect_and_swallows_their_replies() {
    let mut up = upstream();
    up.note_sent(&request(1, "auth", json!({"cred": "token"})));
    up.note_sent(&request(2, "q", json!({"p": "/a", "h": "xyz"})));
    up.note_sent(&request(
        3,
        "q",
        json!({"p": "/b", "q": {"l": 1}, "t": 1, "h": ""}),
    ));
    up.note_sent(&request(4, "n", json!({"p": "/b", "q": {"l": 1}, "t": 1})));
    up.note_sent(&request(5, "o", json!({"p": "/presence/me", "d": "gone"})));
    for r in 1..=5 {
        assert!(
            up.lets_through(&reply(r, "ok")),
            "replies before a move reach the client"
        );
    }
    // In flight when the owner changes: a write and a listen.
    up.note_sent(&request(6, "p", json!({"p": "/x", "d": 1})));
    up.note_sent(&request(7, "q", json!({"p": "/c", "h": ""})));
    let resume = up.resume(false).expect("it can move");
    assert_eq!(resume.answers.len(), 1);
    let answer = parsed(&resume.answers[0]);
    assert_eq!(answer["d"]["r"], 6);
    assert_eq!(answer["d"]["b"]["s"], "unavailable");
    assert_eq!(answer["d"]["b"]["d"], MOVED_UNANSWERED);
    assert_eq!(
        replayed(&resume.replay),
        vec![
            (1, "auth".into()),
            (2, "q".into()),
            (5, "o".into()),
            (7, "q".into())
        ]
    );
    // The new owner must send the data whatever the client holds.
    assert_eq!(parsed(&resume.replay[1])["d"]["b"]["h"], "");
    assert_eq!(parsed(&resume.replay[1])["d"]["b"]["p"], "/a");
    // The replies to what the client had its answers for do not reach it; the one it
    // waits for does.
    for r in [1, 2, 5] {
        assert!(!up.lets_through(&reply(r, "ok")), "reply {r} swallowed");
    }
    assert!(up.lets_through(&reply(7, "ok")));
    // Pushes pass, and so does a late reply of the old owner (it names no replay).
    let push = encode_frames(r#"{"t":"d","d":{"a":"d","b":{"p":"/a","d":1}}}"#.into());
    assert!(up.lets_through(&push));
    assert!(up.lets_through(&reply(6, "ok")));
    assert!(up.take_refusal().is_none());
    // Swallowed once: the same id later is the client's again.
    assert!(up.lets_through(&reply(2, "ok")));
}

#[test]
fn a_refused_replay_is_reported_so_that_the_connection_closes() {
    let mut up = upstream();
    up.note_sent(&request(1, "auth", json!({"cred": "token"})));
    up.note_sent(&request(2, "q", json!({"p": "/a", "h": ""})));
    assert!(up.lets_through(&reply(1, "ok")));
    assert!(up.lets_through(&reply(2, "ok")));
    up.resume(false).expect("it can move");
    assert!(!up.lets_through(&reply(1, "invalid_token")));
    assert!(up.take_refusal().is_some());
    assert!(up.take_refusal().is_none(), "reported once");
}

#[test]
fn refused_and_revoked_requests_are_not_replayed() {
    let mut up = upstream();
    up.note_sent(&request(1, "q", json!({"p": "/denied", "h": ""})));
    up.note_sent(&request(
        2,
        "q",
        json!({"p": "/rooms/a", "q": {"l": 2, "vf": "l"}, "t": 4}),
    ));
    up.note_sent(&request(3, "o", json!({"p": "/denied", "d": 1})));
    up.note_sent(&request(4, "om", json!({"p": "/ok", "d": {"a": 1}})));
    up.note_sent(&request(5, "oc", json!({"p": "/ok"})));
    assert!(up.lets_through(&reply(1, "permission_denied")));
    assert!(up.lets_through(&reply(2, "ok")));
    assert!(up.lets_through(&reply(3, "permission_denied")));
    assert!(up.lets_through(&reply(4, "ok")));
    assert!(up.lets_through(&reply(5, "ok")));
    // The owner revokes the filtered listen.
    let path = Path::parse("/rooms/a").expect("path");
    let cancel = encode_frames(encode_cancel(&path, Some(&json!({"l": 2, "vf": "l"}))));
    assert!(
        up.lets_through(&cancel),
        "the client must see the revocation"
    );
    let resume = up.resume(false).expect("it can move");
    assert!(resume.answers.is_empty());
    assert_eq!(
        replayed(&resume.replay),
        vec![(4, "om".into()), (5, "oc".into())],
        "the onDisconnect queue in order, without what was refused"
    );
}

#[test]
fn unanswered_requests_are_answered_and_reads_sent_again() {
    let mut up = upstream();
    up.note_sent(&request(1, "o", json!({"p": "/p", "d": 1})));
    up.note_sent(&request(2, "m", json!({"p": "/m", "d": {"a": 1}})));
    up.note_sent(&request(3, "g", json!({"p": "/g", "q": {}})));
    up.note_sent(&request(4, "unauth", json!({})));
    up.note_sent(&request(5, "s", json!({"c": {"sdk.js.12": 1}})));
    let resume = up.resume(false).expect("it can move");
    let answers: Vec<(u64, String)> = resume
        .answers
        .iter()
        .map(|text| {
            let answer = parsed(text);
            let status = answer["d"]["b"]["s"].as_str().expect("s").to_owned();
            (answer["d"]["r"].as_u64().expect("r"), status)
        })
        .collect();
    assert_eq!(
        answers,
        vec![
            (1, "unavailable".into()),
            (2, "unavailable".into()),
            (4, "ok".into()),
            (5, "ok".into())
        ],
        "an onDisconnect or write that may or may not have been applied is never sent again"
    );
    assert_eq!(replayed(&resume.replay), vec![(3, "g".into())]);
    assert!(
        up.lets_through(&reply(3, "ok")),
        "the read's answer is the client's"
    );
}

#[test]
fn a_connection_past_a_limit_is_no_longer_kept() {
    let mut up = upstream();
    for r in 0..=MAX_TRACKED_IN_FLIGHT as u64 {
        up.note_sent(&request(r, "p", json!({"p": "/x", "d": r})));
    }
    assert!(up.cannot_move().is_some());
    assert!(up.resume(false).is_err());
    // A large message of another form than the SDKs' cannot be followed either.
    let mut up = upstream();
    let data = "x".repeat(hearth_net::offload::OFF_THREAD_PARSE_BYTES);
    let large = json!({"t": "d", "d": {"b": {"p": "/x", "d": data}, "a": "p", "r": 1}});
    up.note_sent(&large.to_string());
    assert!(up.cannot_move().is_some());
}

#[test]
fn a_large_write_is_followed_from_its_head() {
    let mut up = upstream();
    let data = "x".repeat(hearth_net::offload::OFF_THREAD_PARSE_BYTES);
    let large = format!(r#"{{"t":"d","d":{{"r":9,"a":"p","b":{{"p":"/x","d":"{data}"}}}}}}"#);
    up.note_sent(&large);
    let large_o = format!(r#"{{"t":"d","d":{{"r":10,"a":"o","b":{{"p":"/y","d":"{data}"}}}}}}"#);
    up.note_sent(&large_o);
    assert!(up.cannot_move().is_none());
    assert!(up.lets_through(&reply(10, "ok")));
    // The action first, as a serializer of a hash map may write it.
    let large_java =
        format!(r#"{{"t":"d","d":{{"a":"m","r":11,"b":{{"p":"/z","d":{{"k":"{data}"}}}}}}}}"#);
    up.note_sent(&large_java);
    assert!(up.cannot_move().is_none());
    let resume = up.resume(false).expect("it can move");
    assert_eq!(resume.answers.len(), 2, "the writes in flight");
    assert_eq!(replayed(&resume.replay), vec![(10, "o".into())]);
    // After a planned move, large writes are sent again like any other.
    let mut up = upstream();
    up.note_sent(&large);
    up.note_sent(&large_java);
    let resume = up.resume(true).expect("it can move");
    assert!(resume.answers.is_empty());
    assert_eq!(
        replayed(&resume.replay),
        vec![(9, "p".into()), (11, "m".into())]
    );
    // Another form is not followed.
    let mut up = upstream();
    up.note_sent(&format!(
        r#"{{"t":"d","d":{{"b":{{"p":"/x","d":"{data}"}},"r":1,"a":"p"}}}}"#
    ));
    assert!(up.cannot_move().is_some());
}

#[test]
fn a_connection_writes_no_reply_to_a_replay_and_closes_on_a_refused_one() {
    use std::rc::Rc;

    use crate::recorder::Recorder;
    use crate::EdgeConn;
    use hearth_ground::cross_core::MoveCause;
    use hearth_net::budget::{HttpBudgets, ShardBudget};

    let recorder = Recorder::new(usize::MAX);
    let transport: Rc<dyn crate::socket::Transport> = recorder.clone();
    let budget = ShardBudget::new(std::sync::Arc::new(HttpBudgets::default()));
    let edge = Rc::new(EdgeConn::new(1, transport, budget, Default::default()));
    // Without a record of its requests, a connection whose owner changes closes.
    edge.owner_moved(MoveCause::Moved);
    assert!(edge.closing().is_some());

    let recorder = Recorder::new(usize::MAX);
    let transport: Rc<dyn crate::socket::Transport> = recorder.clone();
    let budget = ShardBudget::new(std::sync::Arc::new(HttpBudgets::default()));
    let edge = Rc::new(EdgeConn::new(1, transport, budget, Default::default()));
    edge.follow_upstream(upstream());
    edge.note_sent(&request(1, "q", json!({"p": "/a", "h": ""})));
    edge.note_sent(&request(2, "q", json!({"p": "/b", "h": ""})));
    edge.write([reply(1, "ok"), reply(2, "ok")]);
    let before = recorder.written.borrow().len();
    assert!(before > 0);
    edge.owner_moved(MoveCause::OwnerLost);
    assert!(edge.closing().is_none(), "it moves instead");
    assert_eq!(edge.take_moving(), Some(MoveCause::OwnerLost));
    let resume = edge.upstream().as_mut().expect("kept").resume(false);
    assert_eq!(resume.expect("it can move").replay.len(), 2);
    let push = encode_frames(r#"{"t":"d","d":{"a":"d","b":{"p":"/a","d":1}}}"#.into());
    edge.write([push.clone(), reply(1, "ok")]);
    assert_eq!(
        recorder.written.borrow().len(),
        before + push.len(),
        "the data reaches the client, the replayed listen's reply does not"
    );
    edge.write([reply(2, "permission_denied")]);
    assert_eq!(recorder.written.borrow().len(), before + push.len());
    assert!(
        edge.closing().is_some(),
        "a refused replay closes the connection"
    );
}

#[test]
fn after_a_planned_move_waiting_writes_are_sent_again_and_their_replies_reach_the_client() {
    let mut up = upstream();
    up.note_sent(&request(1, "auth", json!({"cred": "token"})));
    up.note_sent(&request(2, "p", json!({"p": "/x", "d": 1})));
    assert!(up.lets_through(&reply(1, "ok")));
    assert!(up.lets_through(&reply(2, "ok")), "an answered write");
    // In flight when the stopping owner says the session moves: it handled none of them.
    up.note_sent(&request(3, "p", json!({"p": "/y", "d": 2})));
    up.note_sent(&request(4, "q", json!({"p": "/y", "h": ""})));
    up.note_sent(&request(5, "m", json!({"p": "/z", "d": {"a": 1}})));
    let resume = up.resume(true).expect("it can move");
    assert!(resume.answers.is_empty(), "nothing answered for the client");
    assert_eq!(
        replayed(&resume.replay),
        vec![
            (1, "auth".into()),
            (3, "p".into()),
            (4, "q".into()),
            (5, "m".into())
        ],
        "the answered write is not sent again; the others go in the client's order"
    );
    assert_eq!(parsed(&resume.replay[1])["d"]["b"]["d"], 2);
    assert!(
        !up.lets_through(&reply(1, "ok")),
        "the credential's reply swallowed"
    );
    for r in [3, 4, 5] {
        assert!(
            up.lets_through(&reply(r, "ok")),
            "reply {r} is the client's"
        );
    }
}

#[test]
fn writes_are_never_sent_again_after_another_move_nor_past_their_budget() {
    use crate::upstream::MAX_KEPT_WRITE_BYTES;
    let mut up = upstream();
    up.note_sent(&request(1, "p", json!({"p": "/x", "d": 1})));
    let resume = up.resume(false).expect("it can move");
    assert_eq!(parsed(&resume.answers[0])["d"]["b"]["s"], "unavailable");
    assert!(resume.replay.is_empty());
    // Past the budget of kept writes, a write is answered as after any other move; the
    // connection itself can still move.
    let mut up = upstream();
    let big = "x".repeat(64 * 1024);
    let size = request(1, "p", json!({"p": "/big", "d": big})).len();
    let fit = MAX_KEPT_WRITE_BYTES / size;
    for r in 1..=fit as u64 + 2 {
        up.note_sent(&request(r, "p", json!({"p": "/big", "d": big})));
    }
    let resume = up.resume(true).expect("it can move");
    assert_eq!(resume.replay.len(), fit, "those that fit are sent again");
    let answered: Vec<u64> = resume
        .answers
        .iter()
        .map(|answer| parsed(answer)["d"]["r"].as_u64().expect("r"))
        .collect();
    assert_eq!(answered, vec![fit as u64 + 1, fit as u64 + 2]);
    assert_eq!(
        parsed(&resume.answers[0])["d"]["b"]["s"],
        "unavailable",
        "past the budget: answered as after any other move"
    );
}
