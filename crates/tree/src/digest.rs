//! The texts and digests behind the node hash of spec §10: SHA-1 of a canonical text, in
//! standard padded base64.
//!
//! Clients send this hash with every compare-and-set (transactions) and listen, so the server
//! must produce the very same string for the same data, quirks included: numbers are rendered
//! through the client's arithmetic reconstruction of the IEEE-754 bits rather than the real
//! bits. Here are the texts of leaves and objects, and the digests read straight from packed
//! and chunked bytes; they know leaves and priorities but not nodes, so that a chunk can cache
//! its children's digests. The hash of a node, built from them, is `hash`'s.

use std::sync::Arc;

use base64::Engine as _;
use sha1::{Digest, Sha1};

use crate::leaf::Leaf;
use crate::packed::{self, Value};
use crate::priority::Priority;

/// SHA-1 of `text`, base64 encoded with the standard alphabet and padding (28 characters).
pub(crate) fn sha1_text(text: &str) -> Arc<str> {
    let mut hasher = Sha1::new();
    hasher.update(text.as_bytes());
    sha1_base64(hasher)
}

/// The digest of `hasher` as the hash text clients compare, shared.
fn sha1_base64(hasher: Sha1) -> Arc<str> {
    Arc::from(base64_text(hasher))
}

/// The digest of `hasher` as the hash text clients compare.
fn base64_text(hasher: Sha1) -> String {
    digest_base64(&hasher.finalize().into())
}

