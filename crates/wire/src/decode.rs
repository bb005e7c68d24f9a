//! Decoding one whole client message (spec §2.1, §3, §4, §5).

use std::collections::BTreeMap;

use hearth_sync::WriteScope;
use hearth_tree::Path;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::bounded::parse_bounded;

#[path = "decode_request.rs"]
mod request;

use request::{decode_action, path_field, target_field, ActionError};
pub use request::{AuthRequest, ClientRequest};

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
    /// The write's action: `p`, `m`, `o` or `om`.
    pub fn action(&self) -> &'static str {
        self.action
    }

    /// The location and scope a caller must be able to write for this write to be allowed,
    /// or `None` when nothing needs checking before the data is parsed (an empty update,
    /// which changes nothing and is answered `ok`).
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

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
