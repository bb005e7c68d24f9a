//! Tests of decoding client messages (`decode.rs`): listens, writes and targets, control and
//! connection requests, lone surrogates, addressed errors, and lazy decoding against eager.

use super::*;
use hearth_sync::Request;

fn request(text: &str) -> (u64, ClientRequest) {
    match decode(text) {
        Ok(ClientMessage::Request {
            request_id,
            request,
        }) => (request_id, *request),
        other => panic!("expected a request, got {other:?}"),
    }
}

#[test]
fn decodes_a_tagged_listen() {
    let (r, req) = request(
        r#"{"t":"d","d":{"r":3,"a":"q","b":{"p":"/q1","q":{"l":2,"vf":"r","i":"score"},"t":1,"h":""}}}"#,
    );
    assert_eq!(r, 3);
    match req {
        ClientRequest::Data(Request::Listen {
            path,
            tag,
            hash,
            query_wire,
            ..
        }) => {
            assert_eq!(path.to_string(), "/q1");
            assert_eq!(tag, Some(1));
            assert_eq!(hash.as_deref(), Some(""));
            assert!(query_wire.is_some());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn decodes_writes_and_priority_targets() {
    let (_, req) = request(r#"{"t":"d","d":{"r":3,"a":"p","b":{"p":"/a/.priority","d":5}}}"#);
    assert!(matches!(
        req,
        ClientRequest::Data(Request::Put { ref target, .. }) if target.priority_only
    ));
    let (_, req) =
        request(r#"{"t":"d","d":{"r":4,"a":"m","b":{"p":"/w","d":{"d/e":1,"f":null}}}}"#);
    match req {
        ClientRequest::Data(Request::Merge { entries, .. }) => assert_eq!(entries.len(), 2),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn control_and_connection_requests() {
    assert!(matches!(
        decode(r#"{"t":"c","d":{"t":"p","d":{}}}"#),
        Ok(ClientMessage::Ping)
    ));
    assert_eq!(
        control_type(r#"{"t":"c","d":{"t":"n","d":{}}}"#).as_deref(),
        Some("n")
    );
    assert_eq!(control_type(r#"{"t":"d","d":{"t":"n"}}"#), None);
    assert_eq!(control_type("0"), None);
    assert_eq!(control_type(r#"{"t":"c","d":{"t":"p"}"#), None);
    assert!(matches!(
        decode(r#"{"t":"c","d":{"t":"p","d":{}}}"#),
        Ok(ClientMessage::Ping)
    ));
    let (_, req) = request(r#"{"t":"d","d":{"r":8,"a":"unappeck","b":{}}}"#);
    assert!(matches!(req, ClientRequest::AppCheck(None)));
    let (_, req) = request(r#"{"t":"d","d":{"r":8,"a":"unappcheck","b":{}}}"#);
    assert!(matches!(req, ClientRequest::AppCheck(None)));
    let (_, req) = request(r#"{"t":"d","d":{"r":9,"a":"appcheck","b":{"token":"t.k.n"}}}"#);
    assert!(matches!(req, ClientRequest::AppCheck(Some(token)) if token == "t.k.n"));
    let (_, req) =
        request(r#"{"t":"d","d":{"r":2,"a":"gauth","b":{"cred":"owner","noauth":true}}}"#);
    assert!(matches!(
        req,
        ClientRequest::Auth(AuthRequest {
            no_auth: true,
            google: true,
            ..
        })
    ));
}

#[test]
fn lone_surrogates_in_values_and_keys_become_replacement_characters() {
    let (r, req) =
        request(r#"{"t":"d","d":{"r":5,"a":"p","b":{"p":"/s","d":{"k\udc00":"\ud800"}}}}"#);
    assert_eq!(r, 5);
    match req {
        ClientRequest::Data(Request::Put { data, .. }) => {
            assert_eq!(data, serde_json::json!({"k\u{fffd}": "\u{fffd}"}));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn errors_are_addressed_when_possible() {
    let unknown = decode(r#"{"t":"d","d":{"r":1,"a":"zz","b":{}}}"#).expect_err("unknown");
    assert_eq!(unknown.request_id, Some(1));
    assert_eq!(unknown.status, "unknown_action");
    let bad_key =
        decode(r#"{"t":"d","d":{"r":2,"a":"p","b":{"p":"/a.b","d":1}}}"#).expect_err("bad");
    assert_eq!(bad_key.request_id, Some(2));
    assert_eq!(decode("{").expect_err("bad").request_id, None);
    assert_eq!(decode("[1,2]").expect_err("bad").request_id, None);
    assert_eq!(
        decode(r#"{"t":"d","d":{"a":"q","b":{}}}"#)
            .expect_err("no r")
            .request_id,
        None
    );
}

fn pending(text: &str) -> PendingWrite<'_> {
    match decode_lazy(text) {
        Ok(Decoded::Write(write)) => write,
        other => panic!("expected a pending write, got {other:?}"),
    }
}

#[test]
fn write_data_is_parsed_only_when_finished() {
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let text = format!(r#"{{"t":"d","d":{{"r":7,"a":"p","b":{{"p":"/a/b","d":{deep}}}}}}}"#);
    let write = pending(&text);
    assert_eq!(write.request_id, 7);
    assert_eq!(write.data_len(), deep.len());
    let (path, scope) = write.scope().expect("a set is checked");
    assert_eq!((path.to_string().as_str(), scope), ("/a/b", WriteScope::At));
    // Too deep for the parser: the one request is refused, the connection stays.
    let error = write.finish().expect_err("too deep");
    assert_eq!((error.request_id, error.status), (Some(7), "invalid_data"));
    assert!(
        error.reason.starts_with("malformed JSON"),
        "{}",
        error.reason
    );

    let update = pending(r#"{"t":"d","d":{"r":8,"a":"om","b":{"p":"/w","d":{"x/y":1}}}}"#);
    let (path, scope) = update.scope().expect("an update is checked");
    assert_eq!(
        (path.to_string().as_str(), scope),
        ("/w", WriteScope::Below)
    );
    let empty = pending(r#"{"t":"d","d":{"r":9,"a":"m","b":{"p":"/w","d":{ }}}}"#);
    assert!(empty.scope().is_none(), "an empty update changes nothing");
    let priority = pending(r#"{"t":"d","d":{"r":3,"a":"o","b":{"p":"/a/.priority","d":1}}}"#);
    assert_eq!(
        priority.scope().map(|(p, _)| p.to_string()),
        Some("/a".into())
    );
}

#[test]
fn lazy_and_full_decoding_agree_on_errors() {
    let bad_path = decode_lazy(r#"{"t":"d","d":{"r":2,"a":"p","b":{"p":"/a.b","d":1}}}"#)
        .expect_err("bad path");
    assert_eq!(
        (bad_path.request_id, bad_path.status),
        (Some(2), "invalid_data")
    );
    let bad_body = decode_lazy(r#"{"t":"d","d":{"r":4,"a":"m","b":[1]}}"#).expect_err("bad body");
    assert_eq!(bad_body.reason, "the body `b` must be an object");
    let no_id = decode_lazy(r#"{"t":"d","d":{"a":"p","b":{}}}"#).expect_err("no r");
    assert_eq!(no_id.request_id, None);
    assert!(matches!(
        decode_lazy(r#"{"t":"d","d":{"r":1,"a":"q","b":{"p":"/x"}}}"#),
        Ok(Decoded::Message(ClientMessage::Request {
            request_id: 1,
            ..
        }))
    ));
}
