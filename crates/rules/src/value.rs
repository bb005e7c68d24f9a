//! Runtime values of rule expressions (spec §5.4) and the operators on them (spec §5.5).
//!
//! Strings borrow whenever they can — from the rules (literals), the auth token, the location
//! keys and the query — or share the `Arc<str>` of a data leaf, so comparing `auth.uid` with
//! `$uid` or a stored owner field allocates nothing. Only operations that build new text
//! (`+`, `replace`, case mapping) own a `String`.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::ops::Deref;
use std::sync::Arc;

use hearth_tree::{compare_utf16, Leaf, Priority};

use crate::ast::BinaryOp;
use crate::snapshot::Snap;

/// A value during evaluation.
#[derive(Debug, Clone)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Num(f64),
    Str(Text<'a>),
    Snap(Snap),
    /// An object or array from the auth token.
    Token(&'a serde_json::Value),
    /// What `val()` returns for a node with children (spec §7.1): non-null, equal to nothing.
    Placeholder,
}

/// String contents, borrowed, shared with a data leaf, or built during evaluation.
#[derive(Debug, Clone)]
pub(crate) enum Text<'a> {
    Borrowed(&'a str),
    Shared(Arc<str>),
    Owned(String),
}

impl Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Shared(s) => s,
            Text::Owned(s) => s,
        }
    }
}

/// A runtime error (spec §5.6). It makes the rule that raised it "not granted"; the message is
/// kept for denial reports and debugging, and costs nothing until it is displayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// An operator applied to operands it does not accept (`null + 1`, `'a' < 1`).
    #[error("'{op}' cannot be applied to values of types {left} and {right}")]
    Operands {
        op: &'static str,
        left: &'static str,
        right: &'static str,
    },
    /// A method or `length` used on a value of the wrong type (`5.contains('x')`).
    #[error("{member} used on a value of type {found}")]
    Receiver {
        member: &'static str,
        found: &'static str,
    },
    /// A method argument of the wrong type (`'foo'.contains(null)`).
    #[error("{method}() needs {expected}, got a value of type {found}")]
    Argument {
        method: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    /// `parent()` of the root.
    #[error("parent() called on the root")]
    RootParent,
    /// The operation ran out of evaluation steps; it is denied as a whole.
    #[error("the evaluation step budget is exhausted")]
    Budget,
}

impl Value<'_> {
    /// The type name used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Num(_) => "number",
            Value::Str(_) => "string",
            Value::Snap(_) => "snapshot",
            Value::Token(v) if v.is_array() => "array",
            Value::Token(_) | Value::Placeholder => "object",
        }
    }
}

/// Turns a JSON value from the auth token into a rule value; primitives become primitives so
/// that `auth.uid === $uid` compares strings.
pub(crate) fn from_json(v: &serde_json::Value) -> Value<'_> {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Num(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Value::Str(Text::Borrowed(s)),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => Value::Token(v),
    }
}

/// Strict equality: same type and value, never a coercion, never an error (spec §5.5).
/// Placeholders equal nothing; two token values are equal when their JSON is (spec §14 leaves
/// this open; structural equality is what a reader of `auth.a == auth.b` expects).
pub(crate) fn equals(a: &Value<'_>, b: &Value<'_>) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Num(x), Value::Num(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => **x == **y,
        (Value::Token(x), Value::Token(y)) => x == y,
        _ => false,
    }
}

/// `<`, `<=`, `>`, `>=`: numbers numerically, strings by UTF-16 code units; anything else is
/// an error. Comparisons with NaN are false.
pub(crate) fn compare(op: BinaryOp, a: &Value<'_>, b: &Value<'_>) -> Result<bool, EvalError> {
    let ordering = match (a, b) {
        (Value::Num(x), Value::Num(y)) => match x.partial_cmp(y) {
            Some(ordering) => ordering,
            None => return Ok(false),
        },
        (Value::Str(x), Value::Str(y)) => compare_utf16(x, y),
        _ => return Err(operands(op, a, b)),
    };
    Ok(match op {
        BinaryOp::Lt => ordering == Ordering::Less,
        BinaryOp::Le => ordering != Ordering::Greater,
        BinaryOp::Gt => ordering == Ordering::Greater,
        _ => ordering != Ordering::Less,
    })
}

