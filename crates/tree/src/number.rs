//! Numbers as text, exactly as JavaScript's `String(number)` prints them.
//!
//! The clients are JavaScript, and users compare what the REST API returns with what the
//! clients show, so the server prints numbers the same way: integers without a decimal point
//! (`1`, not `1.0`, which Python would read as a float), positional notation from 1e-6 up to
//! 1e21, exponent notation (`1e+21`, `1.5e-7`) outside it, and always the shortest digits that
//! read back as the same double. Rust's float formatting finds those shortest digits too; the
//! only difference is the rare case where two equally short candidates are exactly equally
//! close to the value, where ECMAScript picks the even one and Rust does not always.
//!
//! One exception: integers of magnitude 2^63 and more are printed in exponent notation
//! (`1e+20`) where JavaScript writes all their digits up to 1e21. The Java (Android) client
//! reads a number written with digits only as a 64-bit integer (`Long.parseLong`) and fails on
//! larger ones, losing the whole message; every JSON reader, JavaScript's included, reads both
//! texts as the same double.

use std::fmt::{self, Write as _};

use serde_json::{Number, Value};

/// 2^53: below it every integer is exact.
const SAFE_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// 2^63: integers from here on do not fit the Java client's 64-bit reading of digit-only
/// numbers, so they are printed in exponent notation.
const JAVA_LONG_LIMIT: f64 = 9_223_372_036_854_775_808.0;

/// The value as an `i64` when it is an integer below 2^53 in magnitude.
fn safe_integer(v: f64) -> Option<i64> {
    // `fract` is NaN for infinities, which fails the comparison.
    if v.fract() == 0.0 && v.abs() < SAFE_INTEGER_LIMIT {
        // The range check makes the conversion exact.
        Some(v as i64)
    } else {
        None
    }
}

/// Appends the number as JavaScript's `String(v)` prints it. Non-finite numbers never reach a
/// node; should one get here it prints as `null`, like `JSON.stringify`.
pub(crate) fn write_number(out: &mut Vec<u8>, v: f64) {
    if let Some(i) = safe_integer(v) {
        push_integer(out, i);
    } else if v.is_finite() {
        write_js_number(out, v);
    } else {
        out.extend_from_slice(b"null");
    }
}

/// The number as JavaScript's `String(v)` prints it.
pub(crate) fn number_text(v: f64) -> String {
    let mut out = Vec::with_capacity(24);
    write_number(&mut out, v);
    // Only ASCII digits, signs, '.', 'e' and "null" are ever written.
    String::from_utf8(out).unwrap_or_default()
}

/// A number as a `serde_json` value that is identical to what parsing [`write_number`]'s text
/// gives back: an integer when the text is an integer that fits 64 bits, a float otherwise.
pub(crate) fn number_to_value(v: f64) -> Value {
    if let Some(i) = safe_integer(v) {
        return Value::Number(Number::from(i));
    }
    let text = number_text(v);
    if !text.contains(['.', 'e']) {
        if let Ok(u) = text.parse::<u64>() {
            return Value::Number(Number::from(u));
        }
        if let Ok(i) = text.parse::<i64>() {
            return Value::Number(Number::from(i));
        }
    }
    Number::from_f64(v).map_or(Value::Null, Value::Number)
}

