//! The label values of the counters: small enums, so that a counter is an array slot and a
//! label set is bounded by construction (no label value comes from a client, except the
//! database names of the bounded top list, see `snapshot::TOP_DATABASES`).

use hearth_sync::{Request, Status};

use crate::close::{
    DISK_FAILED_CLOSE, IDLE_CLOSE, OWNER_MOVED_CLOSE, OWNER_NODE_LOST_CLOSE, REPLACED_CLOSE,
    SHUTDOWN_CLOSE, SLOW_READER_CLOSE, UNWRITABLE_DROP, UPGRADE_REFUSED_CLOSE,
};

/// What a request asked for: the realtime protocol's actions and the REST methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Listen,
    Unlisten,
    Put,
    Merge,
    Get,
    OnDisconnectPut,
    OnDisconnectMerge,
    OnDisconnectCancel,
    Auth,
    Unauth,
    /// `s` (client statistics) and App Check tokens, which are acknowledged and ignored.
    Stats,
    /// A realtime message whose action could not be read (answered with its error).
    Unknown,
    RestGet,
    RestPut,
    RestPatch,
    RestPost,
    RestDelete,
    RestStream,
    /// `/.settings/rules.json`, read or written.
    RestRules,
    /// `/.admin/...` (the list of databases).
    RestAdmin,
    /// `GET /`, CORS preflights and paths that are not endpoints.
    RestOther,
}

impl RequestKind {
    pub const ALL: [RequestKind; 21] = [
        RequestKind::Listen,
        RequestKind::Unlisten,
        RequestKind::Put,
        RequestKind::Merge,
        RequestKind::Get,
        RequestKind::OnDisconnectPut,
        RequestKind::OnDisconnectMerge,
        RequestKind::OnDisconnectCancel,
        RequestKind::Auth,
        RequestKind::Unauth,
        RequestKind::Stats,
        RequestKind::Unknown,
        RequestKind::RestGet,
        RequestKind::RestPut,
        RequestKind::RestPatch,
        RequestKind::RestPost,
        RequestKind::RestDelete,
        RequestKind::RestStream,
        RequestKind::RestRules,
        RequestKind::RestAdmin,
        RequestKind::RestOther,
    ];

    /// The kind of a realtime data request.
    pub fn of(request: &Request) -> RequestKind {
        match request {
            Request::Listen { .. } => RequestKind::Listen,
            Request::Unlisten { .. } => RequestKind::Unlisten,
            Request::Put { .. } | Request::PutPrepared { .. } => RequestKind::Put,
            Request::Merge { .. } | Request::MergePrepared { .. } => RequestKind::Merge,
            Request::OnDisconnectPut { .. } => RequestKind::OnDisconnectPut,
            Request::OnDisconnectMerge { .. } => RequestKind::OnDisconnectMerge,
            Request::OnDisconnectCancel { .. } => RequestKind::OnDisconnectCancel,
            Request::Get { .. } => RequestKind::Get,
        }
    }

    /// The kind of a realtime write by its action (`p`, `m`, `o`, `om`).
    pub fn of_write_action(action: &str) -> RequestKind {
        match action {
            "p" => RequestKind::Put,
            "m" => RequestKind::Merge,
            "o" => RequestKind::OnDisconnectPut,
            "om" => RequestKind::OnDisconnectMerge,
            _ => RequestKind::Unknown,
        }
    }

