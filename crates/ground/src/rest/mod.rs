//! The REST API (spec §15): `GET`, `PUT`, `POST`, `PATCH` and `DELETE` on `/<path>.json`, the
//! emulator's rules endpoint, and the parts of event streaming that are not about the stream
//! itself (see `sse`).
//!
//! A request is handled in three steps. `parse` turns the request head into a [`RestRequest`]
//! (every parameter checked, the credential resolved) without touching a database, so it can
//! run on whichever shard the connection lives on. The HTTP layer then reads the body within
//! the request's size limit and builds a [`RestCall`], plain data that may cross to the shard
//! that owns the database. There the owner's `execute` (`owner/rest/`) applies it and returns
//! a [`RestResponse`], again plain data. This module is that vocabulary and the parsing: it
//! knows no database, shard or role, so every role may use it. `cache` holds the serialized
//! answers the owner keeps.

pub mod audit_api;
pub mod cache;
mod params;
mod parse;
pub mod precheck;
mod response;
pub mod settings_api;
pub mod triggers_api;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use hearth_query::RestQuery;
use hearth_sync::{AuthState, PreparedSet, WriteTarget};
use hearth_wire::{parse_bounded, JsonStyle, ParseError};
use serde_json::Value;

pub use params::{FeedStart, WriteSizeLimit};
pub use parse::{parse_request, require_admin, DATA_METHODS};
pub use response::{RestResponse, JAVASCRIPT};
pub use settings_api::{SettingName, SettingsEndpoint};

/// The largest request body accepted for a write, whatever `writeSizeLimit` says: production's
/// REST limit (spec §17).
pub const MAX_REST_BODY_BYTES: usize = 256 * 1024 * 1024;

/// The largest value one read may return, by the tree's size estimate: production's limit for
/// a single response (spec §17). Larger reads are refused before anything is serialized.
pub const MAX_REST_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// A checked request, before its body is read.
#[derive(Debug)]
pub struct RestRequest {
    pub namespace: String,
    pub auth: AuthState,
    /// When the request's credential expires (seconds since the epoch), if it does.
    pub auth_expires_at: Option<u64>,
    pub endpoint: Endpoint,
    /// The client's address as the node that accepted it saw it ([`PeerAddress`]).
    pub address: Option<std::net::IpAddr>,
}

impl RestRequest {
    /// A read's `timeout`.
    pub fn read_timeout(&self) -> Option<Duration> {
        match &self.endpoint {
            Endpoint::Data(data) if !data.method.is_write() => data.timeout,
            _ => None,
        }
    }
}

/// What a request asks for.
#[derive(Debug)]
pub enum Endpoint {
    /// `GET /`: a sign of life for test runners and load balancers.
    Status,
    /// A CORS preflight (`OPTIONS`).
    Preflight { request_headers: Option<String> },
    /// `GET /.settings/rules.json` (`format=strict` strips comments).
    RulesGet { strict: bool },
    /// `PUT /.settings/rules.json`.
    RulesPut,
    /// `GET /.settings/functionTriggers.json`: the registered database triggers.
    TriggersGet,
    /// `POST /.settings/functionTriggers.json`: a Functions emulator registers a trigger
    /// (`hearth_triggers::registration`).
    TriggerRegister,
    /// `GET /.inspect/coverage` (an HTML page) or `/.inspect/coverage.json`: the emulator's
    /// rules coverage report (`settings::coverage`).
    Coverage { html: bool },
    /// `POST /.admin/backup` (admins only): the server's backup archive (`backup`).
    Backup,
    /// A read, write or stream of data.
    Data(Box<DataRequest>),
    /// `GET /.admin/databases`: every database of every shard (admins only).
    AdminDatabases,
    /// `GET /.inspect/databases.json`: the emulator's list of its databases, as
    /// firebase-tools' export reads it (admins only).
    InspectDatabases,
    /// The database's settings and ruleset history (`settings_api`, admins only).
    Settings(SettingsEndpoint),
    /// `GET /.settings/auditTrail.json`: entries of the database's audit trail
    /// (`audit_api`, admins only).
    AuditQuery(Box<hearth_audit::AuditQuery>),
    /// `DELETE /.settings/auditTrail.json?uid=U`: erases a user's entries (admins only).
    AuditErase { uid: String },
    /// `/.admin/triggers...` (admins only): this node's declared triggers, their state and
    /// dead letters (`triggers_api`).
    Triggers(TriggersEndpoint),
}

/// What `/.admin/triggers...` asks of this node's outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggersEndpoint {
    /// `GET /.admin/triggers`: each trigger's counts, lag and databases.
    Status,
    /// `GET /.admin/triggers/NAME/dead`: its dead letters.
    DeadLetters { name: String },
    /// `POST /.admin/triggers/NAME/retry`: its dead letters sent again.
    Retry { name: String },
    /// `DELETE /.admin/triggers/NAME/dead`: its dead letters dropped.
    Drop { name: String },
    /// `GET /.admin/triggers/declaration`: the triggers file in effect.
    Declaration,
    /// `PUT /.admin/triggers/declaration`: a new triggers file, written and applied.
    Declare,
}

