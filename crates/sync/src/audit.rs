//! What an audit trail records of a write (issue #38): who wrote, by which kind of request,
//! and why it was allowed. A database that is audited ([`Database::set_audited`]) emits these
//! as [`Effect::Audit`] right after each write's [`Effect::Log`]; one that is not builds
//! nothing of them.
//!
//! [`Database::set_audited`]: crate::Database::set_audited
//! [`Effect::Audit`]: crate::Effect::Audit
//! [`Effect::Log`]: crate::Effect::Log

use std::sync::Arc;

use hearth_rules::RuleSite;

use crate::access::AuthState;

/// What kind of request made an audited write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditOp {
    /// A set (realtime `p`, REST PUT and POST, the admin API's put), a delete included.
    Set,
    /// A multi-path update (realtime `m`, REST PATCH).
    Update,
    /// A compare-and-set: a set that applies only if the location still hashes as the client
    /// saw it (a realtime `p` with a hash, as the SDKs' transactions send; REST `If-Match`).
    Transaction,
    /// A write queued with onDisconnect, run when its session closed.
    OnDisconnect,
}

impl AuditOp {
    /// The name of the operation in the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOp::Set => "set",
            AuditOp::Update => "update",
            AuditOp::Transaction => "transaction",
            AuditOp::OnDisconnect => "onDisconnect",
        }
    }
}

/// Why a write was allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The writer had an admin credential: rules were bypassed.
    Admin,
    /// The database has no rules restricting anyone ([`Access::Open`](crate::Access::Open)).
    Open,
    /// The `.write` rules that granted the write's targets, each once, as its place in the
    /// rules below `rules` followed by `/.write`: `/rooms/$room/.write`, `/.write` at the root.
    Rules(Vec<Arc<str>>),
}

impl Grant {
    /// The grant of rules that allowed a write, from the sites the rules reported.
    pub(crate) fn from_sites(sites: &[RuleSite]) -> Grant {
        Grant::Rules(sites.iter().map(|site| rule_name(&site.pattern)).collect())
    }
}

/// A rule's pattern without the document's `/rules` member (`/rules/rooms/$room/.write` is
/// `/rooms/$room/.write`); a pattern that does not start with it is kept whole.
fn rule_name(pattern: &Arc<str>) -> Arc<str> {
    match pattern.strip_prefix("/rules/") {
        Some(below) => Arc::from(format!("/{below}")),
        None => pattern.clone(),
    }
}

/// Who wrote, as much of the identity as an audit entry names: not the whole `auth` (a
/// token's claims), which would be copied for every write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writer {
    /// An admin credential.
    Admin,
    /// No credential.
    Anonymous,
    /// A signed-in user: `auth.uid` and `auth.provider` (how the token was signed in).
    User {
        uid: Option<String>,
        provider: Option<String>,
    },
}

impl Writer {
    pub fn of(auth: &AuthState) -> Writer {
        match auth {
            AuthState::Admin => Writer::Admin,
            AuthState::Anonymous => Writer::Anonymous,
            AuthState::User(auth) => {
                let text = |name: &str| auth.get(name)?.as_str().map(str::to_owned);
                Writer::User {
                    uid: text("uid"),
                    provider: text("provider"),
                }
            }
        }
    }
}

/// The audit record of one applied write (see [`Effect::Audit`](crate::Effect::Audit)); the
/// write itself is the [`Effect::Log`](crate::Effect::Log) just before it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditFacts {
    /// Who wrote: the session's identity (for an onDisconnect write, that of the session
    /// that queued it), or the caller's over REST; [`Writer::Admin`] for the admin API.
    pub writer: Writer,
    pub op: AuditOp,
    pub grant: Grant,
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_rules::RuleKind;
    use hearth_tree::Path;

    #[test]
    fn rules_are_named_below_the_rules_member() {
        let site = |pattern: &str| RuleSite {
            kind: RuleKind::Write,
            pattern: Arc::from(pattern),
            location: Path::root(),
            line: 1,
            column: 1,
        };
        let grant = Grant::from_sites(&[
            site("/rules/rooms/$room/.write"),
            site("/rules/.write"),
            site("/elsewhere/.write"),
        ]);
        let expected: Vec<Arc<str>> = ["/rooms/$room/.write", "/.write", "/elsewhere/.write"]
            .into_iter()
            .map(Arc::from)
            .collect();
        assert_eq!(grant, Grant::Rules(expected));
        assert_eq!(AuditOp::OnDisconnect.as_str(), "onDisconnect");
        assert_eq!(AuditOp::Transaction.as_str(), "transaction");
    }
}
