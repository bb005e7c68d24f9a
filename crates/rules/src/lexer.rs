//! Tokens of the rule expression language (spec §5.1).
//!
//! The whole expression is tokenized up front. A `/` is ambiguous (division or the start of a
//! regular-expression literal); as in JavaScript it starts a literal only where an operand is
//! expected, which the lexer knows from the previous token. JavaScript operators that the
//! language lacks get an error of their own, because "unexpected '='" helps nobody who wrote
//! an assignment by mistake.

use crate::error::LoadError;

/// A token and the byte range of the expression text it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    /// `/body/flags`; `body` still has its escapes (`\/` already turned into `/`).
    Regex {
        body: String,
        flags: String,
    },
    Punct(Punct),
    Eof,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Punct {
    LParen,
    RParen,
    LBracket,
    RBracket,
    Dot,
    Comma,
    Question,
    Colon,
    Not,
    AndAnd,
    OrOr,
    EqEq,
    NotEq,
    EqEqEq,
    NotEqEq,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
}

impl Punct {
    pub fn text(self) -> &'static str {
        match self {
            Punct::LParen => "(",
            Punct::RParen => ")",
            Punct::LBracket => "[",
            Punct::RBracket => "]",
            Punct::Dot => ".",
            Punct::Comma => ",",
            Punct::Question => "?",
            Punct::Colon => ":",
            Punct::Not => "!",
            Punct::AndAnd => "&&",
            Punct::OrOr => "||",
            Punct::EqEq => "==",
            Punct::NotEq => "!=",
            Punct::EqEqEq => "===",
            Punct::NotEqEq => "!==",
            Punct::Lt => "<",
            Punct::Le => "<=",
            Punct::Gt => ">",
            Punct::Ge => ">=",
            Punct::Plus => "+",
            Punct::Minus => "-",
            Punct::Star => "*",
            Punct::Slash => "/",
            Punct::Percent => "%",
        }
    }
}

/// Punctuators, longest first so that `===` wins over `==`.
const PUNCTS: &[(&str, Punct)] = &[
    ("===", Punct::EqEqEq),
    ("!==", Punct::NotEqEq),
    ("==", Punct::EqEq),
    ("!=", Punct::NotEq),
    ("<=", Punct::Le),
    (">=", Punct::Ge),
    ("&&", Punct::AndAnd),
    ("||", Punct::OrOr),
    ("(", Punct::LParen),
    (")", Punct::RParen),
    ("[", Punct::LBracket),
    ("]", Punct::RBracket),
    (".", Punct::Dot),
    (",", Punct::Comma),
    ("?", Punct::Question),
    (":", Punct::Colon),
    ("!", Punct::Not),
    ("<", Punct::Lt),
    (">", Punct::Gt),
    ("+", Punct::Plus),
    ("-", Punct::Minus),
    ("*", Punct::Star),
    ("/", Punct::Slash),
    ("%", Punct::Percent),
];

/// JavaScript operators and statement syntax the language does not have, longest first.
const UNSUPPORTED: &[(&str, &str)] = &[
    (">>>", "shift operators are not part of the rules language"),
    ("**", "'**' is not part of the rules language"),
    ("++", "'++' is not part of the rules language"),
    ("--", "'--' is not part of the rules language"),
    ("+=", "assignments are not part of the rules language"),
    ("-=", "assignments are not part of the rules language"),
    ("*=", "assignments are not part of the rules language"),
    ("/=", "assignments are not part of the rules language"),
    ("%=", "assignments are not part of the rules language"),
    ("=>", "functions are not part of the rules language"),
    ("<<", "shift operators are not part of the rules language"),
    (">>", "shift operators are not part of the rules language"),
    (
        "=",
        "assignments are not part of the rules language (compare with '==' or '===')",
    ),
    (";", "a rule is a single expression; ';' is not allowed"),
    ("&", "bitwise operators are not part of the rules language"),
    ("|", "bitwise operators are not part of the rules language"),
    ("^", "bitwise operators are not part of the rules language"),
    ("~", "bitwise operators are not part of the rules language"),
    (
        "{",
        "object literals and blocks are not part of the rules language",
    ),
    (
        "}",
        "object literals and blocks are not part of the rules language",
    ),
    ("`", "template strings are not part of the rules language"),
];

