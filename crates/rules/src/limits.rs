//! Limits per caller (`.limits`, Hearth's own key beside `.read`/`.write`; docs/limits.md):
//! how often and how much one caller may write at a location, how many listens it may hold
//! there, and (at the root only) how many connections it may hold at once. A caller is a
//! signed-in user (`auth.uid`) or, for anonymous callers and for `"per": "client.address"`,
//! the client's IP address.
//!
//! The rules only declare the limits and say which declarations an operation at a path
//! touches; counting is the server's (it needs the clock and the callers), like evaluation
//! takes `now_ms` as an argument. Firebase's own rules never use the key, so they load
//! unchanged; a document using it is refused by Firebase.

use std::sync::Arc;

use crate::error::LoadError;
use crate::json::{Json, JsonKind};

/// The largest count a limit may name (writes, bytes, listens, connections): 2^40.
pub const MAX_LIMIT: u64 = 1 << 40;

/// Declarations of `.limits` one document may hold.
pub const MAX_LIMIT_DECLARATIONS: usize = 1_000;

/// Whom a declaration counts separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKey {
    /// Each signed-in user by `auth.uid`; anonymous callers by their address (the default).
    Uid,
    /// Each client address, signed in or not.
    Address,
}

/// `count` units per `period_ms`, refilled smoothly (a token bucket whose burst is `count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u64,
    pub period_ms: u64,
}

impl Rate {
    /// Its period in words: `a second`, `a minute` or `an hour`.
    pub fn period_words(&self) -> &'static str {
        match self.period_ms {
            1_000 => "a second",
            60_000 => "a minute",
            _ => "an hour",
        }
    }
}

/// One `.limits` declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSpec {
    /// Its index among the document's declarations, in document order: the key of its
    /// counters for as long as this document is loaded.
    pub id: usize,
    /// Where it is declared, wildcards unfilled: `/rules/rooms/$room/messages/.limits`.
    pub pattern: Arc<str>,
    pub per: LimitKey,
    /// Write operations (a set, an update, a transaction's commit, a REST write).
    pub writes: Option<Rate>,
    /// Bytes written, as the written JSON measures.
    pub bytes: Option<Rate>,
    /// Listens held at once.
    pub listens: Option<u64>,
    /// Connections held at once (the root's declaration only).
    pub connections: Option<u64>,
}

impl LimitSpec {
    /// The declaration's limits in words, for `hearth rules check` and errors.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(rate) = self.writes {
            parts.push(format!("{} writes {}", rate.count, rate.period_words()));
        }
        if let Some(rate) = self.bytes {
            parts.push(format!("{} bytes {}", rate.count, rate.period_words()));
        }
        if let Some(listens) = self.listens {
            parts.push(format!("{listens} listens"));
        }
        if let Some(connections) = self.connections {
            parts.push(format!("{connections} connections"));
        }
        let per = match self.per {
            LimitKey::Uid => "user (anonymous callers by address)",
            LimitKey::Address => "client address",
        };
        format!("{} per {per}", parts.join(", "))
    }
}

