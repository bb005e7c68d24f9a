//! Requests as the sync engine understands them, and its replies. The wire crate turns
//! Firebase frames into these; the engine never sees raw JSON frames.

use hearth_query::QueryParams;
use hearth_tree::{Node, Path};
use serde_json::Value;

use crate::write::{PreparedMerge, PreparedSet, WriteTarget};

/// Identifies one connection (session) within a shard. Assigned by the runtime.
pub type ConnId = u64;

/// A client-chosen tag that identifies one filtered listen on one connection.
pub type Tag = u64;

/// One decoded request of a connection.
#[derive(Debug, Clone)]
pub enum Request {
    /// Start a listen (`q`). `query_wire` keeps the query object exactly as received, so that a
    /// later cancel push can echo it.
    Listen {
        path: Path,
        query: QueryParams,
        query_wire: Option<Value>,
        tag: Option<Tag>,
        hash: Option<String>,
    },
    /// Stop a listen (`n`).
    Unlisten { path: Path, tag: Option<Tag> },
    /// Replace the value at a path (`p`), compare-and-set when `hash` is present.
    Put {
        target: WriteTarget,
        data: Value,
        hash: Option<String>,
    },
    /// A [`Request::Put`] whose data was converted ahead, off the engine's thread (see
    /// [`PreparedSet`]); handled exactly as the put it came from.
    PutPrepared {
        target: WriteTarget,
        data: PreparedSet,
        hash: Option<String>,
    },
    /// Atomic multi-path update (`m`); entry targets are relative to `path`.
    Merge {
        path: Path,
        entries: Vec<(WriteTarget, Value)>,
    },
    /// A [`Request::Merge`] whose entries were converted ahead (see [`PreparedMerge`]);
    /// handled exactly as the merge it came from.
    MergePrepared { path: Path, entries: PreparedMerge },
    /// Queue a put to run when the connection ends (`o`).
    OnDisconnectPut { target: WriteTarget, data: Value },
    /// Queue a merge to run when the connection ends (`om`).
    OnDisconnectMerge {
        path: Path,
        entries: Vec<(WriteTarget, Value)>,
    },
    /// Cancel queued onDisconnect operations at and below a path (`oc`).
    OnDisconnectCancel { path: Path },
    /// One-shot read (`g`).
    Get { path: Path, query: QueryParams },
}

/// The status word of a reply, as the client understands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    Ok,
    PermissionDenied,
    DataStale,
    TooBig,
    InvalidData,
    LimitExceeded,
    Unavailable,
}

impl Status {
    /// The exact status string sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::PermissionDenied => "permission_denied",
            Status::DataStale => "datastale",
            Status::TooBig => "too_big",
            Status::InvalidData => "invalid_data",
            Status::LimitExceeded => "limit_exceeded",
            Status::Unavailable => "unavailable",
        }
    }
}

/// The payload of a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyData {
    /// `""`: what write acknowledgements carry.
    EmptyText,
    /// `{}`: what listen acknowledgements carry (Android casts it to a map).
    EmptyObject,
    /// `{"w":["no_index"]}`: a listen acknowledgement with Firebase's warning that the
    /// query's index is not declared with `.indexOn` (the SDK logs it).
    NoIndexWarning,
    /// A value in export form, for one-shot reads.
    Value(Node),
    /// A human-readable reason, for errors.
    Text(String),
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: Status,
    pub data: ReplyData,
}

impl Reply {
    pub fn write_ok() -> Reply {
        Reply {
            status: Status::Ok,
            data: ReplyData::EmptyText,
        }
    }

    pub fn listen_ok() -> Reply {
        Reply {
            status: Status::Ok,
            data: ReplyData::EmptyObject,
        }
    }

    /// A listen acknowledgement that carries the `no_index` warning.
    pub fn listen_ok_no_index() -> Reply {
        Reply {
            status: Status::Ok,
            data: ReplyData::NoIndexWarning,
        }
    }

    pub fn error(status: Status, reason: impl Into<String>) -> Reply {
        Reply {
            status,
            data: ReplyData::Text(reason.into()),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}
