//! What a connection's session needs of its owner, kept by the edge so that the session can
//! move to another owner while the client's socket stays open (`edge::rehome`): the client's
//! last `auth`, its active listens and its onDisconnect operations, each as the request the
//! client sent, and the requests still waiting for their reply. Pure: it sees the texts the
//! client sends upstream ([`Upstream::note_sent`]) and the frames the owner sends back
//! ([`Upstream::lets_through`]), and says what to replay and answer ([`Upstream::resume`]).
//!
//! The writes waiting for their reply are kept too (within [`MAX_KEPT_WRITE_BYTES`]): an owner
//! that stops on purpose answers everything it handled before it says the session moves and
//! handles nothing after, so those writes were never applied and are sent again to the next
//! owner ([`Upstream::resume`] with `resend_writes`). After any other move they are answered
//! `unavailable`: the old owner may have applied them.
//!
//! Replayed requests keep the client's own ids. The owner's replies to them are swallowed
//! (the client had its answers long ago), except for requests that were still waiting: those
//! replies are the ones the client waits for. A replayed request that the new owner refuses
//! is reported ([`Upstream::take_refusal`]): the connection then closes, so that the SDK
//! reconnects and learns the refusal itself, as it would have without the move.

use std::net::IpAddr;

use hearth_sync::{Request, MAX_LISTENS_PER_SESSION, MAX_ONDISCONNECT_BYTES, MAX_ONDISCONNECT_OPS};
use hearth_wire::{
    decode_lazy, encode_reply_status, encode_reply_value, ClientMessage, ClientRequest, Decoded,
};
use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::reply_scan::{self, FromOwner};
use hearth_net::offload::OFF_THREAD_PARSE_BYTES;

/// The most bytes of listens, credential and reads kept for one connection. A client past it
/// is no longer kept across a move: its connection closes as before, and the SDK reconnects.
pub const MAX_KEPT_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// The most requests of one connection waiting for their reply that are kept track of; past
/// it, as past [`MAX_KEPT_REQUEST_BYTES`].
pub const MAX_TRACKED_IN_FLIGHT: usize = 65_536;

/// The most bytes of writes waiting for their reply kept for one connection, to be sent again
/// after a planned move; past it, a write is answered `unavailable` on a move, as after any
/// other.
pub const MAX_KEPT_WRITE_BYTES: usize = 4 * 1024 * 1024;

/// What the client is told of a request the old owner never answered.
pub const MOVED_UNANSWERED: &str = "the database moved to another server while this request \
     was in flight; a write may or may not have been applied";

/// A request kept to be replayed: its id and its text as the owner must see it.
#[derive(Debug, Clone)]
struct Kept {
    request: u64,
    text: String,
}

/// A listen: a path and, for a filtered one, its tag (spec §5.5).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ListenKey {
    path: String,
    tag: Option<u64>,
}

#[derive(Debug)]
struct Listen {
    kept: Kept,
    /// The query object, which names the listen in a revocation (`c`).
    query: Option<Value>,
}

/// A request waiting for its reply.
#[derive(Debug, Clone)]
enum Pending {
    Listen(ListenKey),
    Auth,
    /// A read: replayed, since reading twice changes nothing.
    Get(String),
    /// A write or a compare-and-set, with its text when kept: sent again only after a
    /// planned move (the old owner then never applied it), never after another.
    Write(Option<String>),
    OnDisconnect,
    /// Changes nothing a new session lacks (`n`, `unauth`, `s`, App Check): answered `ok`.
    Settled,
    /// Not understood here; the owner answers it, or it is answered with an error.
    Other,
}

/// A request replayed on the new owner whose reply is not for the client.
#[derive(Debug)]
enum Replayed {
    Auth,
    Listen(ListenKey),
    OnDisconnect,
}

/// What a move needs done: answers for the client now, then requests for the new owner.
#[derive(Debug, Default)]
pub struct Resume {
    pub answers: Vec<String>,
    pub replay: Vec<String>,
}

#[derive(Debug)]
pub struct Upstream {
    /// The connection's database and session id, to open its session elsewhere.
    pub namespace: String,
    pub session_id: String,
    /// The App Check token the client last gave (its URL's, or its last `appcheck`), which
    /// the next owner verifies again.
    pub app_check: Option<String>,
    /// The client's address as this edge saw it, which the next owner is given again.
    pub address: Option<IpAddr>,
    auth: Option<Kept>,
    listens: FxHashMap<ListenKey, Listen>,
    on_disconnect: Vec<Kept>,
    on_disconnect_bytes: usize,
    /// Bytes of `auth`, `listens` and the reads in `in_flight`.
    kept_bytes: usize,
    /// Bytes of the writes kept in `in_flight`.
    write_bytes: usize,
    in_flight: FxHashMap<u64, Pending>,
    replayed: FxHashMap<u64, Replayed>,
    /// Why the connection cannot move any more (a limit passed).
    untracked: Option<&'static str>,
    refused: Option<String>,
}

