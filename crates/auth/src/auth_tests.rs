//! Tests of credential checking, with keys generated for the purpose (tests/keys).

use super::*;
use base64::Engine;
use jsonwebtoken::{encode, EncodingKey, Header};

const SECRET: &[u8] = b"test-secret-of-enough-length-for-hs256";
// Tokens are built around the real time (now_secs): jsonwebtoken checks `exp` and `nbf`
// against the system clock, so a fixed "now" would make the valid test tokens expire once the
// real date passes it.

fn keys_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/keys")
}

fn request(credential: &str) -> AuthRequest {
    AuthRequest {
        credential: credential.to_owned(),
        google: false,
        auth_override: None,
        no_auth: false,
    }
}

fn sign(algorithm: Algorithm, key: &EncodingKey, kid: Option<&str>, claims: Value) -> String {
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    encode(&header, &claims, key).expect("signing a test token")
}

fn rsa_key() -> EncodingKey {
    let pem = std::fs::read(keys_dir().join("rsa-private.pem")).expect("test key");
    EncodingKey::from_rsa_pem(&pem).expect("valid test key")
}

fn config_with_secret() -> AuthConfig {
    AuthConfig {
        hs256_secret: Some(SECRET.to_vec()),
        ..AuthConfig::default()
    }
}

fn firebase_config() -> AuthConfig {
    AuthConfig {
        keys: AuthConfig::load_keys(&keys_dir().join("rsa-jwks.json"), true).expect("jwks"),
        firebase_project: Some("demo-proj".into()),
        ..AuthConfig::default()
    }
}

fn firebase_claims(aud: &str, exp: u64) -> Value {
    json!({
        "iss": format!("https://securetoken.google.com/{aud}"), "aud": aud,
        "iat": now_secs() - 10, "exp": exp, "sub": "alice", "user_id": "alice",
        "firebase": {"sign_in_provider": "password"}
    })
}

#[test]
fn owner_is_admin_in_dev_only() {
    assert_eq!(
        authenticate_with(&request("owner"), &AuthConfig::development(), now_secs())
            .map(|a| a.state),
        Ok(AuthState::Admin)
    );
    assert_eq!(
        authenticate_with(&request("owner"), &AuthConfig::default(), now_secs()),
        Err(AuthError::DevOnly)
    );
}

#[test]
fn admin_token_and_overrides() {
    let config = AuthConfig {
        admin_token: Some("s3cret-admin".into()),
        ..AuthConfig::default()
    };
    let admin = authenticate_with(&request("s3cret-admin"), &config, now_secs());
    assert_eq!(admin.map(|a| a.state), Ok(AuthState::Admin));
    let mut with_var = request("s3cret-admin");
    with_var.auth_override = Some(json!({"uid": "u1"}));
    assert_eq!(
        authenticate_with(&with_var, &config, now_secs()).map(|a| a.state),
        Ok(AuthState::User(json!({"uid": "u1"})))
    );
    let mut no_auth = request("s3cret-admin");
    no_auth.no_auth = true;
    assert_eq!(
        authenticate_with(&no_auth, &config, now_secs()).map(|a| a.state),
        Ok(AuthState::Anonymous)
    );
    assert!(authenticate_with(&request("s3cret-admiN"), &config, now_secs()).is_err());
}

