//! The audit trail's endpoints (docs/audit.md), admins only:
//!
//! | request | what |
//! |---|---|
//! | `GET /.settings/auditTrail.json?uid=U&path=P&since=MS&until=MS&after=SEQ&limit=N` | the entries that match, as JSON lines, oldest first |
//! | `DELETE /.settings/auditTrail.json?uid=U` | erases every entry of `uid`: `{"erased": N}` |
//!
//! The setting that turns the trail on is `/.settings/audit.json` (`settings_api`).

use hearth_audit::{AuditQuery, AuditTrail, DEFAULT_QUERY_LINES, MAX_QUERY_LINES};
use hearth_net::query_string::QueryString;
use hyper::http::request::Parts;
use hyper::Method;

use super::response::RestResponse;
use super::Endpoint;

/// The path of the trail's endpoints.
pub const AUDIT_TRAIL_PATH: &str = "/.settings/auditTrail.json";

/// The longest `uid` a query or an erasure names (Firebase's uids are at most 128 bytes).
pub const MAX_AUDIT_UID_BYTES: usize = 128;

/// The longest `path` a query names.
pub const MAX_AUDIT_PATH_BYTES: usize = 4096;

fn bad_request(message: impl AsRef<str>) -> RestResponse {
    RestResponse::error(400, message)
}

/// The type of an answer of JSON lines.
const JSON_LINES: &str = "application/x-ndjson; charset=utf-8";

/// Answers an audit endpoint of `namespace` from `trail` (this node's: the node that owns the
/// database answers, `None` without a data directory); `None` for any other endpoint.
pub async fn answer(
    trail: Option<&AuditTrail>,
    namespace: &str,
    endpoint: &Endpoint,
) -> Option<RestResponse> {
    let no_trail = || {
        RestResponse::error(
            404,
            "this server keeps no audit trail: it runs without a data directory (--durability none)",
        )
    };
    Some(match endpoint {
        Endpoint::AuditQuery(query) => match trail {
            None => no_trail(),
            Some(trail) => match trail.query(namespace, (**query).clone()).await {
                Ok(lines) => RestResponse {
                    content_type: Some(JSON_LINES),
                    ..RestResponse::json(200, lines)
                },
                Err(error) => RestResponse::error(500, error.to_string()),
            },
        },
        Endpoint::AuditErase { uid } => match trail {
            None => no_trail(),
            Some(trail) => match trail.erase(namespace, uid).await {
                Ok(erased) => {
                    tracing::info!(namespace, erased, "audit entries of a user erased");
                    RestResponse::json(200, serde_json::json!({ "erased": erased }).to_string())
                }
                Err(error) => RestResponse::error(500, error.to_string()),
            },
        },
        _ => return None,
    })
}

/// The endpoint of a request of [`AUDIT_TRAIL_PATH`].
pub(super) fn endpoint(parts: &Parts, query: &QueryString) -> Result<Endpoint, RestResponse> {
    match parts.method {
        Method::GET | Method::HEAD => Ok(Endpoint::AuditQuery(Box::new(audit_query(query)?))),
        Method::DELETE => match uid(query)? {
            Some(uid) => Ok(Endpoint::AuditErase { uid }),
            None => Err(bad_request(
                "an erasure names the user whose entries go: ?uid=UID",
            )),
        },
        _ => Err(RestResponse::error(405, "Method not allowed")
            .with_header("allow", "GET, HEAD, DELETE, OPTIONS")),
    }
}

fn uid(query: &QueryString) -> Result<Option<String>, RestResponse> {
    match query.get("uid") {
        None => Ok(None),
        Some("") => Err(bad_request("uid must not be empty")),
        Some(uid) if uid.len() > MAX_AUDIT_UID_BYTES => Err(bad_request(format!(
            "uid is longer than {MAX_AUDIT_UID_BYTES} bytes"
        ))),
        Some(uid) => Ok(Some(uid.to_owned())),
    }
}

fn number(query: &QueryString, name: &str) -> Result<Option<u64>, RestResponse> {
    query
        .get(name)
        .map(|text| {
            text.parse::<u64>().map_err(|_| {
                bad_request(format!(
                    "{name} must be a whole number{}",
                    if name == "after" {
                        " (the seq of the last entry seen)"
                    } else if name == "limit" {
                        ""
                    } else {
                        " of milliseconds since 1970-01-01 UTC"
                    }
                ))
            })
        })
        .transpose()
}

fn audit_query(query: &QueryString) -> Result<AuditQuery, RestResponse> {
    let path = match query.get("path") {
        None => None,
        Some(path) if path.len() > MAX_AUDIT_PATH_BYTES => {
            return Err(bad_request(format!(
                "path is longer than {MAX_AUDIT_PATH_BYTES} bytes"
            )))
        }
        Some(path) => Some(
            hearth_tree::Path::parse(path)
                .map_err(|error| bad_request(format!("path is not a database path: {error}")))?
                .to_string(),
        ),
    };
    let limit = match number(query, "limit")? {
        None => DEFAULT_QUERY_LINES,
        Some(limit) if limit == 0 || limit > MAX_QUERY_LINES as u64 => {
            return Err(bad_request(format!(
                "limit must be from 1 to {MAX_QUERY_LINES}; ask again with after= for more"
            )))
        }
        Some(limit) => limit as usize,
    };
    Ok(AuditQuery {
        uid: uid(query)?,
        path,
        since: number(query, "since")?,
        until: number(query, "until")?,
        after: number(query, "after")?,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: Method, query: &str) -> Result<Endpoint, RestResponse> {
        let (parts, ()) = hyper::Request::builder()
            .method(method)
            .uri(format!("{AUDIT_TRAIL_PATH}?{query}"))
            .body(())
            .expect("a request")
            .into_parts();
        endpoint(&parts, &QueryString::parse(query))
    }

    #[test]
    fn queries_are_read_with_bounds() {
        let Ok(Endpoint::AuditQuery(query)) = parse(
            Method::GET,
            "uid=ada&path=/rooms/r1/&since=5&until=9&after=3&limit=20",
        ) else {
            panic!("a query");
        };
        assert_eq!(query.uid.as_deref(), Some("ada"));
        assert_eq!(query.path.as_deref(), Some("/rooms/r1"));
        assert_eq!(
            (query.since, query.until, query.after),
            (Some(5), Some(9), Some(3))
        );
        assert_eq!(query.limit, 20);
        let Ok(Endpoint::AuditQuery(query)) = parse(Method::GET, "") else {
            panic!("a query");
        };
        assert_eq!(query.limit, DEFAULT_QUERY_LINES);
        for bad in [
            "limit=0",
            "limit=10001",
            "since=yesterday",
            "uid=",
            "path=/a%2E",
        ] {
            assert!(parse(Method::GET, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_erasure_names_its_uid() {
        assert!(matches!(
            parse(Method::DELETE, "uid=ada"),
            Ok(Endpoint::AuditErase { uid }) if uid == "ada"
        ));
        assert!(parse(Method::DELETE, "").is_err());
        assert!(parse(Method::PUT, "uid=ada").is_err());
    }
}
