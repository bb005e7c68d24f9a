//! Reading the server's messages without building a JSON tree for each.
//!
//! A tester process receives hundreds of thousands of pushes a second; parsing each into a
//! `serde_json::Value` made the tester, not the server, the bottleneck of high fan-out runs
//! (a profile showed most of its time in building and dropping maps). Here the envelope is
//! read into borrowed fields, and the pushed data is only scanned for send stamps.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// How deep into pushed data stamps are looked for.
const MAX_STAMP_DEPTH: usize = 4;

/// What the server sent.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Handshake,
    Reply {
        id: u64,
        ok: bool,
        detail: String,
    },
    /// The send stamps found in a push's data (`d` of a put, the entries of a merge).
    Push(Vec<u64>),
    Other,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    t: Cow<'a, str>,
    #[serde(borrow)]
    d: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Data<'a> {
    r: Option<u64>,
    #[serde(borrow)]
    a: Option<Cow<'a, str>>,
    #[serde(borrow)]
    t: Option<Cow<'a, str>>,
    #[serde(borrow)]
    b: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    s: Option<Cow<'a, str>>,
    #[serde(borrow)]
    d: Option<&'a RawValue>,
}

/// The body of a push datagram of Hearth's WebTransport sessions.
#[derive(Deserialize)]
struct DatagramBody<'a> {
    #[serde(borrow)]
    d: Option<&'a RawValue>,
}

/// Reads a datagram of Hearth's WebTransport sessions: a push's action letter (`d` or `m`)
/// followed by the push's body, `{"p":PATH,"d":DATA}` (docs/volatile.md).
pub fn parse_datagram(payload: &[u8]) -> Incoming {
    let Some((b'd' | b'm', body)) = payload.split_first() else {
        return Incoming::Other;
    };
    let Ok(body) = serde_json::from_slice::<DatagramBody>(body) else {
        return Incoming::Other;
    };
    match body.d {
        Some(raw) => stamps(raw.get().as_bytes()).map_or(Incoming::Other, Incoming::Push),
        None => Incoming::Push(Vec::new()),
    }
}

pub fn parse(text: &str) -> Incoming {
    parse_checked(text).unwrap_or(Incoming::Other)
}

fn parse_checked(text: &str) -> Option<Incoming> {
    let envelope: Envelope = serde_json::from_str(text).ok()?;
    let data: Data = serde_json::from_str(envelope.d?.get()).ok()?;
    match &*envelope.t {
        "c" if data.t.as_deref() == Some("h") => Some(Incoming::Handshake),
        "d" => {
            let body: Body = serde_json::from_str(data.b?.get()).ok()?;
            if let Some(id) = data.r {
                let status = body.s.unwrap_or_default();
                let detail = body.d.map_or("null", |raw| raw.get());
                return Some(Incoming::Reply {
                    id,
                    ok: status == "ok",
                    detail: format!("{status}: {detail}"),
                });
            }
            match data.a.as_deref() {
                Some("d" | "m") => {
                    let found = match body.d {
                        Some(raw) => stamps(raw.get().as_bytes())?,
                        None => Vec::new(),
                    };
                    Some(Incoming::Push(found))
                }
                _ => Some(Incoming::Other),
            }
        }
        _ => Some(Incoming::Other),
    }
}

/// The send stamps in the JSON `data` (see [`Stamps`]); `None` if it is not JSON.
pub fn stamps(data: &[u8]) -> Option<Vec<u64>> {
    let mut found = Vec::new();
    let mut reader = serde_json::Deserializer::from_slice(data);
    let seed = Stamps {
        depth: 0,
        out: &mut found,
    };
    seed.deserialize(&mut reader).ok()?;
    Some(found)
}

/// Collects send stamps while the data streams past: an object holding a numeric `t` is one
/// stamped value (its other members are not searched); other objects are searched down to
/// [`MAX_STAMP_DEPTH`]. Arrays and scalars hold no stamps.
struct Stamps<'v> {
    depth: usize,
    out: &'v mut Vec<u64>,
}

impl<'de> DeserializeSeed<'de> for Stamps<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Stamps<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("JSON data")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let out = self.out;
        let start = out.len();
        let mut own = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == "t" {
                own = map.next_value::<serde_json::Value>()?.as_u64().or(own);
            } else if self.depth < MAX_STAMP_DEPTH && own.is_none() {
                map.next_value_seed(Stamps {
                    depth: self.depth + 1,
                    out: &mut *out,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if let Some(stamp) = own {
            out.truncate(start);
            out.push(stamp);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_pushes_and_stamps() {
        assert_eq!(
            parse(r#"{"t":"d","d":{"r":4,"b":{"s":"ok","d":""}}}"#),
            Incoming::Reply {
                id: 4,
                ok: true,
                detail: "ok: \"\"".into()
            }
        );
        assert_eq!(
            parse(r#"{"t":"d","d":{"r":5,"b":{"s":"permission_denied","d":"no"}}}"#),
            Incoming::Reply {
                id: 5,
                ok: false,
                detail: "permission_denied: \"no\"".into()
            }
        );
        let Incoming::Push(mut seen) = parse(
            r#"{"t":"d","d":{"a":"m","b":{"p":"/r","d":{"a":{"t":5},"b":null,"c":{"x":{"t":7}}},"t":2}}}"#,
        ) else {
            panic!("a push");
        };
        seen.sort_unstable();
        assert_eq!(
            seen,
            vec![5, 7],
            "the query tag beside the data is no stamp"
        );
        // An object with a stamp is one value, whatever it holds.
        assert_eq!(
            parse(r#"{"t":"d","d":{"a":"d","b":{"p":"/r","d":{"inner":{"t":1},"t":9}}}}"#),
            Incoming::Push(vec![9])
        );
        assert_eq!(
            parse(r#"{"t":"d","d":{"a":"d","b":{"p":"/r","d":[{"t":1}]}}}"#),
            Incoming::Push(vec![])
        );
        assert!(matches!(
            parse(r#"{"t":"c","d":{"t":"h","d":{"ts":1,"v":"5","h":"x","s":"y"}}}"#),
            Incoming::Handshake
        ));
        assert_eq!(parse("not json"), Incoming::Other);
        assert_eq!(
            parse_datagram(br#"d{"p":"/c/u1","d":{"x":1,"t":42}}"#),
            Incoming::Push(vec![42])
        );
        assert_eq!(
            parse_datagram(br#"m{"p":"/c","d":{"u1":{"t":3},"u2":null},"t":7}"#),
            Incoming::Push(vec![3])
        );
        assert_eq!(parse_datagram(br#"x{"p":"/c","d":1}"#), Incoming::Other);
        assert_eq!(parse_datagram(b""), Incoming::Other);
        assert_eq!(parse(r#"{"t":"d","d":{"a":"ac","b":{}}}"#), Incoming::Other);
    }
}