/// A lexing failure: byte offset in the expression text and reason.
pub(crate) type LexError = (usize, LoadError);

fn syntax(at: usize, message: impl Into<String>) -> LexError {
    (at, LoadError::Syntax(message.into()))
}

/// Splits `src` into tokens, ending with [`Tok::Eof`].
pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, LexError> {
    let bytes = src.as_bytes();
    let mut tokens: Vec<Token> = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let c = bytes[pos];
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            pos += 1;
            continue;
        }
        let start = pos;
        let operand_expected = tokens.last().is_none_or(|t| expects_operand(&t.tok));
        let tok = if c.is_ascii_digit()
            || (c == b'.' && operand_expected && next_is_digit(bytes, pos))
        {
            let (value, end) = number(src, pos)?;
            pos = end;
            Tok::Num(value)
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            while pos < bytes.len()
                && (bytes[pos].is_ascii_alphanumeric() || bytes[pos] == b'_' || bytes[pos] == b'$')
            {
                pos += 1;
            }
            Tok::Ident(src[start..pos].to_owned())
        } else if c == b'\'' || c == b'"' {
            let (text, end) = string(src, pos)?;
            pos = end;
            Tok::Str(text)
        } else if c == b'/' && operand_expected {
            let (body, flags, end) = regex(src, pos)?;
            pos = end;
            Tok::Regex { body, flags }
        } else if let Some(message) = unsupported(&src[pos..]) {
            return Err(syntax(start, message));
        } else if let Some((text, punct)) =
            PUNCTS.iter().find(|(text, _)| src[pos..].starts_with(text))
        {
            pos += text.len();
            Tok::Punct(*punct)
        } else {
            let ch = src[pos..].chars().next().unwrap_or('?');
            return Err(syntax(start, format!("unexpected character '{ch}'")));
        };
        tokens.push(Token {
            tok,
            start,
            end: pos,
        });
    }
    tokens.push(Token {
        tok: Tok::Eof,
        start: src.len(),
        end: src.len(),
    });
    Ok(tokens)
}

/// The reason the text at the start of `rest` is an unsupported operator, if it is one.
/// Supported operators that begin like unsupported ones (`==` like `=`, `&&` like `&`) are
/// let through.
fn unsupported(rest: &str) -> Option<&'static str> {
    if ["==", "<=", ">=", "&&", "||"]
        .iter()
        .any(|op| rest.starts_with(op))
    {
        return None;
    }
    UNSUPPORTED
        .iter()
        .find(|(text, _)| rest.starts_with(text))
        .map(|(_, message)| *message)
}

/// Whether an operand (rather than an operator) comes after `tok`; decides what `/` means.
fn expects_operand(tok: &Tok) -> bool {
    match tok {
        Tok::Punct(p) => !matches!(p, Punct::RParen | Punct::RBracket),
        Tok::Num(_) | Tok::Str(_) | Tok::Ident(_) | Tok::Regex { .. } | Tok::Eof => false,
    }
}

fn next_is_digit(bytes: &[u8], pos: usize) -> bool {
    bytes.get(pos + 1).is_some_and(u8::is_ascii_digit)
}