#[test]
fn unsigned_mock_tokens_only_in_dev() {
    let header =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"none","type":"JWT"}"#);
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
        r#"{"sub":"alice","user_id":"alice","iat":0,"exp":3600,"firebase":{"sign_in_provider":"custom"}}"#,
    );
    let token = format!("{header}.{payload}.");
    let dev = AuthConfig {
        dev: true,
        ..AuthConfig::default()
    };
    let outcome = authenticate_with(&request(&token), &dev, now_secs()).expect("accepted in dev");
    match outcome.state {
        AuthState::User(auth) => {
            assert_eq!(auth["uid"], "alice");
            assert_eq!(auth["provider"], "custom");
            assert_eq!(auth["token"]["exp"], 3600);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(outcome.expires_at, None, "mock tokens never expire");
    assert_eq!(
        authenticate_with(&request(&token), &AuthConfig::default(), now_secs()),
        Err(AuthError::Unsigned)
    );
    assert_eq!(
        authenticate_with(
            &request("not-a-jwt"),
            &AuthConfig::development(),
            now_secs()
        ),
        Err(AuthError::NotAJwt)
    );
}

#[test]
fn hs256_tokens_are_verified() {
    let key = EncodingKey::from_secret(SECRET);
    let token = sign(
        Algorithm::HS256,
        &key,
        None,
        json!({"sub": "bob", "exp": now_secs() + 600}),
    );
    let outcome =
        authenticate_with(&request(&token), &config_with_secret(), now_secs()).expect("valid");
    assert_eq!(outcome.expires_at, Some(now_secs() + 600));
    assert!(matches!(outcome.state, AuthState::User(ref auth) if auth["uid"] == "bob"));
    let forged = sign(
        Algorithm::HS256,
        &EncodingKey::from_secret(b"another-secret-entirely-here!!"),
        None,
        json!({"sub": "bob", "exp": now_secs() + 600}),
    );
    assert!(matches!(
        authenticate_with(&request(&forged), &config_with_secret(), now_secs()),
        Err(AuthError::Invalid(_))
    ));
    assert_eq!(
        authenticate_with(&request(&token), &AuthConfig::default(), now_secs()),
        Err(AuthError::NoKey)
    );
}

#[test]
fn expired_tokens_are_refused() {
    let key = EncodingKey::from_secret(SECRET);
    let token = sign(
        Algorithm::HS256,
        &key,
        None,
        json!({"sub": "bob", "exp": 1_000}),
    );
    assert!(matches!(
        authenticate_with(&request(&token), &config_with_secret(), now_secs()),
        Err(AuthError::Invalid(_))
    ));
}

#[test]
fn firebase_id_tokens_check_issuer_and_audience() {
    let config = firebase_config();
    let good = sign(
        Algorithm::RS256,
        &rsa_key(),
        Some("test-kid"),
        firebase_claims("demo-proj", now_secs() + 600),
    );
    let outcome = authenticate_with(&request(&good), &config, now_secs()).expect("valid");
    assert!(matches!(outcome.state, AuthState::User(ref auth) if auth["provider"] == "password"));
    let wrong_audience = sign(
        Algorithm::RS256,
        &rsa_key(),
        Some("test-kid"),
        firebase_claims("other-proj", now_secs() + 600),
    );
    assert!(matches!(
        authenticate_with(&request(&wrong_audience), &config, now_secs()),
        Err(AuthError::Invalid(_))
    ));
}

#[test]
fn firebase_keys_come_from_the_shared_set_in_either_document_form() {
    let good = sign(
        Algorithm::RS256,
        &rsa_key(),
        Some("test-kid"),
        firebase_claims("demo-proj", now_secs() + 600),
    );
    for document in ["rsa-jwks.json", "rsa-x509.json"] {
        let keys = crate::jwks::FirebaseKeys::default();
        let config = AuthConfig {
            firebase_project: Some("demo-proj".into()),
            firebase_keys: Some(keys.clone()),
            ..AuthConfig::default()
        };
        assert_eq!(
            authenticate_with(&request(&good), &config, now_secs()),
            Err(AuthError::NoKey),
            "no key before the first fetch"
        );
        let bytes = std::fs::read(keys_dir().join(document)).expect("key document");
        keys.replace(crate::jwks::keys_from_document(&bytes, true).expect(document));
        let outcome = authenticate_with(&request(&good), &config, now_secs());
        assert!(outcome.is_ok(), "{document}: {outcome:?}");
        keys.replace(Vec::new());
        assert!(authenticate_with(&request(&good), &config, now_secs()).is_err());
    }
}

#[test]
fn rs256_and_es256_from_pem() {
    let rsa = AuthConfig {
        keys: AuthConfig::load_keys(&keys_dir().join("rsa-public.pem"), false).expect("pem"),
        ..AuthConfig::default()
    };
    let token = sign(
        Algorithm::RS256,
        &rsa_key(),
        None,
        json!({"sub": "c", "exp": now_secs() + 60}),
    );
    assert!(authenticate_with(&request(&token), &rsa, now_secs()).is_ok());
    let ec = AuthConfig {
        keys: AuthConfig::load_keys(&keys_dir().join("ec-public.pem"), false).expect("pem"),
        ..AuthConfig::default()
    };
    let pem = std::fs::read(keys_dir().join("ec-private.pem")).expect("test key");
    let ec_key = EncodingKey::from_ec_pem(&pem).expect("valid test key");
    let token = sign(
        Algorithm::ES256,
        &ec_key,
        None,
        json!({"sub": "d", "exp": now_secs() + 60}),
    );
    assert!(authenticate_with(&request(&token), &ec, now_secs()).is_ok());
    assert!(authenticate_with(&request(&token), &rsa, now_secs()).is_err());
}

#[test]
fn tokens_not_valid_yet_are_refused() {
    let key = EncodingKey::from_secret(SECRET);
    let token = |nbf: Value, exp: u64| {
        sign(
            Algorithm::HS256,
            &key,
            None,
            json!({"sub": "bob", "exp": exp, "nbf": nbf}),
        )
    };
    // jsonwebtoken checks `nbf` against the system clock, the server against the time it is
    // given: each check is tested with a token that only it refuses.
    let now = now_secs();
    let far_future = token(json!(now + 3600), now + 7200);
    assert_eq!(
        authenticate_with(&request(&far_future), &config_with_secret(), now),
        Err(AuthError::Invalid("ImmatureSignature".into()))
    );
    let early_caller = now - 7200;
    let not_yet_for_caller = token(json!(now - 3600), now + 7200);
    assert_eq!(
        authenticate_with(
            &request(&not_yet_for_caller),
            &config_with_secret(),
            early_caller
        )
        .map(|a| a.state),
        Err(AuthError::Invalid(
            "not valid yet (nbf is in the future)".into()
        ))
    );
    for nbf in [now - 3600, now + CLOCK_LEEWAY_SECS / 2] {
        let valid = token(json!(nbf), now + 7200);
        assert!(
            authenticate_with(&request(&valid), &config_with_secret(), now).is_ok(),
            "nbf {nbf} is within the leeway of {now}"
        );
    }
    let malformed = token(json!("soon"), now + 7200);
    assert_eq!(
        authenticate_with(&request(&malformed), &config_with_secret(), now).map(|a| a.state),
        Err(AuthError::Invalid("Invalid format for claim: nbf".into()))
    );
}

#[test]
fn admin_token_comparison_is_exact() {
    assert!(constant_time_eq(b"s3cret-admin", b"s3cret-admin"));
    for candidate in [
        &b"s3cret-admiN"[..],
        b"s3cret-admin ",
        b"s3cret-admi",
        b"",
        b"S3cret-admin",
    ] {
        assert!(!constant_time_eq(b"s3cret-admin", candidate));
    }
    assert!(constant_time_eq(b"", b""));
}
