//! Reading a REST request head into a [`RestRequest`]: the endpoint, the method (after
//! `X-HTTP-Method-Override`), the namespace, the credential and every parameter, each checked
//! as spec §15 describes. Pure: no database is touched, so this runs on the shard that
//! received the request even when another shard owns the database.

use hearth_query::{QueryParams, RestQueryText};
use hearth_sync::{AuthState, WriteTarget};
use hearth_tree::replace_lone_surrogates_str;
use hearth_wire::{AuthRequest, JsonStyle};
use hyper::http::request::Parts;
use hyper::Method;
use serde_json::Value;

use super::params::{
    parse_callback, parse_download, parse_format, parse_print, parse_shallow, parse_timeout,
    FeedStart, Print, WriteSizeLimit,
};
use super::response::RestResponse;
use super::settings_api;
use super::{DataMethod, DataRequest, Endpoint, PeerAddress, RestRequest, TriggersEndpoint};
use crate::namespace::resolve;
use hearth_auth::{authenticate_with, now_secs, AuthConfig};
use hearth_net::query_string::{percent_decode, QueryString};

/// The methods data paths accept, for `Allow` headers.
pub const DATA_METHODS: &str = "GET, HEAD, PUT, POST, PATCH, DELETE, OPTIONS";

fn bad_request(message: impl AsRef<str>) -> RestResponse {
    RestResponse::error(400, message)
}

/// Reads a request head. An `Err` is the complete answer (400, 401, 404 or 405).
pub fn parse_request(
    parts: &Parts,
    auth_config: &AuthConfig,
    default_namespace: &str,
) -> Result<RestRequest, RestResponse> {
    let query = QueryString::parse(parts.uri.query().unwrap_or(""));
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    if parts.method == Method::OPTIONS {
        return Ok(RestRequest {
            namespace: default_namespace.to_owned(),
            auth: AuthState::Anonymous,
            auth_expires_at: None,
            endpoint: Endpoint::Preflight {
                request_headers: header("access-control-request-headers").map(str::to_owned),
            },
            address: PeerAddress::of(parts),
        });
    }
    let path = parts.uri.path();
    // The server's own endpoints are about no database: a Host that names none is no error.
    let admin = path.starts_with("/.admin/");
    // Firebase's metadata API names the database in the path (`/namespaces/NS/...`).
    let metadata = path.starts_with("/namespaces/");
    let mut namespace = match resolve(query.get("ns"), header("host"), default_namespace) {
        Ok(namespace) => namespace,
        Err(_) if admin || metadata => default_namespace.to_owned(),
        Err(error) => return Err(RestResponse::error(404, error.to_string())),
    };
    let (auth, auth_expires_at) = resolve_auth(header("authorization"), &query, auth_config)?;
    let endpoint = if metadata {
        if auth != AuthState::Admin {
            return Err(RestResponse::error(401, "Permission denied"));
        }
        let (named, endpoint) = settings_api::metadata(&parts.method, path)?;
        namespace = named;
        Endpoint::Settings(endpoint)
    } else if admin {
        admin_endpoint(parts, path, &auth)?
    } else if path == "/" {
        if parts.method != Method::GET && parts.method != Method::HEAD {
            return Err(method_not_allowed("GET, HEAD, OPTIONS"));
        }
        Endpoint::Status
    } else if path == "/.ws" {
        return Err(bad_request(
            "/.ws is the realtime endpoint: it needs a WebSocket upgrade as the first request of a connection",
        ));
    } else if path == "/.inspect/databases.json" {
        if auth != AuthState::Admin {
            return Err(RestResponse::error(401, "Permission denied"));
        }
        if parts.method != Method::GET && parts.method != Method::HEAD {
            return Err(method_not_allowed("GET, HEAD, OPTIONS"));
        }
        Endpoint::InspectDatabases
    } else if path == "/.inspect/coverage" || path == "/.inspect/coverage.json" {
        // As the emulator's: no credential asked. It answers only in development, where any
        // client may be an admin (the `owner` token), and shows rule text and outcomes.
        if parts.method != Method::GET && parts.method != Method::HEAD {
            return Err(method_not_allowed("GET, HEAD, OPTIONS"));
        }
        Endpoint::Coverage {
            html: path == "/.inspect/coverage",
        }
    } else if path == "/.settings" || path.starts_with("/.settings/") {
        settings_endpoint(parts, path, &query, &auth)?
    } else if let Some(data_path) = path.strip_suffix(".json") {
        Endpoint::Data(Box::new(data_request(
            parts,
            data_path,
            &query,
            auth_config.dev,
        )?))
    } else {
        return Err(RestResponse::error(
            404,
            format!("{path} is not a REST endpoint: data paths end in .json"),
        ));
    };
    Ok(RestRequest {
        namespace,
        auth,
        auth_expires_at,
        endpoint,
        address: PeerAddress::of(parts),
    })
}

