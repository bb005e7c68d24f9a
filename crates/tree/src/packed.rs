//! Small objects kept as one compact byte string.
//!
//! Most of a database's bytes sit in small records (a message, a profile), and a record held
//! as nodes costs several allocations and 48 bytes per field before its text. A small object
//! whose subtree carries no priority is therefore kept packed: one shared allocation that holds
//! its estimated JSON size, its child count and its children in key order, nested objects
//! inline. Reads decode what they touch (one child, or one level of children) without keeping
//! the decoded form, and serialization and hashing walk the bytes directly, so a packed record
//! never grows back to its node form. A write below a packed object unpacks one level, and the
//! new object is packed again when it still qualifies (see `update`'s `object_node`).
//!
//! This file knows bytes, keys and numbers but not nodes, so that a node can hold a `Packed`:
//! turning a node into an entry and an entry back into a node is the work of `packing`.
//!
//! The encoding lives only in memory; it is produced here and read here, so a malformed buffer
//! is a bug. Readers still stop at the first byte that does not parse rather than panic.
//!
//! ```text
//! packed = varint estimate, varint count, entry*          (keys ascending, unique)
//! entry  = varint key length, key bytes, value
//! value  = 0 (false) | 1 (true) | 2 zigzag-varint (integer) | 3 f64 little-endian
//!        | 4 varint length, UTF-8 bytes | 5 varint length, packed (nested object)
//!        | 6 scale byte k, zigzag-varint m   (the double nearest m / 10^k, 1 <= k <= 15)
//! ```
//!
//! Numbers take their smallest exact form: most fractions in data (coordinates, prices,
//! version numbers) have few decimal digits, and `m / 10^k` with both parts exact doubles is
//! the correctly rounded quotient, so it gives back the very double that was stored; a value
//! that does not come back bit for bit keeps its eight bytes.

use std::ops::Bound;
use std::sync::OnceLock;

use triomphe::HeaderSlice;

use crate::estimate::number_bytes;
use crate::key::Key;

/// Largest estimated JSON size (bytes) of an object that is kept packed. Every write below a
/// packed object re-encodes it, so the bound keeps that O(record), not O(collection). 4 KiB
/// holds whole the records of reference data (a feature's support table of 14 browsers is
/// about 1.5 KB): at 512 bytes such a record was a map of nodes, and a nested reference
/// dataset cost 2.9× its JSON live; at 4 KiB it is 1.0× (BENCHMARKS.md §9), while re-encoding
/// 4 KiB on a write stays in the microseconds.
pub(crate) const PACK_MAX_BYTES: usize = 4096;

const FALSE: u8 = 0;
const TRUE: u8 = 1;
const INTEGER: u8 = 2;
const FLOAT: u8 = 3;
const STRING: u8 = 4;
const OBJECT: u8 = 5;
const DECIMAL: u8 = 6;

/// Most decimal digits of a fraction stored as `m / 10^k`; 10^15 and every `m` below 2^53
/// are exact doubles.
const DECIMAL_MAX_SCALE: u8 = 15;

/// Powers of ten up to 10^15, each an exact double.
const POWERS_OF_TEN: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Integers up to this magnitude are exact in a double and stored as varints.
const EXACT_INTEGER_MAX: f64 = 9_007_199_254_740_991.0;

/// One packed object: its bytes and, in the same allocation, a cache `H` (by default its SHA-1
/// once computed; a chunk of a collection keeps its children's digests). The bytes are
/// immutable, so the cache never goes stale. Cloning shares both.
pub(crate) struct Packed<H = OnceLock<[u8; 20]>>(triomphe::Arc<HeaderSlice<H, [u8]>>);

impl<H> Clone for Packed<H> {
    fn clone(&self) -> Self {
        Packed(self.0.clone())
    }
}

