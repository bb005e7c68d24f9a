//! Handling one decoded request of a connection, and delivering the effects it causes.

use hearth_sync::{
    AuthState, Effect, Effects, PreparedMerge, PreparedSet, Reply, Request, Status, WritePrecheck,
};
use hearth_wire::{
    decode_lazy, encode_auth_revoked, encode_reply, encode_reply_status, encode_reply_value,
    without_lone_surrogates, ClientMessage, ClientRequest, Decoded, PendingWrite, WireError, PONG,
};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::audit::Origin;
use crate::caller_limits::LimitKind;
use crate::cluster::fence::CLAIM_WAIT_LIMIT;
use crate::effects::{route_effects, route_effects_from};
use crate::outbound::ConnHandle;
use crate::profile::Operation;
use crate::state::Owner;
use hearth_auth::{authenticate_with, now_secs};
use hearth_ground::close::CloseReason;
use hearth_ground::metrics::labels::{Outcome, RequestKind};
use hearth_net::offload::OFF_THREAD_PARSE_BYTES;
use hearth_net::time::now_ms;

/// What became of an inbound frame.
pub enum Handled {
    Done,
    /// A message to finish later ([`finish_deferred`]) and then hand to
    /// [`on_large_decoded`], before the connection's next message: a large one, decoded off
    /// the shard's thread (see [`OFF_THREAD_PARSE_BYTES`]), or one that waits for this node's
    /// claim on its database (a cluster's new database, `cluster::fence`).
    ParseOffThread(LargeMessage),
}

/// A deferred message and what is needed to refuse it, if it is a write, before its data is
/// parsed: everything the shard's thread would do with it, without touching its text.
pub struct LargeMessage {
    text: String,
    precheck: Option<WritePrecheck>,
    /// The claim to wait for first, and on which database.
    claim: Option<(hearth_cluster::Placement, String)>,
    /// Whether to read etcd again first: another node sent the message here as to the
    /// database's owner while this node's view names another one.
    refresh: bool,
}

/// How long a message another node sent here as to its database's owner waits for this
/// node's view of etcd to be read again, when that view names another owner: the two nodes'
/// views differ for a moment after a claim changes hands (a planned move), and the edge's
/// may be the newer one.
pub const VIEW_REFRESH_LIMIT: std::time::Duration = std::time::Duration::from_millis(500);

/// What the off-thread decoding of a [`LargeMessage`] gives.
pub enum LargeDecoded {
    /// The reply to a write its connection could never be allowed; its data was not parsed.
    Refused {
        reply: String,
        kind: RequestKind,
    },
    Decoded(Result<ClientMessage, WireError>),
}

/// Handles one whole message of a connection whose database this core owns; the connection's
/// socket may be here or on another core. An error means the connection must close with that
/// reason.
pub fn on_message(
    owner: &Owner,
    handle: &ConnHandle,
    message: String,
) -> Result<Handled, CloseReason> {
    owner.counters().message_in();
    let fenced = fence_session_database(owner, handle);
    let message = without_lone_surrogates(message);
    if let Some(placement) = owner.config().cluster.as_ref().filter(|_| fenced) {
        // Nobody holds the database yet and it is placed here: this message and the
        // connection's next wait for the claim instead of a write being refused. (Looked
        // at only while the fence refuses writes, so a claimed database pays nothing.)
        let forwarded = handle.id & (1 << 63) != 0;
        let refresh = forwarded && placement.claimed_elsewhere(&handle.namespace);
        if refresh || placement.claim_pending(&handle.namespace) {
            return Ok(Handled::ParseOffThread(LargeMessage {
                text: message,
                precheck: None,
                claim: Some((placement.clone(), handle.namespace.to_string())),
                refresh,
            }));
        }
    }
    if message.len() > OFF_THREAD_PARSE_BYTES {
        // Even the syntax check that finds a write's path costs O(size): all of it is done
        // off the thread, with the precheck of the moment.
        let precheck = owner
            .databases()
            .get(&handle.namespace)
            .and_then(|database| database.write_precheck(handle.id));
        return Ok(Handled::ParseOffThread(LargeMessage {
            text: message,
            precheck,
            claim: None,
            refresh: false,
        }));
    }
    let decoded = match decode_lazy(&message) {
        Ok(Decoded::Message(message)) => Ok(message),
        Ok(Decoded::Write(write)) => {
            if let Some(refusal) = refuse_early(owner, handle, &write) {
                handle.send_text(refusal);
                return Ok(Handled::Done);
            }
            write.finish()
        }
        Err(error) => Err(error),
    };
    on_decoded(owner, handle, decoded).map(|()| Handled::Done)
}