/// A digest as the hash text clients compare: standard padded base64.
pub(crate) fn digest_base64(digest: &[u8; 20]) -> String {
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// How a client turns a number into the bits it prints in hash texts: [`client_double_bits`]
/// for the JS client, `f64::to_bits` for the Java one (`hash_java`).
pub(crate) type NumberBits = fn(f64) -> u64;

/// Appends `priority:<P>:` when there is a priority.
pub(crate) fn push_priority_prefix(text: &mut String, priority: &Priority, bits: NumberBits) {
    match priority {
        Priority::None => {}
        Priority::Number(n) => {
            text.push_str("priority:number:");
            text.push_str(&bits_hex(bits(*n)));
            text.push(':');
        }
        Priority::String(s) => {
            text.push_str("priority:string:");
            text.push_str(s);
            text.push(':');
        }
    }
}

/// The canonical text of a leaf (spec §10.1), before SHA-1.
pub(crate) fn leaf_hash_text(value: &Leaf, priority: &Priority) -> String {
    leaf_text(value, priority, client_double_bits)
}

/// The canonical text of a leaf with numbers printed from `bits`.
pub(crate) fn leaf_text(value: &Leaf, priority: &Priority, bits: NumberBits) -> String {
    let mut text = String::new();
    push_priority_prefix(&mut text, priority, bits);
    match value {
        Leaf::Bool(b) => {
            text.push_str("boolean:");
            text.push_str(if *b { "true" } else { "false" });
        }
        Leaf::Number(n) => {
            text.push_str("number:");
            text.push_str(&bits_hex(bits(*n)));
        }
        Leaf::String(s) => {
            text.push_str("string:");
            text.push_str(s);
        }
    }
    text
}

/// Hash of a leaf (spec §10.1).
pub(crate) fn leaf_hash(value: &Leaf, priority: &Priority) -> Arc<str> {
    Arc::from(leaf_hash_string(value, priority))
}

fn leaf_hash_string(value: &Leaf, priority: &Priority) -> String {
    let mut hasher = Sha1::new();
    hasher.update(leaf_hash_text(value, priority).as_bytes());
    base64_text(hasher)
}

/// The hash of an object's text: its priority prefix, then `:key:childHash` for each child in
/// the order given, leaving out empty children; `""` when that writes nothing (spec §10.2).
/// The text is streamed into SHA-1 rather than built.
pub(crate) fn object_text_hash<K: AsRef<str>, H: AsRef<str>>(
    priority: &Priority,
    bits: NumberBits,
    children: impl IntoIterator<Item = (K, H)>,
) -> Arc<str> {
    let mut prefix = String::new();
    push_priority_prefix(&mut prefix, priority, bits);
    let mut hasher = Sha1::new();
    let mut wrote_anything = !prefix.is_empty();
    hasher.update(prefix.as_bytes());
    for (key, child_hash) in children {
        let child_hash = child_hash.as_ref();
        if child_hash.is_empty() {
            continue;
        }
        hasher.update(b":");
        hasher.update(key.as_ref().as_bytes());
        hasher.update(b":");
        hasher.update(child_hash.as_bytes());
        wrote_anything = true;
    }
    if !wrote_anything {
        return Arc::from("");
    }
    sha1_base64(hasher)
}

/// SHA-1 of a packed object's hash text: the text of `hash::object_hash` read straight from
/// the bytes, without decoding any child. A packed object holds no priority, so key order is
/// priority order, and it is never empty.
pub(crate) fn packed_digest(bytes: &[u8]) -> [u8; 20] {
    let mut hasher = Sha1::new();
    packed::for_each(bytes, |key, value| {
        push_child(&mut hasher, key, &child_digest(value));
        true
    });
    hasher.finalize().into()
}

/// The digests of the children of a packed object (or a chunk of one), in key order.
pub(crate) fn packed_child_digests(bytes: &[u8]) -> Box<[[u8; 20]]> {
    let mut digests = Vec::new();
    packed::for_each(bytes, |_, value| {
        digests.push(child_digest(value));
        true
    });
    digests.into()
}

/// Adds `:key:childHash` to an object's hash text.
fn push_child(hasher: &mut Sha1, key: &str, digest: &[u8; 20]) {
    push_child_text(hasher, key, &digest_base64(digest));
}

/// Adds `:key:childHash` to an object's hash text, the child's hash given as its text.
fn push_child_text(hasher: &mut Sha1, key: &str, hash: &str) {
    hasher.update(b":");
    hasher.update(key.as_bytes());
    hasher.update(b":");
    hasher.update(hash.as_bytes());
}

/// The digest of one child of a packed object.
fn child_digest(value: Value<'_>) -> [u8; 20] {
    let mut hasher = Sha1::new();
    match value {
        Value::Object(inner) => return packed_digest(inner),
        Value::Bool(b) => hasher.update(leaf_hash_text(&Leaf::Bool(b), &Priority::None)),
        Value::Number(n) => hasher.update(leaf_hash_text(&Leaf::Number(n), &Priority::None)),
        // Streamed rather than through `leaf_hash_text`: no copy of the text.
        Value::Str(text) => {
            hasher.update(b"string:");
            hasher.update(text.as_bytes());
        }
    }
    hasher.finalize().into()
}

/// A part of a collection kept in chunks, for its hash.
pub(crate) enum HashedPart<'a> {
    /// A chunk of packed entries, with its children's digests in key order.
    Run(&'a [u8], &'a [[u8; 20]]),
    /// One child under its key, by its hash text.
    Child(&'a str, Arc<str>),
}

/// The hash of a collection kept in chunks (see `chunked`): every part's children with their
/// digests or hashes, in key order. Such a collection holds no priority and is never empty.
pub(crate) fn chunked_hash<'a>(parts: impl Iterator<Item = HashedPart<'a>>) -> Arc<str> {
    let mut hasher = Sha1::new();
    for part in parts {
        match part {
            HashedPart::Run(bytes, digests) => {
                let mut digests = digests.iter();
                packed::for_each(bytes, |key, _| match digests.next() {
                    Some(digest) => {
                        push_child_text(&mut hasher, key, &digest_base64(digest));
                        true
                    }
                    None => false,
                });
            }
            HashedPart::Child(key, hash) => push_child_text(&mut hasher, key, &hash),
        }
    }
    sha1_base64(hasher)
}

/// The 16 lower-case hex digits the client prints for a number (spec §10.3).
#[cfg(test)]
pub(crate) fn number_hex(v: f64) -> String {
    bits_hex(client_double_bits(v))
}

/// Bits as the 16 lower-case hex digits of hash texts.
fn bits_hex(bits: u64) -> String {
    format!("{bits:016x}")
}

/// The client's reconstruction of the IEEE-754 bits of `v`: exponent from a logarithm and
/// mantissa by scaling and rounding. It equals `v.to_bits()` for almost every value but not
/// just below some powers of two (the logarithm rounds up) nor for normals below 2^-971 (the
/// scale factor overflows), and those differences are part of the protocol.
pub(crate) fn client_double_bits(v: f64) -> u64 {
    if v == 0.0 {
        return if v.is_sign_negative() { 1 << 63 } else { 0 };
    }
    let sign = u64::from(v < 0.0);
    let a = v.abs();
    let (exponent, fraction) = if a >= f64::MIN_POSITIVE {
        let ln = (a.ln() / std::f64::consts::LN_2).floor().min(1023.0);
        // `ln` is an integer in [-1023, 1023] here, so the conversion is exact.
        let ln = ln as i32;
        let scaled = a * pow2(52 - ln) - pow2(52);
        (i64::from(ln) + 1023, js_round(scaled))
    } else {
        (0, js_round(a / pow2(-1074)))
    };
    let mantissa = if fraction.is_finite() {
        // A finite fraction is an integer of magnitude about 2^52; the low 52 bits of its
        // two's complement form are what the client keeps.
        (fraction as i64 as u64) & ((1 << 52) - 1)
    } else {
        0
    };
    let exponent = (exponent as u64) & 0x7ff;
    (sign << 63) | (exponent << 52) | mantissa
}

