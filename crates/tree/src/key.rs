//! Keys (child names) and the client's "name order" (spec §9.1).
//!
//! The order must agree bit for bit with the JS client, because the client and the server both
//! use it to pick the children of a limited query window and to lay out the text that is hashed
//! for compare-and-set. Two details make it differ from plain string order:
//!
//! * keys that look like 32-bit integers sort first, numerically;
//! * other keys compare by UTF-16 code units (JavaScript `<`), not by code points.

use smol_str::SmolStr;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use crate::limits::{TreeError, MAX_KEY_BYTES};

/// A validated child name. Keys of up to 23 bytes (push ids, field names) are stored inline,
/// with no allocation of their own: a database holds one key per node, so this is much of its
/// memory. Longer keys share one allocation, so cloning is cheap either way. The integer
/// reading of the key is computed once, because key comparison sits on every map lookup.
#[derive(Clone)]
pub struct Key {
    text: SmolStr,
    int: Option<i32>,
}

impl Key {
    /// Validates `s` as a key: non-empty, at most [`MAX_KEY_BYTES`] bytes of UTF-8, none of
    /// `. $ # [ ] /` nor an ASCII control character, and not a negative zero (`-0`, `-00`, ...),
    /// which the client cannot order consistently (spec §9.1 item 5).
    pub fn new(s: &str) -> Result<Key, TreeError> {
        if s.is_empty() {
            return Err(TreeError::invalid_key(s, "keys must not be empty"));
        }
        if s.len() > MAX_KEY_BYTES {
            return Err(TreeError::invalid_key(
                s,
                "keys must be at most 768 bytes of UTF-8",
            ));
        }
        if s.bytes().any(is_forbidden_byte) {
            return Err(TreeError::invalid_key(
                s,
                "keys must not contain '.', '$', '#', '[', ']', '/' or ASCII control characters",
            ));
        }
        if is_negative_zero(s) {
            return Err(TreeError::invalid_key(
                s,
                "negative-zero keys such as \"-0\" are refused: clients order them inconsistently",
            ));
        }
        Ok(Key::new_unchecked(s))
    }

    /// Builds a key without validation. Only for tests that must reproduce what the client does
    /// with keys this crate refuses (e.g. the `-0` hash vectors of spec §10.4).
    pub(crate) fn new_unchecked(s: &str) -> Key {
        Key {
            text: SmolStr::new(s),
            int: integer_like(s),
        }
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The numeric value when the key is integer-like (spec §9.1 item 1), e.g. `"007"` → 7.
    pub fn integer_value(&self) -> Option<i32> {
        self.int
    }
}

/// Bytes no key may contain. Bytes of multi-byte UTF-8 sequences are all >= 0x80, so a plain
/// byte scan cannot mistake part of a longer character for one of these.
fn is_forbidden_byte(b: u8) -> bool {
    matches!(
        b,
        b'.' | b'$' | b'#' | b'[' | b']' | b'/' | 0x00..=0x1f | 0x7f
    )
}

/// `-` followed only by zeros: integer-like with the value zero but a different spelling from
/// `0`, `00`, ... of the same length, which the client then orders by arrival.
fn is_negative_zero(s: &str) -> bool {
    s.strip_prefix('-')
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b == b'0'))
}

/// Reads `s` as the client does: `^-?0*\d{1,10}$` whose value fits in an `i32`. Leading zeros
/// are allowed and do not count towards the ten digits.
pub(crate) fn integer_like(s: &str) -> Option<i32> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > 10 {
        return None;
    }
    // At most ten decimal digits, so the i64 below cannot overflow.
    let magnitude = significant
        .bytes()
        .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'));
    i32::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Name order of two keys given their integer readings.
fn compare_parsed(a: &str, a_int: Option<i32>, b: &str, b_int: Option<i32>) -> Ordering {
    match (a_int, b_int) {
        // Equal values are ordered by length, as the client does. Equal value and equal length
        // with different text only happens for negative zeros (refused by `Key::new`); the
        // byte order that breaks that tie keeps the order total and matches the captured
        // client hashes of spec §10.4.
        (Some(x), Some(y)) => x
            .cmp(&y)
            .then_with(|| a.len().cmp(&b.len()))
            .then_with(|| a.as_bytes().cmp(b.as_bytes())),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => compare_utf16(a, b),
    }
}

/// Name order (spec §9.1) on raw strings, as used for query bounds. It does not know the
/// `[MIN_NAME]`/`[MAX_NAME]` sentinels; the caller handles those.
pub fn compare_keys(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    compare_parsed(a, integer_like(a), b, integer_like(b))
}

