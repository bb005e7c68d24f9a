//! The last good key document, kept in the data directory so that a restart without
//! internet still verifies tokens.
//!
//! ```text
//! <data-dir>/jwks-cache.json   {"url": "...", "fetched_at_ms": ..., "max_age_secs": ..., "document": "<the answer's text>"}
//! ```
//!
//! Written as a temporary file, synced, renamed over the old one, and the directory synced:
//! the file is always a whole document, old or new.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tracing::warn;

/// The cache's file name in the data directory.
pub const CACHE_FILE: &str = "jwks-cache.json";

/// The App Check keys' cache, beside it.
pub const APP_CHECK_CACHE_FILE: &str = "app-check-jwks-cache.json";

#[derive(Debug, Serialize, Deserialize)]
pub struct Cached {
    /// The URL the document came from: a cache of another URL is not used.
    pub url: String,
    pub fetched_at_ms: u64,
    pub max_age_secs: Option<u64>,
    /// The answer's text, as fetched.
    pub document: String,
}

/// The cache of `url` in `dir`, if there is a readable one (an unreadable one is logged and
/// ignored: a fetch or the static file still follow).
pub fn read(dir: &Path, file: &str, url: &str) -> Option<Cached> {
    let path = dir.join(file);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => {
            warn!(path = %path.display(), %error, "cannot read the Firebase key cache");
            return None;
        }
    };
    match serde_json::from_slice::<Cached>(&bytes) {
        Ok(cached) if cached.url == url => Some(cached),
        Ok(cached) => {
            warn!(cached = %cached.url, %url, "the Firebase key cache is of another URL; ignored");
            None
        }
        Err(error) => {
            warn!(path = %path.display(), %error, "the Firebase key cache is damaged; ignored");
            None
        }
    }
}

pub fn write(dir: &Path, file: &str, cached: &Cached) -> std::io::Result<()> {
    let path = dir.join(file);
    let temporary = dir.join(format!("{file}.tmp"));
    let text = serde_json::to_vec(cached).map_err(std::io::Error::other)?;
    let mut file = File::create(&temporary)?;
    file.write_all(&text)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, &path)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_round_trips_and_belongs_to_its_url() {
        let dir = std::env::temp_dir().join(format!(
            "hearth-jwks-cache-{}-{}",
            std::process::id(),
            hearth_net::time::now_ms()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        assert!(read(&dir, CACHE_FILE, "https://a").is_none());
        let cached = Cached {
            url: "https://a".into(),
            fetched_at_ms: 7,
            max_age_secs: Some(60),
            document: "{\"keys\":[]}".into(),
        };
        write(&dir, CACHE_FILE, &cached).expect("written");
        let back = read(&dir, CACHE_FILE, "https://a").expect("read back");
        assert_eq!((back.fetched_at_ms, back.max_age_secs), (7, Some(60)));
        assert_eq!(back.document, cached.document);
        assert!(read(&dir, CACHE_FILE, "https://b").is_none());
        std::fs::write(dir.join(CACHE_FILE), b"{broken").expect("written");
        assert!(read(&dir, CACHE_FILE, "https://a").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
