//! The public key a signed token is checked against: its own file, because both the
//! credential checks (`auth`) and the Firebase key refresher (`jwks`) hold keys, and the
//! refresher must not depend on the checks that read from it.

use jsonwebtoken::{Algorithm, DecodingKey};

/// A public key for RS256 or ES256 tokens.
#[derive(Clone)]
pub struct VerifyKey {
    pub kid: Option<String>,
    pub algorithm: Algorithm,
    pub key: DecodingKey,
    /// Keys of Firebase Authentication: tokens signed with them must also carry the
    /// configured project as issuer and audience.
    pub firebase: bool,
}