impl Endpoint {
    /// The most body bytes this request may send, or `None` when it takes no body.
    pub fn body_limit(&self) -> Option<usize> {
        match self {
            Endpoint::RulesPut => Some(hearth_rules::MAX_RULES_BYTES),
            Endpoint::TriggerRegister => Some(hearth_triggers::MAX_REGISTRATION_BYTES),
            Endpoint::Data(data) => data.body_limit(),
            Endpoint::Settings(endpoint) => endpoint.body_limit(),
            Endpoint::Triggers(TriggersEndpoint::Declare) => {
                Some(hearth_triggers::declared::MAX_DECLARATION_BYTES)
            }
            _ => None,
        }
    }
}

/// The method of a data request, after `X-HTTP-Method-Override`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataMethod {
    Get,
    Put,
    Post,
    Patch,
    Delete,
}

impl DataMethod {
    pub fn is_write(self) -> bool {
        self != DataMethod::Get
    }

    fn takes_body(self) -> bool {
        matches!(self, DataMethod::Put | DataMethod::Post | DataMethod::Patch)
    }
}

/// A data request with every parameter checked.
#[derive(Debug, Clone)]
pub struct DataRequest {
    pub method: DataMethod,
    /// The location; `priority_only` for paths ending in `/.priority`.
    pub target: WriteTarget,
    /// `orderBy` and its filters, for reads and streams.
    pub query: Option<RestQuery>,
    pub shallow: bool,
    /// `format=export` and `print=pretty`.
    pub style: JsonStyle,
    /// `print=silent`: answer 204 without a body.
    pub silent: bool,
    /// `X-Firebase-ETag: true`.
    pub want_etag: bool,
    pub if_match: Option<String>,
    pub if_none_match: Option<String>,
    pub write_limit: WriteSizeLimit,
    /// `timeout`, applied to reads.
    pub timeout: Option<Duration>,
    /// `download`: the file name of a `Content-Disposition: attachment`.
    pub download: Option<String>,
    /// `callback`: JSONP.
    pub callback: Option<String>,
    /// `Accept: text/event-stream` on a `GET`.
    pub stream: bool,
    /// `disableTriggers=true` (the emulator suite's import): the write reports no changes to
    /// the database's triggers. Honoured for admins only: a client may not skip the server's
    /// own logic.
    pub disable_triggers: bool,
    /// `changesSince` (or, when it is given, a reconnecting client's `Last-Event-ID`): the
    /// stream is a change feed from there (docs/change-feed.md), not a listen.
    pub changes_since: Option<FeedStart>,
    /// `GET /.settings/profile.json` as an event stream: the database's profiler
    /// (docs/profiler.md), not a listen.
    pub profile: bool,
    /// Its App Check token (`X-Firebase-AppCheck`, or `ac=` as the JavaScript SDK's REST
    /// client sends it), which the owner verifies (docs/app-check.md).
    pub app_check: Option<String>,
    /// The client's address as the edge saw it (its connection's peer, [`PeerAddress`]), for
    /// limits keyed by address; `None` where unknown.
    pub address: Option<IpAddr>,
}

/// The address of the client an HTTP request came from (its connection's peer; no
/// `X-Forwarded-For`: there is no trusted proxy to take it from), put in the request's
/// extensions by the transport that accepted the connection, or by the node that received a
/// forwarded request from the head's. [`parse_request`] copies it into [`DataRequest::address`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddress(pub IpAddr);

impl PeerAddress {
    /// The address in `parts`' extensions, if the transport put one there.
    pub fn of(parts: &hyper::http::request::Parts) -> Option<IpAddr> {
        parts.extensions.get::<PeerAddress>().map(|peer| peer.0)
    }
}

impl DataRequest {
    /// The body limit of this request: the hard limit, lowered by `writeSizeLimit`.
    pub fn body_limit(&self) -> Option<usize> {
        if !self.method.takes_body() {
            return None;
        }
        Some(
            self.write_limit
                .max_bytes()
                .map_or(MAX_REST_BODY_BYTES, |limit| limit.min(MAX_REST_BODY_BYTES)),
        )
    }
}

/// A request ready to run on the shard that owns its database: checked, with its body read.
/// Plain data, so that it can be sent to another shard.
#[derive(Debug)]
pub struct RestCall {
    pub namespace: String,
    pub auth: AuthState,
    pub op: CallOp,
    /// When the request arrived, for `timeout`.
    pub started: Instant,
    /// The client's address, for what the server records of who changed something.
    pub address: Option<std::net::IpAddr>,
}

/// The work of a call.
#[derive(Debug)]
pub enum CallOp {
    RulesGet {
        strict: bool,
    },
    RulesPut {
        text: String,
    },
    Coverage {
        html: bool,
    },
    TriggersGet,
    /// The registration's body, as sent.
    TriggerRegister {
        body: Vec<u8>,
    },
    /// A request of the settings document, with its body as sent.
    Settings {
        endpoint: SettingsEndpoint,
        body: Vec<u8>,
    },
    Data {
        request: Box<DataRequest>,
        /// The parsed body of `PUT`, `POST` and `PATCH`.
        body: Option<Value>,
        /// The body's size in bytes, for `writeSizeLimit`.
        body_bytes: usize,
        /// A large PUT's body converted into the tree off the shard's thread, in place of
        /// `body` (see [`prepare_large_put`]).
        prepared: Option<PreparedSet>,
    },
}