/// Reads the value of a `.limits` member declared at `pattern` (the root when `at_root`).
pub(crate) fn parse(
    value: &Json,
    id: usize,
    pattern: Arc<str>,
    at_root: bool,
) -> Result<LimitSpec, (usize, LoadError)> {
    let invalid = |at: usize, why: &str| (at, LoadError::InvalidLimits(why.to_owned()));
    let JsonKind::Object(members) = &value.kind else {
        return Err(invalid(
            value.at,
            "expected an object such as {\"writes\": \"10/s\"}",
        ));
    };
    let mut spec = LimitSpec {
        id,
        pattern,
        per: LimitKey::Uid,
        writes: None,
        bytes: None,
        listens: None,
        connections: None,
    };
    for member in members {
        let at = member.value.at;
        let text = match &member.value.kind {
            JsonKind::String(text) => Some(text.text.as_str()),
            _ => None,
        };
        match member.name.text.as_str() {
            "writes" => {
                let text =
                    text.ok_or_else(|| invalid(at, "writes must be a string such as \"10/s\""))?;
                spec.writes = Some(rate(text, false).map_err(|why| invalid(at, &why))?);
            }
            "bytes" => {
                let text = text
                    .ok_or_else(|| invalid(at, "bytes must be a string such as \"100kb/min\""))?;
                spec.bytes = Some(rate(text, true).map_err(|why| invalid(at, &why))?);
            }
            "listens" => spec.listens = Some(count(&member.value, "listens")?),
            "connections" if !at_root => {
                return Err(invalid(
                    at,
                    "connections is counted per database: declare it at the root of the rules",
                ))
            }
            "connections" => spec.connections = Some(count(&member.value, "connections")?),
            "per" => {
                spec.per = match text {
                    Some("auth.uid") => LimitKey::Uid,
                    Some("client.address") => LimitKey::Address,
                    _ => {
                        return Err(invalid(
                            at,
                            "per must be \"auth.uid\" or \"client.address\"",
                        ))
                    }
                }
            }
            other => {
                return Err(invalid(
                    member.name.source_offset(0).saturating_sub(1),
                    &format!("unknown limit '{other}' (writes, bytes, listens, connections, per)"),
                ))
            }
        }
    }
    if spec.writes.is_none()
        && spec.bytes.is_none()
        && spec.listens.is_none()
        && spec.connections.is_none()
    {
        return Err(invalid(value.at, "names no limit"));
    }
    Ok(spec)
}

/// A whole number from 1 to [`MAX_LIMIT`].
fn count(value: &Json, name: &str) -> Result<u64, (usize, LoadError)> {
    let parsed = match &value.kind {
        JsonKind::Number(text) => text.parse::<u64>().ok(),
        _ => None,
    };
    match parsed {
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err((
            value.at,
            LoadError::InvalidLimits(format!(
                "{name} must be a whole number from 1 to {MAX_LIMIT}"
            )),
        )),
    }
}

/// Reads `N/period` (`10/s`, `600/min`, `1000/h`); with `bytes`, N may carry a unit
/// (`b`, `kb` = 1024, `mb` = 1024², `gb` = 1024³).
fn rate(text: &str, bytes: bool) -> Result<Rate, String> {
    let shape = if bytes { "\"100kb/min\"" } else { "\"10/s\"" };
    let (amount, period) = text
        .split_once('/')
        .ok_or_else(|| format!("'{text}' is not a rate such as {shape}"))?;
    let period_ms = match period.trim() {
        "s" | "sec" | "second" => 1_000,
        "m" | "min" | "minute" => 60_000,
        "h" | "hour" => 3_600_000,
        other => return Err(format!("unknown period '{other}' (s, min or h)")),
    };
    let amount = amount.trim().to_ascii_lowercase();
    let digits = amount.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &amount[digits.len()..];
    let scale: u64 = match (bytes, unit) {
        (_, "") => 1,
        (true, "b") => 1,
        (true, "kb") => 1 << 10,
        (true, "mb") => 1 << 20,
        (true, "gb") => 1 << 30,
        (true, other) => return Err(format!("unknown unit '{other}' (b, kb, mb or gb)")),
        (false, _) => return Err(format!("'{text}' is not a rate such as {shape}")),
    };
    let count = digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| format!("'{text}': the amount must be from 1 to {MAX_LIMIT}"))?;
    Ok(Rate { count, period_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_units() {
        let rate = |text: &str, bytes| super::rate(text, bytes);
        assert_eq!(
            rate("600/min", false),
            Ok(Rate {
                count: 600,
                period_ms: 60_000
            })
        );
        assert_eq!(rate("2 / h", false).map(|r| r.period_ms), Ok(3_600_000));
        assert_eq!(rate("1MB/s", true).map(|r| r.count), Ok(1 << 20));
        assert_eq!(rate("5b/sec", true).map(|r| r.count), Ok(5));
        assert!(rate("10kb/s", false).is_err());
        assert!(rate("0/s", false).is_err());
        assert!(rate("10/day", false).is_err());
        assert!(rate("10", false).is_err());
        assert!(rate("2000gb/s", true).is_err());
        assert!(rate("-1/s", false).is_err());
        assert!(rate("99999999999999999999999/s", false).is_err());
    }
}
