//! The signing keys of Firebase ID tokens, fetched from a JWKS URL and kept fresh.
//!
//! Google rotates the keys that sign Firebase ID tokens, so a key file loaded once stops
//! verifying new tokens within days. At start the keys come from, in this order: the cache in
//! the data directory if its `max-age` has not passed, a fetch of the URL, the cache even if
//! stale, the static `--firebase-jwks` file. A background thread (never a shard) then fetches
//! the URL again as the answer's `Cache-Control: max-age` says (bounded by [`MIN_REFRESH`] and
//! [`MAX_REFRESH`]), retries with backoff on failure while the last good keys stay in use,
//! and writes every good answer to the cache atomically, so that a restart without internet
//! still verifies tokens. Shards read the current set with one `RwLock` read and an `Arc`
//! clone per verification.

mod cache;
mod fetch;
pub mod policy;

use std::path::PathBuf;
use std::sync::{mpsc, Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};
use tracing::{debug, info, warn};

pub use cache::{APP_CHECK_CACHE_FILE, CACHE_FILE};
pub use fetch::MAX_JWKS_BYTES;
pub use policy::{MAX_REFRESH, MIN_REFRESH};

use crate::verify_key::VerifyKey;
use hearth_net::time::now_ms;

/// Google's JWKS of the keys that sign Firebase ID tokens (the default of
/// `--firebase-jwks-url` when `--firebase-project` is set).
pub const GOOGLE_SECURETOKEN_JWKS_URL: &str =
    "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com";

/// The current Firebase signing keys, shared by every shard and replaced whole by the refresher.
#[derive(Clone, Default)]
pub struct FirebaseKeys(Arc<RwLock<Arc<[VerifyKey]>>>);

impl FirebaseKeys {
    /// The keys in use now.
    pub fn current(&self) -> Arc<[VerifyKey]> {
        match self.0.read() {
            Ok(keys) => keys.clone(),
            // A writer panicked mid-assignment of an `Arc`: the value is still whole.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn replace(&self, keys: Vec<VerifyKey>) {
        let keys: Arc<[VerifyKey]> = keys.into();
        match self.0.write() {
            Ok(mut current) => *current = keys,
            Err(poisoned) => *poisoned.into_inner() = keys,
        }
    }
}

/// Which keys a source holds: what they verify, where they are cached, what the log calls them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyPurpose {
    /// Firebase ID tokens (`--firebase-project`).
    #[default]
    IdTokens,
    /// App Check tokens (`--app-check-project-number`, `app_check`).
    AppCheck,
}

impl KeyPurpose {
    /// The keys' name in the log.
    fn name(self) -> &'static str {
        match self {
            KeyPurpose::IdTokens => "Firebase signing keys",
            KeyPurpose::AppCheck => "App Check keys",
        }
    }

    /// The flag of their static file.
    fn fallback_flag(self) -> &'static str {
        match self {
            KeyPurpose::IdTokens => "--firebase-jwks",
            KeyPurpose::AppCheck => "--app-check-jwks",
        }
    }

    /// Their cache in the data directory.
    pub fn cache_file(self) -> &'static str {
        match self {
            KeyPurpose::IdTokens => CACHE_FILE,
            KeyPurpose::AppCheck => APP_CHECK_CACHE_FILE,
        }
    }

    /// Whether tokens they sign must carry the Firebase project (`VerifyKey::firebase`).
    fn firebase(self) -> bool {
        self == KeyPurpose::IdTokens
    }
}

/// Where a set of keys comes from.
#[derive(Clone)]
pub struct JwksSource {
    /// What the keys verify.
    pub purpose: KeyPurpose,
    /// The JWKS URL (`https://` in production; `http://` is accepted, for tests and proxies
    /// on the same machine).
    pub url: String,
    /// The keys of the static `--firebase-jwks` file, used only when neither a fetch nor the
    /// cache gives any.
    pub fallback: Vec<VerifyKey>,
    /// The shortest refresh period ([`MIN_REFRESH`]; lower only in tests).
    pub min_refresh: Duration,
    /// The set the shards read; the same handle as `AuthConfig::firebase_keys`.
    pub keys: FirebaseKeys,
}