/// `+`: numbers add; a string with a string or number concatenates, numbers rendered as
/// JavaScript renders them.
pub(crate) fn add<'a>(a: Value<'a>, b: Value<'a>) -> Result<Value<'a>, EvalError> {
    // Chains such as `'members/' + $room + '/' + auth.uid` grow one buffer.
    if let Value::Str(Text::Owned(mut s)) = a {
        match &b {
            Value::Str(y) => s.push_str(y),
            Value::Num(y) => write_js_number(*y, &mut s),
            _ => return Err(operands(BinaryOp::Add, &Value::Str(Text::Owned(s)), &b)),
        }
        return Ok(Value::Str(Text::Owned(s)));
    }
    let text = match (&a, &b) {
        (Value::Num(x), Value::Num(y)) => return Ok(Value::Num(x + y)),
        (Value::Str(x), Value::Str(y)) => {
            if y.is_empty() {
                return Ok(a);
            }
            // Room for a few more pieces of a concatenation chain.
            let mut s = String::with_capacity((x.len() + y.len()).max(32) * 2);
            s.push_str(x);
            s.push_str(y);
            s
        }
        (Value::Str(x), Value::Num(y)) => {
            let mut s = String::with_capacity(x.len() + 24);
            s.push_str(x);
            write_js_number(*y, &mut s);
            s
        }
        (Value::Num(x), Value::Str(y)) => {
            let mut s = String::with_capacity(y.len() + 24);
            write_js_number(*x, &mut s);
            s.push_str(y);
            s
        }
        _ => return Err(operands(BinaryOp::Add, &a, &b)),
    };
    Ok(Value::Str(Text::Owned(text)))
}

/// `-`, `*`, `/`, `%` on numbers. Division by zero gives NaN, as observed on the service
/// (spec §5.5); `%` keeps the sign of the dividend, as in JavaScript.
pub(crate) fn arithmetic(op: BinaryOp, a: &Value<'_>, b: &Value<'_>) -> Result<f64, EvalError> {
    let (Value::Num(x), Value::Num(y)) = (a, b) else {
        return Err(operands(op, a, b));
    };
    Ok(match op {
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div if *y == 0.0 => f64::NAN,
        BinaryOp::Div => x / y,
        _ => x % y,
    })
}

fn operands(op: BinaryOp, a: &Value<'_>, b: &Value<'_>) -> EvalError {
    EvalError::Operands {
        op: op.text(),
        left: a.type_name(),
        right: b.type_name(),
    }
}

/// Length in UTF-16 code units, as JavaScript's `length`.
pub(crate) fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().map(char::len_utf16).sum()
    }
}

/// Appends `n` as JavaScript's `Number.prototype.toString()` writes it: integers without a
/// fraction, the shortest digits that round-trip, exponent form outside `1e-7 .. 1e21`.
pub(crate) fn write_js_number(n: f64, out: &mut String) {
    if n.is_nan() {
        out.push_str("NaN");
        return;
    }
    if n.is_infinite() {
        out.push_str(if n > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if n == 0.0 {
        out.push('0');
        return;
    }
    if n < 0.0 {
        out.push('-');
    }
    let n = n.abs();
    if n.fract() == 0.0 && n < 1e15 {
        // Exact: the value is an integer below 2^53.
        let _ = write!(out, "{}", n as u64);
        return;
    }
    // Rust's `{:e}` writes the shortest round-trip digits: "1.2345e-7".
    let scientific = format!("{n:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    // JavaScript's n: the decimal point sits after `point` digits.
    let point = exponent.parse::<i32>().unwrap_or(0) + 1;
    if k <= point && point <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (point - k) as usize));
    } else if 0 < point && point <= 21 {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    } else if -6 < point && point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&digits);
    } else {
        let e = point - 1;
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{}", if e < 0 { '-' } else { '+' }, e.abs());
    }
}

