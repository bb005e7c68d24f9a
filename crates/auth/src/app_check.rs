//! Firebase App Check tokens, verified as Firebase documents for a backend of one's own: an
//! RS256 JWT (`typ` JWT, a `kid`) signed by one of the App Check keys (fetched from their
//! JWKS and kept fresh like the ID-token keys, `jwks`), issued by
//! `https://firebaseappcheck.googleapis.com/<project number>`, whose audience names the
//! project (`projects/<number>`, or `projects/<id>`), with an app id as subject, not expired.
//! A verified token says the request comes from a registered app; it grants no access of its
//! own (the rules and `auth` still decide), and an enforced database refuses clients without
//! one (docs/app-check.md).

use std::sync::atomic::{AtomicU64, Ordering};

use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value;

use crate::jwks::FirebaseKeys;
use crate::jwt::{part as jwt_part, CLOCK_LEEWAY_SECS};
use crate::verify_key::VerifyKey;

/// The App Check keys' JWKS (the default of `--app-check-jwks-url`).
pub const APP_CHECK_JWKS_URL: &str = "https://firebaseappcheck.googleapis.com/v1/jwks";

/// The longest App Check token accepted (tokens are about 1 KB).
pub const MAX_APP_CHECK_TOKEN_BYTES: usize = 8 * 1024;

/// What App Check tokens are checked against.
#[derive(Clone, Default)]
pub struct AppCheckConfig {
    /// The project's number (the issuer and audience carry it).
    pub project_number: String,
    /// The project's id, accepted in the audience too.
    pub project_id: Option<String>,
    /// Keys from a file (`--app-check-jwks` when nothing can be fetched, or tests).
    pub keys: Vec<VerifyKey>,
    /// The keys fetched from the JWKS URL, replaced while the server runs.
    pub fetched: Option<FirebaseKeys>,
}

impl std::fmt::Debug for AppCheckConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppCheckConfig")
            .field("project_number", &self.project_number)
            .field("project_id", &self.project_id)
            .field("keys", &self.keys.len())
            .field(
                "fetched",
                &self.fetched.as_ref().map(|keys| keys.current().len()),
            )
            .finish()
    }
}

/// App Check tokens seen by outcome, server-wide: what an operator watches before enforcing
/// (`hearth_app_check_tokens_total`). Counted once per token received (a connection's, a
/// REST request's), not per request it covers.
pub static VERIFIED: AtomicU64 = AtomicU64::new(0);
/// Requests and connections that came without a token (counted where a database is reached).
pub static MISSING: AtomicU64 = AtomicU64::new(0);
/// Tokens refused.
pub static INVALID: AtomicU64 = AtomicU64::new(0);
/// Requests and connections refused because their database enforces App Check.
pub static REFUSED: AtomicU64 = AtomicU64::new(0);

/// Counts one outcome.
pub fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A verified App Check token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppCheckToken {
    /// The app the token was issued to (`sub`).
    pub app_id: String,
    /// When it expires (seconds since the epoch).
    pub expires_at: u64,
}

/// Why an App Check token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppCheckError {
    #[error("the App Check token is longer than {MAX_APP_CHECK_TOKEN_BYTES} bytes")]
    TooLong,
    #[error("the App Check token is not a JWT")]
    NotAJwt,
    #[error("App Check tokens are RS256 JWTs with a key id")]
    Header,
    #[error("no App Check key has the token's key id")]
    UnknownKey,
    #[error("the App Check token is invalid: {0}")]
    Invalid(String),
}

impl AppCheckConfig {
    /// Verifies `token` at `now_secs`.
    pub fn verify(&self, token: &str, now_secs: u64) -> Result<AppCheckToken, AppCheckError> {
        if token.len() > MAX_APP_CHECK_TOKEN_BYTES {
            return Err(AppCheckError::TooLong);
        }
        let header = jwt_part(token, 0).map_err(|_| AppCheckError::NotAJwt)?;
        let field = |name: &str| header.get(name).and_then(Value::as_str);
        let (Some("RS256"), Some("JWT"), Some(kid)) = (field("alg"), field("typ"), field("kid"))
        else {
            return Err(AppCheckError::Header);
        };
        let fetched = self.fetched.as_ref().map(FirebaseKeys::current);
        let fetched = fetched.as_deref().unwrap_or(&[]);
        let key = self
            .keys
            .iter()
            .chain(fetched)
            .find(|key| key.algorithm == Algorithm::RS256 && key.kid.as_deref() == Some(kid))
            .ok_or(AppCheckError::UnknownKey)?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = CLOCK_LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_issuer(&[format!(
            "https://firebaseappcheck.googleapis.com/{}",
            self.project_number
        )]);
        let mut audiences = vec![format!("projects/{}", self.project_number)];
        audiences.extend(self.project_id.iter().map(|id| format!("projects/{id}")));
        validation.set_audience(&audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Value>(token, &key.key, &validation)
            .map_err(|error| AppCheckError::Invalid(error.to_string()))?
            .claims;
        // jsonwebtoken checks `exp` against the system clock; this checks it against the
        // caller's, as the ID-token checks do.
        let expires_at = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        if expires_at + CLOCK_LEEWAY_SECS < now_secs {
            return Err(AppCheckError::Invalid("expired".into()));
        }
        let app_id = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|sub| !sub.is_empty())
            .ok_or_else(|| AppCheckError::Invalid("no app id (sub)".into()))?;
        Ok(AppCheckToken {
            app_id: app_id.to_owned(),
            expires_at,
        })
    }
}

#[cfg(test)]
#[path = "app_check_tests.rs"]
mod tests;
