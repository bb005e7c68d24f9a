//! What the engine asks its runtime to do.

use std::sync::Arc;

use hearth_tree::{Node, Path};
use serde_json::Value;

use crate::access::AuthState;
use crate::audit::AuditFacts;
use crate::request::{ConnId, Tag};
use crate::triggers::TriggerChange;
use crate::write::Write;

/// One receiver of a push: a connection, and the tag of its filtered listen if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    pub conn: ConnId,
    pub tag: Option<Tag>,
}

/// The payload of a data push.
#[derive(Debug, Clone, PartialEq)]
pub enum PushData {
    /// `d`: the value at the push path is now this node.
    Put(Node),
    /// `m`: for each relative path, the value there is now this node.
    Merge(Vec<(Path, Node)>),
}

/// A data push. One push is serialized once and sent to every target.
#[derive(Debug, Clone, PartialEq)]
pub struct Push {
    pub path: Path,
    pub data: PushData,
}

/// An effect, in the order it must happen.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Send `push` to every target (each with its own tag).
    Push {
        push: Arc<Push>,
        targets: Vec<Target>,
    },
    /// Revoke a listen (`c` push). `query_wire` is the query object as the client sent it.
    Cancel {
        conn: ConnId,
        path: Path,
        query_wire: Option<Value>,
    },
    /// A write was applied: it must reach the write-ahead log before it is acknowledged.
    Log(Arc<Write>),
    /// Emitted right after the [`Effect::Log`] of a write applied on an audited database
    /// ([`Database::set_audited`](crate::Database::set_audited)), for its audit trail: who
    /// wrote, how, and the rule that allowed it. Boxed so that the other effects stay small;
    /// a database that is not audited never builds one.
    Audit(Box<AuditFacts>),
    /// The changes the write just logged made for the database's triggers, to deliver once
    /// it is durable; `dropped` more were past the limit of one write
    /// ([`MAX_TRIGGER_CHANGES_PER_WRITE`](crate::triggers::MAX_TRIGGER_CHANGES_PER_WRITE)).
    Triggered {
        changes: Vec<TriggerChange>,
        dropped: usize,
        /// Who wrote (an onDisconnect write: the session's identity).
        writer: AuthState,
    },
    /// A volatile write was applied: nothing is logged, its pushes wait for the next
    /// [`Database::flush_volatile`](crate::Database::flush_volatile), and the reply to the
    /// request that made it must wait until after them.
    Volatile,
}

/// The effects of one step, in order.
pub type Effects = Vec<Effect>;