/// A decoded value, borrowing its text from the buffer.
pub(crate) enum Value<'a> {
    Bool(bool),
    Number(f64),
    Str(&'a str),
    Object(&'a [u8]),
}

impl Packed {
    /// The SHA-1 of the object's hash text, computed by `digest` on first use.
    pub(crate) fn digest(&self, digest: impl FnOnce(&[u8]) -> [u8; 20]) -> [u8; 20] {
        *self.0.header.get_or_init(|| digest(self.bytes()))
    }
}

impl<H: Default> Packed<H> {
    /// A packed object of `count` entries already encoded by [`put_entry`] (a chunk of a large
    /// collection, whose estimate is kept by the collection, so it records none).
    pub(crate) fn from_entries(count: usize, entries: &[u8]) -> Packed<H> {
        Packed::from_encoded(0, count, entries)
    }

    /// A packed object of the `count` entries `buffer[start..end]`, whose estimated JSON size
    /// is `estimate`; its header is written into the [`HEADER_ROOM`] bytes before `start`
    /// (which must be there, and are overwritten), so that the entries are copied once, into
    /// the object's allocation.
    pub(crate) fn from_entries_in_place(
        buffer: &mut [u8],
        start: usize,
        end: usize,
        estimate: usize,
        count: usize,
    ) -> Packed<H> {
        let mut header = [0u8; HEADER_ROOM];
        let mut len = varint_into(&mut header, estimate as u64);
        len += varint_into(&mut header[len..], count as u64);
        let begin = start - len;
        buffer[begin..start].copy_from_slice(&header[..len]);
        Packed::from_slice(&buffer[begin..end])
    }

    /// A packed object of `count` entries already encoded, whose estimated JSON size is
    /// `estimate` (as [`Packed::encode`] records it).
    pub(crate) fn from_encoded(estimate: usize, count: usize, entries: &[u8]) -> Packed<H> {
        let mut out = Vec::with_capacity(entries.len() + 20);
        put_header(&mut out, estimate, count);
        out.extend_from_slice(entries);
        Packed::from_slice(&out)
    }

    /// The packed object whose whole encoding (header and entries) is `bytes`.
    pub(crate) fn from_slice(bytes: &[u8]) -> Packed<H> {
        Packed(triomphe::Arc::from_header_and_slice(H::default(), bytes))
    }
}

impl<H> Packed<H> {
    /// The cache kept beside the bytes.
    pub(crate) fn cache(&self) -> &H {
        &self.0.header
    }

    /// Appends the entries undecoded, each key with its encoded value made into a `T` by
    /// `entry`, in key order; `None` when they do not parse (after those that do).
    pub(crate) fn raw_entries_into<'a, T>(
        &'a self,
        out: &mut Vec<T>,
        entry: impl Fn(&'a str, &'a [u8]) -> T,
    ) -> Option<()> {
        let bytes = self.bytes();
        let (_, count, mut at) = header(bytes)?;
        out.reserve(count);
        for _ in 0..count {
            let (name, start) = read_str(bytes, at)?;
            at = skip_value(bytes, start)?;
            out.push(entry(name, &bytes[start..at]));
        }
        Some(())
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0.slice
    }

    pub(crate) fn ptr_eq(&self, other: &Packed<H>) -> bool {
        triomphe::Arc::ptr_eq(&self.0, &other.0)
    }

    /// The estimated JSON size recorded at encoding.
    pub(crate) fn estimate(&self) -> usize {
        header(self.bytes()).map_or(0, |(estimate, _, _)| estimate)
    }

    pub(crate) fn len(&self) -> usize {
        header(self.bytes()).map_or(0, |(_, count, _)| count)
    }

    /// The value of the child named `key`, undecoded. The scan compares raw key bytes and
    /// skips the other values unread, since it sits under every query's index lookup.
    pub(crate) fn child_value(&self, key: &Key) -> Option<Value<'_>> {
        let bytes = self.bytes();
        let (_, count, mut at) = header(bytes)?;
        let wanted = key.as_str().as_bytes();
        for _ in 0..count {
            let (name, next) = read_bytes(bytes, at)?;
            if name == wanted {
                return read_value(bytes, next).map(|(value, _)| value);
            }
            at = skip_value(bytes, next)?;
        }
        None
    }
}

