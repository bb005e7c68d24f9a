//! Parsing JSON text into a `serde_json::Value` within a memory budget proportional to the
//! text's size, so that no message or body can make its parse cost more than a known multiple
//! of what the client sent.
//!
//! Measured (serde_json 1.0, 64-bit; bytes held by the parsed value per byte of text): chat
//! messages of a few short fields 7.9, user profiles with numbers and booleans 12.6, an object
//! of a million small members 9.0, a long string 1.0, and the densest document there is,
//! `[1,1,1,…]`, 16.8 (25 at its peak, while the array's buffer doubles). The budget counts
//! what the value holds, by the model below, so the densest documents come to just under 16
//! times their size; [`MAX_PARSE_BYTES_PER_BYTE`] is set there: every document seen in
//! practice fits with room to spare, and no text can cost more.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The memory a parsed value may take, as a multiple of its text's size (plus
/// [`PARSE_ALLOWANCE_BYTES`]). A value is counted as `size_of::<Value>()` (32 bytes), an
/// object member as its key's bytes plus 48 bytes for the key's `String` and the map entry,
/// and a string as its bytes. A client that passes it gets `invalid_data` (WebSocket) or
/// `400` (REST) naming the limit.
pub const MAX_PARSE_BYTES_PER_BYTE: usize = 16;

/// What every parse may take beyond [`MAX_PARSE_BYTES_PER_BYTE`] times its size, so that
/// the smallest documents (`[1]`) fit.
pub const PARSE_ALLOWANCE_BYTES: usize = 1024;

const VALUE_BYTES: usize = std::mem::size_of::<Value>();
const MEMBER_BYTES: usize = std::mem::size_of::<String>() + 24;

/// Why a text could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed JSON: {0}")]
    Malformed(String),
    #[error(
        "the data would take more than {budget} bytes of memory once parsed ({MAX_PARSE_BYTES_PER_BYTE} times its size of {text_bytes} bytes, plus {PARSE_ALLOWANCE_BYTES})"
    )]
    TooCostly { budget: usize, text_bytes: usize },
}

/// Parses `text` as one JSON value within the memory budget of its size.
pub fn parse_bounded(text: &str) -> Result<Value, ParseError> {
    let budget = text
        .len()
        .saturating_mul(MAX_PARSE_BYTES_PER_BYTE)
        .saturating_add(PARSE_ALLOWANCE_BYTES);
    parse_within(text, budget)
}

/// Parses `text` with `budget` bytes of modelled memory.
fn parse_within(text: &str, budget: usize) -> Result<Value, ParseError> {
    let left = Cell::new(budget);
    let exceeded = Cell::new(false);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Seed {
        left: &left,
        exceeded: &exceeded,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value));
    match parsed {
        Ok(value) => Ok(value),
        Err(_) if exceeded.get() => Err(ParseError::TooCostly {
            budget,
            text_bytes: text.len(),
        }),
        Err(error) => Err(ParseError::Malformed(error.to_string())),
    }
}

/// Builds a value while charging its modelled size to a shared allowance.
#[derive(Clone, Copy)]
struct Seed<'b> {
    left: &'b Cell<usize>,
    exceeded: &'b Cell<bool>,
}

impl Seed<'_> {
    fn charge<E: de::Error>(self, bytes: usize) -> Result<(), E> {
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.exceeded.set(true);
                Err(E::custom("memory budget exceeded"))
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        self.charge(VALUE_BYTES)?;
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        self.charge(VALUE_BYTES)?;
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        self.charge(VALUE_BYTES)?;
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        self.charge(VALUE_BYTES)?;
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        self.charge(VALUE_BYTES + s.len())?;
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        self.charge(VALUE_BYTES + s.len())?;
        Ok(Value::String(s))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.charge(VALUE_BYTES)?;
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.charge(VALUE_BYTES)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.charge(VALUE_BYTES)?;
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.charge(MEMBER_BYTES + key.len())?;
            let value = map.next_value_seed(self)?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_like_serde_json() {
        let text = r#"{"a":[1,-2,3.5,"x",true,null,{}],"b":{"c":"\u00e9\ud83d\ude00"},"":1e300}"#;
        assert_eq!(
            parse_bounded(text),
            Ok(serde_json::from_str::<Value>(text).expect("valid"))
        );
        assert_eq!(parse_bounded(" [1] "), Ok(json!([1])));
        assert!(matches!(
            parse_bounded("[1,"),
            Err(ParseError::Malformed(_))
        ));
        assert!(matches!(
            parse_bounded("1 2"),
            Err(ParseError::Malformed(_))
        ));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(
            parse_bounded(&deep),
            Err(ParseError::Malformed(_))
        ));
    }

    #[test]
    fn the_densest_documents_fit() {
        for n in [1, 10, 100_000] {
            let ones = format!("[{}1]", "1,".repeat(n - 1));
            assert!(parse_bounded(&ones).is_ok(), "{n} ones");
            let members: String = (0..n).map(|i| format!("\"{}\":0,", i % 10)).collect();
            assert!(parse_bounded(&format!("{{{members}\"z\":0}}")).is_ok());
            let empties = format!("[{}{{}}]", "{},".repeat(n - 1));
            assert!(parse_bounded(&empties).is_ok());
        }
    }

    #[test]
    fn the_budget_refuses_past_its_bound() {
        // Three values: the array and two numbers.
        assert!(parse_within("[1,2]", 3 * VALUE_BYTES).is_ok());
        assert_eq!(
            parse_within("[1,2]", 3 * VALUE_BYTES - 1),
            Err(ParseError::TooCostly {
                budget: 3 * VALUE_BYTES - 1,
                text_bytes: 5
            })
        );
        let member = VALUE_BYTES + MEMBER_BYTES + 2 + VALUE_BYTES + 3;
        assert!(parse_within(r#"{"ab":"xyz"}"#, member).is_ok());
        assert!(parse_within(r#"{"ab":"xyz"}"#, member - 1).is_err());
    }
}
