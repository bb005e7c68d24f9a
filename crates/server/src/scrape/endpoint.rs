//! The answers of `/metrics`, `/healthz` and `/readyz`, and who may read `/metrics` on the
//! main port.

use hearth_sync::AuthState;
use hearth_wire::AuthRequest;
use hyper::http::request::Parts;
use hyper::Method;

use super::Observer;
use hearth_auth::{authenticate_with, now_secs, AuthConfig};
use hearth_config::ServeConfig;
use hearth_ground::metrics::{encode, CONTENT_TYPE, OK_BODY};
use hearth_ground::rest::RestResponse;

/// The paths served here.
pub const METRICS_PATH: &str = "/metrics";
pub const HEALTHZ_PATH: &str = "/healthz";
pub const READYZ_PATH: &str = "/readyz";

/// Who asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// On `--metrics-listen`, or with `--metrics-public`: no credential needed.
    Open,
    /// On the main port: `/metrics` is for admins.
    AdminOnly,
    /// On the main port while `--metrics-listen` serves the metrics.
    Elsewhere,
}

/// Whether `path` is one of the paths served here.
pub fn is_served_here(path: &str) -> bool {
    [METRICS_PATH, HEALTHZ_PATH, READYZ_PATH].contains(&path)
}

/// The answer to a request for one of the paths served here; `None` for any other path.
pub async fn answer(
    observer: &Observer,
    parts: &Parts,
    caller: Caller,
    auth: Option<&AuthConfig>,
) -> Option<RestResponse> {
    let path = parts.uri.path();
    if !is_served_here(path) {
        return None;
    }
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return Some(
            RestResponse::error(405, "Method not allowed").with_header("allow", "GET, HEAD"),
        );
    }
    let response = match path {
        HEALTHZ_PATH => RestResponse::json(200, OK_BODY),
        READYZ_PATH => match observer.health.ready() {
            Ok(()) => RestResponse::json(200, OK_BODY),
            Err(not_ready) => RestResponse::json(503, not_ready.json()),
        },
        _ => match caller {
            Caller::Elsewhere => RestResponse::error(
                404,
                "metrics are served on the --metrics-listen address, not on this port",
            ),
            Caller::AdminOnly if !is_admin(parts, auth) => RestResponse::error(
                401,
                "Permission denied: /metrics needs the admin token as a bearer token (or --metrics-public)",
            )
            .with_header("www-authenticate", "Bearer"),
            Caller::Open | Caller::AdminOnly => metrics(observer).await,
        },
    };
    Some(response.with_header("cache-control", "no-store"))
}

async fn metrics(observer: &Observer) -> RestResponse {
    match encode(observer.scrape().await) {
        Ok(text) => RestResponse {
            status: 200,
            content_type: Some(CONTENT_TYPE),
            headers: Vec::new(),
            body: text.into(),
        },
        Err(_) => RestResponse::error(500, "the metrics could not be encoded"),
    }
}

/// Whether the request carries an admin credential as a bearer token (the admin token, or
/// `owner` with `--dev`). Only the `Authorization` header is read: a scraper sends it on
/// every scrape, and a token in a URL ends up in logs.
fn is_admin(parts: &Parts, auth: Option<&AuthConfig>) -> bool {
    let Some(auth) = auth else {
        return false;
    };
    let bearer = parts
        .headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let Some(token) = bearer.filter(|token| !token.is_empty()) else {
        return false;
    };
    let request = AuthRequest {
        credential: token.to_owned(),
        google: false,
        auth_override: None,
        no_auth: false,
    };
    authenticate_with(&request, auth, now_secs())
        .is_ok_and(|authenticated| authenticated.state == AuthState::Admin)
}

/// The main port's answer to `/metrics`, `/healthz` and `/readyz`; `None` for other paths.
pub async fn answer_on_main_port(
    config: &ServeConfig,
    observer: &Observer,
    parts: &Parts,
) -> Option<RestResponse> {
    let metrics = &config.metrics;
    let caller = if metrics.listen.is_some() {
        Caller::Elsewhere
    } else if metrics.public {
        Caller::Open
    } else {
        Caller::AdminOnly
    };
    answer(observer, parts, caller, Some(&config.auth)).await
}
