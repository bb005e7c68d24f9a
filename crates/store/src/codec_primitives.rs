//! The byte level of the value encoding (`codec`): where bytes go and come from, varints,
//! strings and numbers, the decoder's limits and [`DecodeError`].

use std::convert::Infallible;
use std::sync::Arc;

use hearth_tree::TreeError;

/// Deepest nesting the decoder follows. The tree allows 32 levels; the margin means a tree
/// that somehow got deeper is still recovered, while corrupt input cannot exhaust the stack.
pub const DECODE_DEPTH_MAX: usize = 256;

/// Longest string the decoder accepts: the tree allows 10 MiB. The bound exists so that a
/// corrupt length cannot make the decoder allocate gigabytes before its checksum fails.
pub const DECODE_STRING_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Largest integer stored as a varint: beyond 2^53 not every integer is a double.
const EXACT_INTEGER_MAX: f64 = 9_007_199_254_740_992.0;

/// Why encoded bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("the data ends early")]
    Truncated,
    #[error("a varint is too long")]
    Varint,
    #[error("a length of {found} is beyond the limit of {limit}")]
    Length { found: u64, limit: u64 },
    #[error("unknown tag {0:#04x}")]
    Tag(u8),
    #[error("a string is not UTF-8")]
    Utf8,
    #[error("{0}")]
    Key(TreeError),
    #[error("object keys are not in strictly ascending order")]
    KeyOrder,
    #[error("an object has no children or a child is empty")]
    EmptyObject,
    #[error("a number is not finite or an integer is out of range")]
    Number,
    #[error("nesting is deeper than {DECODE_DEPTH_MAX} levels")]
    TooDeep,
    #[error("a database name is not valid")]
    DatabaseName,
    #[error("{0} bytes follow the end of the value")]
    Trailing(usize),
}

/// Where encoded bytes go.
pub(crate) trait Sink {
    type Error;
    fn put(&mut self, data: &[u8]) -> Result<(), Self::Error>;
}

impl Sink for Vec<u8> {
    type Error = Infallible;
    fn put(&mut self, data: &[u8]) -> Result<(), Infallible> {
        self.extend_from_slice(data);
        Ok(())
    }
}

/// Where encoded bytes come from.
pub(crate) trait Source {
    type Error: From<DecodeError>;

    /// Fills `buf` or fails (with [`DecodeError::Truncated`] at the end of the data).
    fn read_into(&mut self, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// Hands the next `len` bytes to `f`. Slices override this to avoid the copy.
    fn with_bytes<T>(&mut self, len: usize, f: impl FnOnce(&[u8]) -> T) -> Result<T, Self::Error> {
        let mut buf = vec![0; len];
        self.read_into(&mut buf)?;
        Ok(f(&buf))
    }
}

/// Decoding from a byte slice, which must be consumed exactly.
pub(crate) struct SliceSource<'a> {
    rest: &'a [u8],
}

impl<'a> SliceSource<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> SliceSource<'a> {
        SliceSource { rest: bytes }
    }

    /// Succeeds only if every byte was consumed.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        match self.rest.len() {
            0 => Ok(()),
            left => Err(DecodeError::Trailing(left)),
        }
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < len {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(head)
    }
}

impl Source for SliceSource<'_> {
    type Error = DecodeError;

    fn read_into(&mut self, buf: &mut [u8]) -> Result<(), DecodeError> {
        buf.copy_from_slice(self.take(buf.len())?);
        Ok(())
    }

    fn with_bytes<T>(&mut self, len: usize, f: impl FnOnce(&[u8]) -> T) -> Result<T, DecodeError> {
        Ok(f(self.take(len)?))
    }
}

// ---- primitives -------------------------------------------------------------------------

/// Unsigned LEB128: 7 bits a byte, low bits first, high bit set on all but the last byte.
pub(crate) fn put_varint<K: Sink>(sink: &mut K, mut value: u64) -> Result<(), K::Error> {
    let mut buf = [0u8; 10];
    let mut len = 0;
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            buf[len] = byte;
            len += 1;
            break;
        }
        buf[len] = byte | 0x80;
        len += 1;
    }
    sink.put(&buf[..len])
}

pub(crate) fn read_u8<S: Source>(source: &mut S) -> Result<u8, S::Error> {
    let mut byte = [0];
    source.read_into(&mut byte)?;
    Ok(byte[0])
}

pub(crate) fn read_varint<S: Source>(source: &mut S) -> Result<u64, S::Error> {
    let mut value = 0u64;
    for index in 0..10 {
        let byte = read_u8(source)?;
        let bits = u64::from(byte & 0x7f);
        // The tenth byte may only carry the one bit left of a u64.
        if index == 9 && bits > 1 {
            return Err(DecodeError::Varint.into());
        }
        value |= bits << (7 * index);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::Varint.into())
}

/// A varint length, refused above `limit`.
pub(super) fn read_len<S: Source>(source: &mut S, limit: u64) -> Result<usize, S::Error> {
    let found = read_varint(source)?;
    if found > limit {
        return Err(DecodeError::Length { found, limit }.into());
    }
    // `limit` is far below `usize::MAX` on every supported platform.
    Ok(found as usize)
}

pub(crate) fn put_str<K: Sink>(sink: &mut K, text: &str) -> Result<(), K::Error> {
    put_varint(sink, text.len() as u64)?;
    sink.put(text.as_bytes())
}

pub(crate) fn read_str<S: Source>(source: &mut S, limit: u64) -> Result<Arc<str>, S::Error> {
    let len = read_len(source, limit)?;
    let text = source.with_bytes(len, |bytes| std::str::from_utf8(bytes).map(Arc::from))?;
    text.map_err(|_| DecodeError::Utf8.into())
}

pub(super) fn put_f64<K: Sink>(sink: &mut K, value: f64) -> Result<(), K::Error> {
    sink.put(&value.to_le_bytes())
}

pub(super) fn read_f64<S: Source>(source: &mut S) -> Result<f64, S::Error> {
    let mut bytes = [0; 8];
    source.read_into(&mut bytes)?;
    let value = f64::from_le_bytes(bytes);
    if !value.is_finite() {
        return Err(DecodeError::Number.into());
    }
    Ok(value)
}

/// Whether `value` is stored as a varint: an integer that a double holds exactly, and not -0
/// (whose sign would be lost).
pub(super) fn is_exact_integer(value: f64) -> bool {
    value.fract() == 0.0
        && value.abs() <= EXACT_INTEGER_MAX
        && !(value == 0.0 && value.is_sign_negative())
}

/// Zigzag maps small negative numbers to small varints: 0, -1, 1, -2 → 0, 1, 2, 3.
pub(super) fn put_integer<K: Sink>(sink: &mut K, value: f64) -> Result<(), K::Error> {
    // `is_exact_integer` holds, so the conversion is exact.
    let integer = value as i64;
    put_varint(sink, ((integer << 1) ^ (integer >> 63)) as u64)
}

pub(super) fn read_integer<S: Source>(source: &mut S) -> Result<f64, S::Error> {
    let zigzag = read_varint(source)?;
    let integer = ((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64);
    let value = integer as f64;
    if value.abs() > EXACT_INTEGER_MAX {
        return Err(DecodeError::Number.into());
    }
    Ok(value)
}

/// Unwraps the result of encoding into memory, which cannot fail.
pub(crate) fn infallible<T>(result: Result<T, Infallible>) -> T {
    match result {
        Ok(value) => value,
        Err(never) => match never {},
    }
}