/// Converts a PUT's parsed body into the tree, for a call built off the shard's thread: the
/// conversion, and dropping the JSON, cost about as much as the parse. Bodies the engine must
/// resolve itself (server values) or refuse stay as they are.
pub fn prepare_large_put(mut call: RestCall) -> RestCall {
    if let CallOp::Data {
        request,
        body,
        prepared,
        ..
    } = &mut call.op
    {
        if request.method == DataMethod::Put {
            if let Some(set) = body
                .as_ref()
                .and_then(|value| PreparedSet::prepare(&request.target, value))
            {
                *body = None;
                *prepared = Some(set);
            }
        }
    }
    call
}

/// Builds the call of a request whose body (if any) has been read.
pub fn make_call(
    request: RestRequest,
    body: Option<Vec<u8>>,
    started: Instant,
) -> Result<RestCall, RestResponse> {
    let op = match request.endpoint {
        Endpoint::RulesGet { strict } => CallOp::RulesGet { strict },
        Endpoint::Coverage { html } => CallOp::Coverage { html },
        Endpoint::TriggersGet => CallOp::TriggersGet,
        Endpoint::TriggerRegister => CallOp::TriggerRegister {
            body: body.unwrap_or_default(),
        },
        Endpoint::Settings(endpoint) => CallOp::Settings {
            endpoint,
            body: body.unwrap_or_default(),
        },
        Endpoint::RulesPut => {
            let text = String::from_utf8(body.unwrap_or_default())
                .map_err(|_| RestResponse::error(400, "the rules are not UTF-8 text"))?;
            CallOp::RulesPut { text }
        }
        Endpoint::Data(data) => {
            let body_bytes = body.as_ref().map_or(0, Vec::len);
            let body = match body {
                Some(bytes) if data.method.takes_body() => Some(parse_json_body(&bytes)?),
                _ => None,
            };
            CallOp::Data {
                request: data,
                body,
                body_bytes,
                prepared: None,
            }
        }
        Endpoint::Status
        | Endpoint::Preflight { .. }
        | Endpoint::AdminDatabases
        | Endpoint::InspectDatabases
        | Endpoint::Backup
        | Endpoint::AuditQuery(_)
        | Endpoint::Triggers(_)
        | Endpoint::AuditErase { .. } => {
            return Err(RestResponse::error(500, "not a database request"));
        }
    };
    Ok(RestCall {
        namespace: request.namespace,
        auth: request.auth,
        op,
        started,
        address: request.address,
    })
}

/// Builds the call of a request, parsing a large body off the shard's thread (and converting
/// a PUT's into the tree there too). The connection's next request waits for this one (hyper
/// serves a connection's requests one at a time), so their order holds.
pub async fn build_call(
    parsed: RestRequest,
    bytes: Option<Vec<u8>>,
    started: Instant,
) -> Result<RestCall, RestResponse> {
    if bytes
        .as_ref()
        .is_none_or(|b| b.len() <= hearth_net::offload::OFF_THREAD_PARSE_BYTES)
    {
        return make_call(parsed, bytes, started);
    }
    tokio::task::spawn_blocking(move || make_call(parsed, bytes, started).map(prepare_large_put))
        .await
        .unwrap_or_else(|_| {
            Err(RestResponse::error(
                500,
                "the request body could not be parsed",
            ))
        })
}

/// Production's answer to a body that is not JSON.
pub const INVALID_JSON: &str = "Invalid data; couldn't parse JSON object, array, or value.";

fn parse_json_body(bytes: &[u8]) -> Result<Value, RestResponse> {
    // serde_json refuses nesting deeper than 128 levels, so a hostile body cannot overflow
    // the stack; the tree refuses anything deeper than its own limit afterwards. The parse
    // may take at most a fixed multiple of the body's size in memory. A lone surrogate escape
    // (half an emoji from `JSON.stringify`) is stored as U+FFFD, as over WebSocket, instead
    // of refusing the whole body.
    let bytes = hearth_tree::replace_lone_surrogates(bytes);
    let text = std::str::from_utf8(&bytes).map_err(|_| RestResponse::error(400, INVALID_JSON))?;
    parse_bounded(text).map_err(|error| match error {
        ParseError::Malformed(_) => RestResponse::error(400, INVALID_JSON),
        too_costly @ ParseError::TooCostly { .. } => {
            RestResponse::error(400, too_costly.to_string())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_with_a_lone_surrogate_is_stored_with_a_replacement_character() {
        let value = parse_json_body(br#"{"k\ud83d":"x\ude00"}"#).expect("parses");
        assert_eq!(value, serde_json::json!({"k\u{fffd}": "x\u{fffd}"}));
        assert!(parse_json_body(br#""\ud800"#).is_err());
    }
}