/// A snapshot's data as a value: here rather than in `snapshot`, so that snapshots know
/// nothing of values and the two modules import one way.
impl Snap {
    /// `val()`: the primitive, null for no data, a placeholder for an object.
    pub fn val(&self) -> Value<'static> {
        let node = self.node();
        match node.leaf_value() {
            Some(Leaf::Bool(b)) => Value::Bool(*b),
            Some(Leaf::Number(n)) => Value::Num(*n),
            Some(Leaf::String(s)) => Value::Str(Text::Shared(s.clone())),
            None if node.is_empty() => Value::Null,
            None => Value::Placeholder,
        }
    }

    /// `getPriority()`: the priority, or null.
    pub fn priority(&self) -> Value<'static> {
        match self.node().priority() {
            Priority::None => Value::Null,
            Priority::Number(n) => Value::Num(*n),
            Priority::String(s) => Value::Str(Text::Shared(s.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn js(n: f64) -> String {
        let mut s = String::new();
        write_js_number(n, &mut s);
        s
    }

    fn s(text: &'static str) -> Value<'static> {
        Value::Str(Text::Borrowed(text))
    }

    #[test]
    fn numbers_render_as_in_javascript() {
        assert_eq!(js(42.0), "42");
        assert_eq!(js(-7.0), "-7");
        assert_eq!(js(1.5), "1.5");
        assert_eq!(js(-0.0), "0");
        assert_eq!(js(f64::NAN), "NaN");
        assert_eq!(js(f64::INFINITY), "Infinity");
        assert_eq!(js(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(js(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(js(1e21), "1e+21");
        assert_eq!(js(1e20), "100000000000000000000");
        assert_eq!(js(123456789012345680000.0), "123456789012345680000");
        assert_eq!(js(1.5e-7), "1.5e-7");
        assert_eq!(js(0.000001), "0.000001");
        assert_eq!(js(0.0000012), "0.0000012");
        assert_eq!(js(1e-7), "1e-7");
        assert_eq!(js(2.5e25), "2.5e+25");
        assert_eq!(js(1700000000000.0), "1700000000000");
        assert_eq!(js(9007199254740993.0), "9007199254740992");
        assert_eq!(js(123.456), "123.456");
    }

    #[test]
    fn equality_never_coerces() {
        assert!(equals(&Value::Null, &Value::Null));
        assert!(equals(&Value::Num(1.0), &Value::Num(1.0)));
        assert!(equals(&s("5"), &Value::Str(Text::Owned("5".into()))));
        assert!(!equals(&s("5"), &Value::Num(5.0)));
        assert!(!equals(&Value::Null, &Value::Bool(false)));
        assert!(!equals(&Value::Placeholder, &Value::Placeholder));
        assert!(!equals(&Value::Placeholder, &Value::Null));
        assert!(!equals(&Value::Num(f64::NAN), &Value::Num(f64::NAN)));
        let token = serde_json::json!({"a": 1});
        assert!(!equals(&Value::Token(&token), &Value::Null));
        assert!(equals(&Value::Token(&token), &Value::Token(&token)));
    }

    #[test]
    fn relational_operators() {
        assert_eq!(compare(BinaryOp::Lt, &s("apple"), &s("banana")), Ok(true));
        assert_eq!(
            compare(BinaryOp::Ge, &Value::Num(2.0), &Value::Num(2.0)),
            Ok(true)
        );
        assert_eq!(
            compare(BinaryOp::Gt, &Value::Num(f64::NAN), &Value::Num(1.0)),
            Ok(false)
        );
        // UTF-16 order: the high surrogate 0xD83D of U+1F600 sorts before U+FF5E, although
        // the code point is larger.
        assert_eq!(compare(BinaryOp::Lt, &s("😀"), &s("～")), Ok(true));
        assert!(compare(BinaryOp::Lt, &s("1"), &Value::Num(2.0)).is_err());
        assert!(compare(BinaryOp::Lt, &Value::Null, &Value::Num(2.0)).is_err());
    }

    #[test]
    fn addition_and_arithmetic() {
        let text = |v: Value<'_>| match v {
            Value::Str(t) => t.to_string(),
            other => panic!("string expected, got {other:?}"),
        };
        assert_eq!(text(add(s("2"), Value::Num(1.0)).expect("ok")), "21");
        assert_eq!(text(add(Value::Num(42.0), s("")).expect("ok")), "42");
        assert_eq!(text(add(s("a"), s("b")).expect("ok")), "ab");
        assert!(matches!(add(Value::Num(1.0), Value::Num(2.0)), Ok(Value::Num(n)) if n == 3.0));
        assert!(add(Value::Null, Value::Num(1.0)).is_err());
        assert!(add(s("a"), Value::Bool(true)).is_err());
        let owned = add(s("a/"), s("b")).expect("ok");
        assert_eq!(
            text(add(add(owned.clone(), s("/")).expect("ok"), Value::Num(7.0)).expect("ok")),
            "a/b/7"
        );
        assert!(add(owned, Value::Null).is_err());
        assert_eq!(
            arithmetic(BinaryOp::Div, &Value::Num(7.0), &Value::Num(2.0)),
            Ok(3.5)
        );
        assert!(
            arithmetic(BinaryOp::Div, &Value::Num(1.0), &Value::Num(0.0)).is_ok_and(f64::is_nan)
        );
        assert_eq!(
            arithmetic(BinaryOp::Rem, &Value::Num(-7.0), &Value::Num(2.0)),
            Ok(-1.0)
        );
        assert!(arithmetic(BinaryOp::Mul, &s("2"), &Value::Num(2.0)).is_err());
    }

    #[test]
    fn lengths_count_utf16_units() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("😀"), 2);
    }

    #[test]
    fn snapshots_give_their_value_and_priority() {
        use crate::expr::split_path;
        use crate::snapshot::{Frames, Tree};
        let json = serde_json::json!({
            "a": {"b": {"c": 1}, "s": "x"},
            "n": {".value": 2.5, ".priority": "p"},
            "o": {"x": 1, ".priority": 5}
        });
        let old = vec![hearth_tree::Node::from_json(&json).expect("valid test node")];
        let frames = Frames {
            old: &old,
            new: &[],
        };
        let root = Snap::at(&frames, Tree::Old, 0);
        let at = |path: &str| root.child(&split_path(path).collect());
        assert!(matches!(at("a/s").val(), Value::Str(t) if &*t == "x"));
        assert!(matches!(at("a/b/c").val(), Value::Num(n) if n == 1.0));
        assert!(matches!(at("missing").val(), Value::Null));
        assert!(matches!(root.val(), Value::Placeholder));
        assert!(matches!(at("n").priority(), Value::Str(t) if &*t == "p"));
        assert!(matches!(at("o").priority(), Value::Num(p) if p == 5.0));
        assert!(matches!(at("o/x").priority(), Value::Null));
    }
}