pub(crate) fn after(key: &Key, from: Bound<&Key>) -> bool {
    match from {
        Bound::Included(bound) => key >= bound,
        Bound::Excluded(bound) => key > bound,
        Bound::Unbounded => true,
    }
}

pub(crate) fn before(key: &Key, to: Bound<&Key>) -> bool {
    match to {
        Bound::Included(bound) => key <= bound,
        Bound::Excluded(bound) => key < bound,
        Bound::Unbounded => true,
    }
}

/// The estimated JSON size of an encoded value (as [`Node::estimated_bytes`] of its node).
///
/// [`Node::estimated_bytes`]: crate::Node::estimated_bytes
pub(crate) fn value_estimate(encoded: &[u8]) -> usize {
    match read_value(encoded, 0) {
        Some((Value::Object(inner), _)) => header(inner).map_or(0, |(estimate, _, _)| estimate),
        Some((Value::Bool(true), _)) => 4,
        Some((Value::Bool(false), _)) => 5,
        Some((Value::Number(n), _)) => number_bytes(n),
        Some((Value::Str(text), _)) => text.len() + 2,
        None => 0,
    }
}

/// Appends an entry whose value is already encoded.
pub(crate) fn put_raw_entry(out: &mut Vec<u8>, key: &str, encoded: &[u8]) {
    put_str(out, key);
    out.extend_from_slice(encoded);
}

/// Calls `visit` with every child of the packed object `bytes` in key order, until it
/// returns false.
pub(crate) fn for_each<'a>(bytes: &'a [u8], mut visit: impl FnMut(&'a str, Value<'a>) -> bool) {
    for (name, value) in Entries::new(bytes) {
        if !visit(name, value) {
            return;
        }
    }
}

/// The children of the packed object `bytes` in key order, borrowed from it; it ends at the
/// first entry that does not parse.
pub(crate) struct Entries<'a> {
    bytes: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Entries<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Entries<'a> {
        let (left, at) = header(bytes).map_or((0, 0), |(_, count, at)| (count, at));
        Entries { bytes, at, left }
    }

    fn read(&mut self) -> Option<(&'a str, Value<'a>)> {
        let (name, next) = read_str(self.bytes, self.at)?;
        let (value, next) = read_value(self.bytes, next)?;
        self.at = next;
        Some((name, value))
    }
}

impl Entries<'_> {
    /// The number of entries still to come (all of them before the first `next`).
    pub(crate) fn len(&self) -> usize {
        self.left
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a str, Value<'a>);

    fn next(&mut self) -> Option<(&'a str, Value<'a>)> {
        if self.left == 0 {
            return None;
        }
        let entry = self.read();
        self.left = if entry.is_some() { self.left - 1 } else { 0 };
        entry
    }
}

/// The estimate, the count and the offset of the first entry.
fn header(bytes: &[u8]) -> Option<(usize, usize, usize)> {
    let (estimate, at) = read_varint(bytes, 0)?;
    let (count, at) = read_varint(bytes, at)?;
    Some((
        usize::try_from(estimate).ok()?,
        usize::try_from(count).ok()?,
        at,
    ))
}

/// Appends the header of a packed object: its estimated JSON size and its count of entries,
/// which follow.
pub(crate) fn put_header(out: &mut Vec<u8>, estimate: usize, count: usize) {
    put_varint(out, estimate as u64);
    put_varint(out, count as u64);
}

/// Appends a boolean value.
pub(crate) fn put_bool(out: &mut Vec<u8>, value: bool) {
    out.push(if value { TRUE } else { FALSE });
}