/// A session's messages find its database without a lookup: the cluster's claim is checked
/// before each (`cluster::fence`), so that a claim that lapsed refuses the next write and one
/// made since the session opened lets it through. Whether the fence refuses its writes now
/// (a database not in memory counts as refused: the claim decides).
fn fence_session_database(owner: &Owner, handle: &ConnHandle) -> bool {
    if owner.config().cluster.is_none() {
        return false;
    }
    owner
        .with_loaded(&handle.namespace, |database| {
            owner.fence(database);
            database.is_fenced()
        })
        .unwrap_or(true)
}

/// Finishes a message [`on_message`] deferred: waits for the claim it waits for (at most
/// [`CLAIM_WAIT_LIMIT`]), then decodes it, off the shard's thread when it is large. `None`
/// if the decoding thread failed.
pub async fn finish_deferred(mut message: LargeMessage) -> Option<LargeDecoded> {
    if let Some((placement, namespace)) = message.claim.take() {
        if message.refresh {
            placement.refreshed(VIEW_REFRESH_LIMIT).await;
        }
        placement.claim_settled(&namespace, CLAIM_WAIT_LIMIT).await;
    }
    if message.text.len() > OFF_THREAD_PARSE_BYTES {
        tokio::task::spawn_blocking(move || decode_large(message))
            .await
            .ok()
    } else {
        Some(decode_large(message))
    }
}

/// Decodes a large message, off the shard's thread (see [`Handled::ParseOffThread`]): a write
/// its connection could never make is refused before its data is parsed, as on the thread;
/// a put's or update's data is converted into the tree here too, and its JSON dropped here,
/// when the engine can take it so ([`PreparedSet`], [`PreparedMerge`]): both cost about as
/// much as the parse.
pub fn decode_large(message: LargeMessage) -> LargeDecoded {
    let decoded = match decode_lazy(&message.text) {
        Ok(Decoded::Message(message)) => Ok(message),
        Ok(Decoded::Write(write)) => {
            let refusal = match (&message.precheck, write.scope()) {
                (Some(precheck), Some((path, scope))) => precheck.check(path, scope).err(),
                _ => None,
            };
            if let Some(reply) = refusal {
                return LargeDecoded::Refused {
                    reply: encode_reply(write.request_id, &reply),
                    kind: RequestKind::of_write_action(write.action()),
                };
            }
            write.finish().map(prepare_write)
        }
        Err(error) => Err(error),
    };
    LargeDecoded::Decoded(decoded)
}

/// Handles a large message decoded off the shard's thread ([`finish_deferred`]); one that
/// could not be decoded closes the connection.
pub fn on_deferred_decoded(
    owner: &Owner,
    handle: &ConnHandle,
    decoded: Option<LargeDecoded>,
) -> Result<(), CloseReason> {
    match decoded {
        Some(decoded) => on_large_decoded(owner, handle, decoded),
        None => Err(CloseReason::new(
            CloseCode::Error,
            "a message could not be decoded",
        )),
    }
}

/// Handles what [`decode_large`] gave.
pub fn on_large_decoded(
    owner: &Owner,
    handle: &ConnHandle,
    decoded: LargeDecoded,
) -> Result<(), CloseReason> {
    // The claim may have changed while the message waited.
    fence_session_database(owner, handle);
    match decoded {
        LargeDecoded::Refused { reply, kind } => {
            owner.counters().request(kind, Outcome::Denied);
            handle.send_text(reply);
            Ok(())
        }
        LargeDecoded::Decoded(decoded) => on_decoded(owner, handle, decoded),
    }
}

/// A put or update with its data converted into the tree, when the engine can take it so.
fn prepare_write(decoded: ClientMessage) -> ClientMessage {
    let ClientMessage::Request {
        request_id,
        request,
    } = decoded
    else {
        return decoded;
    };
    let request = match *request {
        ClientRequest::Data(Request::Put { target, data, hash }) => {
            match PreparedSet::prepare(&target, &data) {
                Some(data) => ClientRequest::Data(Request::PutPrepared { target, data, hash }),
                None => ClientRequest::Data(Request::Put { target, data, hash }),
            }
        }
        ClientRequest::Data(Request::Merge { path, entries }) => {
            match PreparedMerge::prepare(&path, &entries) {
                Some(entries) => ClientRequest::Data(Request::MergePrepared { path, entries }),
                None => ClientRequest::Data(Request::Merge { path, entries }),
            }
        }
        other => other,
    };
    ClientMessage::Request {
        request_id,
        request: Box::new(request),
    }
}

