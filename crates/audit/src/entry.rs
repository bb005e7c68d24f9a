//! One audited write as its database's owner describes it, the line the audit files keep of
//! it, and what a query asks of lines.

use serde::{Deserialize, Serialize};

/// What the owner knows of an acknowledged write of an audited database. Logged as the text
/// of an audit record right after the write's own record (so it is durable exactly when the
/// write is), then copied into the audit files with the record's position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When the owner applied the write, in milliseconds since the Unix epoch.
    pub time: u64,
    /// `set`, `update`, `transaction` or `onDisconnect`.
    pub op: String,
    /// The location written (an update's base).
    pub path: String,
    /// An update's written locations, each in full; empty for a set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The credential's `uid`; `None` for an admin or an unauthenticated caller.
    pub uid: Option<String>,
    /// How the credential was signed in (`firebase.sign_in_provider`, else the `provider` of
    /// `auth`); `admin` for an admin credential, `None` without one.
    pub provider: Option<String>,
    /// `websocket`, `longpoll`, `webtransport` (a realtime session's carrier) or `rest`.
    pub transport: String,
    /// The client's IP address as the server saw it (no `X-Forwarded-For`).
    pub address: Option<String>,
    /// The rules that allowed it: each granting `.write` rule as `PATTERN/.write`, or
    /// `admin` (an admin credential bypasses the rules) or `open` (no rules restrict).
    pub rules: Vec<String>,
}

