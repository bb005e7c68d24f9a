//! The owner's part of the audit trail (docs/audit.md): each write of an audited database
//! gets an audit record right after its own record, in the same batch, and the reply and
//! pushes wait for the later of the two; once released (durable, and on the followers), the
//! entries go to the server's trail thread (`hearth_audit`), which never holds a shard up.

use std::net::IpAddr;

use hearth_audit::{AuditEntry, Copied};
use hearth_ground::cross_core::RealtimeTransport;
use hearth_store::SideRecord;
use hearth_sync::audit::{AuditFacts, Grant, Writer};
use hearth_sync::Write;

use crate::state::Owner;

/// Where a step's requests came from, for the audit entries of its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// `websocket`, `longpoll`, `webtransport` (the realtime protocol's carriers) or `rest`.
    pub transport: &'static str,
    /// The client's address as its edge saw it.
    pub address: Option<IpAddr>,
}

impl Origin {
    /// The requests of a realtime session carried by `transport`.
    pub fn session(transport: RealtimeTransport, address: Option<IpAddr>) -> Origin {
        Origin {
            transport: transport.as_str(),
            address,
        }
    }

    /// A REST request.
    pub fn rest(address: Option<IpAddr>) -> Origin {
        Origin {
            transport: "rest",
            address,
        }
    }

    /// What the server does on its own (a tick, a rules change): no client.
    pub const SERVER: Origin = Origin {
        transport: "server",
        address: None,
    };
}

/// The entry of `write`, applied at `now_ms`, as `facts` and `origin` describe it.
pub fn entry(facts: &AuditFacts, write: &Write, origin: Origin, now_ms: u64) -> AuditEntry {
    let (uid, provider) = match &facts.writer {
        Writer::Admin => (None, Some("admin".to_owned())),
        Writer::Anonymous => (None, None),
        Writer::User { uid, provider } => (uid.clone(), provider.clone()),
    };
    let rules = match &facts.grant {
        Grant::Admin => vec!["admin".to_owned()],
        Grant::Open => vec!["open".to_owned()],
        Grant::Rules(rules) => rules.iter().map(|rule| rule.to_string()).collect(),
    };
    // A set is one operation at the base; an update names each location it wrote.
    let single_set = matches!(write.ops.as_slice(), [only] if only.path.is_root());
    let paths = if single_set {
        Vec::new()
    } else {
        write.targets().map(|path| path.to_string()).collect()
    };
    AuditEntry {
        time: now_ms,
        op: facts.op.as_str().to_owned(),
        path: write.base.to_string(),
        paths,
        uid,
        provider,
        transport: origin.transport.to_owned(),
        address: origin.address.map(|address| address.to_string()),
        rules,
    }
}

/// Hands audit entries (released, or found in the log at start) to the trail.
pub fn hand(owner: &Owner, records: Vec<SideRecord>) {
    if records.is_empty() {
        return;
    }
    match owner.audit_trail() {
        Some(trail) => trail.append(records.into_iter().map(copied).collect()),
        None => tracing::warn!(
            entries = records.len(),
            "audit entries without an audit trail to keep them"
        ),
    }
}

fn copied(record: SideRecord) -> Copied {
    Copied {
        database: record.database,
        seq: record.seq,
        entry: record.entry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_sync::audit::AuditOp;
    use hearth_sync::AuthState;
    use hearth_sync::{Change, WriteOp};
    use hearth_tree::{Node, Path};
    use serde_json::json;

    fn path(text: &str) -> Path {
        Path::parse(text).expect("a path")
    }

    fn op(at: &str) -> WriteOp {
        WriteOp {
            path: path(at),
            change: Change::Set(Node::empty()),
        }
    }

    #[test]
    fn an_entry_names_the_writer_the_locations_and_the_rules() {
        let facts = AuditFacts {
            writer: Writer::of(&AuthState::User(
                json!({"uid": "ada", "provider": "password", "token": {}}),
            )),
            op: AuditOp::Update,
            grant: Grant::Rules(vec![std::sync::Arc::from("/rooms/$room/.write")]),
        };
        let write = Write {
            base: path("/rooms"),
            ops: vec![op("/r1/a"), op("/r2")],
        };
        let address: IpAddr = "10.0.0.7".parse().expect("an address");
        let entry = entry(&facts, &write, Origin::rest(Some(address)), 42);
        assert_eq!(entry.time, 42);
        assert_eq!(entry.op, "update");
        assert_eq!(entry.path, "/rooms");
        assert_eq!(entry.paths, ["/rooms/r1/a", "/rooms/r2"]);
        assert_eq!(entry.uid.as_deref(), Some("ada"));
        assert_eq!(entry.provider.as_deref(), Some("password"));
        assert_eq!(entry.transport, "rest");
        assert_eq!(entry.address.as_deref(), Some("10.0.0.7"));
        assert_eq!(entry.rules, ["/rooms/$room/.write"]);

        let admin = AuditFacts {
            writer: Writer::Admin,
            op: AuditOp::Set,
            grant: Grant::Admin,
        };
        let set = Write {
            base: path("/a"),
            ops: vec![op("/")],
        };
        let entry = super::entry(
            &admin,
            &set,
            Origin::session(RealtimeTransport::LongPolling, None),
            1,
        );
        assert_eq!(
            (entry.uid, entry.provider.as_deref()),
            (None, Some("admin"))
        );
        assert!(entry.paths.is_empty());
        assert_eq!(entry.rules, ["admin"]);
        assert_eq!(entry.transport, "longpoll");
    }
}