/// Reads a decimal number: `42`, `3.5`, `.5`, `1e3`, `2.5E-4`. Hex and octal literals are not
/// accepted (spec §5.1 leaves them unverified).
fn number(src: &str, start: usize) -> Result<(f64, usize), LexError> {
    let bytes = src.as_bytes();
    let mut pos = start;
    let digits = |pos: &mut usize| {
        let from = *pos;
        while bytes.get(*pos).is_some_and(u8::is_ascii_digit) {
            *pos += 1;
        }
        *pos > from
    };
    digits(&mut pos);
    if bytes.get(pos) == Some(&b'.') && next_is_digit(bytes, pos) {
        pos += 1;
        digits(&mut pos);
    }
    if matches!(bytes.get(pos), Some(b'e' | b'E')) {
        let mut exp = pos + 1;
        if matches!(bytes.get(exp), Some(b'+' | b'-')) {
            exp += 1;
        }
        if digits(&mut exp) {
            pos = exp;
        }
    }
    if bytes
        .get(pos)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$')
    {
        return Err(syntax(start, "invalid number literal"));
    }
    let value: f64 = src[start..pos]
        .parse()
        .map_err(|_| syntax(start, "invalid number literal"))?;
    Ok((value, pos))
}

/// Reads a single- or double-quoted string with JavaScript escapes.
fn string(src: &str, start: usize) -> Result<(String, usize), LexError> {
    let quote = src.as_bytes()[start] as char;
    let mut out = String::new();
    let mut chars = src[start + 1..].char_indices();
    while let Some((i, c)) = chars.next() {
        let at = start + 1 + i;
        match c {
            c if c == quote => return Ok((out, at + 1)),
            '\n' | '\r' => break,
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    '0' => out.push('\0'),
                    'x' | 'u' => {
                        let len = if e == 'x' { 2 } else { 4 };
                        let digits: String = chars.by_ref().take(len).map(|(_, d)| d).collect();
                        // Hex digits only: `from_str_radix` would also take a sign (`\x+1`).
                        let hex =
                            digits.len() == len && digits.bytes().all(|b| b.is_ascii_hexdigit());
                        let code = hex
                            .then(|| u32::from_str_radix(&digits, 16).ok())
                            .flatten()
                            .ok_or_else(|| syntax(at, format!("invalid \\{e} escape")))?;
                        let decoded = char::from_u32(code).ok_or_else(|| {
                            syntax(at, "surrogate escapes are not supported in rule strings")
                        })?;
                        out.push(decoded);
                    }
                    // A line continuation, as in JavaScript.
                    '\n' => {}
                    other => out.push(other),
                }
            }
            c => out.push(c),
        }
    }
    Err(syntax(start, "unterminated string literal"))
}

