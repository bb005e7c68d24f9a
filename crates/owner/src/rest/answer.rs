//! What the answers of REST reads and writes share: ETags, and the answers to requests the
//! engine refused.

use hearth_sync::{Reply, ReplyData, Status};
use hearth_tree::Node;

use hearth_ground::rest::RestResponse;

/// The ETag of an empty location (spec §15.4).
pub const NULL_ETAG: &str = "null_etag";

/// The ETag of a value: its node hash (spec §10), or [`NULL_ETAG`] when it is empty.
pub fn etag_of(node: &Node) -> String {
    if node.is_empty() {
        NULL_ETAG.to_owned()
    } else {
        node.hash().to_string()
    }
}

pub fn permission_denied() -> RestResponse {
    RestResponse::error(401, "Permission denied")
}

/// The HTTP answer to a request the engine refused.
pub fn reply_error(reply: Reply) -> RestResponse {
    let status = match reply.status {
        Status::PermissionDenied => return permission_denied(),
        Status::TooBig => 413,
        Status::DataStale => 412,
        Status::Unavailable => 503,
        _ => 400,
    };
    let message = match reply.data {
        ReplyData::Text(text) => text,
        _ => reply.status.as_str().to_owned(),
    };
    RestResponse::error(status, message)
}
