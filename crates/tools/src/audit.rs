//! `hearth audit query|erase`: a database's audit trail on a running server, through
//! `/.settings/auditTrail.json` (docs/audit.md), admins only.

use super::client::{data_path, Call, Client, DatabaseArgs};
use super::error::{Result, ToolsError};

const TRAIL: &str = "/.settings/auditTrail.json";

/// Lines the server answers at most per request (`hearth_audit::MAX_QUERY_LINES`).
const PAGE_LINES: usize = 10_000;

/// What `hearth audit query` filters by.
#[derive(Debug, Default, clap::Args)]
pub struct AuditFilter {
    /// Writes by this uid.
    #[arg(long)]
    pub uid: Option<String>,
    /// Writes that changed this location (at, below or above it).
    #[arg(long)]
    pub path: Option<String>,
    /// Writes at or after this time, in milliseconds since 1970-01-01 UTC.
    #[arg(long)]
    pub since: Option<u64>,
    /// Writes before this time, in milliseconds since 1970-01-01 UTC.
    #[arg(long)]
    pub until: Option<u64>,
    /// Print at most this many entries (all by default).
    #[arg(long)]
    pub limit: Option<usize>,
}

/// `hearth audit query`: prints the matching entries as JSON lines, oldest first, asking
/// the server page by page.
pub fn audit_query(server: &DatabaseArgs, filter: &AuditFilter) -> Result<()> {
    let client = Client::for_database(server)?;
    let mut after: Option<u64> = None;
    let mut printed = 0usize;
    loop {
        let want = filter
            .limit
            .map_or(PAGE_LINES, |limit| (limit - printed).min(PAGE_LINES));
        if want == 0 {
            return Ok(());
        }
        let mut query: Vec<(&str, String)> = vec![("limit", want.to_string())];
        if let Some(uid) = &filter.uid {
            query.push(("uid", uid.clone()));
        }
        if let Some(path) = &filter.path {
            query.push(("path", path.clone()));
        }
        if let Some(since) = filter.since {
            query.push(("since", since.to_string()));
        }
        if let Some(until) = filter.until {
            query.push(("until", until.to_string()));
        }
        if let Some(after) = after {
            query.push(("after", after.to_string()));
        }
        let pairs: Vec<(&str, &str)> = query
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        let text = client.text(Call::new("GET", TRAIL).query(&pairs))?;
        let mut lines = 0;
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let seq = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|entry| entry.get("seq")?.as_u64())
                .ok_or_else(|| ToolsError::BadAnswer {
                    request: format!("GET {TRAIL}"),
                    reason: format!("not an audit entry: {line}"),
                })?;
            println!("{line}");
            after = Some(seq);
            lines += 1;
        }
        printed += lines;
        // A short page is the last (the server also stops a page at 16 MiB of lines,
        // which is never short of its last line).
        if lines == 0 {
            return Ok(());
        }
    }
}

/// `hearth audit erase --uid U [--data PATH]...`: erases the user's entries from the trail,
/// then deletes the data at each PATH.
pub fn audit_erase(server: &DatabaseArgs, uid: &str, data: &[String]) -> Result<()> {
    let client = Client::for_database(server)?;
    let answer = client.json(Call::new("DELETE", TRAIL).query(&[("uid", uid)]))?;
    let erased = answer.get("erased").and_then(|erased| erased.as_u64());
    let database = client.namespace().unwrap_or_default().to_owned();
    println!(
        "{} audit entries of {uid} erased on {database}",
        erased.unwrap_or(0)
    );
    for path in data {
        client.text(Call::new("DELETE", &data_path(path)))?;
        println!("{path} deleted on {database}");
    }
    Ok(())
}
