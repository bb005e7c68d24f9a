//! Decoding one whole client message (spec §2.1, §3, §4, §5).

use std::collections::BTreeMap;

use hearth_query::QueryParams;
use hearth_sync::{Request, Tag, WriteScope, WriteTarget};
use hearth_tree::Path;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::bounded::parse_bounded;

/// Why a message could not be understood. `request_id` is set when the message named its
/// request, so that the error can be answered instead of closing the connection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason}")]
pub struct WireError {
    pub request_id: Option<u64>,
    pub status: &'static str,
    pub reason: String,
}

impl WireError {
    fn unaddressed(reason: impl Into<String>) -> WireError {
        WireError {
            request_id: None,
            status: "invalid_data",
            reason: reason.into(),
        }
    }
}

/// A credential presented with `auth` or `gauth`.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthRequest {
    pub credential: String,
    /// `gauth` rather than `auth`.
    pub google: bool,
    /// An admin's override of the identity that rules see.
    pub auth_override: Option<Value>,
    /// An admin's request to be seen as unauthenticated.
    pub no_auth: bool,
}

/// A request that concerns the connection rather than the data.
#[derive(Debug, Clone)]
pub enum ClientRequest {
    Data(Request),
    Auth(AuthRequest),
    Unauth,
    AppCheck,
    Stats,
}

/// One decoded client message.
#[derive(Debug, Clone)]
pub enum ClientMessage {
    /// Control ping `p`: answer with a pong.
    Ping,
    /// Any other control message (long-poll upgrade acks): nothing to do.
    OtherControl,
    /// A data request with its number.
    Request {
        request_id: u64,
        request: Box<ClientRequest>,
    },
}

/// The longest client message read by [`control_type`]: control messages are a few dozen
/// bytes, and anything longer is not one the transport layer looks at.
const MAX_CONTROL_BYTES: usize = 256;

/// The type of a short control message (`p`, `a`, `n`, ...), for the transport layer, which
/// acts on the ones of a long-poll upgrade before the owner sees anything; `None` for
/// anything else (data, keep-alives, frame counts, malformed text).
pub fn control_type(text: &str) -> Option<String> {
    if text.len() > MAX_CONTROL_BYTES || !text.starts_with('{') {
        return None;
    }
    let Value::Object(envelope) = serde_json::from_str::<Value>(text).ok()? else {
        return None;
    };
    if envelope.get("t").and_then(Value::as_str) != Some("c") {
        return None;
    }
    let kind = envelope.get("d")?.get("t")?.as_str()?;
    Some(kind.to_owned())
}

/// Decodes one whole message.
pub fn decode(text: &str) -> Result<ClientMessage, WireError> {
    let text = hearth_tree::replace_lone_surrogates_str(text);
    match decode_lazy(&text)? {
        Decoded::Message(message) => Ok(message),
        Decoded::Write(write) => write.finish(),
    }
}

/// A message decoded except for the data of a write, which may be large and is parsed only
/// once the write is known to be allowed to proceed (see [`PendingWrite::scope`]).
#[derive(Debug)]
pub enum Decoded<'a> {
    Message(ClientMessage),
    Write(PendingWrite<'a>),
}

/// A write (`p`, `m`, `o`, `om`) whose data is still the text of the message.
#[derive(Debug)]
pub struct PendingWrite<'a> {
    pub request_id: u64,
    action: &'static str,
    /// The body without its data.
    body: Map<String, Value>,
    data: Option<&'a RawValue>,
    path: Path,
    scope: WriteScope,
}

/// A JSON object whose members are not parsed yet.
type RawObject<'a> = BTreeMap<String, &'a RawValue>;

/// `JSON.stringify` writes half of a surrogate pair as a lone escape, which serde_json
/// refuses; Firebase stores such strings, so each lone half becomes U+FFFD instead of a
/// refused message. The text keeps its length, so error offsets stay true. Apply it to a
/// message before [`decode_lazy`], which borrows from its text.
pub fn without_lone_surrogates(text: String) -> String {
    match hearth_tree::replace_lone_surrogates_str(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(fixed) => fixed,
    }
}

