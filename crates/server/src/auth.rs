//! Credentials accepted on a connection. For now these are the development credentials of the
//! emulator (spec §14): the `owner` admin token and unsigned mock user tokens. Signed tokens and
//! rules arrive with the security issue.

use base64::Engine;
use hearth_sync::AuthState;
use hearth_wire::AuthRequest;
use serde_json::{json, Value};

/// The literal admin credential of emulator mode.
pub const OWNER_TOKEN: &str = "owner";

/// The outcome of an `auth`/`gauth` request.
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticated {
    pub state: AuthState,
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
    #[error("the token payload is not valid base64url JSON")]
    BadPayload,
    #[error("signed tokens are not supported yet")]
    Unsupported,
}

/// Checks a credential and returns the identity the connection takes on.
pub fn authenticate(request: &AuthRequest, dev: bool) -> Result<Authenticated, AuthError> {
    if request.credential == OWNER_TOKEN {
        if !dev {
            return Err(AuthError::DevOnly);
        }
        let state = if request.no_auth {
            AuthState::Anonymous
        } else if let Some(claims) = request.auth_override.clone().filter(|v| !v.is_null()) {
            AuthState::User(claims)
        } else {
            AuthState::Admin
        };
        return Ok(Authenticated {
            state,
            reply: json!({"auth": null, "expires": Value::Null}),
        });
    }
    let claims = jwt_claims(&request.credential)?;
    if !dev {
        return Err(AuthError::Unsupported);
    }
    Ok(Authenticated {
        reply: json!({"auth": claims.clone(), "expires": claims.get("exp").cloned().unwrap_or(Value::Null)}),
        state: AuthState::User(auth_variable(claims)),
    })
}

/// Decodes the payload of a JWT without checking its signature.
fn jwt_claims(token: &str) -> Result<Value, AuthError> {
    let mut parts = token.split('.');
    let (Some(_header), Some(payload), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::NotAJwt);
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| AuthError::BadPayload)?;
    let claims: Value = serde_json::from_slice(&bytes).map_err(|_| AuthError::BadPayload)?;
    if !claims.is_object() {
        return Err(AuthError::BadPayload);
    }
    Ok(claims)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(credential: &str) -> AuthRequest {
        AuthRequest {
            credential: credential.to_owned(),
            google: false,
            auth_override: None,
            no_auth: false,
        }
    }

    #[test]
    fn owner_is_admin_in_dev_only() {
        assert_eq!(
            authenticate(&request("owner"), true).map(|a| a.state),
            Ok(AuthState::Admin)
        );
        assert_eq!(
            authenticate(&request("owner"), false),
            Err(AuthError::DevOnly)
        );
    }

    #[test]
    fn owner_with_overrides() {
        let mut with_var = request("owner");
        with_var.auth_override = Some(json!({"uid": "u1"}));
        assert_eq!(
            authenticate(&with_var, true).map(|a| a.state),
            Ok(AuthState::User(json!({"uid": "u1"})))
        );
        let mut no_auth = request("owner");
        no_auth.no_auth = true;
        assert_eq!(
            authenticate(&no_auth, true).map(|a| a.state),
            Ok(AuthState::Anonymous)
        );
    }

    #[test]
    fn mock_tokens_carry_their_claims() {
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"alg":"none","type":"JWT"}"#);
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"sub":"alice","user_id":"alice","iat":0,"exp":3600,"firebase":{"sign_in_provider":"custom"}}"#);
        let token = format!("{header}.{payload}.");
        let state = authenticate(&request(&token), true).map(|a| a.state);
        match state {
            Ok(AuthState::User(auth)) => {
                assert_eq!(auth["uid"], "alice");
                assert_eq!(auth["provider"], "custom");
                assert_eq!(auth["token"]["exp"], 3600);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            authenticate(&request("not-a-jwt"), true),
            Err(AuthError::NotAJwt)
        );
    }
}