/// Reads a regular-expression literal `/body/flags`. Only the `i` flag exists (spec §9.1).
fn regex(src: &str, start: usize) -> Result<(String, String, usize), LexError> {
    let mut body = String::new();
    let mut in_class = false;
    let mut chars = src[start + 1..].char_indices();
    let end = loop {
        let Some((i, c)) = chars.next() else {
            return Err(syntax(start, "unterminated regular expression"));
        };
        match c {
            '\n' | '\r' => return Err(syntax(start, "unterminated regular expression")),
            '\\' => match chars.next() {
                Some((_, '/')) => body.push('/'),
                Some((_, e)) => {
                    body.push('\\');
                    body.push(e);
                }
                None => return Err(syntax(start, "unterminated regular expression")),
            },
            '[' => {
                in_class = true;
                body.push(c);
            }
            ']' => {
                in_class = false;
                body.push(c);
            }
            '/' if !in_class => break start + 1 + i + 1,
            c => body.push(c),
        }
    };
    if body.is_empty() {
        return Err(syntax(start, "empty regular expression"));
    }
    let bytes = src.as_bytes();
    let mut pos = end;
    while bytes
        .get(pos)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$')
    {
        pos += 1;
    }
    let flags = &src[end..pos];
    if flags.chars().any(|f| f != 'i') || flags.len() > 1 {
        return Err((
            end,
            LoadError::Regex(format!("unsupported flags '{flags}': the only flag is 'i'")),
        ));
    }
    Ok((body, flags.to_owned(), pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        tokenize(src)
            .expect("valid")
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    fn err(src: &str) -> (usize, String) {
        let (at, reason) = tokenize(src).expect_err("invalid");
        (at, reason.to_string())
    }

    fn ident(s: &str) -> Tok {
        Tok::Ident(s.into())
    }

    #[test]
    fn operators_and_operands() {
        use Punct::*;
        assert_eq!(
            toks("a===b!==c==d!=e<=f>=g&&h||!i"),
            vec![
                ident("a"),
                Tok::Punct(EqEqEq),
                ident("b"),
                Tok::Punct(NotEqEq),
                ident("c"),
                Tok::Punct(EqEq),
                ident("d"),
                Tok::Punct(NotEq),
                ident("e"),
                Tok::Punct(Le),
                ident("f"),
                Tok::Punct(Ge),
                ident("g"),
                Tok::Punct(AndAnd),
                ident("h"),
                Tok::Punct(OrOr),
                Tok::Punct(Not),
                ident("i"),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("$uid.length\n\t% 2"),
            vec![
                ident("$uid"),
                Tok::Punct(Dot),
                ident("length"),
                Tok::Punct(Percent),
                Tok::Num(2.0),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(toks("42")[0], Tok::Num(42.0));
        assert_eq!(toks("3.5")[0], Tok::Num(3.5));
        assert_eq!(toks(".5")[0], Tok::Num(0.5));
        assert_eq!(toks("1e3")[0], Tok::Num(1000.0));
        assert_eq!(toks("2.5E-1")[0], Tok::Num(0.25));
        assert!(err("0x1f").1.contains("invalid number"));
        assert!(err("12abc").1.contains("invalid number"));
    }

    #[test]
    fn strings_with_escapes() {
        assert_eq!(toks(r#"'it\'s'"#)[0], Tok::Str("it's".into()));
        assert_eq!(toks(r#""a\"b""#)[0], Tok::Str("a\"b".into()));
        assert_eq!(toks(r"'\n\t\\\x41\u00e9'")[0], Tok::Str("\n\t\\Aé".into()));
        assert_eq!(toks(r"'\q'")[0], Tok::Str("q".into()));
        assert!(err(r"'\x+1'").1.contains("invalid \\x escape"));
        assert!(err(r"'\u+041'").1.contains("invalid \\u escape"));
        assert_eq!(err("'open"), (0, "unterminated string literal".into()));
        assert_eq!(err("'line\nbreak'").0, 0);
    }

    #[test]
    fn slash_is_regex_only_where_an_operand_is_expected() {
        assert_eq!(
            toks("a / b"),
            vec![ident("a"), Tok::Punct(Punct::Slash), ident("b"), Tok::Eof]
        );
        assert_eq!(
            toks("x.matches(/^a\\/b[/]$/i)")[4],
            Tok::Regex {
                body: "^a/b[/]$".into(),
                flags: "i".into()
            }
        );
        assert_eq!(
            toks("(1) / 2")[3],
            Tok::Punct(Punct::Slash),
            "after ')' a slash divides"
        );
        assert!(err("x.matches(/a/g)").1.contains("flags 'g'"));
        assert!(err("x.matches(/a/ii)").1.contains("flags"));
        assert!(err("x.matches(/abc").1.contains("unterminated"));
    }

    #[test]
    fn javascript_extras_are_refused_with_a_reason() {
        assert_eq!(err("root = 5").0, 5);
        assert!(err("root = 5").1.contains("assignments"));
        assert!(err("2 ** 2").1.contains("'**'"));
        assert!(err("a; b").1.contains("single expression"));
        assert!(err("a & b").1.contains("bitwise"));
        assert!(err("a | b").1.contains("bitwise"));
        assert!(err("a >> b").1.contains("shift"));
        assert!(err("{}").1.contains("object literals"));
        assert!(err("a++").1.contains("'++'"));
        assert!(err("`x`").1.contains("template"));
        assert!(err("a # b").1.contains("unexpected character '#'"));
        // Supported operators sharing a prefix with unsupported ones still lex.
        assert_eq!(toks("a >= b").len(), 4);
        assert_eq!(toks("a == b").len(), 4);
    }
}
