//! App Check tokens against the test keys (testdata/keys), as Firebase's backend would issue
//! them, and each way one can be wrong.

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::*;
use crate::{now_secs, AuthConfig};

fn keys_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/keys")
}

fn config() -> AppCheckConfig {
    AppCheckConfig {
        project_number: "123456789".into(),
        project_id: Some("demo-app".into()),
        keys: AuthConfig::load_keys(&keys_dir().join("rsa-jwks.json"), false).expect("jwks"),
        fetched: None,
    }
}

fn kid() -> String {
    let jwks: Value =
        serde_json::from_slice(&std::fs::read(keys_dir().join("rsa-jwks.json")).expect("jwks"))
            .expect("json");
    jwks["keys"][0]["kid"].as_str().expect("a kid").to_owned()
}

fn token(header: Header, claims: Value) -> String {
    let pem = std::fs::read(keys_dir().join("rsa-private.pem")).expect("test key");
    let key = EncodingKey::from_rsa_pem(&pem).expect("valid test key");
    encode(&header, &claims, &key).expect("signing")
}

fn header() -> Header {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid());
    header.typ = Some("JWT".into());
    header
}

fn claims(now: u64) -> Value {
    json!({
        "iss": "https://firebaseappcheck.googleapis.com/123456789",
        "aud": ["projects/123456789", "projects/demo-app"],
        "sub": "1:123456789:web:abc",
        "iat": now,
        "exp": now + 3600,
    })
}

#[test]
fn a_token_as_firebase_issues_it_is_verified() {
    let now = now_secs();
    let verified = config()
        .verify(&token(header(), claims(now)), now)
        .expect("valid");
    assert_eq!(verified.app_id, "1:123456789:web:abc");
    assert_eq!(verified.expires_at, now + 3600);
    // An audience naming the project by number only, or by id only, is the project's too.
    for audience in [json!(["projects/123456789"]), json!("projects/demo-app")] {
        let mut claims = claims(now);
        claims["aud"] = audience;
        config()
            .verify(&token(header(), claims), now)
            .expect("the project's audience");
    }
}

#[test]
fn every_way_a_token_can_be_wrong_is_refused() {
    let now = now_secs();
    let refused = |header: Header, claims: Value| config().verify(&token(header, claims), now);
    let with = |name: &str, value: Value| {
        let mut claims = claims(now);
        claims[name] = value;
        claims
    };
    let without = |name: &str| {
        let mut claims = claims(now);
        claims.as_object_mut().expect("object").remove(name);
        claims
    };
    for (why, claims) in [
        (
            "another project's issuer",
            with("iss", json!("https://firebaseappcheck.googleapis.com/999")),
        ),
        (
            "an ID token's issuer",
            with("iss", json!("https://securetoken.google.com/demo-app")),
        ),
        ("another audience", with("aud", json!(["projects/999"]))),
        ("expired", with("exp", json!(now - 3600))),
        ("no subject", without("sub")),
        ("an empty subject", with("sub", json!(""))),
        ("no expiry", without("exp")),
    ] {
        assert!(
            matches!(refused(header(), claims), Err(AppCheckError::Invalid(_))),
            "{why}"
        );
    }
    let mut no_kid = header();
    no_kid.kid = None;
    assert_eq!(refused(no_kid, claims(now)), Err(AppCheckError::Header));
    let mut other_kid = header();
    other_kid.kid = Some("another".into());
    assert_eq!(
        refused(other_kid, claims(now)),
        Err(AppCheckError::UnknownKey)
    );
    let mut no_typ = header();
    no_typ.typ = None;
    assert_eq!(refused(no_typ, claims(now)), Err(AppCheckError::Header));
    // Signed by nobody the keys know: the signature is checked.
    let good = token(header(), claims(now));
    let mut parts: Vec<&str> = good.split('.').collect();
    let forged = token(header(), with("sub", json!("1:123456789:web:forged")));
    let forged_payload = forged.split('.').nth(1).expect("payload").to_owned();
    parts[1] = &forged_payload;
    assert!(matches!(
        config().verify(&parts.join("."), now),
        Err(AppCheckError::Invalid(_))
    ));
    assert_eq!(
        config().verify("not a token", now),
        Err(AppCheckError::NotAJwt)
    );
    assert_eq!(
        config().verify(&"x".repeat(MAX_APP_CHECK_TOKEN_BYTES + 1), now),
        Err(AppCheckError::TooLong)
    );
    // An unsigned token, whatever it claims.
    let unsigned = format!(
        "{}.{}.",
        base64_url(&json!({"alg": "none", "typ": "JWT", "kid": kid()})),
        base64_url(&claims(now))
    );
    assert_eq!(config().verify(&unsigned, now), Err(AppCheckError::Header));
}

fn base64_url(value: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}
