//! Reading a large JSON document one top-level member at a time: the root object is never
//! held whole, only the member being read, so a 1 GB export of many children imports with
//! memory for the tree plus one child.

use std::fmt;
use std::io::Read;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::error::{Result, ToolsError};

/// One piece of the document.
pub enum Piece {
    /// A member of the root object.
    Member(String, Value),
    /// The root itself, when it is not an object.
    Whole(Value),
}

/// Calls `each` with every member of the root object of the JSON document in `reader`, in
/// document order; a root that is not an object comes whole. Trailing data is an error, and
/// the first error of `each` ends the reading and is returned as it was.
pub fn for_each_member<R: Read>(
    reader: R,
    each: &mut dyn FnMut(Piece) -> Result<()>,
) -> Result<()> {
    let mut failure = None;
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    let parsed = Members {
        each,
        failure: &mut failure,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    match (failure, parsed) {
        (Some(failure), _) => Err(failure),
        (None, parsed) => parsed.map_err(ToolsError::json("the document")),
    }
}

struct Members<'a> {
    each: &'a mut dyn FnMut(Piece) -> Result<()>,
    /// The error of `each` that stopped the reading.
    failure: &'a mut Option<ToolsError>,
}

impl<'de> DeserializeSeed<'de> for Members<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Members<'_> {
    fn whole<E: de::Error>(mut self, value: Value) -> Result<(), E> {
        self.call(Piece::Whole(value))
    }

    fn call<E: de::Error>(&mut self, piece: Piece) -> Result<(), E> {
        (self.each)(piece).map_err(|failure| {
            let message = E::custom(&failure);
            *self.failure = Some(failure);
            message
        })
    }
}

impl<'de> Visitor<'de> for Members<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            let value: Value = map.next_value()?;
            self.call(Piece::Member(key, value))?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        self.whole(Value::Array(items))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.whole(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.whole(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.whole(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.whole(Value::from(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.whole(Value::from(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.whole(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Result<Vec<String>> {
        let mut seen = Vec::new();
        for_each_member(text.as_bytes(), &mut |piece| {
            seen.push(match piece {
                Piece::Member(key, value) => format!("{key}={value}"),
                Piece::Whole(value) => format!("whole {value}"),
            });
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn members_come_one_at_a_time_in_order() -> Result<()> {
        assert_eq!(
            pieces(r#"{"b": {"x": [1, 2]}, "a": 1.5, ".priority": 3}"#)?,
            vec!["b={\"x\":[1,2]}", "a=1.5", ".priority=3"]
        );
        assert_eq!(pieces("\"text\"")?, vec!["whole \"text\""]);
        assert_eq!(pieces("null")?, vec!["whole null"]);
        Ok(())
    }

    #[test]
    fn bad_documents_are_errors() {
        assert!(pieces(r#"{"a": 1"#).is_err());
        assert!(pieces(r#"{"a": 1} {"b": 2}"#).is_err());
    }
}