/// 2^exp, exact. Beyond the double range it is infinite (as `Math.pow` is), and below the
/// normal range it is a subnormal power of two or zero.
fn pow2(exp: i32) -> f64 {
    if exp > 1023 {
        f64::INFINITY
    } else if exp >= -1022 {
        // A biased exponent in 1..=2046 with a zero mantissa is exactly 2^exp.
        f64::from_bits(((exp + 1023) as u64) << 52)
    } else if exp >= -1074 {
        f64::from_bits(1u64 << (exp + 1074))
    } else {
        0.0
    }
}

/// JavaScript `Math.round`: the nearest integer, with exact halves going towards +∞ (so -2.5
/// becomes -2, unlike `f64::round`). `x - floor(x)` is exact for every double, so the tie test
/// is exact too, unlike the naive `floor(x + 0.5)`, which misrounds 0.49999999999999994.
fn js_round(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let floor = x.floor();
    if x - floor >= 0.5 {
        floor + 1.0
    } else {
        floor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_round_semantics() {
        assert_eq!(js_round(0.5), 1.0);
        assert_eq!(js_round(1.5), 2.0);
        assert_eq!(js_round(2.5), 3.0);
        assert_eq!(js_round(-0.5), 0.0);
        assert_eq!(js_round(-1.5), -1.0);
        assert_eq!(js_round(-2.5), -2.0);
        assert_eq!(js_round(-2.6), -3.0);
        assert_eq!(js_round(0.49999999999999994), 0.0);
        assert_eq!(js_round(4503599627370495.5), 4503599627370496.0);
        assert_eq!(js_round(9007199254740991.0), 9007199254740991.0);
        assert_eq!(js_round(-0.2), 0.0);
        assert!(js_round(f64::INFINITY).is_infinite());
    }

    #[test]
    fn pow2_is_exact() {
        assert_eq!(pow2(0), 1.0);
        assert_eq!(pow2(52), 4503599627370496.0);
        assert_eq!(pow2(-1), 0.5);
        assert_eq!(pow2(1023), f64::from_bits(0x7fe0_0000_0000_0000));
        assert!(pow2(1024).is_infinite());
        assert_eq!(pow2(-1022), f64::MIN_POSITIVE);
        assert_eq!(pow2(-1074), f64::from_bits(1));
        assert_eq!(pow2(-1075), 0.0);
    }

    #[test]
    fn number_text_routine() {
        assert_eq!(number_hex(1.0), "3ff0000000000000");
        assert_eq!(number_hex(2.0), "4000000000000000");
        assert_eq!(number_hex(0.0), "0000000000000000");
        assert_eq!(number_hex(-0.0), "8000000000000000");
        assert_eq!(number_hex(-2.5), "c004000000000000");
        assert_eq!(number_hex(0.1), "3fb999999999999a");
        assert_eq!(number_hex(1e21), "444b1ae4d6e2ef50");
        assert_eq!(number_hex(5.0), "4014000000000000");
        assert_eq!(number_hex(7.0), "401c000000000000");
        // The quirk: 2^53 - 1 is reconstructed as 2^53.
        assert_eq!(number_hex(9007199254740991.0), "4340000000000000");
        assert_eq!(9007199254740991f64.to_bits(), 0x433f_ffff_ffff_ffff);
        // Subnormals take the other branch and come out exact.
        assert_eq!(client_double_bits(f64::from_bits(1)), 1);
        assert_eq!(
            client_double_bits(f64::from_bits(0x000f_ffff_ffff_ffff)),
            0x000f_ffff_ffff_ffff
        );
        // Normals below 2^-971 lose their mantissa (the scale factor overflows).
        assert_eq!(client_double_bits(1.5 * pow2(-1000)), (23u64) << 52);
        assert_eq!(client_double_bits(1e-300), 0x01a0_0000_0000_0000);
        // Ordinary values match the real bits.
        for v in [3.0, 1e-290, 123456.789, -1e308, f64::MAX, 0.3, 1.0 / 3.0] {
            assert_eq!(client_double_bits(v), v.to_bits(), "{v}");
        }
    }
}
