//! Long polling (`/.lp`): the transport the web SDK uses when it cannot open a WebSocket
//! (`forceLongPolling()`, or a WebSocket that failed before on this browser), a JSONP-style
//! protocol of script-tag GETs. User documentation: `docs/long-polling.md`.
//!
//! - `hearth_ground::longpoll_request` (beside this folder, so that a shard's inbox can carry a
//!   request without knowing long polling): a request's query read into a start, a poll, the
//!   disconnect frame or a disconnect;
//! - `longpoll_session` (beside this folder, so that the shard can keep the sessions without
//!   knowing the tasks that run them): a session on its home core, an edge connection whose
//!   outbox is a mailbox that polls empty, what a poll does to it and the state of its move
//!   to a WebSocket, behind its methods; in it, `segments` (the client's messages put back
//!   together from the segments of its polls) and `script` (the answers, scripts that call
//!   the page's callbacks, and the messages taken out of the frames the owner encodes);
//! - `task`: a session opened, run and ended;
//! - `secondary`, `switch`: a session's move to a WebSocket (the SDK's upgrade), on the
//!   WebSocket's side, and the polls answered with the close after it.
//!
//! A session is a session like a WebSocket one for everything above the transport, so
//! everything but the transport (rules, listens, onDisconnect, budgets, durability) is the
//! WebSocket path's.

pub mod secondary;
pub(crate) mod switch;
pub(crate) mod task;

use std::rc::Rc;

use hyper::http::request::Parts;
use hyper::Method;
use tokio::sync::oneshot;

use crate::front::Front;
use crate::longpoll_session::script::{self, script_answer};
use hearth_ground::longpoll_request::{parse, Forwarded, LpRequest, SessionRef};
use hearth_ground::namespace::resolve;
use hearth_ground::rest::{PeerAddress, RestResponse};
use hearth_net::query_string::QueryString;

/// The path of every long-polling request.
pub const LONG_POLL_PATH: &str = "/.lp";

/// Answers a request of `/.lp`, or `None` for any other path.
pub async fn answer(front: &Rc<Front>, parts: &Parts) -> Option<RestResponse> {
    if parts.uri.path() != LONG_POLL_PATH {
        return None;
    }
    if parts.method != Method::GET && parts.method != Method::POST {
        return Some(RestResponse::error(
            405,
            "long polling takes GET (and POST for the goodbye)",
        ));
    }
    let query = QueryString::parse(parts.uri.query().unwrap_or(""));
    let request = match parse(&query) {
        Ok(request) => request,
        Err(error) => return Some(RestResponse::error(400, error.to_string())),
    };
    let host = parts
        .headers
        .get(hyper::header::HOST)
        .and_then(|host| host.to_str().ok());
    Some(match request {
        LpRequest::Start { callback, previous } => {
            match resolve(query.get("ns"), host, &front.config().default_namespace) {
                Ok(namespace) => {
                    let host = host.map_or_else(
                        || {
                            front
                                .config()
                                .listen
                                .first()
                                .map_or_else(String::new, ToString::to_string)
                        },
                        str::to_owned,
                    );
                    let app_check = hearth_ground::app_check::app_check_token(
                        query.get("ac"),
                        parts
                            .headers
                            .get(hearth_ground::app_check::APP_CHECK_HEADER)
                            .and_then(|value| value.to_str().ok()),
                    );
                    // The client's: the peer of the HTTP connection the start came on.
                    let address = PeerAddress::of(parts);
                    task::start(
                        front, callback, namespace, previous, host, app_check, address,
                    )
                }
                // As on a WebSocket: `s` tells the client not to retry a name that cannot be.
                Err(error) => script_answer(script::data(
                    callback,
                    0,
                    &[hearth_wire::encode_shutdown(&error.to_string())],
                )),
            }
        }
        LpRequest::DisconnectFrame => RestResponse {
            status: 200,
            content_type: Some(script::HTML_TYPE),
            headers: vec![
                ("cache-control", "no-store".into()),
                (
                    "content-security-policy",
                    script::DISCONNECT_FRAME_POLICY.into(),
                ),
            ],
            body: script::DISCONNECT_FRAME.into(),
        },
        request @ (LpRequest::Poll { .. } | LpRequest::Disconnect { .. }) => {
            let (reply, answer) = oneshot::channel();
            let home = home_core(&request);
            match home {
                Some(home) if home == front.index() => on_request(front, request, reply),
                Some(home) if home < front.shard_count() => {
                    front
                        .inboxes()
                        .forward_long_poll(home, Forwarded { request, reply });
                }
                _ => unknown_session(reply),
            }
            answer
                .await
                .unwrap_or_else(|_| RestResponse::error(503, "the session's core is unavailable"))
        }
    })
}

/// Handles a poll or a disconnect on its session's home core.
pub fn on_request(front: &Front, request: LpRequest, reply: oneshot::Sender<RestResponse>) {
    let (session_ref, segments) = match request {
        LpRequest::Poll { session, segments } => (session, Some(segments)),
        LpRequest::Disconnect { session } => (session, None),
        LpRequest::Start { .. } | LpRequest::DisconnectFrame => return unknown_session(reply),
    };
    let Some(session) = front
        .long_polls()
        .get(&session_ref.id)
        .filter(|session| session.accepts(&session_ref.password))
    else {
        return unknown_session(reply);
    };
    match segments {
        Some(segments) => session.poll(segments, reply),
        None => {
            session.end(None);
            let _ = reply.send(RestResponse::empty(204));
        }
    }
}

/// The core a session's id names.
fn home_core(request: &LpRequest) -> Option<usize> {
    let (LpRequest::Poll {
        session: SessionRef { id, .. },
        ..
    }
    | LpRequest::Disconnect {
        session: SessionRef { id, .. },
    }) = request
    else {
        return None;
    };
    id.split_once('-')?.0.parse().ok()
}

/// An unknown session (or a wrong password, which is told apart from it in no way): a 404,
/// which makes the SDK's script tag fail, and the SDK start over with a new session.
fn unknown_session(reply: oneshot::Sender<RestResponse>) {
    let _ = reply.send(RestResponse::error(404, "no such long-polling session"));
}
