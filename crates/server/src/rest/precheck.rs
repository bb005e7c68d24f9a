//! Refusing a REST write before its body is read: a caller that no rule could let write at
//! the target gets its `401` without the server reading, holding or parsing a byte of the
//! body (which may be hundreds of megabytes, and cost many times that once parsed).

use hearth_sync::WriteScope;

use super::execute::reply_error;
use super::{DataMethod, Endpoint, RestRequest, RestResponse};
use crate::shard::Shard;

/// The answer to a write that the rules refuse whatever its body, or `None` when the body
/// must be read and the full check decide. Only the shard that owns the database can tell;
/// elsewhere the request goes on (the owner checks it fully).
pub fn refuse_early(shard: &Shard, request: &RestRequest) -> Option<RestResponse> {
    let Endpoint::Data(data) = &request.endpoint else {
        return None;
    };
    let scope = match data.method {
        DataMethod::Put => WriteScope::At,
        // A push writes below the path, at a key not made yet; an update's paths are in
        // its body.
        DataMethod::Post | DataMethod::Patch => WriteScope::Below,
        DataMethod::Get | DataMethod::Delete => return None,
    };
    if crate::namespace::owner_shard(&request.namespace, shard.shard_count) != shard.index {
        return None;
    }
    let mut databases = shard.databases.borrow_mut();
    let database = shard.database(&mut databases, &request.namespace);
    database
        .engine
        .precheck_write_as(&request.auth, &data.target.path, scope)
        .err()
        .map(reply_error)
}