    /// The `transport` and `kind` labels.
    pub fn labels(self) -> (&'static str, &'static str) {
        let (transport, kind) = match self {
            RequestKind::Listen => ("websocket", "listen"),
            RequestKind::Unlisten => ("websocket", "unlisten"),
            RequestKind::Put => ("websocket", "put"),
            RequestKind::Merge => ("websocket", "merge"),
            RequestKind::Get => ("websocket", "get"),
            RequestKind::OnDisconnectPut => ("websocket", "on_disconnect_put"),
            RequestKind::OnDisconnectMerge => ("websocket", "on_disconnect_merge"),
            RequestKind::OnDisconnectCancel => ("websocket", "on_disconnect_cancel"),
            RequestKind::Auth => ("websocket", "auth"),
            RequestKind::Unauth => ("websocket", "unauth"),
            RequestKind::Stats => ("websocket", "stats"),
            RequestKind::Unknown => ("websocket", "unknown"),
            RequestKind::RestGet => ("rest", "get"),
            RequestKind::RestPut => ("rest", "put"),
            RequestKind::RestPatch => ("rest", "patch"),
            RequestKind::RestPost => ("rest", "post"),
            RequestKind::RestDelete => ("rest", "delete"),
            RequestKind::RestStream => ("rest", "stream"),
            RequestKind::RestRules => ("rest", "rules"),
            RequestKind::RestAdmin => ("rest", "admin"),
            RequestKind::RestOther => ("rest", "other"),
        };
        (transport, kind)
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Refused by the rules or for want of a credential (`permission_denied`, 401, 403).
    Denied,
    /// Malformed data or parameters, or an invalid credential.
    Invalid,
    /// A compare-and-set whose hash did not match (`datastale`, 412).
    Stale,
    /// Larger than a limit (`too_big`, 413).
    TooBig,
    /// A limit other than size (`limit_exceeded`).
    LimitExceeded,
    /// Refused for now: the database is read-only after a disk failure, or a budget is spent
    /// (`unavailable`, 503).
    Unavailable,
    /// The client took too long (408).
    Timeout,
    /// Anything else (5xx).
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 9] = [
        Outcome::Ok,
        Outcome::Denied,
        Outcome::Invalid,
        Outcome::Stale,
        Outcome::TooBig,
        Outcome::LimitExceeded,
        Outcome::Unavailable,
        Outcome::Timeout,
        Outcome::Error,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Denied => "denied",
            Outcome::Invalid => "invalid",
            Outcome::Stale => "stale",
            Outcome::TooBig => "too_big",
            Outcome::LimitExceeded => "limit_exceeded",
            Outcome::Unavailable => "unavailable",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
        }
    }

    /// The outcome of a realtime reply.
    pub fn of_status(status: Status) -> Outcome {
        match status {
            Status::Ok => Outcome::Ok,
            Status::PermissionDenied => Outcome::Denied,
            Status::DataStale => Outcome::Stale,
            Status::TooBig => Outcome::TooBig,
            Status::InvalidData => Outcome::Invalid,
            Status::LimitExceeded => Outcome::LimitExceeded,
            Status::Unavailable => Outcome::Unavailable,
            _ => Outcome::Error,
        }
    }

    /// The outcome of a realtime reply by its status word (replies made before the engine saw
    /// the request carry only the word).
    pub fn of_status_word(word: &str) -> Outcome {
        match word {
            "ok" => Outcome::Ok,
            "permission_denied" => Outcome::Denied,
            "datastale" => Outcome::Stale,
            "too_big" => Outcome::TooBig,
            "limit_exceeded" => Outcome::LimitExceeded,
            "unavailable" => Outcome::Unavailable,
            "invalid_token" | "invalid_data" | "invalid_query" => Outcome::Invalid,
            _ => Outcome::Error,
        }
    }

    /// The outcome of a REST answer.
    pub fn of_http(status: u16) -> Outcome {
        match status {
            200..=399 => Outcome::Ok,
            401 | 403 => Outcome::Denied,
            408 => Outcome::Timeout,
            412 => Outcome::Stale,
            413 => Outcome::TooBig,
            503 => Outcome::Unavailable,
            400..=499 => Outcome::Invalid,
            _ => Outcome::Error,
        }
    }
}

/// Why a WebSocket connection ended (see `close.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCause {
    /// The client closed the connection or its socket failed.
    Client,
    /// No frame and no pong for the idle timeout.
    Idle,
    /// Queued bytes past the per-connection limit or the server's answer budget.
    SlowReader,
    /// The socket took no byte for the write timeout (dropped without a close frame).
    Unwritable,
    /// A reconnect of the same client named this session.
    Replaced,
    /// Writes of the connection's database missed the disk.
    DiskFailed,
    /// A frame or message the protocol does not allow, or a database that cannot exist.
    Protocol,
    /// The server stopped.
    Shutdown,
    /// A WebSocket named a long-polling session it could not carry (`longpoll::secondary`).
    UpgradeRefused,
    /// The link to the node that owns the connection's database was lost (`peer`).
    OwnerNodeLost,
    /// The connection's database moved to another node than its session's (`peer::follow`).
    OwnerMoved,
}

impl CloseCause {
    pub const ALL: [CloseCause; 11] = [
        CloseCause::Client,
        CloseCause::Idle,
        CloseCause::SlowReader,
        CloseCause::Unwritable,
        CloseCause::Replaced,
        CloseCause::DiskFailed,
        CloseCause::Protocol,
        CloseCause::Shutdown,
        CloseCause::UpgradeRefused,
        CloseCause::OwnerNodeLost,
        CloseCause::OwnerMoved,
    ];

    pub fn label(self) -> &'static str {
        match self {
            CloseCause::Client => "client",
            CloseCause::Idle => "idle",
            CloseCause::SlowReader => "slow_reader",
            CloseCause::Unwritable => "unwritable",
            CloseCause::Replaced => "replaced",
            CloseCause::DiskFailed => "disk_failed",
            CloseCause::Protocol => "protocol",
            CloseCause::Shutdown => "shutdown",
            CloseCause::UpgradeRefused => "upgrade_refused",
            CloseCause::OwnerNodeLost => "owner_node_lost",
            CloseCause::OwnerMoved => "owner_moved",
        }
    }

    /// The cause of a close the server decided, by its reason's text (`close.rs`); a reason
    /// not named there is a protocol error's.
    pub fn of_reason(text: &str) -> CloseCause {
        match text {
            SHUTDOWN_CLOSE => CloseCause::Shutdown,
            IDLE_CLOSE => CloseCause::Idle,
            SLOW_READER_CLOSE => CloseCause::SlowReader,
            REPLACED_CLOSE => CloseCause::Replaced,
            DISK_FAILED_CLOSE => CloseCause::DiskFailed,
            UPGRADE_REFUSED_CLOSE => CloseCause::UpgradeRefused,
            OWNER_NODE_LOST_CLOSE => CloseCause::OwnerNodeLost,
            OWNER_MOVED_CLOSE => CloseCause::OwnerMoved,
            UNWRITABLE_DROP => CloseCause::Unwritable,
            _ => CloseCause::Protocol,
        }
    }
}

