//! One fetch of the key document over HTTP(S), with `ureq` (rustls, Mozilla's roots).

use std::time::Duration;

use super::policy::max_age;

/// The largest key document accepted; Google's is a few kilobytes.
pub const MAX_JWKS_BYTES: u64 = 1024 * 1024;

/// How long one fetch may take in all (connect, TLS, answer).
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// A fetched document and its `max-age`.
pub struct Fetched {
    pub document: String,
    pub max_age_secs: Option<u64>,
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(FETCH_TIMEOUT))
        .http_status_as_error(true)
        .build()
        .into()
}

/// Fetches `url`; the error is a sentence for the log.
pub fn fetch(agent: &ureq::Agent, url: &str) -> Result<Fetched, String> {
    let mut response = agent.get(url).call().map_err(|error| error.to_string())?;
    let cache_control = response
        .headers()
        .get("cache-control")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let bytes = response
        .body_mut()
        .with_config()
        .limit(MAX_JWKS_BYTES)
        .read_to_vec()
        .map_err(|error| format!("reading the answer: {error}"))?;
    let document =
        String::from_utf8(bytes).map_err(|_| "the answer is not UTF-8 text".to_owned())?;
    Ok(Fetched {
        document,
        max_age_secs: max_age(cache_control.as_deref()),
    })
}