/// Compares two strings by their UTF-16 code units, like JavaScript's `<`, without encoding
/// them.
///
/// UTF-8 byte order equals code-point order, and code-point order equals UTF-16 order except
/// in one case: a supplementary character (4-byte UTF-8, lead byte 0xF0..=0xF4, encoded as a
/// surrogate pair starting at 0xD800) sorts *before* a character of U+E000..=U+FFFF (3-byte
/// UTF-8 with lead byte 0xEE or 0xEF) in UTF-16. At the first differing byte both strings have
/// either started a new character (then both bytes are lead bytes) or are inside characters
/// with the same lead byte (then both are continuation bytes, of the same class). So only that
/// lead-byte pair needs to be flipped, and everything else is plain byte comparison.
pub fn compare_utf16(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let at = first_difference(a, b);
    match (a.get(at), b.get(at)) {
        (Some(&x), Some(&y)) => {
            if x >= 0xF0 && (0xEE..=0xEF).contains(&y) {
                Ordering::Less
            } else if y >= 0xF0 && (0xEE..=0xEF).contains(&x) {
                Ordering::Greater
            } else {
                x.cmp(&y)
            }
        }
        // One is a prefix of the other (or both are equal): shorter first in every order.
        _ => a.len().cmp(&b.len()),
    }
}

