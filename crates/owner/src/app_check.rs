//! App Check on the owner (docs/app-check.md): a session's token, given with its connection
//! (`Opening::app_check`) or later in an `appcheck` request, is verified here, counted, and
//! kept on its handle; a request of a REST call or stream brings its own. A database that
//! enforces App Check serves its data only to admins and to clients whose token verified and
//! has not expired: a session without one is told why with the shutdown message the SDKs
//! show (`Missing appcheck token`, `Invalid appcheck token`, the reasons Firebase gives) and
//! closed, as Firebase closes such connections; a REST call is answered 401.
//!
//! With no `--app-check-project-number` nothing is verified or counted: tokens are
//! acknowledged, as before, and no database enforces anything.

use hearth_auth::app_check::{count, AppCheckError, INVALID, MISSING, REFUSED, VERIFIED};
use hearth_auth::now_secs;
use hearth_ground::app_check::AppCheckSeen;
use hearth_ground::close::CloseReason;
use hearth_ground::rest::RestResponse;
use hearth_sync::AuthState;
use hearth_wire::encode_shutdown;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::outbound::ConnHandle;
use crate::state::Owner;

/// Verifies `token` and counts the outcome; `None` when the server verifies no App Check
/// tokens. The error says why a token was refused.
pub fn verify(owner: &Owner, token: Option<&str>) -> Option<(AppCheckSeen, Option<AppCheckError>)> {
    let config = owner.config().auth.app_check.as_ref()?;
    Some(match token {
        None => {
            count(&MISSING);
            (AppCheckSeen::Missing, None)
        }
        Some(token) => match config.verify(token, now_secs()) {
            Ok(verified) => {
                count(&VERIFIED);
                (
                    AppCheckSeen::Verified {
                        expires_at: verified.expires_at,
                    },
                    None,
                )
            }
            Err(error) => {
                count(&INVALID);
                (AppCheckSeen::Invalid, Some(error))
            }
        },
    })
}

/// Whether `namespace` enforces App Check for a caller of `seen`, who is an admin or not:
/// the reason it is refused, counted.
fn enforced_refusal(
    owner: &Owner,
    namespace: &str,
    seen: AppCheckSeen,
    admin: impl FnOnce(&crate::loaded::Loaded) -> bool,
) -> Option<&'static str> {
    if seen.valid_at(now_secs()) {
        return None;
    }
    let by_default = owner.config().app_check_enforced;
    // A database that does not exist yet has no setting of its own: the server's decides.
    let refused = owner
        .with_existing_database(namespace, |database| {
            database.settings().app_check_enforced(by_default) && !admin(database)
        })
        .unwrap_or(by_default);
    refused.then(|| {
        count(&REFUSED);
        seen.reason()
    })
}

/// Before a session's request reaches its database's data: whether App Check refuses it. The
/// session is then told why and closed.
pub fn refuses_session(owner: &Owner, handle: &ConnHandle) -> bool {
    if owner.config().auth.app_check.is_none() {
        return false;
    }
    let Some(reason) = enforced_refusal(owner, &handle.namespace, handle.app_check(), |database| {
        database.is_admin(handle.id)
    }) else {
        return false;
    };
    handle.send_text(encode_shutdown(reason));
    handle.close(CloseReason::new(CloseCode::Policy, reason));
    true
}

/// A REST call or event stream of `namespace` by `auth` with App Check token `token`: the
/// answer when App Check refuses it.
pub fn refuses_request(
    owner: &Owner,
    namespace: &str,
    auth: &AuthState,
    token: Option<&str>,
) -> Option<RestResponse> {
    let (seen, _) = verify(owner, token)?;
    let admin = *auth == AuthState::Admin;
    let reason = enforced_refusal(owner, namespace, seen, |_| admin)?;
    Some(RestResponse::error(401, reason))
}