/// Decodes one whole message, leaving a write's data unparsed: the envelope, request and
/// body are read as borrowed raw text, so the data costs a syntax check and no allocation.
/// Lone surrogates must have been replaced first ([`without_lone_surrogates`]).
pub fn decode_lazy(text: &str) -> Result<Decoded<'_>, WireError> {
    let raw: &RawValue = serde_json::from_str(text)
        .map_err(|error| WireError::unaddressed(format!("malformed JSON: {error}")))?;
    let Some(mut envelope) = raw_object(raw) else {
        return Err(WireError::unaddressed("a message must be a JSON object"));
    };
    let layer = match envelope.get("t") {
        Some(t) => parse(t).map_err(WireError::unaddressed)?,
        None => Value::Null,
    };
    match layer.as_str().unwrap_or("") {
        "c" => {
            let mut control = Map::new();
            if let Some(d) = envelope.get("d") {
                control.insert("d".to_owned(), parse(d).map_err(WireError::unaddressed)?);
            }
            decode_control(&control).map(Decoded::Message)
        }
        "d" => {
            let Some(message) = envelope.remove("d").and_then(raw_object) else {
                return Err(WireError::unaddressed("a data message needs an object `d`"));
            };
            decode_raw_data(message)
        }
        _ => Err(WireError::unaddressed(
            "a message needs `t` of \"c\" or \"d\"",
        )),
    }
}

/// A raw value's members, if it is an object.
fn raw_object(raw: &RawValue) -> Option<RawObject<'_>> {
    if !raw.get().starts_with('{') {
        return None;
    }
    serde_json::from_str(raw.get()).ok()
}

/// Parses a member. Its syntax was checked with the whole message, but not its nesting depth
/// nor its escapes, which only a full parse checks.
fn parse(raw: &RawValue) -> Result<Value, String> {
    parse_bounded(raw.get()).map_err(|error| error.to_string())
}

/// Parses every member of an object.
fn parse_members(object: RawObject<'_>) -> Result<Map<String, Value>, String> {
    object
        .into_iter()
        .map(|(key, raw)| Ok((key, parse(raw)?)))
        .collect()
}

fn decode_raw_data(mut message: RawObject<'_>) -> Result<Decoded<'_>, WireError> {
    let action = match message.get("a") {
        Some(a) => parse(a).map_err(WireError::unaddressed)?,
        None => Value::Null,
    };
    let (action, scope) = match action.as_str() {
        Some("p") => ("p", WriteScope::At),
        Some("o") => ("o", WriteScope::At),
        Some("m") => ("m", WriteScope::Below),
        Some("om") => ("om", WriteScope::Below),
        _ => {
            let parsed = parse_members(message).map_err(WireError::unaddressed)?;
            return decode_data(parsed).map(Decoded::Message);
        }
    };
    let request_id = message
        .get("r")
        .and_then(|r| parse(r).ok())
        .and_then(|r| r.as_u64())
        .ok_or_else(|| WireError::unaddressed("a request needs a numeric `r`"))?;
    let fail = |reason: String| WireError {
        request_id: Some(request_id),
        status: "invalid_data",
        reason,
    };
    let mut body = match message.remove("b") {
        None => RawObject::new(),
        Some(raw) if raw.get() == "null" => RawObject::new(),
        Some(raw) => {
            raw_object(raw).ok_or_else(|| fail("the body `b` must be an object".into()))?
        }
    };
    let data = body.remove("d");
    let body = parse_members(body).map_err(fail)?;
    let path = match scope {
        WriteScope::At => target_field(&body).map(|target| target.path),
        WriteScope::Below => path_field(&body),
    }
    .map_err(fail)?;
    Ok(Decoded::Write(PendingWrite {
        request_id,
        action,
        body,
        data,
        path,
        scope,
    }))
}

impl PendingWrite<'_> {
    /// The location and scope a caller must be able to write for this write to be allowed,
    /// or `None` when nothing needs checking before the data is parsed (an empty update,
    /// which changes nothing and is answered `ok`).
    /// The write's action: `p`, `m`, `o` or `om`.
    pub fn action(&self) -> &'static str {
        self.action
    }

    pub fn scope(&self) -> Option<(&Path, WriteScope)> {
        let empty_update = self.scope == WriteScope::Below
            && self.data.is_some_and(|d| {
                let significant = d.get().bytes().filter(|b| !b.is_ascii_whitespace());
                significant.take(3).eq(*b"{}")
            });
        (!empty_update).then_some((&self.path, self.scope))
    }

    /// The size of the unparsed data, in bytes.
    pub fn data_len(&self) -> usize {
        self.data.map_or(0, |d| d.get().len())
    }

    /// Parses the data and completes the request.
    pub fn finish(self) -> Result<ClientMessage, WireError> {
        let request_id = self.request_id;
        let fail = |reason: String| WireError {
            request_id: Some(request_id),
            status: "invalid_data",
            reason,
        };
        let mut body = self.body;
        if let Some(data) = self.data {
            body.insert("d".to_owned(), parse(data).map_err(fail)?);
        }
        let request = decode_action(self.action, body).map_err(|reason| match reason {
            ActionError::Invalid(reason) => fail(reason),
            // Only the four write actions are pending.
            ActionError::Unknown => fail(format!("unknown action {:?}", self.action)),
        })?;
        Ok(ClientMessage::Request {
            request_id,
            request: Box::new(request),
        })
    }
}

