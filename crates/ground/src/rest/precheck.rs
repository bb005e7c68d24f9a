//! Refusing a REST write before its body is read: a caller that no rule could let write at
//! the target gets its `401` without the server reading, holding or parsing a byte of the
//! body (which may be hundreds of megabytes, and cost many times that once parsed). Only the
//! shard that owns the database can tell: a request that arrived on another core asks it
//! first (`Shard::precheck`), a round trip of two small messages.

use hearth_sync::{AuthState, WriteScope};
use hearth_tree::Path;

use super::{DataMethod, Endpoint, RestRequest};

/// What the pre-check of a REST write needs: plain data, so that it can cross cores.
#[derive(Debug)]
pub struct WriteCheck {
    pub namespace: String,
    pub auth: AuthState,
    pub path: Path,
    pub scope: WriteScope,
}

/// The pre-check a request needs, if it is a write with a body.
pub fn write_check(request: &RestRequest) -> Option<WriteCheck> {
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
    Some(WriteCheck {
        namespace: request.namespace.clone(),
        auth: request.auth.clone(),
        path: data.target.path.clone(),
        scope,
    })
}