/// Whether the query is a limit and nothing else (no `orderBy`, no range).
fn is_limit_alone(query: &RestQueryText) -> bool {
    (query.limit_to_first.is_some() || query.limit_to_last.is_some())
        && query.order_by.is_none()
        && query.start_at.is_none()
        && query.start_after.is_none()
        && query.end_at.is_none()
        && query.end_before.is_none()
        && query.equal_to.is_none()
}

fn method_not_allowed(allow: &'static str) -> RestResponse {
    RestResponse::error(405, "Method not allowed").with_header("allow", allow)
}

fn settings_endpoint(
    parts: &Parts,
    path: &str,
    query: &QueryString,
    auth: &AuthState,
) -> Result<Endpoint, RestResponse> {
    // Settings are the database owner's: only admins may read or change them.
    if *auth != AuthState::Admin {
        return Err(RestResponse::error(401, "Permission denied"));
    }
    if path == "/.settings/functionTriggers.json" {
        return match parts.method {
            Method::GET | Method::HEAD => Ok(Endpoint::TriggersGet),
            Method::POST => Ok(Endpoint::TriggerRegister),
            _ => Err(method_not_allowed("GET, HEAD, POST, OPTIONS")),
        };
    }
    if let Some(endpoint) = settings_api::settings_document(&parts.method, path) {
        return endpoint.map(Endpoint::Settings);
    }
    if path == super::audit_api::AUDIT_TRAIL_PATH {
        return super::audit_api::endpoint(parts, query);
    }
    if path == "/.settings/profile.json" {
        if parts.method != Method::GET {
            return Err(method_not_allowed("GET, OPTIONS"));
        }
        let mut request = data_request(parts, "", query, false)?;
        if !request.stream {
            return Err(bad_request(
                "the profiler answers an event stream: ask with Accept: text/event-stream",
            ));
        }
        if request.query.is_some() || request.changes_since.is_some() {
            return Err(bad_request("the profiler takes no query parameters"));
        }
        request.profile = true;
        return Ok(Endpoint::Data(Box::new(request)));
    }
    if path != "/.settings/rules.json" {
        return Err(RestResponse::error(404, format!("{path} does not exist")));
    }
    match parts.method {
        Method::GET | Method::HEAD => Ok(Endpoint::RulesGet {
            strict: query.get("format") == Some("strict"),
        }),
        Method::PUT => Ok(Endpoint::RulesPut),
        _ => Err(method_not_allowed("GET, HEAD, PUT, OPTIONS")),
    }
}

/// `/.admin/...`: the server's administration, for admins only (401 without a credential,
/// 403 with one that is not an admin's).
fn admin_endpoint(parts: &Parts, path: &str, auth: &AuthState) -> Result<Endpoint, RestResponse> {
    match auth {
        AuthState::Admin => {}
        AuthState::Anonymous => {
            return Err(RestResponse::error(401, "an admin credential is required"))
        }
        AuthState::User(_) => return Err(RestResponse::error(403, "Permission denied")),
    }
    match (path, &parts.method) {
        ("/.admin/databases", &Method::GET | &Method::HEAD) => Ok(Endpoint::AdminDatabases),
        ("/.admin/databases", _) => Err(method_not_allowed("GET, HEAD, OPTIONS")),
        ("/.admin/backup", &Method::POST) => Ok(Endpoint::Backup),
        ("/.admin/backup", _) => Err(method_not_allowed("POST, OPTIONS")),
        ("/.admin/triggers", &Method::GET | &Method::HEAD) => {
            Ok(Endpoint::Triggers(TriggersEndpoint::Status))
        }
        ("/.admin/triggers", _) => Err(method_not_allowed("GET, HEAD, OPTIONS")),
        ("/.admin/triggers/declaration", &Method::GET | &Method::HEAD) => {
            Ok(Endpoint::Triggers(TriggersEndpoint::Declaration))
        }
        ("/.admin/triggers/declaration", &Method::PUT) => {
            Ok(Endpoint::Triggers(TriggersEndpoint::Declare))
        }
        ("/.admin/triggers/declaration", _) => Err(method_not_allowed("GET, HEAD, PUT, OPTIONS")),
        _ => match triggers_endpoint(path, &parts.method) {
            Some(endpoint) => endpoint,
            None => Err(RestResponse::error(404, format!("{path} does not exist"))),
        },
    }
}

