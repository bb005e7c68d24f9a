//! Lone UTF-16 surrogates in client JSON text.
//!
//! A JavaScript string may hold half of a surrogate pair (`'😀'.slice(0, 1)`), and
//! `JSON.stringify` then writes it as an escape such as `"\ud800"`. Firebase accepts and stores
//! such strings; a Rust `String` cannot hold the unit, and serde_json refuses the whole text.
//! This pass rewrites each lone surrogate escape inside a string literal (values and keys
//! alike) to `\ufffd`, the replacement character, as a browser's `TextEncoder` does, so that the
//! text parses and only the broken unit is lost. Escapes of complete pairs are kept. The
//! rewrite has the same length as the original, so byte offsets in parse errors stay true.

use std::borrow::Cow;

/// The escape each lone surrogate becomes: U+FFFD REPLACEMENT CHARACTER.
const REPLACEMENT_HEX: &[u8; 4] = b"fffd";

/// Returns `text` with every lone surrogate escape inside a JSON string literal replaced by
/// `\ufffd`. Text without one (every valid JSON text) is returned unchanged and not copied.
/// Invalid JSON stays invalid: the pass only looks at escapes inside string literals.
pub fn replace_lone_surrogates(text: &[u8]) -> Cow<'_, [u8]> {
    // Fast path: nearly every message has no `\u` escape of a surrogate at all.
    if !may_hold_surrogate_escape(text) {
        return Cow::Borrowed(text);
    }
    let lone = lone_surrogate_offsets(text);
    if lone.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_vec();
    for at in lone {
        // `at` is the offset of the four hex digits after `\u`.
        out[at..at + 4].copy_from_slice(REPLACEMENT_HEX);
    }
    Cow::Owned(out)
}

/// [`replace_lone_surrogates`] for text that is already a `str`.
pub fn replace_lone_surrogates_str(text: &str) -> Cow<'_, str> {
    match replace_lone_surrogates(text.as_bytes()) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        // Only ASCII hex digits were overwritten by ASCII hex digits, so the bytes are still
        // UTF-8; the lossy conversion therefore never replaces anything.
        Cow::Owned(bytes) => Cow::Owned(String::from_utf8_lossy(&bytes).into_owned()),
    }
}

/// Whether `\u` followed by `d`/`D` and one of `8`..`f` occurs anywhere: a cheap filter that
/// lets texts without surrogate escapes skip the string-literal scan.
fn may_hold_surrogate_escape(text: &[u8]) -> bool {
    text.windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && (w[2] | 0x20) == b'd'
            && matches!(w[3] | 0x20, b'8'..=b'9' | b'a'..=b'f')
    })
}