fn push_integer(out: &mut Vec<u8>, i: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = i.unsigned_abs();
    loop {
        at -= 1;
        // `rest % 10` is a single digit.
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if i < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

/// A small stack buffer to format into, so that printing a number does not allocate.
struct StackText {
    bytes: [u8; 32],
    len: usize,
}

impl StackText {
    fn new() -> StackText {
        StackText {
            bytes: [0; 32],
            len: 0,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The shortest round-tripping decimal digits of a positive finite double: the value is
/// `0.d1d2…dk × 10^n`.
struct Decimal {
    // 17 shortest digits at most, plus one for the exact form of a tie.
    digits: [u8; 18],
    len: usize,
    n: i32,
}

impl Decimal {
    /// Reads Rust's shortest `{:e}` output (`d.ddde-7`), a form Rust guarantees.
    fn shortest(v: f64) -> Decimal {
        let mut text = StackText::new();
        // The longest `{:e}` of a double is 23 bytes; the buffer holds 32.
        let _ = write!(text, "{v:e}");
        Decimal::parse(text.as_bytes())
    }

    fn parse(text: &[u8]) -> Decimal {
        let mut decimal = Decimal {
            digits: [0; 18],
            len: 0,
            n: 0,
        };
        let mut exponent = 0i32;
        let mut negative_exponent = false;
        let mut in_exponent = false;
        for &b in text {
            match b {
                b'e' => in_exponent = true,
                b'-' if in_exponent => negative_exponent = true,
                b'0'..=b'9' if in_exponent => exponent = exponent * 10 + i32::from(b - b'0'),
                b'0'..=b'9' if decimal.len < decimal.digits.len() => {
                    decimal.digits[decimal.len] = b;
                    decimal.len += 1;
                }
                _ => {}
            }
        }
        decimal.n = if negative_exponent {
            -exponent
        } else {
            exponent
        } + 1;
        decimal
    }

    fn digits(&self) -> &[u8] {
        &self.digits[..self.len]
    }
}

/// Whether the exact value of positive `v` lies exactly halfway between two `k`-digit
/// decimals, `k` being the length of its shortest digits `d`. The exact expansion of
/// `m × 2^q` (m odd) with q < 0 ends with a 5 at 10^q, so that is a tie exactly when 10^q is
/// the (k+1)-th significant digit. Integers (q >= 0) are checked on their exact expansion.
fn is_tie(v: f64, d: &Decimal) -> bool {
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (mut m, mut q) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    let zeros = m.trailing_zeros();
    m >>= zeros;
    q += zeros as i32;
    debug_assert!(m % 2 == 1);
    if q < 0 {
        return q == d.n - d.len as i32 - 1;
    }
    let exact = format!("{v:.0}");
    let exact = exact.as_bytes();
    exact.len() as i32 == d.n
        && exact.get(d.len) == Some(&b'5')
        && exact[d.len + 1..].iter().all(|&b| b == b'0')
}

/// Applies ECMAScript's tie rule: of two equally close shortest candidates, the even one.
fn prefer_even(v: f64, d: Decimal) -> Decimal {
    let last = d.digits()[d.len - 1];
    if (last - b'0').is_multiple_of(2) || !is_tie(v, &d) {
        return d;
    }
    // The exact value has k+1 digits, so printing it with k+1 significant digits is exact.
    let mut text = StackText::new();
    let _ = write!(text, "{:.*e}", d.len, v);
    let exact = Decimal::parse(text.as_bytes());
    if exact.n != d.n || exact.len != d.len + 1 {
        return d;
    }
    let mut candidate = Decimal {
        digits: exact.digits,
        len: d.len,
        n: d.n,
    };
    if (candidate.digits[d.len - 1] - b'0') % 2 == 1 {
        // Round the truncated digits up; a carry out of the first digit would mean a shorter
        // candidate existed, which cannot be, so keep Rust's digits then.
        let mut at = d.len;
        loop {
            if at == 0 {
                return d;
            }
            at -= 1;
            if candidate.digits[at] == b'9' {
                candidate.digits[at] = b'0';
            } else {
                candidate.digits[at] += 1;
                break;
            }
        }
    }
    let mut text = StackText::new();
    let digits = candidate.digits();
    let _ = write!(
        text,
        "{}.{}e{}",
        char::from(digits[0]),
        std::str::from_utf8(&digits[1..]).unwrap_or("0"),
        d.n - 1
    );
    let round_trips = std::str::from_utf8(text.as_bytes())
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        == Some(v);
    if round_trips {
        candidate
    } else {
        d
    }
}

/// ECMAScript Number::toString(10) layout of finite non-zero `v` (spec 6.1.6.1.20).
fn write_js_number(out: &mut Vec<u8>, v: f64) {
    if v < 0.0 {
        out.push(b'-');
    }
    let magnitude = v.abs();
    let d = prefer_even(magnitude, Decimal::shortest(magnitude));
    let digits = d.digits();
    let (k, n) = (d.len as i32, d.n);
    if k <= n && n <= 21 && magnitude < JAVA_LONG_LIMIT {
        out.extend_from_slice(digits);
        out.extend(std::iter::repeat_n(b'0', (n - k) as usize));
    } else if n < k && 0 < n && n <= 21 {
        out.extend_from_slice(&digits[..n as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-n) as usize));
        out.extend_from_slice(digits);
    } else {
        out.push(digits[0]);
        if k > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        let e = n - 1;
        out.extend_from_slice(if e >= 0 { b"e+" } else { b"e-" });
        push_integer(out, i64::from(e.abs()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_javascript() {
        // Expected texts are what Node's String(v) prints.
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (0.5, "0.5"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (100.0, "100"),
            (123.456, "123.456"),
            (9007199254740991.0, "9007199254740991"),
            (9007199254740992.0, "9007199254740992"),
            (1152921504606846976.0, "1152921504606847000"),
            (9223372036854774784.0, "9223372036854775000"),
            (-9223372036854774784.0, "-9223372036854775000"),
            // From 2^63 on, exponent notation where Node prints every digit (see the top).
            (9223372036854775808.0, "9.223372036854776e+18"),
            (-9223372036854775808.0, "-9.223372036854776e+18"),
            (1e20, "1e+20"),
            (123456789012345680000.0, "1.2345678901234568e+20"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (-1.5e300, "-1.5e+300"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.000001, "0.000001"),
            (0.0000012, "0.0000012"),
            (1e-7, "1e-7"),
            (1.23e-18, "1.23e-18"),
            (5e-324, "5e-324"),
            (1.0 / 3.0, "0.3333333333333333"),
            // Ties: two shortest candidates equally close; ECMAScript takes the even one.
            (
                f64::from_bits(0x3e60_0000_0000_0000),
                "2.9802322387695312e-8",
            ),
            (f64::from_bits(0x4310_0000_0000_0001), "1125899906842624.2"),
            (f64::from_bits(0x42e0_0000_0000_0004), "140737488355328.12"),
            (f64::from_bits(0x42ee_e708_f58b_7e34), "271821092707313.62"),
            (f64::from_bits(0x430d_eb9e_e957_fc2a), "1052730259603333.2"),
        ];
        for &(v, text) in cases {
            assert_eq!(number_text(v), text, "{v:e}");
            let parsed: Value = serde_json::from_str(text).expect("valid number");
            assert_eq!(number_to_value(v), parsed, "{text}");
        }
        assert_eq!(number_text(f64::NAN), "null");
    }

    #[test]
    fn tie_detection() {
        let tie = f64::from_bits(0x3e60_0000_0000_0000);
        assert!(is_tie(tie, &Decimal::shortest(tie)));
        for v in [0.1, 0.3, 123.456, 5e-324, 1e300, 2f64.powi(60)] {
            assert!(!is_tie(v, &Decimal::shortest(v)), "{v:e}");
        }
    }

    #[test]
    fn integers_are_printed_exactly() {
        let mut out = Vec::new();
        for i in [0i64, 7, -7, 10, 1 << 52, -(1 << 52) - 1, (1 << 53) - 1] {
            out.clear();
            push_integer(&mut out, i);
            assert_eq!(out, i.to_string().as_bytes());
        }
    }
}
