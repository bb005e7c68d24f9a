//! Server values (`{".sv": ...}` placeholders), resolved against the tree at commit time.

use hearth_tree::{Key, Leaf, Node, Priority};
use serde_json::{Map, Number, Value};

/// Why a placeholder could not be resolved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerValueError {
    #[error("unknown server value {0}")]
    Unknown(String),
    #[error("increment needs a finite number, got {0}")]
    BadIncrement(String),
    /// The sum is beyond the range of a double. The message quotes no number: the stored base
    /// may be hidden from the client.
    #[error("the increment would overflow the number stored at the location")]
    Overflow,
}

/// A value with its placeholders resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The resolved value, or `None` when the value had no placeholder (use it as it is).
    pub value: Option<Value>,
    /// An error that depends on the stored data (an increment that overflows). The value then
    /// holds the nearest finite number in its place, so that the rules can still judge the
    /// write: the caller must report this error only to a client that the rules allow to make
    /// the write, or a refused client would learn something of the data.
    pub data_error: Option<ServerValueError>,
}

/// Returns `value` with every placeholder replaced. `existing` is the node currently stored at
/// the location of `value` (it supplies the base of `increment`); `now_ms` is the commit time,
/// shared by every timestamp of one write. Values without placeholders are returned as they are
/// without copying. An error returned here depends only on `value`; one that depends on
/// `existing` is returned in [`Resolved::data_error`].
pub fn resolve_server_values(
    value: &Value,
    existing: &Node,
    now_ms: u64,
) -> Result<Resolved, ServerValueError> {
    let mut resolved = Resolved {
        value: None,
        data_error: None,
    };
    if contains_placeholder(value) {
        let mut context = Context {
            now_ms,
            data_error: None,
        };
        resolved.value = Some(resolve(value, existing, &mut context)?);
        resolved.data_error = context.data_error;
    }
    Ok(resolved)
}

/// What every placeholder of one value shares: the commit time, and the first error that
/// depends on the stored data.
struct Context {
    now_ms: u64,
    data_error: Option<ServerValueError>,
}

pub(crate) fn contains_placeholder(value: &Value) -> bool {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if map.contains_key(".sv") {
                    return true;
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items.iter()),
            _ => {}
        }
    }
    false
}

fn resolve(
    value: &Value,
    existing: &Node,
    context: &mut Context,
) -> Result<Value, ServerValueError> {
    match value {
        Value::Object(map) => {
            if let Some(placeholder) = map.get(".sv") {
                return resolve_placeholder(placeholder, existing, context);
            }
            let mut out = Map::with_capacity(map.len());
            for (key, child) in map {
                let resolved = match key.as_str() {
                    ".value" => resolve(child, existing, context)?,
                    ".priority" => resolve(child, &priority_node(existing.priority()), context)?,
                    _ => resolve(child, &child_of(existing, key), context)?,
                };
                out.insert(key.clone(), resolved);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                out.push(resolve(
                    item,
                    &child_of(existing, &index.to_string()),
                    context,
                )?);
            }
            Ok(Value::Array(out))
        }
        other => Ok(other.clone()),
    }
}

fn resolve_placeholder(
    placeholder: &Value,
    existing: &Node,
    context: &mut Context,
) -> Result<Value, ServerValueError> {
    match placeholder {
        Value::String(name) if name == "timestamp" => {
            Ok(Value::Number(Number::from(context.now_ms)))
        }
        Value::Object(map) if map.len() == 1 && map.contains_key("increment") => {
            let delta = map
                .get("increment")
                .and_then(Value::as_f64)
                .filter(|delta| delta.is_finite())
                .ok_or_else(|| ServerValueError::BadIncrement(placeholder.to_string()))?;
            let base = match existing.leaf_value() {
                Some(Leaf::Number(current)) => *current,
                _ => 0.0,
            };
            let sum = base + delta;
            if sum.is_finite() {
                return Ok(number_value(sum));
            }
            // Storing the sum would store null (JSON has no infinity) and delete the value.
            context.data_error.get_or_insert(ServerValueError::Overflow);
            Ok(number_value(f64::MAX.copysign(sum)))
        }
        other => Err(ServerValueError::Unknown(other.to_string())),
    }
}