/// The sessions other than WebSocket connections whose ends are counted by [`CloseCause`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionTransport {
    LongPoll,
    WebTransport,
}

impl SessionTransport {
    pub const ALL: [SessionTransport; 2] =
        [SessionTransport::LongPoll, SessionTransport::WebTransport];

    pub fn label(self) -> &'static str {
        match self {
            SessionTransport::LongPoll => "long_poll",
            SessionTransport::WebTransport => "webtransport",
        }
    }
}

/// Why the server ended a REST event stream (one the client ends is not counted here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The stream's read permission was withdrawn (`cancel`).
    Cancel,
    /// Its credential expired or was revoked (`auth_revoked`).
    AuthRevoked,
    /// The client read too slowly: its queue passed the per-connection limit.
    SlowReader,
    /// An event did not fit in the server's answer budget.
    AnswersBusy,
}

impl StreamEnd {
    pub const ALL: [StreamEnd; 4] = [
        StreamEnd::Cancel,
        StreamEnd::AuthRevoked,
        StreamEnd::SlowReader,
        StreamEnd::AnswersBusy,
    ];

    pub fn label(self) -> &'static str {
        match self {
            StreamEnd::Cancel => "cancel",
            StreamEnd::AuthRevoked => "auth_revoked",
            StreamEnd::SlowReader => "slow_reader",
            StreamEnd::AnswersBusy => "answers_busy",
        }
    }
}

/// Why an HTTP request was refused by a server limit rather than answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpRefusal {
    /// The answer budget was spent (503).
    AnswersBusy,
    /// The request body budget was spent (503).
    BodiesBusy,
    /// The body was larger than its limit (413).
    BodyTooLarge,
    /// The body arrived too slowly or stopped arriving (408).
    BodyTooSlow,
    /// The first request head was too large (431).
    HeadTooLarge,
    /// The first request head could not be parsed (400).
    HeadMalformed,
}

impl HttpRefusal {
    pub const ALL: [HttpRefusal; 6] = [
        HttpRefusal::AnswersBusy,
        HttpRefusal::BodiesBusy,
        HttpRefusal::BodyTooLarge,
        HttpRefusal::BodyTooSlow,
        HttpRefusal::HeadTooLarge,
        HttpRefusal::HeadMalformed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            HttpRefusal::AnswersBusy => "answers_busy",
            HttpRefusal::BodiesBusy => "bodies_busy",
            HttpRefusal::BodyTooLarge => "body_too_large",
            HttpRefusal::BodyTooSlow => "body_too_slow",
            HttpRefusal::HeadTooLarge => "head_too_large",
            HttpRefusal::HeadMalformed => "head_malformed",
        }
    }
}

/// Which transport a push or a byte left by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Websocket,
    /// REST answers and event streams.
    Http,
}

impl Channel {
    pub const ALL: [Channel; 2] = [Channel::Websocket, Channel::Http];

    pub fn label(self) -> &'static str {
        match self {
            Channel::Websocket => "websocket",
            Channel::Http => "http",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_is_listed_once_in_order() {
        for (index, kind) in RequestKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, index);
        }
        for (index, outcome) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*outcome as usize, index);
        }
        for (index, cause) in CloseCause::ALL.iter().enumerate() {
            assert_eq!(*cause as usize, index);
        }
        for (index, refusal) in HttpRefusal::ALL.iter().enumerate() {
            assert_eq!(*refusal as usize, index);
        }
        for (index, channel) in Channel::ALL.iter().enumerate() {
            assert_eq!(*channel as usize, index);
        }
    }

    #[test]
    fn http_statuses_map_to_outcomes() {
        assert_eq!(Outcome::of_http(200), Outcome::Ok);
        assert_eq!(Outcome::of_http(204), Outcome::Ok);
        assert_eq!(Outcome::of_http(304), Outcome::Ok);
        assert_eq!(Outcome::of_http(401), Outcome::Denied);
        assert_eq!(Outcome::of_http(404), Outcome::Invalid);
        assert_eq!(Outcome::of_http(412), Outcome::Stale);
        assert_eq!(Outcome::of_http(413), Outcome::TooBig);
        assert_eq!(Outcome::of_http(503), Outcome::Unavailable);
        assert_eq!(Outcome::of_http(500), Outcome::Error);
    }

    #[test]
    fn status_words_map_like_statuses() {
        for status in [
            Status::Ok,
            Status::PermissionDenied,
            Status::DataStale,
            Status::TooBig,
            Status::InvalidData,
            Status::LimitExceeded,
            Status::Unavailable,
        ] {
            assert_eq!(
                Outcome::of_status_word(status.as_str()),
                Outcome::of_status(status),
                "{status:?}"
            );
        }
    }
}