/// The UTF-16 unit of the `\uXXXX` escape whose hex digits start at `at`, if well formed.
fn escape_unit(text: &[u8], at: usize) -> Option<u16> {
    let hex = text.get(at..at + 4)?;
    let hex = std::str::from_utf8(hex).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

fn is_high(unit: u16) -> bool {
    (0xD800..=0xDBFF).contains(&unit)
}

fn is_low(unit: u16) -> bool {
    (0xDC00..=0xDFFF).contains(&unit)
}

/// Offsets of the hex digits of every lone surrogate escape inside a string literal.
fn lone_surrogate_offsets(text: &[u8]) -> Vec<usize> {
    let mut lone = Vec::new();
    let mut in_string = false;
    let mut i = 0;
    while i < text.len() {
        let byte = text[i];
        if !in_string {
            in_string = byte == b'"';
            i += 1;
            continue;
        }
        match byte {
            b'"' => {
                in_string = false;
                i += 1;
            }
            b'\\' if text.get(i + 1) == Some(&b'u') => {
                let Some(unit) = escape_unit(text, i + 2) else {
                    // Malformed escape: leave it for the parser to refuse.
                    i += 2;
                    continue;
                };
                if is_high(unit) {
                    let next_is_low = text.get(i + 6) == Some(&b'\\')
                        && text.get(i + 7) == Some(&b'u')
                        && escape_unit(text, i + 8).is_some_and(is_low);
                    if next_is_low {
                        i += 12;
                        continue;
                    }
                    lone.push(i + 2);
                } else if is_low(unit) {
                    // A low surrogate that completes a pair was skipped with its high half.
                    lone.push(i + 2);
                }
                i += 6;
            }
            // Any other escape is two bytes; skipping both keeps `\\ud800` (an escaped
            // backslash, then plain text) from being read as an escape.
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    lone
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pass(text: &str) -> String {
        replace_lone_surrogates_str(text).into_owned()
    }

    #[test]
    fn lone_halves_become_the_replacement_character() {
        assert_eq!(pass(r#""\ud800""#), r#""\ufffd""#);
        assert_eq!(pass(r#""\uDC00x""#), r#""\ufffdx""#);
        assert_eq!(pass(r#"["a\ud83d","\ude00b"]"#), r#"["a\ufffd","\ufffdb"]"#);
        // Two highs in a row: both are lone.
        assert_eq!(pass(r#""\ud83d\ud83d""#), r#""\ufffd\ufffd""#);
        // A low before a high is not a pair.
        assert_eq!(pass(r#""\ude00\ud83d""#), r#""\ufffd\ufffd""#);
        // Keys too.
        assert_eq!(pass(r#"{"k\ud800":1}"#), r#"{"k\ufffd":1}"#);
        let value: serde_json::Value =
            serde_json::from_str(&pass(r#"{"k\ud800":"\udfff"}"#)).expect("parses");
        assert_eq!(value, serde_json::json!({"k\u{fffd}": "\u{fffd}"}));
    }

    #[test]
    fn pairs_escaped_backslashes_and_text_outside_strings_stay() {
        for text in [
            r#""\ud83d\ude00""#,
            r#""\\ud800""#,
            r#""\\\\ud800""#,
            r#""\"\ud83d\ude00""#,
            r#"{"a":"\u00e9\u2028"}"#,
            // Not inside a string literal: not ours to touch (the parser refuses it).
            r#"\ud800"#,
            // Truncated escapes stay as they are.
            r#""\ud8"#,
        ] {
            assert!(
                matches!(replace_lone_surrogates_str(text), Cow::Borrowed(_)),
                "{text} changed"
            );
        }
        assert_eq!(pass(r#""\\\ud800""#), r#""\\\ufffd""#);
    }

    /// JSON text of `units` as one string literal, every unit written as an escape, with some
    /// plain characters and escaped backslashes mixed in as they come.
    fn escaped_literal(units: &[u16], plain: &[bool]) -> String {
        let mut out = String::from("\"");
        for (i, unit) in units.iter().enumerate() {
            if plain.get(i).copied().unwrap_or(false) {
                out.push_str("\\\\ud800");
            }
            out.push_str(&format!("\\u{unit:04x}"));
        }
        out.push('"');
        out
    }

    proptest! {
        #[test]
        fn valid_json_text_is_never_changed(value in any_json(), escape_all in any::<bool>()) {
            let text = if escape_all { ascii_json(&value) } else { value.to_string() };
            prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
            prop_assert!(matches!(replace_lone_surrogates_str(&text), Cow::Borrowed(_)));
        }

        #[test]
        fn any_units_parse_as_the_lossy_decoding(
            units in proptest::collection::vec(
                prop_oneof![0xD7F0u16..0xE010, any::<u16>()], 0..12),
            plain in proptest::collection::vec(any::<bool>(), 0..12),
        ) {
            let text = escaped_literal(&units, &plain);
            let repaired = pass(&text);
            prop_assert_eq!(repaired.len(), text.len());
            let parsed: String = serde_json::from_str(&repaired).expect("repaired text parses");
            // The escaped backslashes come out as the plain text `\ud800` and cut the units
            // into runs; each run must read as its lossy UTF-16 decoding.
            let mut expected = String::new();
            let mut run = Vec::new();
            for (i, unit) in units.iter().enumerate() {
                if plain.get(i).copied().unwrap_or(false) {
                    expected.push_str(&String::from_utf16_lossy(&run));
                    expected.push_str("\\ud800");
                    run.clear();
                }
                run.push(*unit);
            }
            expected.push_str(&String::from_utf16_lossy(&run));
            prop_assert_eq!(parsed, expected);
        }
    }

    /// Arbitrary JSON values with strings of any characters, including astral ones.
    fn any_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<String>().prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(any::<String>(), inner, 0..4)
                    .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
            ]
        })
    }

    /// `value` as JSON with every non-ASCII character escaped, astral ones as surrogate pairs
    /// (what `JSON.stringify` plus an ASCII-only transport would produce).
    fn ascii_json(value: &serde_json::Value) -> String {
        let mut out = String::new();
        for c in value.to_string().chars() {
            if c.is_ascii() {
                out.push(c);
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        out
    }
}