/// A JSON number for the finite `value`, integral when it is a safe integer so that clients
/// see `3`, not `3.0`.
fn number_value(value: f64) -> Value {
    const SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;
    if value.fract() == 0.0 && value.abs() <= SAFE_INTEGER {
        // The range check above makes the conversion exact.
        return Value::Number(Number::from(value as i64));
    }
    Number::from_f64(value).map_or(Value::Null, Value::Number)
}

fn child_of(node: &Node, segment: &str) -> Node {
    match Key::new(segment) {
        Ok(key) => node.child(&key),
        Err(_) => Node::empty(),
    }
}

fn priority_node(priority: &Priority) -> Node {
    match priority {
        Priority::None => Node::empty(),
        Priority::Number(n) => Node::leaf(Leaf::Number(*n)),
        Priority::String(s) => Node::leaf(Leaf::String(s.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(value: Value) -> Node {
        Node::from_json(&value).expect("valid test node")
    }

    /// The resolved value of a write without data errors.
    fn resolved(value: Option<Value>) -> Result<Resolved, ServerValueError> {
        Ok(Resolved {
            value,
            data_error: None,
        })
    }

    #[test]
    fn plain_values_are_not_copied() {
        assert_eq!(
            resolve_server_values(&json!({"a": 1}), &Node::empty(), 5),
            resolved(None)
        );
    }

    #[test]
    fn timestamps_share_the_commit_time() {
        let value = json!({"a": {".sv": "timestamp"}, "b": {"c": {".sv": "timestamp"}}});
        let resolved = resolve_server_values(&value, &Node::empty(), 1_700_000_000_123);
        assert_eq!(
            resolved,
            self::resolved(Some(
                json!({"a": 1_700_000_000_123u64, "b": {"c": 1_700_000_000_123u64}})
            ))
        );
    }

    #[test]
    fn increment_adds_to_numbers_only() {
        let inc = json!({".sv": {"increment": 2}});
        let existing = node(json!({"n": 5, "s": "x"}));
        let value = json!({"n": inc, "s": inc, "missing": inc});
        let resolved = resolve_server_values(&value, &existing, 0);
        assert_eq!(
            resolved,
            self::resolved(Some(json!({"n": 7, "s": 2, "missing": 2})))
        );
        let fractional =
            resolve_server_values(&json!({".sv": {"increment": 0.5}}), &node(json!(1)), 0);
        assert_eq!(fractional, self::resolved(Some(json!(1.5))));
    }

    #[test]
    fn timestamp_priority_and_value_wrappers() {
        let value = json!({".value": {".sv": "timestamp"}, ".priority": {".sv": "timestamp"}});
        let resolved = resolve_server_values(&value, &Node::empty(), 9);
        assert_eq!(
            resolved,
            self::resolved(Some(json!({".value": 9, ".priority": 9})))
        );
    }

    #[test]
    fn unknown_placeholders_are_refused() {
        assert!(resolve_server_values(&json!({".sv": "nope"}), &Node::empty(), 0).is_err());
        assert!(
            resolve_server_values(&json!({".sv": {"increment": "x"}}), &Node::empty(), 0).is_err()
        );
    }

    #[test]
    fn an_overflowing_increment_is_a_data_error_with_a_finite_stand_in() {
        let inc = json!({"a": {".sv": {"increment": 1e308}}, "b": {".sv": {"increment": -1e308}}});
        let existing = node(json!({"a": 1.7e308, "b": -1.7e308}));
        let resolved = resolve_server_values(&inc, &existing, 0).expect("a valid value");
        assert_eq!(resolved.data_error, Some(ServerValueError::Overflow));
        assert_eq!(resolved.value, Some(json!({"a": f64::MAX, "b": -f64::MAX})));
    }
}
