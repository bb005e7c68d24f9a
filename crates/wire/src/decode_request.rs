//! The request of a data message (`decode`): its action `a` and body `b` decoded into a
//! [`ClientRequest`], with the fields the actions share (path, target, listen, update).

use hearth_query::QueryParams;
use hearth_sync::{Request, Tag, WriteTarget};
use hearth_tree::Path;
use serde_json::{Map, Value};

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
    /// An App Check token (`appcheck`), or none any more (`unappeck`, `unappcheck`).
    AppCheck(Option<String>),
    Stats,
}

pub(super) enum ActionError {
    Unknown,
    Invalid(String),
}

impl From<String> for ActionError {
    fn from(reason: String) -> ActionError {
        ActionError::Invalid(reason)
    }
}

pub(super) fn decode_action(
    action: &str,
    mut body: Map<String, Value>,
) -> Result<ClientRequest, ActionError> {
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
        "appcheck" => {
            return match body.get("token") {
                Some(Value::String(token)) => Ok(ClientRequest::AppCheck(Some(token.clone()))),
                _ => Err("appcheck needs a string `token`".to_owned().into()),
            }
        }
        "unappeck" | "unappcheck" => return Ok(ClientRequest::AppCheck(None)),
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

pub(super) fn path_field(body: &Map<String, Value>) -> Result<Path, String> {
    Path::parse(path_text(body)?).map_err(|error| format!("invalid path: {error}"))
}

pub(super) fn target_field(body: &Map<String, Value>) -> Result<WriteTarget, String> {
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