/// Handles a decoded message, or answers the error that stopped its decoding.
pub fn on_decoded(
    owner: &Owner,
    handle: &ConnHandle,
    decoded: Result<ClientMessage, WireError>,
) -> Result<(), CloseReason> {
    match decoded {
        Ok(ClientMessage::Ping) => handle.send_text(PONG.to_owned()),
        Ok(ClientMessage::OtherControl) => {}
        Ok(ClientMessage::Request {
            request_id,
            request,
        }) => on_request(owner, handle, request_id, *request),
        Err(error) => match error.request_id {
            Some(request_id) => {
                let outcome = Outcome::of_status_word(error.status);
                owner.counters().request(RequestKind::Unknown, outcome);
                handle.send_text(encode_reply_status(request_id, error.status, &error.reason))
            }
            None => return Err(CloseReason::new(CloseCode::Policy, error.reason)),
        },
    }
    Ok(())
}

/// The reply to a write that its connection could never be allowed, whatever its data: the
/// full check's reply, given before the data (up to a whole message) is parsed.
fn refuse_early(owner: &Owner, handle: &ConnHandle, write: &PendingWrite<'_>) -> Option<String> {
    let (path, scope) = write.scope()?;
    let databases = owner.databases();
    let database = databases.get(&handle.namespace)?;
    let reply = database.precheck_write(handle.id, path, scope).err()?;
    let kind = RequestKind::of_write_action(write.action());
    owner
        .counters()
        .request(kind, Outcome::of_status(reply.status));
    Some(encode_reply(write.request_id, &reply))
}

fn on_request(owner: &Owner, handle: &ConnHandle, request_id: u64, request: ClientRequest) {
    let counters = &owner.counters();
    let reply = match request {
        ClientRequest::Stats => {
            counters.request(RequestKind::Stats, Outcome::Ok);
            encode_reply_status(request_id, "ok", "")
        }
        ClientRequest::AppCheck(token) => {
            counters.request(RequestKind::Stats, Outcome::Ok);
            match crate::app_check::verify(owner, token.as_deref()) {
                // The server verifies no App Check token: acknowledged.
                None => encode_reply_status(request_id, "ok", ""),
                Some((seen, refused)) => {
                    handle.set_app_check(seen);
                    match refused {
                        None => encode_reply_status(request_id, "ok", ""),
                        Some(error) => {
                            encode_reply_status(request_id, "invalid_token", &error.to_string())
                        }
                    }
                }
            }
        }
        ClientRequest::Unauth => {
            counters.request(RequestKind::Unauth, Outcome::Ok);
            handle.set_auth_expiry(None);
            set_auth(owner, handle, AuthState::Anonymous);
            encode_reply_status(request_id, "ok", "")
        }
        ClientRequest::Auth(auth) => {
            match authenticate_with(&auth, &owner.config().auth, now_secs()) {
                Ok(authenticated) => {
                    counters.request(RequestKind::Auth, Outcome::Ok);
                    handle.set_auth_expiry(authenticated.expires_at);
                    set_auth(owner, handle, authenticated.state);
                    encode_reply_value(request_id, "ok", &authenticated.reply)
                }
                Err(error) => {
                    counters.request(RequestKind::Auth, Outcome::Invalid);
                    encode_reply_status(request_id, "invalid_token", &error.to_string())
                }
            }
        }
        ClientRequest::Data(request) => {
            let kind = RequestKind::of(&request);
            if crate::app_check::refuses_session(owner, handle) {
                counters.request(kind, Outcome::Denied);
                return;
            }
            if let Some(reply) = refuse_read(owner, handle, request_id, &request) {
                counters.request(kind, Outcome::Denied);
                match reply {
                    Some(reply) => handle.send_text(reply),
                    None => handle.refuse_reads(),
                }
                return;
            }
            let mut effects = Effects::new();
            // A session past the rules' limit of connections is closed after its reply.
            let mut shut = None;
            let handled = owner.with_loaded(&handle.namespace, |database| {
                database.touched(now_ms());
                // The caller's own limits first: a caller past them uses nothing of the
                // database's quotas, which the other callers share.
                crate::sessions::follow_limits(owner, database);
                // A write's size is measured only where a limit or a quota asks for it, and
                // once for both.
                let limited = database.has_caller_limits();
                let quota = database.limits_writes() && !database.is_admin(handle.id);
                let size = match limited || quota {
                    true => crate::quotas::write_size(&request),
                    false => None,
                };
                if limited {
                    let bytes = size.map(|size| size.bytes);
                    if let Err(refusal) = admit_by_limits(database, handle.id, &request, bytes) {
                        if refusal.kind == LimitKind::Connections {
                            shut = Some(refusal.message.clone());
                        }
                        return Reply::error(Status::LimitExceeded, refusal.message);
                    }
                }
                if quota {
                    if let Some(size) = size {
                        if let Err(refusal) = database.admit_write(size, now_ms()) {
                            return Reply::error(Status::LimitExceeded, refusal.message);
                        }
                    }
                }
                let profiled = Operation::of_request(database, &request);
                let reply = database.handle(handle.id, request, now_ms(), &mut effects);
                if let Some(operation) = profiled {
                    operation.done(database, reply.status, None);
                }
                reply
            });
            let Some(reply) = handled else {
                return;
            };
            if let Some(reason) = shut {
                counters.request(kind, Outcome::of_status(reply.status));
                handle.send_text(encode_reply(request_id, &reply));
                handle.send_text(hearth_wire::encode_shutdown(&reason));
                handle.close(CloseReason::new(CloseCode::Policy, reason));
                return;
            }
            counters.request(kind, Outcome::of_status(reply.status));
            // A volatile write's reply waits for the tick's push of its value.
            let volatile = effects
                .iter()
                .any(|effect| matches!(effect, Effect::Volatile));
            route_effects_from(
                owner,
                &handle.namespace,
                effects,
                Origin::session(handle.transport(), handle.address()),
            );
            if volatile {
                let reply = encode_reply(request_id, &reply);
                owner
                    .volatile()
                    .hold_reply(&handle.namespace, handle.id, reply);
                return;
            }
            encode_reply(request_id, &reply)
        }
    };
    handle.send_text(reply);
}