fn decode_control(envelope: &Map<String, Value>) -> Result<ClientMessage, WireError> {
    let kind = envelope
        .get("d")
        .and_then(|d| d.get("t"))
        .and_then(Value::as_str);
    match kind {
        Some("p") => Ok(ClientMessage::Ping),
        Some(_) => Ok(ClientMessage::OtherControl),
        None => Err(WireError::unaddressed("a control message needs `d.t`")),
    }
}

fn decode_data(mut message: Map<String, Value>) -> Result<ClientMessage, WireError> {
    let request_id = message
        .get("r")
        .and_then(Value::as_u64)
        .ok_or_else(|| WireError::unaddressed("a request needs a numeric `r`"))?;
    let fail = |reason: String| WireError {
        request_id: Some(request_id),
        status: "invalid_data",
        reason,
    };
    let action = match message.get("a") {
        Some(Value::String(action)) => action.clone(),
        _ => return Err(fail("a request needs a string action `a`".into())),
    };
    let body = match message.remove("b") {
        Some(Value::Object(body)) => body,
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(fail("the body `b` must be an object".into())),
    };
    let request = decode_action(&action, body).map_err(|reason| match reason {
        ActionError::Unknown => WireError {
            request_id: Some(request_id),
            status: "unknown_action",
            reason: format!("unknown action {action:?}"),
        },
        ActionError::Invalid(reason) => fail(reason),
    })?;
    Ok(ClientMessage::Request {
        request_id,
        request: Box::new(request),
    })
}

enum ActionError {
    Unknown,
    Invalid(String),
}

impl From<String> for ActionError {
    fn from(reason: String) -> ActionError {
        ActionError::Invalid(reason)
    }
}

fn decode_action(action: &str, mut body: Map<String, Value>) -> Result<ClientRequest, ActionError> {
    let request = match action {
        "q" => {
            let (path, query, query_wire, tag) = listen_fields(&body)?;
            let hash = body.get("h").and_then(Value::as_str).map(str::to_owned);
            Request::Listen {
                path,
                query,
                query_wire,
                tag,
                hash,
            }
        }
        "n" => {
            let (path, _, _, tag) = listen_fields(&body)?;
            Request::Unlisten { path, tag }
        }
        "p" => Request::Put {
            target: target_field(&body)?,
            data: body.remove("d").unwrap_or(Value::Null),
            hash: body.get("h").and_then(Value::as_str).map(str::to_owned),
        },
        "m" => Request::Merge {
            path: path_field(&body)?,
            entries: merge_entries(body.remove("d"))?,
        },
        "o" => Request::OnDisconnectPut {
            target: target_field(&body)?,
            data: body.remove("d").unwrap_or(Value::Null),
        },
        "om" => Request::OnDisconnectMerge {
            path: path_field(&body)?,
            entries: merge_entries(body.remove("d"))?,
        },
        "oc" => Request::OnDisconnectCancel {
            path: path_field(&body)?,
        },
        "g" => {
            let (path, query, _, _) = listen_fields(&body)?;
            Request::Get { path, query }
        }
        "s" => return Ok(ClientRequest::Stats),
        "auth" | "gauth" => return auth_request(action == "gauth", &mut body),
        "unauth" => return Ok(ClientRequest::Unauth),
        // The JS client spells the second one `unappeck`; accept both spellings.
        "appcheck" | "unappeck" | "unappcheck" => return Ok(ClientRequest::AppCheck),
        _ => return Err(ActionError::Unknown),
    };
    Ok(ClientRequest::Data(request))
}

fn auth_request(google: bool, body: &mut Map<String, Value>) -> Result<ClientRequest, ActionError> {
    let credential = match body.get("cred") {
        Some(Value::String(cred)) => cred.clone(),
        _ => return Err("auth needs a string `cred`".to_owned().into()),
    };
    Ok(ClientRequest::Auth(AuthRequest {
        credential,
        google,
        auth_override: body.remove("authvar"),
        no_auth: body.get("noauth").and_then(Value::as_bool).unwrap_or(false),
    }))
}

