//! What every token check shares: the clocks' leeway and the reading of a JWT's parts. Its own
//! file, so that the App Check checks (`app_check`) and the credential checks (`lib.rs`) both
//! stand on it without importing each other.

use base64::Engine;
use serde_json::Value;

/// Leeway for clock differences when checking `exp`, `nbf` and `iat`.
pub const CLOCK_LEEWAY_SECS: u64 = 60;

/// Why a JWT's part could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartError {
    NotAJwt,
    BadPayload,
}

/// Decodes one base64url JSON object part of a JWT without checking anything.
pub(crate) fn part(token: &str, index: usize) -> Result<Value, PartError> {
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err(PartError::NotAJwt);
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(parts[index].trim_end_matches('='))
        .map_err(|_| PartError::BadPayload)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| PartError::BadPayload)?;
    if !value.is_object() {
        return Err(PartError::BadPayload);
    }
    Ok(value)
}
