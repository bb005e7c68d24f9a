//! Where a client's App Check token is (docs/app-check.md): the JavaScript SDK puts it in the
//! realtime URL's `ac` parameter (and, under Node.js, in an `X-Firebase-AppCheck` header too),
//! Android in that header only (the text `null` when it has none), and a REST client in the
//! header or in `ac`. The owner verifies it (`owner/src/app_check.rs`); this finds it and
//! names what it was found to be.

/// The header an App Check token comes in.
pub const APP_CHECK_HEADER: &str = "x-firebase-appcheck";

/// The token of a request whose `ac` parameter is `param` and App Check header `header`.
pub fn app_check_token(param: Option<&str>, header: Option<&str>) -> Option<String> {
    [param, header]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|token| !token.is_empty() && *token != "null")
        .map(str::to_owned)
}

/// Why a session or request without a token is refused, in Firebase's words.
pub const MISSING_REASON: &str = "Missing appcheck token";
/// Why one whose token did not verify (or expired) is refused.
pub const INVALID_REASON: &str = "Invalid appcheck token";

/// What a session's App Check token was found to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppCheckSeen {
    #[default]
    Missing,
    Invalid,
    Verified {
        /// Seconds since the epoch.
        expires_at: u64,
    },
}

impl AppCheckSeen {
    pub fn valid_at(self, now_secs: u64) -> bool {
        matches!(self, AppCheckSeen::Verified { expires_at } if expires_at + hearth_auth::CLOCK_LEEWAY_SECS >= now_secs)
    }

    pub fn reason(self) -> &'static str {
        match self {
            AppCheckSeen::Missing => MISSING_REASON,
            AppCheckSeen::Invalid | AppCheckSeen::Verified { .. } => INVALID_REASON,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_auth::CLOCK_LEEWAY_SECS;

    #[test]
    fn the_parameter_then_the_header_and_never_the_text_null() {
        assert_eq!(app_check_token(Some("a"), Some("b")), Some("a".into()));
        assert_eq!(app_check_token(None, Some(" b ")), Some("b".into()));
        assert_eq!(app_check_token(Some(""), Some("null")), None);
        assert_eq!(app_check_token(None, None), None);
    }

    #[test]
    fn a_token_is_valid_until_it_expires_with_the_leeway() {
        let seen = AppCheckSeen::Verified { expires_at: 1_000 };
        assert!(seen.valid_at(1_000 + CLOCK_LEEWAY_SECS));
        assert!(!seen.valid_at(1_001 + CLOCK_LEEWAY_SECS));
        assert_eq!(seen.reason(), INVALID_REASON);
        assert!(!AppCheckSeen::Missing.valid_at(0));
        assert_eq!(AppCheckSeen::Missing.reason(), MISSING_REASON);
        assert!(!AppCheckSeen::Invalid.valid_at(0));
    }
}
