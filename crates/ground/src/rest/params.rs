//! The plain REST query parameters (spec §15.3): `print`, `format`, `shallow`, `timeout`,
//! `writeSizeLimit`, `download` and `callback`. (`orderBy` and its filters are read by
//! `hearth_query`.) Each parser returns the message of a 400 answer when the value is wrong.

use std::time::Duration;

/// `print`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Print {
    #[default]
    Compact,
    Pretty,
    Silent,
}

pub fn parse_print(value: Option<&str>) -> Result<Print, String> {
    match value {
        None => Ok(Print::Compact),
        Some("pretty") => Ok(Print::Pretty),
        Some("silent") => Ok(Print::Silent),
        Some(other) => Err(format!(
            "print must be either 'pretty' or 'silent', not {other:?}"
        )),
    }
}

/// `format=export`: `true` when priorities are to be kept.
pub fn parse_format(value: Option<&str>) -> Result<bool, String> {
    match value {
        None => Ok(false),
        Some("export") => Ok(true),
        Some(other) => Err(format!("format must be 'export', not {other:?}")),
    }
}

/// `shallow=true|false`.
pub fn parse_shallow(value: Option<&str>) -> Result<bool, String> {
    match value {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(format!("shallow must be 'true' or 'false', not {other:?}")),
    }
}

/// The longest `timeout` a read may ask for (production's limit).
pub const MAX_READ_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// `timeout=<n>ms|<n>s|<n>min`, a positive whole number of at most [`MAX_READ_TIMEOUT`].
pub fn parse_timeout(value: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(text) = value else {
        return Ok(None);
    };
    let invalid = || {
        format!(
            "timeout must be a positive whole number followed by ms, s or min, of at most 15min, not {text:?}"
        )
    };
    let (number, unit_ms) = if let Some(number) = text.strip_suffix("ms") {
        (number, 1)
    } else if let Some(number) = text.strip_suffix("min") {
        (number, 60_000)
    } else if let Some(number) = text.strip_suffix('s') {
        (number, 1_000)
    } else {
        return Err(invalid());
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let count: u64 = number.parse().map_err(|_| invalid())?;
    let duration = count
        .checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(invalid)?;
    if duration.is_zero() || duration > MAX_READ_TIMEOUT {
        return Err(invalid());
    }
    Ok(Some(duration))
}

/// `writeSizeLimit`. Production limits a write by its estimated execution time; this server
/// estimates a write's cost as the bytes it writes plus the bytes of the data it replaces (a
/// large delete is expensive too) and maps each level to a byte threshold, about one MiB per
/// second of production's target time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteSizeLimit {
    /// No parameter: only [`super::MAX_REST_BODY_BYTES`] applies.
    #[default]
    Default,
    /// ~1 s: 1 MiB.
    Tiny,
    /// ~10 s: 10 MiB.
    Small,
    /// ~30 s: 30 MiB.
    Medium,
    /// ~60 s: 60 MiB.
    Large,
    /// No cost limit (the body limit still applies).
    Unlimited,
}

const MIB: usize = 1024 * 1024;

impl WriteSizeLimit {
    pub fn parse(value: Option<&str>) -> Result<WriteSizeLimit, String> {
        match value {
            None => Ok(WriteSizeLimit::Default),
            Some("tiny") => Ok(WriteSizeLimit::Tiny),
            Some("small") => Ok(WriteSizeLimit::Small),
            Some("medium") => Ok(WriteSizeLimit::Medium),
            Some("large") => Ok(WriteSizeLimit::Large),
            Some("unlimited") => Ok(WriteSizeLimit::Unlimited),
            Some(other) => Err(format!(
                "writeSizeLimit must be one of tiny, small, medium, large or unlimited, not {other:?}"
            )),
        }
    }

    /// The largest cost in bytes, or `None` for no limit beyond the body limit.
    pub fn max_bytes(self) -> Option<usize> {
        match self {
            WriteSizeLimit::Default | WriteSizeLimit::Unlimited => None,
            WriteSizeLimit::Tiny => Some(MIB),
            WriteSizeLimit::Small => Some(10 * MIB),
            WriteSizeLimit::Medium => Some(30 * MIB),
            WriteSizeLimit::Large => Some(60 * MIB),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WriteSizeLimit::Default => "default",
            WriteSizeLimit::Tiny => "tiny",
            WriteSizeLimit::Small => "small",
            WriteSizeLimit::Medium => "medium",
            WriteSizeLimit::Large => "large",
            WriteSizeLimit::Unlimited => "unlimited",
        }
    }
}