impl std::fmt::Debug for JwksSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksSource")
            .field("purpose", &self.purpose)
            .field("url", &self.url)
            .field("fallback", &self.fallback.len())
            .field("min_refresh", &self.min_refresh)
            .finish()
    }
}

/// Why a key document is refused.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error(
        "the URL must start with https:// (or http:// for a server you trust on the path): {0}"
    )]
    BadUrl(String),
}

/// The refresher thread; dropping this stops it (at its next wake-up at the latest, an
/// attempt in flight ends within the fetch timeout).
pub struct JwksRefresher {
    _stop: mpsc::Sender<()>,
}

/// Loads the first key set (cache, fetch, stale cache, static file, in that order, logging
/// which) and starts the thread that keeps it fresh. `cache_dir` is the data directory
/// (`None` with `--durability none`: nothing is cached).
pub fn start(source: JwksSource, cache_dir: Option<PathBuf>) -> Result<JwksRefresher, JwksError> {
    let url = source.url.clone();
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(JwksError::BadUrl(url));
    }
    if url.starts_with("http://") {
        warn!(%url, "the JWKS URL of the {} is plain http: anyone on the path could swap the keys; use https in production", source.purpose.name());
    }
    let agent = fetch::agent();
    let mut refresher = Refresher {
        source,
        cache_dir,
        agent,
        failures: 0,
    };
    let purpose = refresher.source.purpose;
    let first_wait = refresher.first_keys();
    let (stop, stopped) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("hearth-jwks".to_owned())
        .spawn(move || refresher.run(first_wait, &stopped));
    if let Err(error) = spawned {
        warn!(%error, "cannot start the refresher of the {}; the keys loaded at start stay in use", purpose.name());
    }
    Ok(JwksRefresher { _stop: stop })
}

struct Refresher {
    source: JwksSource,
    cache_dir: Option<PathBuf>,
    agent: ureq::Agent,
    /// Failed fetches in a row.
    failures: u32,
}

impl Refresher {
    /// The start-up order; returns how long to wait before the next fetch.
    fn first_keys(&mut self) -> Duration {
        let url = self.source.url.clone();
        let cached = self
            .cache_dir
            .as_deref()
            .and_then(|dir| cache::read(dir, self.source.purpose.cache_file(), &url));
        let (name, firebase) = (self.source.purpose.name(), self.source.purpose.firebase());
        let cached = cached.and_then(|cached| {
            match keys_from_document(cached.document.as_bytes(), firebase) {
                Ok(keys) if !keys.is_empty() => Some((cached, keys)),
                Ok(_) => None,
                Err(reason) => {
                    warn!(%reason, "the cached {name} are unusable; ignored");
                    None
                }
            }
        });
        let now = now_ms();
        if let Some((cached, keys)) = &cached {
            let period = policy::refresh_after(cached.max_age_secs, self.source.min_refresh);
            let expires = cached
                .fetched_at_ms
                .saturating_add(period.as_millis() as u64);
            if now < expires {
                info!(keys = keys.len(), kids = ?kids(keys), "{name} loaded from the cache (fresh)");
                self.source.keys.replace(keys.clone());
                return Duration::from_millis(expires - now);
            }
        }
        if let Some(wait) = self.fetch_and_install() {
            return wait;
        }
        let wait = policy::retry_after(self.failures, self.source.min_refresh);
        if let Some((cached, keys)) = cached {
            warn!(keys = keys.len(), age_secs = now.saturating_sub(cached.fetched_at_ms) / 1000, "the JWKS URL of the {name} cannot be fetched; using the cached keys although their max-age has passed");
            self.source.keys.replace(keys);
        } else if !self.source.fallback.is_empty() {
            warn!(keys = self.source.fallback.len(), "the JWKS URL of the {name} cannot be fetched and nothing is cached; using the keys of {}", self.source.purpose.fallback_flag());
            self.source.keys.replace(self.source.fallback.clone());
        } else {
            warn!("the JWKS URL of the {name} cannot be fetched and there is no cache or {} file: the tokens they sign are refused until a fetch succeeds", self.source.purpose.fallback_flag());
        }
        wait
    }

