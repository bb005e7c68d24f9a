//! JSON into the tree (spec §8).
//!
//! Input is the export form the clients send: `.priority` and `.value` carry priorities, other
//! keys starting with `.` are ignored, arrays are objects keyed by index, and nulls and empty
//! objects vanish. Keys, depth, path length and string length are checked on the way in. The
//! tree's JSON output is `json_write`'s.

use serde_json::{Map, Value};

use crate::key::Key;
use crate::leaf::Leaf;
use crate::limits::{TreeError, MAX_DEPTH, MAX_PATH_BYTES, MAX_STRING_BYTES};
use crate::node::{Node, ObjectData};
use crate::path::Path;
use crate::priority::Priority;

/// Where the value being parsed sits, so that the limits see the full path of every key.
#[derive(Clone, Copy)]
struct Position {
    depth: usize,
    /// UTF-8 bytes of the path so far: segments plus separators (0 at the root).
    bytes: usize,
}

impl Position {
    fn of(path: &Path) -> Position {
        let bytes = if path.is_root() { 0 } else { path.byte_len() };
        Position {
            depth: path.len(),
            bytes,
        }
    }

    /// The position of child `key`, refused when it breaks the depth or path-length limit.
    fn child(self, key: &str) -> Result<Position, TreeError> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(TreeError::TooDeep { depth });
        }
        let bytes = self.bytes + usize::from(self.depth > 0) + key.len();
        if bytes > MAX_PATH_BYTES {
            return Err(TreeError::PathTooLong { bytes });
        }
        Ok(Position { depth, bytes })
    }
}

impl Node {
    /// Builds a node from JSON in export form (plain JSON is a special case of it). Keys, depth,
    /// path length and string length are validated as if the value were written at the root;
    /// see [`Node::from_json_at`] for values written elsewhere. Unresolved server values
    /// (`.sv`) are refused: the caller resolves them first.
    pub fn from_json(v: &Value) -> Result<Node, TreeError> {
        parse(v, Position::of(&Path::root()))
    }

    /// Like [`Node::from_json`] for a value that will be written at `at`: the depth and
    /// path-length limits then apply to the full path of every key, as clients check them.
    pub fn from_json_at(v: &Value, at: &Path) -> Result<Node, TreeError> {
        parse(v, Position::of(at))
    }
}

fn parse(v: &Value, at: Position) -> Result<Node, TreeError> {
    match v {
        Value::Object(map) => parse_object(map, at),
        Value::Array(items) => Ok(ObjectData::build_from_entries(
            array_children(items, at)?,
            Priority::None,
        )),
        scalar => Ok(scalar_leaf(scalar)?.map(Node::leaf).unwrap_or_default()),
    }
}

fn parse_object(map: &Map<String, Value>, at: Position) -> Result<Node, TreeError> {
    refuse_server_value(map)?;
    if let Some(Value::Object(placeholder)) = map.get(".priority") {
        // Report an unresolved placeholder as such rather than as a bad priority.
        refuse_server_value(placeholder)?;
    }
    let priority = match map.get(".priority") {
        Some(p) => Priority::from_json(p)?,
        None => Priority::None,
    };
    if let Some(inner) = map.get(".value") {
        if map.keys().any(|key| !key.starts_with('.')) {
            return Err(TreeError::InvalidValue(
                "an object with .value cannot have other children".into(),
            ));
        }
        // The wrapped value takes the wrapper's priority; any metadata inside it is ignored,
        // as the client ignores it.
        match inner {
            Value::Null => return Ok(Node::empty()),
            Value::Object(inner_map) => {
                refuse_server_value(inner_map)?;
                return Ok(ObjectData::build_from_entries(
                    object_children(inner_map, at)?,
                    priority,
                ));
            }
            Value::Array(items) => {
                return Ok(ObjectData::build_from_entries(
                    array_children(items, at)?,
                    priority,
                ))
            }
            scalar => {
                return Ok(scalar_leaf(scalar)?
                    .map(|leaf| Node::leaf_with_priority(leaf, priority))
                    .unwrap_or_default())
            }
        }
    }
    Ok(ObjectData::build_from_entries(
        object_children(map, at)?,
        priority,
    ))
}

fn refuse_server_value(map: &Map<String, Value>) -> Result<(), TreeError> {
    if map.contains_key(".sv") {
        return Err(TreeError::InvalidValue(
            "unresolved server value (.sv) placeholder".into(),
        ));
    }
    Ok(())
}