/// Where a change feed starts (`changesSince`, or the `Last-Event-ID` of a reconnecting
/// client, docs/change-feed.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedStart {
    /// With the whole current value, then every change after it.
    Now,
    /// After the record at this log position: `SEQ` outside a cluster, `EPOCH.SEQ` in one
    /// (the fencing epoch of the owner that gave the position).
    After { epoch: Option<u64>, seq: u64 },
}

impl FeedStart {
    /// `now`, `SEQ` or `EPOCH.SEQ`, as the feed's event ids write positions.
    pub fn parse(value: &str) -> Result<FeedStart, String> {
        let value = value.trim();
        if value == "now" {
            return Ok(FeedStart::Now);
        }
        let number = |text: &str| {
            (!text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse::<u64>().ok())
                .flatten()
        };
        let parsed = match value.split_once('.') {
            None => number(value).map(|seq| FeedStart::After { epoch: None, seq }),
            Some((epoch, seq)) => {
                number(epoch)
                    .zip(number(seq))
                    .map(|(epoch, seq)| FeedStart::After {
                        epoch: Some(epoch),
                        seq,
                    })
            }
        };
        parsed.ok_or_else(|| {
            "changesSince (and Last-Event-ID) must be now or a position the feed gave as an event id"
                .to_owned()
        })
    }
}

/// The longest `download` file name or `callback` name accepted.
const MAX_NAME_BYTES: usize = 256;

/// `download=<file name>`: kept to characters that are safe inside a quoted header value.
pub fn parse_download(value: Option<&str>) -> Result<Option<String>, String> {
    let Some(name) = value else {
        return Ok(None);
    };
    let safe = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .chars()
            .all(|c| (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ');
    if !safe {
        return Err(format!(
            "download must be a file name of printable ASCII without quotes, not {name:?}"
        ));
    }
    Ok(Some(name.to_owned()))
}

/// `callback=<function>` (JSONP): a JavaScript name, dots allowed.
pub fn parse_callback(value: Option<&str>) -> Result<Option<String>, String> {
    let Some(name) = value else {
        return Ok(None);
    };
    let safe = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'));
    if !safe {
        return Err(format!("callback must be a JavaScript name, not {name:?}"));
    }
    Ok(Some(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_format_shallow() {
        assert_eq!(parse_print(None), Ok(Print::Compact));
        assert_eq!(parse_print(Some("pretty")), Ok(Print::Pretty));
        assert_eq!(parse_print(Some("silent")), Ok(Print::Silent));
        assert!(parse_print(Some("loud")).is_err());
        assert_eq!(parse_format(Some("export")), Ok(true));
        assert!(parse_format(Some("xml")).is_err());
        assert_eq!(parse_shallow(Some("true")), Ok(true));
        assert_eq!(parse_shallow(Some("false")), Ok(false));
        assert!(parse_shallow(Some("yes")).is_err());
    }

    #[test]
    fn timeouts() {
        assert_eq!(
            parse_timeout(Some("250ms")),
            Ok(Some(Duration::from_millis(250)))
        );
        assert_eq!(parse_timeout(Some("3s")), Ok(Some(Duration::from_secs(3))));
        assert_eq!(
            parse_timeout(Some("15min")),
            Ok(Some(Duration::from_secs(900)))
        );
        assert_eq!(parse_timeout(None), Ok(None));
        for bad in [
            "16min",
            "0s",
            "1.5s",
            "s",
            "10",
            "-1s",
            "10h",
            "99999999999999999999ms",
        ] {
            assert!(parse_timeout(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn write_size_limits() {
        assert_eq!(
            WriteSizeLimit::parse(Some("tiny")).map(WriteSizeLimit::max_bytes),
            Ok(Some(MIB))
        );
        assert_eq!(
            WriteSizeLimit::parse(Some("large")).map(WriteSizeLimit::max_bytes),
            Ok(Some(60 * MIB))
        );
        assert_eq!(
            WriteSizeLimit::parse(Some("unlimited")).map(WriteSizeLimit::max_bytes),
            Ok(None)
        );
        assert_eq!(WriteSizeLimit::parse(None), Ok(WriteSizeLimit::Default));
        assert!(WriteSizeLimit::parse(Some("huge")).is_err());
    }

    #[test]
    fn download_and_callback_names() {
        assert_eq!(
            parse_download(Some("backup 1.json")),
            Ok(Some("backup 1.json".into()))
        );
        assert!(parse_download(Some("a\"b")).is_err());
        assert!(parse_download(Some("a\r\nSet-Cookie: x")).is_err());
        assert_eq!(
            parse_callback(Some("app.cb_1")),
            Ok(Some("app.cb_1".into()))
        );
        assert!(parse_callback(Some("alert(1)")).is_err());
        assert!(parse_callback(Some("1x")).is_err());
    }
}