fn path_text(body: &Map<String, Value>) -> Result<&str, String> {
    match body.get("p") {
        Some(Value::String(path)) => Ok(path),
        _ => Err("the request needs a string path `p`".to_owned()),
    }
}

fn path_field(body: &Map<String, Value>) -> Result<Path, String> {
    Path::parse(path_text(body)?).map_err(|error| format!("invalid path: {error}"))
}

fn target_field(body: &Map<String, Value>) -> Result<WriteTarget, String> {
    WriteTarget::parse(path_text(body)?).map_err(|error| format!("invalid path: {error}"))
}

type ListenFields = (Path, QueryParams, Option<Value>, Option<Tag>);

fn listen_fields(body: &Map<String, Value>) -> Result<ListenFields, String> {
    let path = path_field(body)?;
    let query_wire = body.get("q").filter(|q| !q.is_null()).cloned();
    let query = match &query_wire {
        Some(q) => QueryParams::from_wire(q).map_err(|error| format!("invalid query: {error}"))?,
        None => QueryParams::default(),
    };
    let tag = match body.get("t") {
        None | Some(Value::Null) => None,
        Some(tag) => Some(
            tag.as_u64()
                .ok_or_else(|| "the tag `t` must be a non-negative integer".to_owned())?,
        ),
    };
    Ok((path, query, query_wire, tag))
}

