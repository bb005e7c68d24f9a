//! When to fetch the Firebase signing keys again: pure functions of the answer's
//! `Cache-Control` header and of the failures so far, with time as an argument.

use std::time::Duration;

/// Never fetch the keys more often than this, whatever `max-age` says (the default of the
/// `--firebase-jwks-min-refresh-ms` test knob).
pub const MIN_REFRESH: Duration = Duration::from_secs(60);

/// Fetch the keys at least this often, even when `max-age` promises longer (or is missing).
pub const MAX_REFRESH: Duration = Duration::from_secs(24 * 60 * 60);

/// The refresh period when the answer has no usable `max-age`.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(60 * 60);

/// The first retry after a failed fetch; each further failure doubles it.
pub const FIRST_RETRY: Duration = Duration::from_secs(5);

/// The longest wait between two attempts after failures.
pub const MAX_RETRY: Duration = Duration::from_secs(5 * 60);

/// The `max-age` of a `Cache-Control` header value, in seconds; `None` when it has none, or
/// when `no-cache`/`no-store` say the answer must not be kept as is.
pub fn max_age(cache_control: Option<&str>) -> Option<u64> {
    let mut found = None;
    for directive in cache_control?.split(',') {
        let directive = directive.trim();
        let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
        let name = name.trim();
        if name.eq_ignore_ascii_case("no-cache") || name.eq_ignore_ascii_case("no-store") {
            return None;
        }
        if name.eq_ignore_ascii_case("max-age") {
            found = value.trim().trim_matches('"').parse().ok();
        }
    }
    found
}

/// How long the keys of an answer with this `max-age` are used before the next fetch: the
/// server's word, kept between `floor` and [`MAX_REFRESH`].
pub fn refresh_after(max_age_secs: Option<u64>, floor: Duration) -> Duration {
    max_age_secs
        .map_or(DEFAULT_REFRESH, Duration::from_secs)
        .clamp(floor.min(MAX_REFRESH), MAX_REFRESH)
}

/// The wait before the next attempt after `failures` failed fetches in a row (at least one):
/// [`FIRST_RETRY`] doubled per failure, at most [`MAX_RETRY`]; never shorter than `floor`
/// allows when the floor is below the first retry (the test knob makes both fast).
pub fn retry_after(failures: u32, floor: Duration) -> Duration {
    let first = FIRST_RETRY.min(floor.max(Duration::from_millis(1)));
    let doublings = failures.saturating_sub(1).min(16);
    first.saturating_mul(1 << doublings).min(MAX_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_from_the_directives() {
        assert_eq!(
            max_age(Some("public, max-age=19990, must-revalidate, no-transform")),
            Some(19990)
        );
        assert_eq!(max_age(Some("MAX-AGE = 7")), Some(7));
        assert_eq!(max_age(Some("max-age=\"30\"")), Some(30));
        assert_eq!(max_age(Some("public")), None);
        assert_eq!(max_age(Some("max-age=abc")), None);
        assert_eq!(max_age(Some("no-cache, max-age=60")), None);
        assert_eq!(max_age(None), None);
    }

    #[test]
    fn the_refresh_period_is_bounded() {
        let floor = MIN_REFRESH;
        assert_eq!(refresh_after(Some(1), floor), MIN_REFRESH);
        assert_eq!(refresh_after(Some(3600), floor), Duration::from_secs(3600));
        assert_eq!(refresh_after(Some(10 * 24 * 3600), floor), MAX_REFRESH);
        assert_eq!(refresh_after(None, floor), DEFAULT_REFRESH);
        // The test knob lowers the floor.
        assert_eq!(
            refresh_after(Some(1), Duration::from_millis(100)),
            Duration::from_secs(1)
        );
        assert_eq!(
            refresh_after(Some(0), Duration::from_millis(100)),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn retries_back_off_to_a_ceiling() {
        assert_eq!(retry_after(1, MIN_REFRESH), FIRST_RETRY);
        assert_eq!(retry_after(2, MIN_REFRESH), FIRST_RETRY * 2);
        assert_eq!(retry_after(100, MIN_REFRESH), MAX_RETRY);
        assert_eq!(
            retry_after(1, Duration::from_millis(100)),
            Duration::from_millis(100)
        );
    }
}
