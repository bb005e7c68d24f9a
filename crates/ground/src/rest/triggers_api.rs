//! `/.admin/triggers...`: this node's declared triggers (docs/triggers.md). Each node answers
//! for its own outbox: the databases it owns (and the events it keeps for those it follows).
//! The answers read files, so callers run them off the shard's thread.

use hearth_triggers::outbox::Outbox;
use hearth_triggers::{DeclareError, ServerTriggers};
use serde_json::{json, Value};

use super::response::RestResponse;
use super::TriggersEndpoint;

/// The answer to `endpoint`, from the server's `triggers` (`body`: a new declaration's).
pub fn answer(
    triggers: &ServerTriggers,
    endpoint: &TriggersEndpoint,
    body: &[u8],
    now_ms: u64,
) -> RestResponse {
    match endpoint {
        TriggersEndpoint::Declaration => {
            return match triggers.declaration_text() {
                None => RestResponse::error(409, DeclareError::NoOutbox.to_string()),
                Some(Ok(text)) => RestResponse::json(200, text),
                Some(Err(error)) => {
                    RestResponse::error(500, format!("the triggers file is not readable: {error}"))
                }
            }
        }
        TriggersEndpoint::Declare => {
            return match triggers.redeclare(body) {
                Ok(count) => RestResponse::json(200, json!({ "declared": count }).to_string()),
                Err(error @ DeclareError::NoOutbox) => RestResponse::error(409, error.to_string()),
                Err(error @ DeclareError::Invalid(_)) => {
                    RestResponse::error(400, error.to_string())
                }
                Err(error @ DeclareError::Io { .. }) => RestResponse::error(500, error.to_string()),
            }
        }
        _ => {}
    }
    answer_outbox(triggers.outbox.as_ref(), endpoint, now_ms)
}

/// The answer to `endpoint` from `outbox` (`None`: no data directory).
fn answer_outbox(
    outbox: Option<&Outbox>,
    endpoint: &TriggersEndpoint,
    now_ms: u64,
) -> RestResponse {
    let Some(outbox) = outbox else {
        return match endpoint {
            TriggersEndpoint::Status => RestResponse::json(200, "{\"triggers\":[]}"),
            _ => RestResponse::error(404, "no trigger is declared (hearth serve --triggers FILE)"),
        };
    };
    let unknown = |name: &str| RestResponse::error(404, format!("no trigger is named {name:?}"));
    let failed = |error: std::io::Error| {
        RestResponse::error(500, format!("the trigger outbox failed: {error}"))
    };
    match endpoint {
        TriggersEndpoint::Status => RestResponse::json(200, outbox.status(now_ms).to_string()),
        TriggersEndpoint::DeadLetters { name } => match outbox.dead_letters(name) {
            None => unknown(name),
            Some(Err(error)) => failed(error),
            Some(Ok(letters)) => {
                let letters: Vec<Value> = letters
                    .iter()
                    .map(|letter| {
                        json!({
                            "database": letter.database,
                            "seq": letter.seq,
                            "id": letter.id,
                            "attempts": letter.attempts,
                            "error": letter.error,
                            "deadAt": letter.dead_at_ms,
                            "event": serde_json::from_str::<Value>(&letter.event).unwrap_or(Value::Null),
                        })
                    })
                    .collect();
                RestResponse::json(200, Value::Array(letters).to_string())
            }
        },
        TriggersEndpoint::Retry { name } => match outbox.retry_dead_letters(name) {
            None => unknown(name),
            Some(Err(error)) => failed(error),
            Some(Ok((retried, kept))) => RestResponse::json(
                200,
                json!({ "retried": retried, "keptForOtherOwners": kept }).to_string(),
            ),
        },
        TriggersEndpoint::Drop { name } => match outbox.drop_dead_letters(name) {
            None => unknown(name),
            Some(Err(error)) => failed(error),
            Some(Ok(count)) => RestResponse::json(200, json!({ "dropped": count }).to_string()),
        },
        TriggersEndpoint::Declaration | TriggersEndpoint::Declare => {
            RestResponse::error(404, "not an outbox's question")
        }
    }
}