fn merge_entries(data: Option<Value>) -> Result<Vec<(WriteTarget, Value)>, String> {
    let Some(Value::Object(map)) = data else {
        return Err("an update needs an object `d`".to_owned());
    };
    map.into_iter()
        .map(|(key, value)| {
            let target = WriteTarget::parse(&key)
                .map_err(|error| format!("invalid update path {key:?}: {error}"))?;
            Ok((target, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> (u64, ClientRequest) {
        match decode(text) {
            Ok(ClientMessage::Request {
                request_id,
                request,
            }) => (request_id, *request),
            other => panic!("expected a request, got {other:?}"),
        }
    }

    #[test]
    fn decodes_a_tagged_listen() {
        let (r, req) = request(
            r#"{"t":"d","d":{"r":3,"a":"q","b":{"p":"/q1","q":{"l":2,"vf":"r","i":"score"},"t":1,"h":""}}}"#,
        );
        assert_eq!(r, 3);
        match req {
            ClientRequest::Data(Request::Listen {
                path,
                tag,
                hash,
                query_wire,
                ..
            }) => {
                assert_eq!(path.to_string(), "/q1");
                assert_eq!(tag, Some(1));
                assert_eq!(hash.as_deref(), Some(""));
                assert!(query_wire.is_some());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn decodes_writes_and_priority_targets() {
        let (_, req) = request(r#"{"t":"d","d":{"r":3,"a":"p","b":{"p":"/a/.priority","d":5}}}"#);
        assert!(matches!(
            req,
            ClientRequest::Data(Request::Put { ref target, .. }) if target.priority_only
        ));
        let (_, req) =
            request(r#"{"t":"d","d":{"r":4,"a":"m","b":{"p":"/w","d":{"d/e":1,"f":null}}}}"#);
        match req {
            ClientRequest::Data(Request::Merge { entries, .. }) => assert_eq!(entries.len(), 2),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn control_and_connection_requests() {
        assert!(matches!(
            decode(r#"{"t":"c","d":{"t":"p","d":{}}}"#),
            Ok(ClientMessage::Ping)
        ));
        assert_eq!(
            control_type(r#"{"t":"c","d":{"t":"n","d":{}}}"#).as_deref(),
            Some("n")
        );
        assert_eq!(control_type(r#"{"t":"d","d":{"t":"n"}}"#), None);
        assert_eq!(control_type("0"), None);
        assert_eq!(control_type(r#"{"t":"c","d":{"t":"p"}"#), None);
        assert!(matches!(
            decode(r#"{"t":"c","d":{"t":"p","d":{}}}"#),
            Ok(ClientMessage::Ping)
        ));
        let (_, req) = request(r#"{"t":"d","d":{"r":8,"a":"unappeck","b":{}}}"#);
        assert!(matches!(req, ClientRequest::AppCheck));
        let (_, req) =
            request(r#"{"t":"d","d":{"r":2,"a":"gauth","b":{"cred":"owner","noauth":true}}}"#);
        assert!(matches!(
            req,
            ClientRequest::Auth(AuthRequest {
                no_auth: true,
                google: true,
                ..
            })
        ));
    }

    #[test]
    fn lone_surrogates_in_values_and_keys_become_replacement_characters() {
        let (r, req) =
            request(r#"{"t":"d","d":{"r":5,"a":"p","b":{"p":"/s","d":{"k\udc00":"\ud800"}}}}"#);
        assert_eq!(r, 5);
        match req {
            ClientRequest::Data(Request::Put { data, .. }) => {
                assert_eq!(data, serde_json::json!({"k\u{fffd}": "\u{fffd}"}));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn errors_are_addressed_when_possible() {
        let unknown = decode(r#"{"t":"d","d":{"r":1,"a":"zz","b":{}}}"#).expect_err("unknown");
        assert_eq!(unknown.request_id, Some(1));
        assert_eq!(unknown.status, "unknown_action");
        let bad_key =
            decode(r#"{"t":"d","d":{"r":2,"a":"p","b":{"p":"/a.b","d":1}}}"#).expect_err("bad");
        assert_eq!(bad_key.request_id, Some(2));
        assert_eq!(decode("{").expect_err("bad").request_id, None);
        assert_eq!(decode("[1,2]").expect_err("bad").request_id, None);
        assert_eq!(
            decode(r#"{"t":"d","d":{"a":"q","b":{}}}"#)
                .expect_err("no r")
                .request_id,
            None
        );
    }

    fn pending(text: &str) -> PendingWrite<'_> {
        match decode_lazy(text) {
            Ok(Decoded::Write(write)) => write,
            other => panic!("expected a pending write, got {other:?}"),
        }
    }

    #[test]
    fn write_data_is_parsed_only_when_finished() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let text = format!(r#"{{"t":"d","d":{{"r":7,"a":"p","b":{{"p":"/a/b","d":{deep}}}}}}}"#);
        let write = pending(&text);
        assert_eq!(write.request_id, 7);
        assert_eq!(write.data_len(), deep.len());
        let (path, scope) = write.scope().expect("a set is checked");
        assert_eq!((path.to_string().as_str(), scope), ("/a/b", WriteScope::At));
        // Too deep for the parser: the one request is refused, the connection stays.
        let error = write.finish().expect_err("too deep");
        assert_eq!((error.request_id, error.status), (Some(7), "invalid_data"));
        assert!(
            error.reason.starts_with("malformed JSON"),
            "{}",
            error.reason
        );

        let update = pending(r#"{"t":"d","d":{"r":8,"a":"om","b":{"p":"/w","d":{"x/y":1}}}}"#);
        let (path, scope) = update.scope().expect("an update is checked");
        assert_eq!(
            (path.to_string().as_str(), scope),
            ("/w", WriteScope::Below)
        );
        let empty = pending(r#"{"t":"d","d":{"r":9,"a":"m","b":{"p":"/w","d":{ }}}}"#);
        assert!(empty.scope().is_none(), "an empty update changes nothing");
        let priority = pending(r#"{"t":"d","d":{"r":3,"a":"o","b":{"p":"/a/.priority","d":1}}}"#);
        assert_eq!(
            priority.scope().map(|(p, _)| p.to_string()),
            Some("/a".into())
        );
    }

    #[test]
    fn lazy_and_full_decoding_agree_on_errors() {
        let bad_path = decode_lazy(r#"{"t":"d","d":{"r":2,"a":"p","b":{"p":"/a.b","d":1}}}"#)
            .expect_err("bad path");
        assert_eq!(
            (bad_path.request_id, bad_path.status),
            (Some(2), "invalid_data")
        );
        let bad_body =
            decode_lazy(r#"{"t":"d","d":{"r":4,"a":"m","b":[1]}}"#).expect_err("bad body");
        assert_eq!(bad_body.reason, "the body `b` must be an object");
        let no_id = decode_lazy(r#"{"t":"d","d":{"a":"p","b":{}}}"#).expect_err("no r");
        assert_eq!(no_id.request_id, None);
        assert!(matches!(
            decode_lazy(r#"{"t":"d","d":{"r":1,"a":"q","b":{"p":"/x"}}}"#),
            Ok(Decoded::Message(ClientMessage::Request {
                request_id: 1,
                ..
            }))
        ));
    }
}