impl Upstream {
    pub fn new(namespace: String, session_id: String) -> Upstream {
        Upstream {
            namespace,
            session_id,
            app_check: None,
            address: None,
            auth: None,
            listens: FxHashMap::default(),
            on_disconnect: Vec::new(),
            on_disconnect_bytes: 0,
            kept_bytes: 0,
            write_bytes: 0,
            in_flight: FxHashMap::default(),
            replayed: FxHashMap::default(),
            untracked: None,
            refused: None,
        }
    }

    /// Why the connection cannot move, if it cannot.
    pub fn cannot_move(&self) -> Option<&'static str> {
        self.untracked
    }

    /// Takes note of a whole message the client sends to the owner.
    pub fn note_sent(&mut self, text: &str) {
        if self.untracked.is_some() {
            return;
        }
        if text.len() > OFF_THREAD_PARSE_BYTES {
            self.large_to_owner(text);
        } else {
            match decode_lazy(text) {
                Ok(Decoded::Write(write)) => {
                    let action = write.action();
                    self.note(write.request_id, action, None, text);
                }
                Ok(Decoded::Message(ClientMessage::Request {
                    request_id,
                    request,
                })) => self.note(request_id, "", Some(*request), text),
                Ok(Decoded::Message(_)) => {}
                Err(error) => {
                    if let Some(request) = error.request_id {
                        self.wait(request, Pending::Other);
                    }
                }
            }
        }
        self.check_limits();
    }

    /// A large message is a write (or an onDisconnect write): its id and action are read from
    /// its head as the SDKs write it (`r` and `a` before the body, in either order: the web
    /// SDK writes `r` first, and the SDKs that build the message as a hash map need not), not
    /// parsed on the edge's thread.
    /// Another form cannot be followed, and the connection is no longer kept.
    fn large_to_owner(&mut self, text: &str) {
        match large_head(text) {
            Some((request, "p" | "m")) => {
                let pending = self.keep_write(text);
                self.wait(request, pending);
            }
            Some((request, action @ ("o" | "om"))) => self.note(request, action, None, text),
            _ => self.untracked = Some("a large message of a form the edge does not follow"),
        }
    }

    /// Keeps what request `request` (`action` for a write, else `decoded`) changes.
    fn note(&mut self, request: u64, action: &str, decoded: Option<ClientRequest>, text: &str) {
        let pending = match (action, decoded) {
            ("p" | "m", _) => self.keep_write(text),
            ("o" | "om", _) => self.queue_on_disconnect(request, text),
            (_, Some(ClientRequest::Data(data))) => match data {
                Request::Listen { path, tag, .. } => {
                    self.listen(request, &path.to_string(), tag, text)
                }
                Request::Unlisten { path, tag } => {
                    let key = ListenKey {
                        path: path.to_string(),
                        tag,
                    };
                    if let Some(listen) = self.listens.remove(&key) {
                        self.kept_bytes = self.kept_bytes.saturating_sub(listen.kept.text.len());
                    }
                    Pending::Settled
                }
                Request::OnDisconnectCancel { .. } => self.queue_on_disconnect(request, text),
                Request::Get { .. } => {
                    self.kept_bytes += text.len();
                    Pending::Get(text.to_owned())
                }
                _ => self.keep_write(text),
            },
            (_, Some(ClientRequest::Auth(_))) => {
                self.forget_auth();
                self.kept_bytes += text.len();
                self.auth = Some(Kept {
                    request,
                    text: text.to_owned(),
                });
                Pending::Auth
            }
            (_, Some(ClientRequest::Unauth)) => {
                self.forget_auth();
                Pending::Settled
            }
            (_, Some(ClientRequest::AppCheck(token))) => {
                self.app_check = token;
                Pending::Settled
            }
            (_, Some(ClientRequest::Stats)) => Pending::Settled,
            (_, None) => Pending::Other,
        };
        self.wait(request, pending);
    }

    fn wait(&mut self, request: u64, pending: Pending) {
        let replaced = self.in_flight.insert(request, pending);
        self.forget_pending(replaced);
    }

    /// A write waiting for its reply, kept while the connection's writes fit.
    fn keep_write(&mut self, text: &str) -> Pending {
        if self.write_bytes + text.len() > MAX_KEPT_WRITE_BYTES {
            return Pending::Write(None);
        }
        self.write_bytes += text.len();
        Pending::Write(Some(text.to_owned()))
    }

    /// Lets go of the bytes a request that no longer waits kept.
    fn forget_pending(&mut self, pending: Option<Pending>) {
        match pending {
            Some(Pending::Get(text)) => {
                self.kept_bytes = self.kept_bytes.saturating_sub(text.len())
            }
            Some(Pending::Write(Some(text))) => {
                self.write_bytes = self.write_bytes.saturating_sub(text.len())
            }
            _ => {}
        }
    }

    fn forget_auth(&mut self) {
        if let Some(auth) = self.auth.take() {
            self.kept_bytes = self.kept_bytes.saturating_sub(auth.text.len());
        }
    }

    /// A listen, kept with an empty hash: on a new owner it must send the data whatever the
    /// client has, since what the client has is unknown here (a push may have been lost with
    /// the old owner).
    fn listen(&mut self, request: u64, path: &str, tag: Option<u64>, text: &str) -> Pending {
        let Ok(mut message) = serde_json::from_str::<Value>(text) else {
            return Pending::Other;
        };
        let query = message
            .pointer("/d/b/q")
            .filter(|query| !query.is_null())
            .cloned();
        if let Some(body) = message.pointer_mut("/d/b").and_then(Value::as_object_mut) {
            body.insert("h".to_owned(), Value::String(String::new()));
        }
        let key = ListenKey {
            path: path.to_owned(),
            tag,
        };
        let kept = Kept {
            request,
            text: message.to_string(),
        };
        self.kept_bytes += kept.text.len();
        if let Some(old) = self.listens.insert(key.clone(), Listen { kept, query }) {
            self.kept_bytes = self.kept_bytes.saturating_sub(old.kept.text.len());
        }
        Pending::Listen(key)
    }

    fn queue_on_disconnect(&mut self, request: u64, text: &str) -> Pending {
        self.on_disconnect_bytes += text.len();
        self.on_disconnect.push(Kept {
            request,
            text: text.to_owned(),
        });
        Pending::OnDisconnect
    }

    fn drop_on_disconnect(&mut self, request: u64) {
        if let Some(at) = self
            .on_disconnect
            .iter()
            .position(|op| op.request == request)
        {
            let op = self.on_disconnect.remove(at);
            self.on_disconnect_bytes = self.on_disconnect_bytes.saturating_sub(op.text.len());
        }
    }

    fn drop_listen(&mut self, key: &ListenKey, request: Option<u64>) {
        let matches = self
            .listens
            .get(key)
            .is_some_and(|listen| request.is_none_or(|request| listen.kept.request == request));
        if matches {
            if let Some(listen) = self.listens.remove(key) {
                self.kept_bytes = self.kept_bytes.saturating_sub(listen.kept.text.len());
            }
        }
    }

    fn check_limits(&mut self) {
        let why = if self.listens.len() > MAX_LISTENS_PER_SESSION {
            "more listens than a session may hold"
        } else if self.on_disconnect.len() > MAX_ONDISCONNECT_OPS
            || self.on_disconnect_bytes > MAX_ONDISCONNECT_BYTES
        {
            "more onDisconnect operations than a session may queue"
        } else if self.kept_bytes > MAX_KEPT_REQUEST_BYTES {
            "more listen and read bytes than the edge keeps"
        } else if self.in_flight.len() > MAX_TRACKED_IN_FLIGHT {
            "more requests in flight than the edge follows"
        } else {
            return;
        };
        self.untracked = Some(why);
        // Nothing of it will be replayed: its memory goes now.
        self.auth = None;
        self.listens = FxHashMap::default();
        self.on_disconnect = Vec::new();
        self.in_flight = FxHashMap::default();
        self.kept_bytes = 0;
        self.write_bytes = 0;
        self.on_disconnect_bytes = 0;
    }

    /// Takes note of a message the owner sends the client; `false` when it must not reach
    /// the client (the reply to a replayed request).
    pub fn lets_through(&mut self, frames: &[u8]) -> bool {
        if self.untracked.is_some() && self.replayed.is_empty() {
            return true;
        }
        match reply_scan::read(frames) {
            FromOwner::Reply { request, status } => self.reply(request, &status),
            FromOwner::Cancel { path, query } => {
                let revoked = self
                    .listens
                    .iter()
                    .find(|(key, listen)| key.path == path && listen.query == query)
                    .map(|(key, _)| key.clone());
                if let Some(key) = revoked {
                    self.drop_listen(&key, None);
                }
                true
            }
            FromOwner::Other => true,
        }
    }

    fn reply(&mut self, request: u64, status: &str) -> bool {
        let ok = status == "ok";
        if let Some(replayed) = self.replayed.remove(&request) {
            if !ok {
                match replayed {
                    Replayed::Auth => self.forget_auth(),
                    Replayed::Listen(key) => self.drop_listen(&key, Some(request)),
                    Replayed::OnDisconnect => self.drop_on_disconnect(request),
                }
                self.refused.get_or_insert_with(|| {
                    format!("the new owner refused a request set up again after a move ({status})")
                });
            }
            return false;
        }
        match self.in_flight.remove(&request) {
            pending @ Some(Pending::Get(_) | Pending::Write(_)) => self.forget_pending(pending),
            Some(Pending::Listen(key)) if !ok => self.drop_listen(&key, Some(request)),
            Some(Pending::Auth)
                if !ok && self.auth.as_ref().is_some_and(|a| a.request == request) =>
            {
                self.forget_auth();
            }
            Some(Pending::OnDisconnect) if !ok => self.drop_on_disconnect(request),
            _ => {}
        }
        true
    }

    /// Why the connection must close: a replayed request was refused. Taken once.
    pub fn take_refusal(&mut self) -> Option<String> {
        self.refused.take()
    }

    /// The session moves: what to answer the client now (requests the old owner never
    /// answered and that are not sent again), and what to send the new owner, in order (the
    /// credential first, then the listens, onDisconnect operations, waiting reads and, with
    /// `resend_writes`, waiting writes, in the client's order). `resend_writes`: the old owner
    /// handled none of the requests it left unanswered (it stopped on purpose). `Err` says
    /// why the connection cannot move.
    pub fn resume(&mut self, resend_writes: bool) -> Result<Resume, &'static str> {
        if let Some(why) = self.untracked {
            return Err(why);
        }
        let mut resume = Resume::default();
        let mut waiting: Vec<(u64, Pending)> = self.in_flight.drain().collect();
        waiting.sort_by_key(|(request, _)| *request);
        // Reads, and writes when sent again: their replies are the client's.
        let mut again = Vec::new();
        for (request, pending) in waiting {
            let answer = match &pending {
                Pending::Listen(key) => {
                    if self
                        .listens
                        .get(key)
                        .is_some_and(|l| l.kept.request == request)
                    {
                        self.in_flight.insert(request, pending);
                        continue;
                    }
                    // Unlistened since: nobody waits for it.
                    encode_reply_value(request, "ok", &Value::Object(Default::default()))
                }
                Pending::Auth if self.auth.as_ref().is_some_and(|a| a.request == request) => {
                    self.in_flight.insert(request, pending);
                    continue;
                }
                Pending::Get(text) => {
                    again.push(Kept {
                        request,
                        text: text.clone(),
                    });
                    self.in_flight.insert(request, pending);
                    continue;
                }
                Pending::Write(Some(text)) if resend_writes => {
                    again.push(Kept {
                        request,
                        text: text.clone(),
                    });
                    self.in_flight.insert(request, pending);
                    continue;
                }
                Pending::Auth | Pending::Settled => encode_reply_status(request, "ok", ""),
                Pending::OnDisconnect => {
                    self.drop_on_disconnect(request);
                    encode_reply_status(request, "unavailable", MOVED_UNANSWERED)
                }
                Pending::Write(_) | Pending::Other => {
                    self.forget_pending(Some(pending));
                    encode_reply_status(request, "unavailable", MOVED_UNANSWERED)
                }
            };
            resume.answers.push(answer);
        }
        let mut later: Vec<Kept> = Vec::new();
        for (key, listen) in &self.listens {
            if !self.in_flight.contains_key(&listen.kept.request) {
                self.replayed
                    .insert(listen.kept.request, Replayed::Listen(key.clone()));
            }
            later.push(listen.kept.clone());
        }
        for op in &self.on_disconnect {
            self.replayed.insert(op.request, Replayed::OnDisconnect);
            later.push(op.clone());
        }
        later.extend(again);
        later.sort_by_key(|kept| kept.request);
        if let Some(auth) = &self.auth {
            if !self.in_flight.contains_key(&auth.request) {
                self.replayed.insert(auth.request, Replayed::Auth);
            }
            resume.replay.push(auth.text.clone());
        }
        resume
            .replay
            .extend(later.into_iter().map(|kept| kept.text));
        Ok(resume)
    }
}

/// The request id and action of a large client message, read from its head:
/// `{"t":"d","d":{` then `"r":N` and `"a":"…"` in either order, before anything else.
fn large_head(text: &str) -> Option<(u64, &str)> {
    let head = text.get(..128.min(text.len()))?;
    let mut rest = head.strip_prefix(r#"{"t":"d","d":{"#)?;
    let (mut request, mut action) = (None, None);
    while request.is_none() || action.is_none() {
        if let Some(after) = rest.strip_prefix(r#""r":"#) {
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            request = Some(after[..digits].parse::<u64>().ok()?);
            rest = &after[digits..];
        } else if let Some(after) = rest.strip_prefix(r#""a":""#) {
            let end = after.find('"')?;
            action = Some(&after[..end]);
            rest = &after[end + 1..];
        } else {
            return None;
        }
        if request.is_none() || action.is_none() {
            rest = rest.strip_prefix(',')?;
        }
    }
    Some((request?, action?))
}