/// A read this node may not answer from its copy (`Placement::read_refusal`: it cannot
/// confirm its claim, or another node may hold newer data): a get is answered
/// `unavailable`; a listen is not answered, and the session closes once its other replies
/// have left (`replica::sync_set`), so that the SDK listens again where the database is.
/// `None` for anything else.
fn refuse_read(
    owner: &Owner,
    handle: &ConnHandle,
    request_id: u64,
    request: &hearth_sync::Request,
) -> Option<Option<String>> {
    let is_get = match request {
        hearth_sync::Request::Get { .. } => true,
        hearth_sync::Request::Listen { .. } => false,
        _ => return None,
    };
    let reason = owner
        .config()
        .cluster
        .as_ref()?
        .read_refusal(&handle.namespace)?;
    Some(is_get.then(|| encode_reply_status(request_id, "unavailable", &reason)))
}

/// The connection's credential expired: the client is told (`ac`), and from now on it is
/// anonymous, so listens it may no longer read are revoked.
pub fn expire_auth(owner: &Owner, handle: &ConnHandle) {
    handle.set_auth_expiry(None);
    handle.send_text(encode_auth_revoked(
        "expired_token",
        "Auth token is expired.",
    ));
    set_auth(owner, handle, AuthState::Anonymous);
}

/// Changes the connection's identity; listens it may no longer read are revoked first, so the
/// cancel pushes precede the auth reply. A caller who already holds as many connections as
/// the rules' limit allows is told so and the connection closes (`caller_limits`).
fn set_auth(owner: &Owner, handle: &ConnHandle, auth: AuthState) {
    let mut effects = Effects::new();
    let refused = owner.with_loaded(&handle.namespace, |database| {
        crate::sessions::follow_limits(owner, database);
        let refused = database.caller_signed_in(handle.id, &auth).err();
        database.set_auth(handle.id, auth, now_ms(), &mut effects);
        refused
    });
    route_effects(owner, &handle.namespace, effects);
    if let Some(refusal) = refused.flatten() {
        handle.send_text(hearth_wire::encode_shutdown(&refusal.message));
        handle.close(CloseReason::new(CloseCode::Policy, refusal.message));
    }
}

