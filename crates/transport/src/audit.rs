//! The audit trail's endpoints (`/.settings/auditTrail.json`, admins only, checked when the
//! request was parsed): the trail's thread answers, on the node that received the request,
//! from its own files (docs/audit.md: every node that holds a database's log keeps its trail).

use hearth_audit::AuditQuery;
use hearth_ground::rest::RestResponse;

use crate::front::Front;

/// The type of an answer of JSON lines.
const JSON_LINES: &str = "application/x-ndjson; charset=utf-8";

fn no_trail() -> RestResponse {
    RestResponse::error(
        404,
        "this server keeps no audit trail: it runs without a data directory (--durability none)",
    )
}

/// `GET`: the entries of `namespace` that `query` asks for, oldest first, one JSON object a
/// line; more with `after=` the last line's `seq`.
pub async fn query(front: &Front, namespace: &str, query: &AuditQuery) -> RestResponse {
    let Some(trail) = front.config().audit.trail.clone() else {
        return no_trail();
    };
    match trail.query(namespace, query.clone()).await {
        Ok(lines) => RestResponse {
            content_type: Some(JSON_LINES),
            ..RestResponse::json(200, lines)
        },
        Err(error) => RestResponse::error(500, error.to_string()),
    }
}

/// `DELETE ?uid=U`: every entry of `uid` in `namespace`'s trail replaced by its position
/// alone; answers `{"erased": N}`.
pub async fn erase(front: &Front, namespace: &str, uid: &str) -> RestResponse {
    let Some(trail) = front.config().audit.trail.clone() else {
        return no_trail();
    };
    match trail.erase(namespace, uid).await {
        Ok(erased) => {
            tracing::info!(namespace, erased, "audit entries of a user erased");
            RestResponse::json(200, serde_json::json!({ "erased": erased }).to_string())
        }
        Err(error) => RestResponse::error(500, error.to_string()),
    }
}
