//! Credentials: who a connection or request is. Verification of signed tokens (HS256 secrets,
//! RS256/ES256 keys, Firebase ID tokens) uses `jsonwebtoken`; the development credentials of
//! the emulator (`owner`, unsigned mock tokens) are accepted only with `--dev`.

pub mod app_check;
pub mod jwks;
mod jwt;
mod verify_key;

use std::path::Path;

use hearth_sync::AuthState;
use hearth_wire::AuthRequest;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The literal admin credential of emulator mode.
pub const OWNER_TOKEN: &str = "owner";

pub use crate::jwt::CLOCK_LEEWAY_SECS;

pub use crate::verify_key::VerifyKey;

/// What the server accepts as credentials.
#[derive(Clone, Default)]
pub struct AuthConfig {
    /// Development mode: `owner` and unsigned mock tokens are accepted.
    pub dev: bool,
    /// A secret that grants admin access (rules bypassed).
    pub admin_token: Option<String>,
    /// The HS256 secret of tokens the operator signs itself.
    pub hs256_secret: Option<Vec<u8>>,
    /// RS256/ES256 public keys, from PEM or JWKS files.
    pub keys: Vec<VerifyKey>,
    /// The Firebase project whose ID tokens are accepted (`iss` and `aud` are checked).
    pub firebase_project: Option<String>,
    /// The signing keys of Firebase ID tokens as fetched from the JWKS URL (or the cache, or
    /// the static file), replaced while the server runs (`jwks`); shared by every shard.
    pub firebase_keys: Option<crate::jwks::FirebaseKeys>,
    /// How App Check tokens are verified (`--app-check-project-number`); `None`: they are
    /// acknowledged and not checked, and no database can enforce them.
    pub app_check: Option<crate::app_check::AppCheckConfig>,
}

impl std::fmt::Debug for AuthConfig {
    /// Secrets stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("dev", &self.dev)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "<set>"))
            .field("hs256_secret", &self.hs256_secret.as_ref().map(|_| "<set>"))
            .field("keys", &self.keys.len())
            .field("firebase_project", &self.firebase_project)
            .field(
                "firebase_keys",
                &self.firebase_keys.as_ref().map(|keys| keys.current().len()),
            )
            .field("app_check", &self.app_check)
            .finish()
    }
}

/// Why key material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

impl AuthConfig {
    /// Development settings: the emulator's credentials, nothing else.
    pub fn development() -> AuthConfig {
        AuthConfig {
            dev: true,
            ..AuthConfig::default()
        }
    }

    /// Loads public keys from a PEM file (one RSA or EC public key) or a JWKS file (JSON).
    pub fn load_keys(path: &Path, firebase: bool) -> Result<Vec<VerifyKey>, KeyFileError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| KeyFileError::Read {
            path: name.clone(),
            source,
        })?;
        let invalid = |reason: String| KeyFileError::Invalid {
            path: name.clone(),
            reason,
        };
        if bytes.trim_ascii_start().starts_with(b"{") {
            return crate::jwks::keys_from_document(&bytes, firebase).map_err(invalid);
        }
        if let Ok(key) = DecodingKey::from_rsa_pem(&bytes) {
            return Ok(vec![VerifyKey {
                kid: None,
                algorithm: Algorithm::RS256,
                key,
                firebase,
            }]);
        }
        let key = DecodingKey::from_ec_pem(&bytes)
            .map_err(|error| invalid(format!("not an RSA or EC public key in PEM: {error}")))?;
        Ok(vec![VerifyKey {
            kid: None,
            algorithm: Algorithm::ES256,
            key,
            firebase,
        }])
    }
}

/// The outcome of an `auth`/`gauth` request.
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticated {
    pub state: AuthState,
    /// When the credential stops being valid (seconds since the epoch).
    pub expires_at: Option<u64>,
    /// The payload of the success reply: `{auth, expires}`.
    pub reply: Value,
}

/// Why a credential was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("development credentials are accepted only when the server runs with --dev")]
    DevOnly,
    #[error("the token is not a JWT")]
    NotAJwt,
    #[error("the token header or payload is not valid base64url JSON")]
    BadPayload,
    #[error("unsigned tokens (alg none) are accepted only with --dev")]
    Unsigned,
    #[error("tokens signed with {0} are not accepted")]
    UnsupportedAlgorithm(String),
    #[error("no key is configured for this token")]
    NoKey,
    #[error("the token is invalid: {0}")]
    Invalid(String),
}

/// Checks a credential and returns the identity the connection takes on.
pub fn authenticate_with(
    request: &AuthRequest,
    config: &AuthConfig,
    now_secs: u64,
) -> Result<Authenticated, AuthError> {
    let is_admin_token = config
        .admin_token
        .as_deref()
        .is_some_and(|token| constant_time_eq(token.as_bytes(), request.credential.as_bytes()));
    if is_admin_token || request.credential == OWNER_TOKEN {
        if !is_admin_token && !config.dev {
            return Err(AuthError::DevOnly);
        }
        return Ok(Authenticated {
            state: admin_identity(request),
            expires_at: None,
            reply: json!({"auth": null, "expires": null}),
        });
    }
    let (claims, verified) = verify_jwt(&request.credential, config, now_secs)?;
    let expires_at = if verified {
        claims.get("exp").and_then(Value::as_u64)
    } else {
        None
    };
    Ok(Authenticated {
        reply: json!({"auth": claims.clone(), "expires": claims.get("exp").cloned().unwrap_or(Value::Null)}),
        state: AuthState::User(auth_variable(claims)),
        expires_at,
    })
}