/// Appends a number value (finite, not `-0`) in its smallest exact form.
pub(crate) fn put_number(out: &mut Vec<u8>, n: f64) {
    if is_exact_integer(n) {
        out.push(INTEGER);
        // The range check makes the conversion exact.
        put_varint(out, zigzag(n as i64));
        return;
    }
    match decimal(n) {
        Some((scale, mantissa)) => {
            out.push(DECIMAL);
            out.push(scale);
            put_varint(out, zigzag(mantissa));
        }
        None => {
            out.push(FLOAT);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// Appends a string value.
pub(crate) fn put_string(out: &mut Vec<u8>, text: &str) {
    out.push(STRING);
    put_str(out, text);
}

/// Appends a nested object value whose packed bytes are `bytes`.
pub(crate) fn put_object(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(OBJECT);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a nested object value of `count` entries whose estimated JSON size is `estimate`:
/// `buffer[HEADER_ROOM..]` holds the entries, and the header is written into the room before
/// them, so that the object is copied once, without first being made a [`Packed`].
pub(crate) fn put_object_in_place(
    out: &mut Vec<u8>,
    buffer: &mut [u8],
    estimate: usize,
    count: usize,
) {
    let mut header = [0u8; HEADER_ROOM];
    let mut len = varint_into(&mut header, estimate as u64);
    len += varint_into(&mut header[len..], count as u64);
    let begin = HEADER_ROOM - len;
    buffer[begin..HEADER_ROOM].copy_from_slice(&header[..len]);
    put_object(out, &buffer[begin..]);
}

/// Appends an entry's key, for the value that follows.
pub(crate) fn put_key(out: &mut Vec<u8>, key: &str) {
    put_str(out, key);
}

/// The offset after the entry (key and value) at `at` of a run of entries, with its key.
pub(crate) fn skip_entry(bytes: &[u8], at: usize) -> Option<(&str, usize)> {
    let (name, start) = read_str(bytes, at)?;
    Some((name, skip_value(bytes, start)?))
}

/// Whether `n` is stored as an integer: whole, exact in a double, and not `-0`, which would
/// come back as `0`.
fn is_exact_integer(n: f64) -> bool {
    n.fract() == 0.0 && n.abs() <= EXACT_INTEGER_MAX && n.to_bits() != (-0.0f64).to_bits()
}

/// `n` as `(k, m)` with `m / 10^k == n` bit for bit and a varint of `m` shorter than the
/// double's eight bytes, if there is one (the smallest such `k`).
fn decimal(n: f64) -> Option<(u8, i64)> {
    for scale in 1..=DECIMAL_MAX_SCALE {
        let power = POWERS_OF_TEN[usize::from(scale)];
        let scaled = (n * power).round();
        if scaled.abs() > EXACT_INTEGER_MAX {
            return None;
        }
        if scaled / power == n && n.to_bits() != (-0.0f64).to_bits() {
            // `scaled` is whole and inside the exact range, so the conversion is exact; a
            // mantissa of 7 bytes or more as a varint saves nothing.
            let mantissa = scaled as i64;
            return (zigzag(mantissa) < 1 << 42).then_some((scale, mantissa));
        }
    }
    None
}

fn read_value(bytes: &[u8], at: usize) -> Option<(Value<'_>, usize)> {
    let tag = *bytes.get(at)?;
    let at = at + 1;
    match tag {
        FALSE => Some((Value::Bool(false), at)),
        TRUE => Some((Value::Bool(true), at)),
        INTEGER => {
            let (raw, at) = read_varint(bytes, at)?;
            Some((Value::Number(unzigzag(raw) as f64), at))
        }
        FLOAT => {
            let raw: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
            Some((Value::Number(f64::from_le_bytes(raw)), at + 8))
        }
        STRING => {
            let (text, at) = read_str(bytes, at)?;
            Some((Value::Str(text), at))
        }
        DECIMAL => {
            let power = *POWERS_OF_TEN.get(usize::from(*bytes.get(at)?))?;
            let (raw, at) = read_varint(bytes, at + 1)?;
            Some((Value::Number(unzigzag(raw) as f64 / power), at))
        }
        OBJECT => {
            let (body, at) = read_bytes(bytes, at)?;
            Some((Value::Object(body), at))
        }
        _ => None,
    }
}

/// The offset after the value at `at`, without decoding it.
fn skip_value(bytes: &[u8], at: usize) -> Option<usize> {
    let tag = *bytes.get(at)?;
    let at = at + 1;
    match tag {
        FALSE | TRUE => Some(at),
        INTEGER => read_varint(bytes, at).map(|(_, at)| at),
        FLOAT => Some(at + 8).filter(|end| *end <= bytes.len()),
        DECIMAL => read_varint(bytes, at + 1).map(|(_, at)| at),
        STRING | OBJECT => read_bytes(bytes, at).map(|(_, end)| end),
        _ => None,
    }
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    put_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

fn read_bytes(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let (len, at) = read_varint(bytes, at)?;
    let end = at.checked_add(usize::try_from(len).ok()?)?;
    Some((bytes.get(at..end)?, end))
}

fn read_str(bytes: &[u8], at: usize) -> Option<(&str, usize)> {
    let (raw, at) = read_bytes(bytes, at)?;
    Some((std::str::from_utf8(raw).ok()?, at))
}

/// Bytes of the longest header of a packed object: two varints of at most ten bytes.
pub(crate) const HEADER_ROOM: usize = 20;

/// Writes the varint of `value` at the start of `out` (ten bytes are always enough); returns
/// its length.
fn varint_into(out: &mut [u8], mut value: u64) -> usize {
    let mut len = 0;
    while value >= 0x80 {
        out[len] = (value as u8) | 0x80;
        value >>= 7;
        len += 1;
    }
    out[len] = value as u8;
    len + 1
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn read_varint(bytes: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(at)?;
        at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((value, at));
        }
    }
    None
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for n in [
            0i64,
            1,
            -1,
            63,
            -64,
            1 << 40,
            -(1 << 52),
            9_007_199_254_740_991,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, zigzag(n));
            let (raw, end) = read_varint(&out, 0).expect("a varint");
            assert_eq!(end, out.len());
            assert_eq!(unzigzag(raw), n);
        }
    }

    #[test]
    fn numbers_come_back_bit_for_bit() {
        for n in [
            0.0,
            -0.0,
            1.5,
            -7.0,
            1e300,
            9_007_199_254_740_993.0,
            f64::MIN_POSITIVE,
            -12.34567,
            123.45678,
            0.1,
            -0.000_001,
            0.1 + 0.2,
            1.0 / 3.0,
            4_398_046_511_103.5,
            5e-324,
        ] {
            let mut out = Vec::new();
            put_number(&mut out, n);
            let Some((Value::Number(back), _)) = read_value(&out, 0) else {
                panic!("a number decodes");
            };
            assert_eq!(back.to_bits(), n.to_bits());
        }
    }

    #[test]
    fn decimal_fractions_take_their_short_form() {
        let size = |n: f64| {
            let mut out = Vec::new();
            put_number(&mut out, n);
            out.len()
        };
        // A tag, the scale and a varint of the mantissa, against a tag and eight bytes.
        assert_eq!(size(-12.34567), 6);
        assert_eq!(size(0.5), 3);
        assert_eq!(size(1.0 / 3.0), 9);
        assert_eq!(size(1e300), 9);
    }

    #[test]
    fn truncated_buffers_decode_to_nothing_rather_than_panic() {
        let mut out = Vec::new();
        put_varint(&mut out, 10);
        put_varint(&mut out, 2);
        put_str(&mut out, "a");
        out.push(STRING);
        put_varint(&mut out, 100);
        let mut seen = 0;
        for_each(&out, |_, _| {
            seen += 1;
            true
        });
        assert_eq!(seen, 0);
        assert!(read_varint(&[0xff; 11], 0).is_none());
    }
}
