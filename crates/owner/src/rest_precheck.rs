//! The owner's side of a REST write's pre-check (`rest::precheck`).

use crate::rest::reply_error;
use crate::state::Owner;
use hearth_ground::rest::precheck::WriteCheck;
use hearth_ground::rest::RestResponse;

/// The answer to a write that the rules refuse whatever its body, or `None` when the body must
/// be read and the full check decide.
pub fn refuse_early(owner: &Owner, check: &WriteCheck) -> Option<RestResponse> {
    // A new database of a cluster that this node is claiming: the write waits for the claim
    // (`execute_durable`) and is checked in full then.
    let claiming = owner
        .config()
        .cluster
        .as_ref()
        .is_some_and(|placement| placement.claim_pending(&check.namespace));
    if claiming {
        return None;
    }
    owner
        .with_database(&check.namespace, |database| {
            database.precheck_write_as(&check.auth, &check.path, check.scope)
        })
        .err()
        .map(reply_error)
}