/// `/.admin/triggers/NAME/dead` and `/.admin/triggers/NAME/retry`.
fn triggers_endpoint(path: &str, method: &Method) -> Option<Result<Endpoint, RestResponse>> {
    let rest = path.strip_prefix("/.admin/triggers/")?;
    let (name, action) = rest.split_once('/')?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let name = name.to_owned();
    Some(match (action, method) {
        ("dead", &Method::GET | &Method::HEAD) => {
            Ok(Endpoint::Triggers(TriggersEndpoint::DeadLetters { name }))
        }
        ("dead", &Method::DELETE) => Ok(Endpoint::Triggers(TriggersEndpoint::Drop { name })),
        ("dead", _) => Err(method_not_allowed("GET, HEAD, DELETE, OPTIONS")),
        ("retry", &Method::POST) => Ok(Endpoint::Triggers(TriggersEndpoint::Retry { name })),
        ("retry", _) => Err(method_not_allowed("POST, OPTIONS")),
        _ => return None,
    })
}

/// The identity of a request, and when its credential expires. The credential is
/// `Authorization: Bearer`, else `access_token=`, else `auth=`; it is checked exactly as a
/// WebSocket `auth`/`gauth` request is. None at all is an anonymous request (rules decide).
fn resolve_auth(
    authorization: Option<&str>,
    query: &QueryString,
    auth_config: &AuthConfig,
) -> Result<(AuthState, Option<u64>), RestResponse> {
    let bearer = authorization.and_then(|value| {
        let (scheme, token) = value.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
    });
    let credential = bearer
        .or_else(|| query.get("access_token"))
        .or_else(|| query.get("auth"))
        .filter(|credential| !credential.is_empty());
    let Some(credential) = credential else {
        return Ok((AuthState::Anonymous, None));
    };
    let (auth_override, no_auth) = match query.get("auth_variable_override") {
        None => (None, false),
        Some(text) => match serde_json::from_str::<Value>(&replace_lone_surrogates_str(text)) {
            Ok(Value::Null) => (None, true),
            Ok(value @ Value::Object(_)) => (Some(value), false),
            _ => {
                return Err(bad_request(
                    "auth_variable_override must be a JSON object or null",
                ))
            }
        },
    };
    let request = AuthRequest {
        credential: credential.to_owned(),
        google: false,
        auth_override,
        no_auth,
    };
    authenticate_with(&request, auth_config, now_secs())
        .map(|authenticated| (authenticated.state, authenticated.expires_at))
        .map_err(|error| RestResponse::error(401, error.to_string()))
}

/// Refuses a request that does not carry an admin credential (401 without one, 403 with a
/// user's), for endpoints outside the Firebase API that only operators use (the console's).
pub fn require_admin(parts: &Parts, auth_config: &AuthConfig) -> Result<(), RestResponse> {
    let query = QueryString::parse(parts.uri.query().unwrap_or(""));
    let authorization = parts
        .headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    match resolve_auth(authorization, &query, auth_config)?.0 {
        AuthState::Admin => Ok(()),
        AuthState::Anonymous => Err(RestResponse::error(401, "an admin credential is required")),
        AuthState::User(_) => Err(RestResponse::error(403, "Permission denied")),
    }
}

/// The method after `X-HTTP-Method-Override` (header or query parameter), which only a
/// `POST` may carry.
fn data_method(parts: &Parts, query: &QueryString) -> Result<DataMethod, RestResponse> {
    let method = match parts.method {
        Method::GET | Method::HEAD => DataMethod::Get,
        Method::PUT => DataMethod::Put,
        Method::POST => DataMethod::Post,
        Method::PATCH => DataMethod::Patch,
        Method::DELETE => DataMethod::Delete,
        _ => return Err(method_not_allowed(DATA_METHODS)),
    };
    if method != DataMethod::Post {
        return Ok(method);
    }
    let header = parts
        .headers
        .get("x-http-method-override")
        .and_then(|value| value.to_str().ok());
    let Some(requested) = header.or_else(|| query.get("x-http-method-override")) else {
        return Ok(method);
    };
    match requested.trim().to_ascii_uppercase().as_str() {
        "PUT" => Ok(DataMethod::Put),
        "PATCH" => Ok(DataMethod::Patch),
        "DELETE" => Ok(DataMethod::Delete),
        "POST" => Ok(DataMethod::Post),
        _ => Err(bad_request(
            "X-HTTP-Method-Override must be PUT, PATCH or DELETE",
        )),
    }
}