/// Admits a realtime request under the limits its database's rules declare per caller: an
/// anonymous session's first by its address's connections, a write by its path and size, a
/// new listen by the listens its caller holds.
/// `write_bytes`: a set's or an update's size, measured by the caller.
fn admit_by_limits(
    database: &mut crate::loaded::Loaded,
    conn: hearth_sync::ConnId,
    request: &Request,
    write_bytes: Option<u64>,
) -> Result<(), crate::caller_limits::LimitRefusal> {
    database.claim_caller(conn)?;
    let (path, bytes) = match request {
        Request::Listen { path, tag, .. } => {
            // Listening again where it listens replaces the listen: it takes no more room.
            return if database.holds_listen(conn, path, *tag) {
                Ok(())
            } else {
                database.admit_caller_listen(conn, path, *tag)
            };
        }
        Request::Put { target, .. } | Request::PutPrepared { target, .. } => {
            (&target.path, write_bytes)
        }
        Request::Merge { path, .. } | Request::MergePrepared { path, .. } => (path, write_bytes),
        // An onDisconnect operation is counted when it is queued: otherwise a caller could
        // write past its limits by connecting, queueing and leaving, again and again.
        Request::OnDisconnectPut { target, data } => {
            (&target.path, Some(crate::quotas::json_bytes(data)))
        }
        Request::OnDisconnectMerge { path, entries } => (
            path,
            Some(
                entries
                    .iter()
                    .map(|(_, value)| crate::quotas::json_bytes(value))
                    .sum(),
            ),
        ),
        _ => return Ok(()),
    };
    let bytes = bytes.unwrap_or(0);
    let caller = database.caller(conn);
    database.admit_caller_write(&caller, path, bytes, now_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_request(data: &str) -> Request {
        write_request("p", data)
    }

    fn write_request(action: &str, data: &str) -> Request {
        let message =
            format!(r#"{{"t":"d","d":{{"r":3,"a":"{action}","b":{{"p":"/a","d":{data}}}}}}}"#);
        let message = LargeMessage {
            text: message,
            precheck: None,
            claim: None,
            refresh: false,
        };
        match decode_large(message) {
            LargeDecoded::Decoded(Ok(ClientMessage::Request {
                request_id: 3,
                request,
            })) => match *request {
                ClientRequest::Data(request) => request,
                other => panic!("not a data request: {other:?}"),
            },
            _ => panic!("not a request"),
        }
    }

    #[test]
    fn large_writes_no_rule_allows_are_refused_where_they_are_decoded() {
        let mut database = hearth_sync::Database::new();
        database.set_access(hearth_sync::Access::Locked, 0, &mut Effects::new());
        database.connect(1);
        let precheck = database.write_precheck(1);
        assert!(precheck.is_some(), "an open connection has a precheck");
        let text = r#"{"t":"d","d":{"r":5,"a":"p","b":{"p":"/a","d":[1,2,3]}}}"#.to_owned();
        match decode_large(LargeMessage {
            text,
            precheck,
            claim: None,
            refresh: false,
        }) {
            LargeDecoded::Refused { reply, .. } => assert_eq!(
                reply,
                r#"{"t":"d","d":{"r":5,"b":{"s":"permission_denied","d":"Permission denied"}}}"#
            ),
            LargeDecoded::Decoded(decoded) => panic!("not refused: {decoded:?}"),
        }
        assert!(
            database.write_precheck(2).is_none(),
            "no connection, no precheck"
        );
    }

    #[test]
    fn large_puts_and_updates_are_converted_where_they_are_decoded() {
        assert!(matches!(
            put_request("[1, 2, 3]"),
            Request::PutPrepared { .. }
        ));
        // Server values are resolved by the engine, against the data of the commit; data the
        // engine refuses keeps its reply and its order.
        assert!(matches!(
            put_request(r#"{"t": {".sv": "timestamp"}}"#),
            Request::Put { .. }
        ));
        assert!(matches!(put_request(r#"{"a.b": 1}"#), Request::Put { .. }));
        assert!(matches!(
            write_request("m", r#"{"b": [1, 2], "c/d": 3}"#),
            Request::MergePrepared { .. }
        ));
        assert!(matches!(
            write_request("m", r#"{"b": {".sv": "timestamp"}}"#),
            Request::Merge { .. }
        ));
    }
}
