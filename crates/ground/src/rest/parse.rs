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
    parse_callback, parse_download, parse_format, parse_print, parse_shallow, parse_timeout, Print,
    WriteSizeLimit,
};
use super::response::RestResponse;
use super::{DataMethod, DataRequest, Endpoint, RestRequest};
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
        });
    }
    let path = parts.uri.path();
    // The server's own endpoints are about no database: a Host that names none is no error.
    let admin = path.starts_with("/.admin/");
    let namespace = match resolve(query.get("ns"), header("host"), default_namespace) {
        Ok(namespace) => namespace,
        Err(_) if admin => default_namespace.to_owned(),
        Err(error) => return Err(RestResponse::error(404, error.to_string())),
    };
    let (auth, auth_expires_at) = resolve_auth(header("authorization"), &query, auth_config)?;
    let endpoint = if admin {
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
        _ => Err(RestResponse::error(404, format!("{path} does not exist"))),
    }
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
        write_limit,
        timeout,
        download,
        callback,
        stream,
        disable_triggers: query.get("disableTriggers") == Some("true"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_tree::Path;
    use hyper::Request;

    fn parts(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut builder = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("valid test request").into_parts().0
    }

    fn parse(method: &str, uri: &str, headers: &[(&str, &str)]) -> RestRequest {
        parse_request(
            &parts(method, uri, headers),
            &AuthConfig::development(),
            "default",
        )
        .expect("a valid request")
    }

    fn refuse(method: &str, uri: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let response = parse_request(
            &parts(method, uri, headers),
            &AuthConfig::development(),
            "default",
        )
        .expect_err("an invalid request");
        (
            response.status,
            response.error_message().unwrap_or_default(),
        )
    }

    fn data_of(request: RestRequest) -> DataRequest {
        match request.endpoint {
            Endpoint::Data(data) => *data,
            other => panic!("not a data request: {other:?}"),
        }
    }

    #[test]
    fn a_shallow_read_with_a_limit_alone_is_the_emulators_in_development_only() {
        let url = "/.json?ns=p&shallow=true&limitToFirst=1";
        let data = data_of(parse("GET", url, &[]));
        assert!(data.shallow && data.query.is_none());
        let production = parse_request(&parts("GET", url, &[]), &AuthConfig::default(), "default");
        assert_eq!(production.err().map(|r| r.status), Some(400));
        let ordered = "/.json?shallow=true&orderBy=%22%24key%22&limitToFirst=1";
        assert_eq!(
            refuse("GET", ordered, &[]).0,
            400,
            "a real query is still refused"
        );
    }

    #[test]
    fn the_emulators_database_list_is_for_admins() {
        assert_eq!(refuse("GET", "/.inspect/databases.json", &[]).0, 401);
        let listed = parse(
            "GET",
            "/.inspect/databases.json?ns=p",
            &[("authorization", "Bearer owner")],
        );
        assert!(matches!(listed.endpoint, Endpoint::InspectDatabases));
    }

    #[test]
    fn paths_and_namespaces() {
        let request = parse("GET", "/users/ada.json?ns=demo", &[]);
        assert_eq!(request.namespace, "demo");
        assert_eq!(request.auth, AuthState::Anonymous);
        let data = data_of(request);
        assert_eq!(data.method, DataMethod::Get);
        assert_eq!(data.target.path, Path::parse("/users/ada").expect("valid"));
        assert!(data_request_root("/.json"));
        assert!(data_request_root("/.json?ns=x"));
        let slash = data_of(parse("GET", "/a/.json", &[]));
        assert_eq!(slash.target.path, Path::parse("/a").expect("valid"));
        let escaped = data_of(parse("GET", "/caf%C3%A9/x%20y.json", &[]));
        assert_eq!(escaped.target.path.to_string(), "/café/x y");
        let priority = data_of(parse("PUT", "/a/.priority.json", &[]));
        assert!(priority.target.priority_only);
        let host = parse("GET", "/.json", &[("host", "proj.example.com")]);
        assert_eq!(host.namespace, "proj");
        assert_eq!(refuse("GET", "/a.b.json", &[]).0, 400);
        assert_eq!(refuse("GET", "/.info/connected.json", &[]).0, 400);
        assert_eq!(refuse("GET", "/a", &[]).0, 404);
        assert_eq!(refuse("GET", "/.json?ns=bad/name", &[]).0, 404);
        assert_eq!(refuse("GET", "/.ws", &[]).0, 400);
        assert!(matches!(parse("GET", "/", &[]).endpoint, Endpoint::Status));
    }

    fn data_request_root(uri: &str) -> bool {
        data_of(parse("GET", uri, &[])).target.path.is_root()
    }

    #[test]
    fn methods_and_overrides() {
        assert_eq!(
            data_of(parse("HEAD", "/a.json", &[])).method,
            DataMethod::Get
        );
        assert_eq!(
            data_of(parse("DELETE", "/a.json", &[])).method,
            DataMethod::Delete
        );
        let overridden = parse("POST", "/a.json", &[("X-HTTP-Method-Override", "patch")]);
        assert_eq!(data_of(overridden).method, DataMethod::Patch);
        let by_query = parse("POST", "/a.json?x-http-method-override=DELETE", &[]);
        assert_eq!(data_of(by_query).method, DataMethod::Delete);
        assert_eq!(
            refuse("POST", "/a.json", &[("X-HTTP-Method-Override", "GET")]).0,
            400
        );
        let (status, _) = refuse("TRACE", "/a.json", &[]);
        assert_eq!(status, 405);
        assert_eq!(
            data_of(parse(
                "PUT",
                "/a.json",
                &[("X-HTTP-Method-Override", "DELETE")]
            ))
            .method,
            DataMethod::Put
        );
        assert!(matches!(
            parse("OPTIONS", "/a.json", &[]).endpoint,
            Endpoint::Preflight { .. }
        ));
    }

    #[test]
    fn credentials() {
        let bearer = parse("GET", "/.json", &[("authorization", "Bearer owner")]);
        assert_eq!(bearer.auth, AuthState::Admin);
        let access = parse("GET", "/.json?access_token=owner", &[]);
        assert_eq!(access.auth, AuthState::Admin);
        let auth = parse("GET", "/.json?auth=owner", &[]);
        assert_eq!(auth.auth, AuthState::Admin);
        let overridden = parse(
            "GET",
            "/.json?auth_variable_override=%7B%22uid%22%3A%22u1%22%7D",
            &[("authorization", "Bearer owner")],
        );
        assert_eq!(
            overridden.auth,
            AuthState::User(serde_json::json!({"uid": "u1"}))
        );
        let none = parse(
            "GET",
            "/.json?auth_variable_override=null",
            &[("authorization", "Bearer owner")],
        );
        assert_eq!(none.auth, AuthState::Anonymous);
        assert_eq!(refuse("GET", "/.json?auth=garbage", &[]).0, 401);
        assert_eq!(
            refuse(
                "GET",
                "/.json?auth_variable_override=5",
                &[("authorization", "Bearer owner")]
            )
            .0,
            400
        );
        let production = parse_request(
            &parts("GET", "/.json?auth=owner", &[]),
            &AuthConfig::default(),
            "default",
        )
        .expect_err("owner is a development credential");
        assert_eq!(production.status, 401);
    }

    #[test]
    fn a_backup_is_an_admin_post() {
        let owner = [("authorization", "Bearer owner")];
        let post = parse("POST", "/.admin/backup", &owner);
        assert!(matches!(post.endpoint, Endpoint::Backup));
        assert_eq!(refuse("POST", "/.admin/backup", &[]).0, 401);
        assert_eq!(refuse("GET", "/.admin/backup", &owner).0, 405);
        // An unsigned mock token of a user (accepted in development mode): not an admin.
        let user = [("authorization", "Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsInVzZXJfaWQiOiJhbGljZSJ9.")];
        assert_eq!(refuse("POST", "/.admin/backup", &user).0, 403);
    }

    #[test]
    fn coverage_is_read_without_a_credential() {
        let json = parse("GET", "/.inspect/coverage.json?ns=demo", &[]);
        assert!(matches!(json.endpoint, Endpoint::Coverage { html: false }));
        assert_eq!(json.namespace, "demo");
        let page = parse("GET", "/.inspect/coverage?ns=demo", &[]);
        assert!(matches!(page.endpoint, Endpoint::Coverage { html: true }));
        assert_eq!(refuse("PUT", "/.inspect/coverage.json", &[]).0, 405);
    }

    #[test]
    fn settings_need_an_admin() {
        assert_eq!(refuse("GET", "/.settings/rules.json", &[]).0, 401);
        let get = parse(
            "GET",
            "/.settings/rules.json?format=strict",
            &[("authorization", "Bearer owner")],
        );
        assert!(matches!(get.endpoint, Endpoint::RulesGet { strict: true }));
        let put = parse(
            "PUT",
            "/.settings/rules.json",
            &[("authorization", "Bearer owner")],
        );
        assert!(matches!(put.endpoint, Endpoint::RulesPut));
        assert_eq!(
            refuse(
                "GET",
                "/.settings/other.json",
                &[("authorization", "Bearer owner")]
            )
            .0,
            404
        );
    }

    #[test]
    fn parameters() {
        let request = data_of(parse(
            "GET",
            "/a.json?print=pretty&format=export&timeout=2s&download=a.json&callback=cb",
            &[("x-firebase-etag", "true"), ("if-none-match", "\"abc=\"")],
        ));
        assert!(request.style.pretty && request.style.export);
        assert!(request.want_etag);
        assert_eq!(request.if_none_match.as_deref(), Some("abc="));
        assert_eq!(request.timeout, Some(std::time::Duration::from_secs(2)));
        assert_eq!(request.download.as_deref(), Some("a.json"));
        assert_eq!(request.callback.as_deref(), Some("cb"));
        let silent = data_of(parse(
            "PUT",
            "/a.json?print=silent&writeSizeLimit=tiny",
            &[],
        ));
        assert!(silent.silent);
        assert_eq!(silent.body_limit(), Some(1024 * 1024));
        assert_eq!(data_of(parse("DELETE", "/a.json", &[])).body_limit(), None);
        for bad in [
            "/a.json?print=loud",
            "/a.json?format=xml",
            "/a.json?shallow=maybe",
            "/a.json?timeout=16min",
            "/a.json?writeSizeLimit=huge",
            "/a.json?limitToFirst=2",
            "/a.json?orderBy=age",
            "/a.json?orderBy=%22%24key%22&startAt=1",
            "/a.json?shallow=true&orderBy=%22%24key%22",
            "/a.json?callback=alert(1)",
        ] {
            assert_eq!(refuse("GET", bad, &[]).0, 400, "{bad}");
        }
    }

    #[test]
    fn python_query_string() {
        let request = data_of(parse(
            "GET",
            "/people.json?endAt=%22z%22&limitToFirst=3&orderBy=%22age%22&startAt=5&ns=demo",
            &[],
        ));
        let query = request.query.expect("a query");
        assert!(query.params.is_filtered());
        assert!(!query.matches_nothing);
    }

    #[test]
    fn streams() {
        let stream = data_of(parse("GET", "/a.json", &[("accept", "text/event-stream")]));
        assert!(stream.stream);
        let put = data_of(parse("PUT", "/a.json", &[("accept", "text/event-stream")]));
        assert!(!put.stream);
        assert_eq!(
            refuse(
                "GET",
                "/a.json?shallow=true",
                &[("accept", "text/event-stream")]
            )
            .0,
            400
        );
    }
}