/// An ETag as sent in `if-match` / `if-none-match`, without quotes or a weak marker.
fn etag_header(parts: &Parts, name: &str) -> Option<String> {
    let value = parts.headers.get(name)?.to_str().ok()?.trim();
    let value = value.strip_prefix("W/").unwrap_or(value);
    let value = value
        .strip_prefix('"')
        .and_then(|inner| inner.strip_suffix('"'))
        .unwrap_or(value);
    Some(value.to_owned())
}

fn data_request(
    parts: &Parts,
    raw_path: &str,
    query: &QueryString,
    dev: bool,
) -> Result<DataRequest, RestResponse> {
    let method = data_method(parts, query)?;
    let target = WriteTarget::parse(&percent_decode(raw_path))
        .map_err(|error| bad_request(format!("Invalid path: {error}")))?;
    let print = parse_print(query.get("print")).map_err(bad_request)?;
    let export = parse_format(query.get("format")).map_err(bad_request)?;
    let shallow = parse_shallow(query.get("shallow")).map_err(bad_request)?;
    let timeout = parse_timeout(query.get("timeout")).map_err(bad_request)?;
    let write_limit = WriteSizeLimit::parse(query.get("writeSizeLimit")).map_err(bad_request)?;
    let download = parse_download(query.get("download")).map_err(bad_request)?;
    let callback = parse_callback(query.get("callback")).map_err(bad_request)?;
    let mut query_text = RestQueryText::from_pairs(query.pairs());
    if dev && shallow && is_limit_alone(&query_text) {
        // The emulator answers a shallow read with a limit and no `orderBy`, which
        // production refuses: firebase-tools' export asks `/.json?shallow=true&limitToFirst=1`
        // whether a database holds data. In development the limit is let go (a shallow
        // answer names the children, nothing more).
        query_text.limit_to_first = None;
        query_text.limit_to_last = None;
    }
    let rest_query =
        QueryParams::from_rest(&query_text).map_err(|error| bad_request(error.to_string()))?;
    if shallow && rest_query.is_some() {
        return Err(bad_request(
            "Mixing 'shallow' and querying parameters is not supported",
        ));
    }
    if target.priority_only && matches!(method, DataMethod::Post | DataMethod::Patch) {
        return Err(bad_request(
            "Invalid path: a priority can only be read, set or deleted",
        ));
    }
    let accept = parts
        .headers
        .get("accept")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let stream = method == DataMethod::Get && accept.contains("text/event-stream");
    if stream {
        if shallow || target.priority_only {
            return Err(bad_request(
                "shallow and .priority paths cannot be streamed",
            ));
        }
        if rest_query
            .as_ref()
            .is_some_and(|query| query.matches_nothing)
        {
            return Err(bad_request("a streamed query needs a limit of at least 1"));
        }
    }
    let changes_since = match query.get("changesSince") {
        None => None,
        // An EventSource that reconnects sends the last id it saw: it wins over the URL's
        // start, which it repeats.
        Some(start) => {
            let start = parts
                .headers
                .get("last-event-id")
                .and_then(|value| value.to_str().ok())
                .filter(|value| !value.trim().is_empty())
                .unwrap_or(start);
            Some(FeedStart::parse(start).map_err(bad_request)?)
        }
    };
    if changes_since.is_some() && (!stream || rest_query.is_some()) {
        return Err(bad_request(
            "changesSince opens a change feed: it needs Accept: text/event-stream and no query parameters",
        ));
    }
    let want_etag = parts
        .headers
        .get("x-firebase-etag")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
    Ok(DataRequest {
        method,
        target,
        query: rest_query,
        shallow,
        style: JsonStyle {
            export,
            pretty: print == Print::Pretty,
        },
        silent: print == Print::Silent,
        want_etag,
        if_match: etag_header(parts, "if-match"),
        if_none_match: etag_header(parts, "if-none-match"),
        app_check: crate::app_check::app_check_token(
            query.get("ac"),
            parts
                .headers
                .get(crate::app_check::APP_CHECK_HEADER)
                .and_then(|value| value.to_str().ok()),
        ),
        address: PeerAddress::of(parts),
        write_limit,
        timeout,
        download,
        callback,
        stream,
        disable_triggers: query.get("disableTriggers") == Some("true"),
        changes_since,
        profile: false,
    })
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