/// Index of the first byte where `a` and `b` differ, or the shorter length. Compares 16-byte
/// blocks first so that long common prefixes (push IDs share many) go at memcmp speed.
fn first_difference(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 16;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        compare_parsed(&self.text, self.int, &other.text, other.int)
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.text == other.text
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", &*self.text)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(s: &str) -> Key {
        Key::new(s).expect("valid test key")
    }

    #[test]
    fn validation_refuses_bad_keys() {
        for bad in [
            "",
            "a.b",
            "a$",
            "#",
            "[x",
            "x]",
            "a/b",
            "\u{0}",
            "tab\t",
            "\u{1f}",
            "del\u{7f}",
        ] {
            assert!(
                matches!(Key::new(bad), Err(TreeError::InvalidKey { .. })),
                "{bad:?} should be refused"
            );
        }
        assert!(Key::new(&"x".repeat(MAX_KEY_BYTES)).is_ok());
        let too_long = |key: &str| {
            matches!(
                Key::new(key),
                Err(TreeError::InvalidKey { reason, .. })
                    if reason == "keys must be at most 768 bytes of UTF-8"
            )
        };
        assert!(too_long(&"x".repeat(MAX_KEY_BYTES + 1)));
        // 256 three-byte characters are exactly 768 bytes; one more is too many.
        assert!(Key::new(&"☃".repeat(256)).is_ok());
        assert!(too_long(&"☃".repeat(257)));
        for ok in [
            "a",
            "A b",
            "😀",
            "-",
            "-a",
            "key with \"quotes\" and \\",
            "-1",
            "0",
        ] {
            assert_eq!(key(ok).as_str(), ok);
        }
    }

    #[test]
    fn negative_zero_keys_are_refused() {
        for bad in ["-0", "-00", "-0000000000000"] {
            assert!(Key::new(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(Key::new("-01").is_ok());
        assert!(Key::new("-0a").is_ok());
    }

    #[test]
    fn integer_likeness() {
        let cases: &[(&str, Option<i32>)] = &[
            ("0", Some(0)),
            ("00", Some(0)),
            ("007", Some(7)),
            ("-1", Some(-1)),
            ("-007", Some(-7)),
            ("2147483647", Some(i32::MAX)),
            ("2147483648", None),
            ("-2147483648", Some(i32::MIN)),
            ("-2147483649", None),
            ("0000000000002147483647", Some(i32::MAX)),
            ("00000000000", Some(0)),
            ("12345678901", None),
            ("+5", None),
            ("5.0", None),
            ("1e3", None),
            (" 5", None),
            ("5 ", None),
            ("-", None),
            ("", None),
            ("٣", None),
        ];
        for &(text, expected) in cases {
            assert_eq!(integer_like(text), expected, "{text:?}");
        }
        assert_eq!(key("007").integer_value(), Some(7));
        assert_eq!(key("abc").integer_value(), None);
    }

    #[test]
    fn spec_ordering_example() {
        // Spec §9.1: -1, 0, -0, 00, 7, 007, 9, 10, 2147483648, B, a. "-0" is refused by
        // `Key::new`, so it is built unchecked to show where the order puts it.
        let expected = [
            "-1",
            "0",
            "-0",
            "00",
            "7",
            "007",
            "9",
            "10",
            "2147483648",
            "B",
            "a",
        ];
        let mut keys: Vec<Key> = expected
            .iter()
            .rev()
            .map(|s| Key::new_unchecked(s))
            .collect();
        keys.sort();
        let sorted: Vec<&str> = keys.iter().map(Key::as_str).collect();
        assert_eq!(sorted, expected);
        for pair in expected.windows(2) {
            assert_eq!(compare_keys(pair[0], pair[1]), Ordering::Less, "{pair:?}");
            assert_eq!(
                compare_keys(pair[1], pair[0]),
                Ordering::Greater,
                "{pair:?}"
            );
        }
        // The valid keys of the example, through the validating constructor.
        let mut valid: Vec<Key> = [
            "a",
            "B",
            "2147483648",
            "10",
            "9",
            "007",
            "7",
            "00",
            "0",
            "-1",
        ]
        .iter()
        .map(|s| key(s))
        .collect();
        valid.sort();
        let sorted: Vec<&str> = valid.iter().map(Key::as_str).collect();
        assert_eq!(
            sorted,
            [
                "-1",
                "0",
                "00",
                "7",
                "007",
                "9",
                "10",
                "2147483648",
                "B",
                "a"
            ]
        );
    }

    #[test]
    fn utf16_order_differs_from_code_points() {
        // U+1F600 is a surrogate pair (0xD83D ...) and sorts before U+FF61 in JavaScript.
        assert_eq!(compare_utf16("😀", "｡"), Ordering::Less);
        assert_eq!(compare_utf16("｡", "😀"), Ordering::Greater);
        assert!(key("😀") < key("｡"));
        assert_eq!(compare_utf16("\u{E000}", "😀"), Ordering::Greater);
        assert_eq!(compare_utf16("\u{D7FF}", "😀"), Ordering::Less);
        assert_eq!(compare_utf16("abc", "abd"), Ordering::Less);
        assert_eq!(compare_utf16("ab", "abc"), Ordering::Less);
        assert_eq!(compare_utf16("same", "same"), Ordering::Equal);
        assert_eq!(compare_utf16("B", "a"), Ordering::Less);
        let long_a = format!("{}x😀", "p".repeat(40));
        let long_b = format!("{}x｡", "p".repeat(40));
        assert_eq!(compare_utf16(&long_a, &long_b), Ordering::Less);
    }

    #[test]
    fn equality_and_hash_follow_the_text() {
        use std::collections::HashSet;
        let set: HashSet<Key> = [key("7"), key("007"), key("7")].into_iter().collect();
        assert_eq!(set.len(), 2);
        assert_ne!(key("7"), key("007"));
        assert_eq!(key("7").cmp(&key("7")), Ordering::Equal);
        assert_eq!(format!("{}", key("a b")), "a b");
        assert_eq!(format!("{:?}", key("a")), "Key(\"a\")");
    }

    /// Strings drawn mostly from the ranges where UTF-8 and UTF-16 orders disagree.
    fn tricky_string() -> impl Strategy<Value = String> {
        let ch = prop_oneof![
            proptest::char::range('a', 'c'),
            proptest::char::range('0', '2'),
            proptest::char::range('\u{D7F0}', '\u{E002}'),
            proptest::char::range('\u{FFF0}', '\u{FFFF}'),
            proptest::char::range('\u{10000}', '\u{10003}'),
            proptest::char::range('\u{1F600}', '\u{1F602}'),
            proptest::char::range('\u{10FFFE}', '\u{10FFFF}'),
            any::<char>(),
        ];
        proptest::collection::vec(ch, 0..24).prop_map(|cs| cs.into_iter().collect())
    }

    fn key_like_string() -> impl Strategy<Value = String> {
        prop_oneof![
            "-?0{0,3}[0-9]{1,11}",
            "[0-9a-c-]{1,4}",
            tricky_string().prop_filter("non-empty", |s| !s.is_empty()),
        ]
    }

    proptest! {
        #[test]
        fn compare_utf16_matches_encoding(a in tricky_string(), b in tricky_string()) {
            let expected = a.encode_utf16().cmp(b.encode_utf16());
            prop_assert_eq!(compare_utf16(&a, &b), expected);
        }

        #[test]
        fn compare_utf16_with_shared_prefix(p in tricky_string(), a in tricky_string(), b in tricky_string()) {
            let (a, b) = (format!("{p}{a}"), format!("{p}{b}"));
            prop_assert_eq!(compare_utf16(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
        }

        #[test]
        fn key_order_matches_raw_order(a in key_like_string(), b in key_like_string()) {
            let (ka, kb) = (Key::new_unchecked(&a), Key::new_unchecked(&b));
            prop_assert_eq!(ka.cmp(&kb), compare_keys(&a, &b));
            prop_assert_eq!(ka.cmp(&kb), kb.cmp(&ka).reverse());
            prop_assert_eq!(ka.cmp(&kb) == Ordering::Equal, a == b);
        }
    }
}