/// The non-empty children of a JSON object, skipping metadata keys (those starting with `.`).
fn object_children(map: &Map<String, Value>, at: Position) -> Result<Vec<(Key, Node)>, TreeError> {
    let mut children = Vec::with_capacity(map.len());
    for (name, value) in map {
        if name.starts_with('.') {
            continue;
        }
        let key = Key::new(name)?;
        let child = parse(value, at.child(name)?)?;
        if !child.is_empty() {
            children.push((key, child));
        }
    }
    Ok(children)
}

/// The non-empty elements of a JSON array, keyed by index.
fn array_children(items: &[Value], at: Position) -> Result<Vec<(Key, Node)>, TreeError> {
    let mut children = Vec::with_capacity(items.len());
    for (index, value) in items.iter().enumerate() {
        let name = index.to_string();
        let position = at.child(&name)?;
        let child = parse(value, position)?;
        if !child.is_empty() {
            children.push((Key::new(&name)?, child));
        }
    }
    Ok(children)
}

/// The leaf of a JSON scalar (`None` for null).
fn scalar_leaf(v: &Value) -> Result<Option<Leaf>, TreeError> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(Leaf::Bool(*b))),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_finite() => Ok(Some(Leaf::Number(f))),
            _ => Err(TreeError::InvalidValue(format!(
                "{n} is not a finite number"
            ))),
        },
        Value::String(s) => {
            if s.len() > MAX_STRING_BYTES {
                return Err(TreeError::StringTooLong { bytes: s.len() });
            }
            Ok(Some(Leaf::String(s.as_str().into())))
        }
        Value::Object(_) | Value::Array(_) => {
            Err(TreeError::InvalidValue("expected a scalar".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, written};
    use serde_json::json;

    #[test]
    fn arrays_become_index_keyed_objects() {
        assert_eq!(
            node(json!([1, null, 3])).to_json(false),
            json!({"0": 1, "2": 3})
        );
        assert!(node(json!([])).is_empty());
        assert!(node(json!([null, {}, []])).is_empty());
        let eleven: Vec<u32> = (0..11).collect();
        let keys: Vec<String> = node(json!(eleven))
            .children()
            .map(|(k, _)| k.to_string())
            .collect();
        assert_eq!(
            keys,
            ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
        );
        assert_eq!(
            node(json!({".value": [5], ".priority": 1})).to_json(true),
            json!({"0": 5, ".priority": 1})
        );
    }

    #[test]
    fn nulls_and_empty_objects_vanish() {
        assert!(node(json!({"a": {}, "b": {"c": null}, "d": null})).is_empty());
        assert!(node(json!({".priority": 5})).is_empty());
        assert!(node(json!({".value": null, ".priority": 1})).is_empty());
        assert_eq!(
            node(json!({"a": {}, "b": 1})).to_json(true),
            json!({"b": 1})
        );
    }

    #[test]
    fn metadata_keys() {
        assert_eq!(
            node(json!({"a": 1, ".other": 2, ".info": {"x": 1}})).to_json(true),
            json!({"a": 1})
        );
        assert_eq!(
            node(json!({".value": 1, ".junk": 2})).to_json(true),
            json!(1)
        );
        assert!(matches!(
            Node::from_json(&json!({".value": 1, "a": 2})),
            Err(TreeError::InvalidValue(_))
        ));
        assert!(matches!(
            Node::from_json(&json!({".value": null, "a": 2})),
            Err(TreeError::InvalidValue(_))
        ));
        // The wrapped object's own metadata is ignored; the wrapper's priority applies.
        assert_eq!(
            node(json!({".value": {"a": 1, ".priority": 5}, ".priority": 2})).to_json(true),
            json!({"a": 1, ".priority": 2})
        );
        assert_eq!(
            node(json!({".value": {"a": 1, ".priority": 5}})).to_json(true),
            json!({"a": 1})
        );
        for bad in [
            json!({".sv": "timestamp"}),
            json!({"a": {"b": {".sv": "timestamp"}}}),
            json!([{".sv": {"increment": 1}}]),
            json!({".value": {".sv": "timestamp"}}),
            json!({"a": 1, ".priority": {".sv": "timestamp"}}),
        ] {
            assert!(
                matches!(Node::from_json(&bad), Err(TreeError::InvalidValue(_))),
                "{bad}"
            );
        }
        for bad in [
            json!({"a": 1, ".priority": true}),
            json!({".value": 1, ".priority": {"x": 1}}),
        ] {
            assert!(
                matches!(Node::from_json(&bad), Err(TreeError::InvalidPriority(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn negative_zero_becomes_zero() {
        let n: Value =
            serde_json::from_str(r#"{"a": -0.0, "b": -0, "c": {".value": 1, ".priority": -0.0}}"#)
                .expect("valid JSON");
        let n = node(n);
        for child in ["a", "b"] {
            match n.get(&Path::parse(child).expect("valid")).leaf_value() {
                Some(Leaf::Number(v)) => assert!(*v == 0.0 && v.is_sign_positive()),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(
            written(&n, true),
            r#"{"a":0,"b":0,"c":{".value":1,".priority":0}}"#
        );
    }

    #[test]
    fn invalid_keys_are_refused() {
        for bad in [
            json!({"a.b": 1}),
            json!({"": 1}),
            json!({"x": {"a/b": 1}}),
            json!({"-0": 1}),
            json!({"a": {"$x": 1}}),
        ] {
            assert!(
                matches!(Node::from_json(&bad), Err(TreeError::InvalidKey { .. })),
                "{bad}"
            );
        }
    }

    fn nested(depth: usize) -> Value {
        (0..depth).fold(json!(true), |inner, _| json!({ "k": inner }))
    }

    #[test]
    fn depth_limit() {
        assert!(Node::from_json(&nested(MAX_DEPTH)).is_ok());
        assert_eq!(
            Node::from_json(&nested(MAX_DEPTH + 1)),
            Err(TreeError::TooDeep { depth: 33 })
        );
        // Nulls do not escape the check, as in the client.
        let mut deep_null = json!(null);
        for _ in 0..=MAX_DEPTH {
            deep_null = json!({ "k": deep_null });
        }
        assert_eq!(
            Node::from_json(&deep_null),
            Err(TreeError::TooDeep { depth: 33 })
        );
        // `.value` wrappers do not add depth.
        let wrapped = (0..MAX_DEPTH).fold(
            json!({".value": 1, ".priority": 1}),
            |inner, _| json!({ "k": inner }),
        );
        assert!(Node::from_json(&wrapped).is_ok());
        // Written below a path, the limit covers the whole path.
        let at = Path::parse("/a/b").expect("valid");
        assert!(Node::from_json_at(&nested(MAX_DEPTH - 2), &at).is_ok());
        assert_eq!(
            Node::from_json_at(&nested(MAX_DEPTH - 1), &at),
            Err(TreeError::TooDeep { depth: 33 })
        );
        // And the tree accepts a leaf at depth 32 through `set`.
        let deepest = Path::parse(&"/k".repeat(MAX_DEPTH)).expect("valid");
        let root = Node::empty().set(&deepest, node(json!(1)));
        let expected = (0..MAX_DEPTH).fold(json!(1), |inner, _| json!({ "k": inner }));
        assert_eq!(root, node(expected));
    }

    #[test]
    fn path_length_limit() {
        let long = "x".repeat(MAX_PATH_BYTES);
        assert!(Node::from_json(&json!({ long.clone(): 1 })).is_ok());
        assert_eq!(
            Node::from_json(&json!({"a": { long.clone(): 1 }})),
            Err(TreeError::PathTooLong { bytes: 770 })
        );
        let at = Path::parse("/ab").expect("valid");
        let fits = "y".repeat(MAX_PATH_BYTES - 3);
        assert!(Node::from_json_at(&json!({ fits.clone(): 1 }), &at).is_ok());
        let too_long = format!("{fits}y");
        assert_eq!(
            Node::from_json_at(&json!({ too_long: 1 }), &at),
            Err(TreeError::PathTooLong { bytes: 769 })
        );
    }

    #[test]
    fn string_length_limit() {
        let max = "s".repeat(MAX_STRING_BYTES);
        assert!(Node::from_json(&Value::String(max.clone())).is_ok());
        let over = format!("{max}s");
        assert_eq!(
            Node::from_json(&json!({ "a": over })),
            Err(TreeError::StringTooLong {
                bytes: MAX_STRING_BYTES + 1
            })
        );
    }
}