/// An admin may ask to be seen by the rules as someone else, or as nobody.
fn admin_identity(request: &AuthRequest) -> AuthState {
    if request.no_auth {
        AuthState::Anonymous
    } else if let Some(claims) = request.auth_override.clone().filter(|v| !v.is_null()) {
        AuthState::User(claims)
    } else {
        AuthState::Admin
    }
}

/// Verifies a JWT and returns its claims, and whether its signature was checked (unsigned
/// development tokens are not, and never expire).
fn verify_jwt(token: &str, config: &AuthConfig, now_secs: u64) -> Result<(Value, bool), AuthError> {
    let header = jwt_part(token, 0)?;
    let algorithm = header.get("alg").and_then(Value::as_str).unwrap_or("");
    if algorithm == "none" {
        if !config.dev {
            return Err(AuthError::Unsigned);
        }
        return Ok((jwt_part(token, 1)?, false));
    }
    let kid = header.get("kid").and_then(Value::as_str);
    let claims = match algorithm {
        "HS256" => {
            let secret = config.hs256_secret.as_deref().ok_or(AuthError::NoKey)?;
            decode(
                token,
                &DecodingKey::from_secret(secret),
                validation(Algorithm::HS256, None),
            )?
        }
        "RS256" | "ES256" => {
            let wanted = if algorithm == "RS256" {
                Algorithm::RS256
            } else {
                Algorithm::ES256
            };
            // One cheap read of the shared set per verification: a refresh replaces it whole.
            let fetched = config
                .firebase_keys
                .as_ref()
                .map(crate::jwks::FirebaseKeys::current);
            let fetched = fetched.as_deref().unwrap_or(&[]);
            let mut candidates = config.keys.iter().chain(fetched).filter(|key| {
                key.algorithm == wanted
                    && (kid.is_none() || key.kid.is_none() || key.kid.as_deref() == kid)
            });
            let mut last = AuthError::NoKey;
            loop {
                let Some(key) = candidates.next() else {
                    return Err(last);
                };
                let project = key
                    .firebase
                    .then_some(config.firebase_project.as_deref())
                    .flatten();
                if key.firebase && project.is_none() {
                    continue;
                }
                match decode(token, &key.key, validation(wanted, project)) {
                    Ok(claims) => break claims,
                    Err(error) => last = error,
                }
            }
        }
        other => return Err(AuthError::UnsupportedAlgorithm(other.to_owned())),
    };
    let issued = claims.get("iat").and_then(Value::as_u64);
    if issued.is_some_and(|iat| iat > now_secs + CLOCK_LEEWAY_SECS) {
        return Err(AuthError::Invalid("issued in the future".into()));
    }
    // jsonwebtoken checks `nbf` against the system clock; this checks it against the time the
    // caller gives, like `iat`, so that both clocks agree on a token that is not valid yet.
    let not_before = claims.get("nbf").and_then(Value::as_f64);
    if not_before.is_some_and(|nbf| nbf > (now_secs + CLOCK_LEEWAY_SECS) as f64) {
        return Err(AuthError::Invalid(
            "not valid yet (nbf is in the future)".into(),
        ));
    }
    if claims
        .get("sub")
        .and_then(Value::as_str)
        .is_some_and(str::is_empty)
    {
        return Err(AuthError::Invalid("empty subject".into()));
    }
    Ok((claims, true))
}

fn validation(algorithm: Algorithm, firebase_project: Option<&str>) -> Validation {
    let mut validation = Validation::new(algorithm);
    validation.leeway = CLOCK_LEEWAY_SECS;
    // Off by default in jsonwebtoken: a token that is not valid yet must be refused.
    validation.validate_nbf = true;
    match firebase_project {
        Some(project) => {
            validation.set_issuer(&[format!("https://securetoken.google.com/{project}")]);
            validation.set_audience(&[project]);
            validation.set_required_spec_claims(&["exp", "iat", "sub", "aud", "iss"]);
        }
        None => {
            validation.validate_aud = false;
            validation.set_required_spec_claims(&["exp"]);
        }
    }
    validation
}

fn decode(token: &str, key: &DecodingKey, validation: Validation) -> Result<Value, AuthError> {
    jsonwebtoken::decode::<Value>(token, key, &validation)
        .map(|data| data.claims)
        .map_err(|error| AuthError::Invalid(error.to_string()))
}

/// One JSON part of a JWT (`jwt`), as the credential checks refuse a bad one.
fn jwt_part(token: &str, index: usize) -> Result<Value, AuthError> {
    jwt::part(token, index).map_err(|error| match error {
        jwt::PartError::NotAJwt => AuthError::NotAJwt,
        jwt::PartError::BadPayload => AuthError::BadPayload,
    })
}

/// The `auth` variable that rules see for a token: `uid`, `provider` and every claim under
/// `token`.
fn auth_variable(claims: Value) -> Value {
    let uid = claims
        .get("user_id")
        .or_else(|| claims.get("sub"))
        .or_else(|| claims.get("uid"))
        .cloned()
        .unwrap_or(Value::Null);
    let provider = claims
        .pointer("/firebase/sign_in_provider")
        .cloned()
        .unwrap_or_else(|| Value::String("custom".into()));
    json!({"uid": uid, "provider": provider, "token": claims})
}

/// Compares a secret with a candidate in time that depends on neither: both are hashed to a
/// fixed length first, so that not even the secret's length shows in the timing.
fn constant_time_eq(secret: &[u8], candidate: &[u8]) -> bool {
    let secret = Sha256::digest(secret);
    let candidate = Sha256::digest(candidate);
    secret[..].ct_eq(&candidate[..]).into()
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    hearth_net::time::now_ms() / 1000
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