    /// Fetches the keys; on success installs and caches them and returns the wait before the
    /// next fetch. On failure the keys in use stay.
    fn fetch_and_install(&mut self) -> Option<Duration> {
        let url = &self.source.url;
        let name = self.source.purpose.name();
        let fetched = fetch::fetch(&self.agent, url).and_then(|fetched| {
            let keys =
                keys_from_document(fetched.document.as_bytes(), self.source.purpose.firebase())?;
            if keys.is_empty() {
                return Err("the document holds no usable key".to_owned());
            }
            Ok((fetched, keys))
        });
        let (fetched, keys) = match fetched {
            Ok(fetched) => fetched,
            Err(reason) => {
                self.failures += 1;
                warn!(%url, %reason, failures = self.failures, "fetching the {name} failed; the last good keys stay in use");
                return None;
            }
        };
        self.failures = 0;
        let previous = self.source.keys.current();
        let now = kids(&keys);
        if kids(&previous) != now {
            info!(keys = keys.len(), kids = ?now, "{name} fetched");
        } else {
            debug!(keys = keys.len(), "{name} fetched, unchanged");
        }
        self.source.keys.replace(keys);
        let period = policy::refresh_after(fetched.max_age_secs, self.source.min_refresh);
        if let Some(dir) = &self.cache_dir {
            let cached = cache::Cached {
                url: url.clone(),
                fetched_at_ms: now_ms(),
                max_age_secs: fetched.max_age_secs,
                document: fetched.document,
            };
            if let Err(error) = cache::write(dir, self.source.purpose.cache_file(), &cached) {
                warn!(%error, "cannot write the cache of the {name}; a restart without internet would not find these keys");
            }
        }
        Some(period)
    }

    fn run(&mut self, first_wait: Duration, stopped: &mpsc::Receiver<()>) {
        let mut wait = first_wait;
        loop {
            match stopped.recv_timeout(wait) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            wait = match self.fetch_and_install() {
                Some(period) => period,
                None => policy::retry_after(self.failures, self.source.min_refresh),
            };
        }
    }
}

fn kids(keys: &[VerifyKey]) -> Vec<&str> {
    keys.iter().filter_map(|key| key.kid.as_deref()).collect()
}

/// The keys of a JSON key document: a JWKS (`{"keys": [...]}`), or Google's X.509 form
/// (`{"<kid>": "-----BEGIN CERTIFICATE-----...", ...}`).
pub fn keys_from_document(bytes: &[u8], firebase: bool) -> Result<Vec<VerifyKey>, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|error| format!("not a JSON key document: {error}"))?;
    let Some(object) = value.as_object() else {
        return Err("not a JSON key document: not an object".to_owned());
    };
    if !object.contains_key("keys") && object.values().all(|value| value.is_string()) {
        return certificates(object, firebase);
    }
    let set: JwkSet =
        serde_json::from_value(value).map_err(|error| format!("not a JWKS document: {error}"))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        let key = DecodingKey::from_jwk(jwk).map_err(|error| format!("unusable key: {error}"))?;
        let algorithm = match jwk.common.key_algorithm.map(|a| a.to_string()).as_deref() {
            Some("ES256") => Algorithm::ES256,
            Some("RS256") | None if matches!(jwk.algorithm, AlgorithmParameters::RSA(_)) => {
                Algorithm::RS256
            }
            None if matches!(jwk.algorithm, AlgorithmParameters::EllipticCurve(_)) => {
                Algorithm::ES256
            }
            other => return Err(format!("unsupported key algorithm {other:?}")),
        };
        keys.push(VerifyKey {
            kid: jwk.common.key_id.clone(),
            algorithm,
            key,
            firebase,
        });
    }
    Ok(keys)
}

fn certificates(
    object: &serde_json::Map<String, serde_json::Value>,
    firebase: bool,
) -> Result<Vec<VerifyKey>, String> {
    let mut keys = Vec::new();
    for (kid, pem) in object {
        let pem = pem.as_str().unwrap_or_default();
        let key = DecodingKey::from_rsa_pem(pem.as_bytes())
            .map_err(|error| format!("key {kid}: not an RSA certificate in PEM: {error}"))?;
        keys.push(VerifyKey {
            kid: Some(kid.clone()),
            algorithm: Algorithm::RS256,
            key,
            firebase,
        });
    }
    Ok(keys)
}