impl AuditEntry {
    /// The entry as the text of its log record.
    pub fn to_record(&self) -> String {
        // A struct of strings and numbers always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The fields of a line of an audit file that a query or an erasure reads; the line itself
/// is answered as written.
#[derive(Debug, Deserialize)]
pub(crate) struct LineFacts {
    pub seq: u64,
    #[serde(default)]
    pub erased: bool,
    #[serde(default)]
    pub time: u64,
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub uid: Option<String>,
}

/// The line of the audit file for the entry `record` (an audit record's text) at log
/// position `seq` (the entry's fields after `seq`), with the entry's time. `None` if the text
/// is not an entry.
pub(crate) fn line_of(seq: u64, record: &str) -> Option<(String, u64)> {
    /// What is read of an entry here: its time (the other members are checked as JSON and
    /// skipped without being kept).
    #[derive(Deserialize)]
    struct Timed {
        time: u64,
    }
    let timed: Timed = serde_json::from_str(record).ok()?;
    // The record's text is one JSON object on one line (serde_json writes no newline), so
    // its members follow the position as they are.
    let members = record.trim().strip_prefix('{')?;
    if members.trim_start().starts_with('}') || record.contains('\n') {
        return None;
    }
    let mut line = String::with_capacity(record.len() + 24);
    line.push_str("{\"seq\":");
    line.push_str(&seq.to_string());
    line.push(',');
    line.push_str(members);
    line.push('\n');
    Some((line, timed.time))
}

/// The line that replaces an erased one: its position stays (so that nothing copies the
/// entry again from the log), nothing else of it.
pub(crate) fn tombstone(seq: u64) -> String {
    format!("{{\"seq\":{seq},\"erased\":true}}\n")
}

/// The most lines one query answers ([`AuditQuery::limit`]); ask again with `after` for more.
pub const MAX_QUERY_LINES: usize = 10_000;

/// Lines a query answers when it names no limit.
pub const DEFAULT_QUERY_LINES: usize = 1_000;

/// What an operator asks of a database's audit trail. Every filter given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Writes by this `uid`.
    pub uid: Option<String>,
    /// Writes that changed this location: at it, below it, or above it (a set of `/a`
    /// changes `/a/b`).
    pub path: Option<String>,
    /// Writes at or after this time (milliseconds since the Unix epoch).
    pub since: Option<u64>,
    /// Writes before this time.
    pub until: Option<u64>,
    /// Lines after this position (the `seq` of the last line of an earlier answer).
    pub after: Option<u64>,
    /// At most this many lines ([`MAX_QUERY_LINES`]).
    pub limit: usize,
}

impl AuditQuery {
    pub(crate) fn matches(&self, facts: &LineFacts) -> bool {
        if facts.erased {
            return false;
        }
        if self.after.is_some_and(|after| facts.seq <= after)
            || self.since.is_some_and(|since| facts.time < since)
            || self.until.is_some_and(|until| facts.time >= until)
        {
            return false;
        }
        if let Some(uid) = &self.uid {
            if facts.uid.as_deref() != Some(uid.as_str()) {
                return false;
            }
        }
        if let Some(path) = &self.path {
            let written: &[String] = if facts.paths.is_empty() {
                std::slice::from_ref(&facts.path)
            } else {
                &facts.paths
            };
            if !written
                .iter()
                .any(|at| at_or_below(at, path) || at_or_below(path, at))
            {
                return false;
            }
        }
        true
    }
}

/// Whether the location `inner` is `outer` or below it (`/a/b` is below `/a`, `/ab` is not).
pub(crate) fn at_or_below(inner: &str, outer: &str) -> bool {
    let outer = outer.trim_end_matches('/');
    let inner = inner.trim_end_matches('/');
    outer.is_empty()
        || inner == outer
        || (inner.starts_with(outer) && inner.as_bytes().get(outer.len()) == Some(&b'/'))
}

/// Milliseconds in a day.
pub(crate) const DAY_MS: u64 = 86_400_000;

/// The UTC date of day `day` after 1970-01-01, as `YYYY-MM-DD` (the civil calendar's
/// algorithm of H. Hinnant's `civil_from_days`).
pub(crate) fn date_of_day(day: u64) -> String {
    let z = day as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The day after 1970-01-01 of a `YYYY-MM-DD` date, if it is one (`days_from_civil`).
pub(crate) fn day_of_date(date: &str) -> Option<u64> {
    let mut parts = date.split('-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    u64::try_from(era * 146_097 + doe - 719_468).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(line: &str) -> LineFacts {
        serde_json::from_str(line).expect("a line")
    }

    #[test]
    fn dates_round_trip() {
        assert_eq!(date_of_day(0), "1970-01-01");
        assert_eq!(date_of_day(20_000), "2024-10-04");
        assert_eq!(date_of_day(11_016), "2000-02-29");
        for day in [0, 59, 60, 365, 11_016, 20_000, 40_000] {
            assert_eq!(day_of_date(&date_of_day(day)), Some(day));
        }
        assert_eq!(day_of_date("2024-13-01"), None);
        assert_eq!(day_of_date("latest"), None);
    }

    #[test]
    fn a_line_carries_its_position_and_the_entry() {
        let entry = AuditEntry {
            time: 5,
            op: "set".into(),
            path: "/a".into(),
            paths: Vec::new(),
            uid: Some("ada".into()),
            provider: Some("password".into()),
            transport: "websocket".into(),
            address: Some("127.0.0.1".into()),
            rules: vec!["/a/.write".into()],
        };
        let (line, time) = line_of(7, &entry.to_record()).expect("an entry");
        assert_eq!(time, 5);
        assert!(line.starts_with("{\"seq\":7,\"time\":5,"), "{line}");
        assert!(line.ends_with("}\n"));
        let facts = facts(&line);
        assert_eq!((facts.seq, facts.uid.as_deref()), (7, Some("ada")));
        assert_eq!(line_of(7, "not json"), None);
    }

    #[test]
    fn paths_match_at_above_and_below() {
        assert!(at_or_below("/a/b", "/a"));
        assert!(at_or_below("/a", "/a"));
        assert!(at_or_below("/a", "/"));
        assert!(!at_or_below("/ab", "/a"));
        assert!(!at_or_below("/a", "/a/b"));
        let query = AuditQuery {
            path: Some("/rooms/r1".into()),
            ..AuditQuery::default()
        };
        let set_above = facts(r#"{"seq":1,"path":"/rooms"}"#);
        let set_below = facts(r#"{"seq":2,"path":"/rooms/r1/m"}"#);
        let elsewhere = facts(r#"{"seq":3,"path":"/rooms/r2"}"#);
        let update = facts(r#"{"seq":4,"path":"/","paths":["/x","/rooms/r1/n"]}"#);
        assert!(query.matches(&set_above));
        assert!(query.matches(&set_below));
        assert!(!query.matches(&elsewhere));
        assert!(query.matches(&update));
        assert!(!query.matches(&facts(r#"{"seq":5,"erased":true}"#)));
    }

    #[test]
    fn times_uids_and_positions_filter() {
        let line = facts(r#"{"seq":9,"time":100,"path":"/a","uid":"ada"}"#);
        let ask = |query: AuditQuery| query.matches(&line);
        assert!(ask(AuditQuery::default()));
        assert!(ask(AuditQuery {
            since: Some(100),
            until: Some(101),
            ..AuditQuery::default()
        }));
        assert!(!ask(AuditQuery {
            until: Some(100),
            ..AuditQuery::default()
        }));
        assert!(!ask(AuditQuery {
            since: Some(101),
            ..AuditQuery::default()
        }));
        assert!(!ask(AuditQuery {
            uid: Some("bob".into()),
            ..AuditQuery::default()
        }));
        assert!(!ask(AuditQuery {
            after: Some(9),
            ..AuditQuery::default()
        }));
        assert!(ask(AuditQuery {
            after: Some(8),
            uid: Some("ada".into()),
            ..AuditQuery::default()
        }));
    }
}
