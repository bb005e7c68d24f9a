//! Regular-expression literals of `String.matches` (spec §9).
//!
//! Rules use a small, documented subset of JavaScript regex syntax. We parse exactly that
//! subset and re-emit it in the syntax of the `regex` crate, instead of handing the text to a
//! regex engine as it is: the two dialects disagree on details (`\d` and `\w` are ASCII in
//! rules, `\n` is a plain `n`, `(?` groups and lazy quantifiers do not exist), and anything the
//! service rejects must be rejected when the rules load, not silently accepted. The `regex`
//! crate matches in linear time, so no rule can make the server backtrack exponentially.

use std::fmt::Write as _;

use regex::{Regex, RegexBuilder};

/// Upper bound of the compiled program of one regex, in bytes. Patterns from real rules are a
/// few hundred bytes; the bound stops a `{1000}{1000}`-style blow-up at load time.
pub const MAX_REGEX_PROGRAM_BYTES: usize = 1 << 20;

/// Largest count accepted in `{n}`, `{n,}` and `{n,m}`.
pub const MAX_REPEAT: u32 = 1000;

const DIGIT: &str = "0-9";
const WORD: &str = "0-9A-Za-z_";
const SPACE: &str = r"\t\n\x0B\x0C\r\x20";

/// Compiles a rules regex literal (`body` without slashes, `\/` already unescaped). The only
/// flag is `i`.
pub(crate) fn compile(body: &str, flags: &str) -> Result<Regex, String> {
    let translated = translate(body)?;
    let ignore_case = match flags {
        "" => false,
        "i" => true,
        other => return Err(format!("unsupported flags '{other}': the only flag is 'i'")),
    };
    RegexBuilder::new(&translated)
        .case_insensitive(ignore_case)
        .size_limit(MAX_REGEX_PROGRAM_BYTES)
        .dfa_size_limit(MAX_REGEX_PROGRAM_BYTES)
        .build()
        .map_err(|err| match err {
            regex::Error::CompiledTooBig(_) => "the pattern is too large".to_owned(),
            other => other.to_string(),
        })
}

/// Translates the supported subset into `regex` crate syntax.
fn translate(body: &str) -> Result<String, String> {
    let mut t = Translator {
        chars: body.chars().collect(),
        pos: 0,
        out: String::with_capacity(body.len() * 2),
    };
    if t.peek() == Some('^') {
        t.pos += 1;
        t.out.push_str(r"\A");
    }
    t.alternation(0)?;
    if t.peek() == Some('$') && t.pos + 1 == t.chars.len() {
        t.pos += 1;
        t.out.push_str(r"\z");
    }
    match t.peek() {
        None => Ok(t.out),
        Some(')') => Err("unmatched ')'".into()),
        Some(c) => Err(format!(
            "'{c}' is only allowed at the very end of the pattern"
        )),
    }
}

struct Translator {
    chars: Vec<char>,
    pos: usize,
    out: String,
}

impl Translator {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn alternation(&mut self, depth: usize) -> Result<(), String> {
        self.sequence(depth)?;
        while self.peek() == Some('|') {
            self.pos += 1;
            self.out.push('|');
            self.sequence(depth)?;
        }
        Ok(())
    }

    /// One or more quantified atoms; stops before `|`, `)` and a final `$`.
    fn sequence(&mut self, depth: usize) -> Result<(), String> {
        let mut items = 0;
        loop {
            match self.peek() {
                None | Some('|') | Some(')') => break,
                Some('$') if depth == 0 && self.pos + 1 == self.chars.len() => break,
                Some(_) => {
                    self.atom(depth)?;
                    self.quantifier()?;
                    items += 1;
                }
            }
        }
        if items == 0 {
            return Err("empty alternative".into());
        }
        Ok(())
    }

    fn atom(&mut self, depth: usize) -> Result<(), String> {
        let Some(c) = self.peek() else {
            return Err("unexpected end of the pattern".into());
        };
        self.pos += 1;
        match c {
            '(' => {
                if self.peek() == Some('?') {
                    return Err(
                        "'(?' groups (look-around, non-capturing, flags) are not supported".into(),
                    );
                }
                self.out.push_str("(?:");
                self.alternation(depth + 1)?;
                if self.peek() != Some(')') {
                    return Err("missing ')'".into());
                }
                self.pos += 1;
                self.out.push(')');
            }
            '[' => self.class()?,
            '.' => self.out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
            '\\' => {
                let Some(e) = self.peek() else {
                    return Err("'\\' at the end of the pattern".into());
                };
                self.pos += 1;
                match class_escape(e) {
                    Some((set, negated)) => push_set(&mut self.out, set, negated),
                    None => push_literal(&mut self.out, e),
                }
            }
            '^' | '$' => {
                return Err(format!(
                    "'{c}' is only allowed at the very start ('^') or end ('$') of the pattern"
                ))
            }
            '*' | '+' | '?' => return Err(format!("nothing to repeat before '{c}'")),
            '{' if self.counted_at(self.pos - 1).is_some() => {
                return Err("nothing to repeat before '{'".into())
            }
            c => push_literal(&mut self.out, c),
        }
        Ok(())
    }

    fn quantifier(&mut self) -> Result<(), String> {
        match self.peek() {
            Some(c @ ('*' | '+' | '?')) => {
                self.pos += 1;
                self.out.push(c);
            }
            Some('{') => {
                let Some((min, max, len)) = self.counted_at(self.pos) else {
                    return Ok(());
                };
                if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT) {
                    return Err(format!("repetition counts are limited to {MAX_REPEAT}"));
                }
                if max.is_some_and(|m| m < min) {
                    return Err("numbers out of order in a {n,m} quantifier".into());
                }
                self.pos += len;
                let _ = match max {
                    Some(m) if m == min => write!(self.out, "{{{min}}}"),
                    Some(m) => write!(self.out, "{{{min},{m}}}"),
                    None => write!(self.out, "{{{min},}}"),
                };
            }
            _ => return Ok(()),
        }
        match self.peek() {
            Some('?') => Err("lazy quantifiers are not supported".into()),
            Some('+') => Err("possessive quantifiers are not supported".into()),
            _ => Ok(()),
        }
    }

    /// Reads `{n}`, `{n,}` or `{n,m}` at `at`: (n, m, length). `{n}` gives `m == Some(n)`;
    /// `{n,}` gives `m == None`. Anything else is not a quantifier (and `{` is then literal).
    fn counted_at(&self, at: usize) -> Option<(u32, Option<u32>, usize)> {
        let rest = self.chars.get(at..)?;
        if rest.first() != Some(&'{') {
            return None;
        }
        let close = rest.iter().position(|&c| c == '}')?;
        let inner: String = rest[1..close].iter().collect();
        let number = |s: &str| -> Option<u32> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(s.parse::<u32>().unwrap_or(u32::MAX))
        };
        let (min, max) = match inner.split_once(',') {
            None => {
                let n = number(&inner)?;
                (n, Some(n))
            }
            Some((lo, "")) => (number(lo)?, None),
            Some((lo, hi)) => (number(lo)?, Some(number(hi)?)),
        };
        Some((min, max, close + 1))
    }

    /// A bracket class; the opening `[` has been consumed.
    fn class(&mut self) -> Result<(), String> {
        self.out.push('[');
        if self.peek() == Some('^') {
            self.pos += 1;
            self.out.push('^');
        }
        let mut items = 0;
        loop {
            match self.peek() {
                None => return Err("missing ']'".into()),
                Some(']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {}
            }
            items += 1;
            let lo = match self.class_item()? {
                ClassItem::Set(set, negated) => {
                    push_set(&mut self.out, set, negated);
                    continue;
                }
                ClassItem::Char(lo) => lo,
            };
            push_literal(&mut self.out, lo);
            // `a-z`, unless the '-' is the last character of the class.
            if self.peek() != Some('-') || self.peek_at(1).is_none_or(|c| c == ']') {
                continue;
            }
            self.pos += 1;
            match self.class_item()? {
                ClassItem::Char(hi) => {
                    if hi < lo {
                        return Err(format!("range out of order in class: '{lo}-{hi}'"));
                    }
                    self.out.push('-');
                    push_literal(&mut self.out, hi);
                }
                ClassItem::Set(set, negated) => {
                    // `[a-\d]`: JavaScript reads the '-' literally.
                    push_literal(&mut self.out, '-');
                    push_set(&mut self.out, set, negated);
                }
            }
        }
        if items == 0 {
            return Err("empty character class".into());
        }
        self.out.push(']');
        Ok(())
    }

    /// Reads one class member: a character (possibly escaped) or a shorthand set.
    fn class_item(&mut self) -> Result<ClassItem, String> {
        let Some(c) = self.peek() else {
            return Err("missing ']'".into());
        };
        self.pos += 1;
        if c != '\\' {
            return Ok(ClassItem::Char(c));
        }
        let Some(e) = self.peek() else {
            return Err("'\\' at the end of the pattern".into());
        };
        self.pos += 1;
        Ok(match class_escape(e) {
            Some((set, negated)) => ClassItem::Set(set, negated),
            None => ClassItem::Char(e),
        })
    }
}

enum ClassItem {
    Char(char),
    Set(&'static str, bool),
}

/// Emits a shorthand set as a (nested) class.
fn push_set(out: &mut String, set: &str, negated: bool) {
    let _ = write!(out, "[{}{set}]", if negated { "^" } else { "" });
}

/// The ASCII set behind `\d \w \s` and whether it is negated (`\D \W \S`).
fn class_escape(e: char) -> Option<(&'static str, bool)> {
    match e {
        'd' => Some((DIGIT, false)),
        'D' => Some((DIGIT, true)),
        'w' => Some((WORD, false)),
        'W' => Some((WORD, true)),
        's' => Some((SPACE, false)),
        'S' => Some((SPACE, true)),
        _ => None,
    }
}

/// Emits `c` so that it matches itself in or out of a class: ASCII letters and digits as they
/// are, everything else as a hex escape (never a metacharacter that way).
fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:X}}}", c as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, input: &str) -> bool {
        let (body, flags) = match pattern.rsplit_once('/') {
            Some((body, flags)) => (body.trim_start_matches('/'), flags),
            None => (pattern, ""),
        };
        compile(body, flags)
            .unwrap_or_else(|e| panic!("{pattern}: {e}"))
            .is_match(input)
    }

    fn refused(body: &str) -> String {
        compile(body, "").expect_err(body)
    }

    #[test]
    fn search_semantics_and_anchors() {
        assert!(matches("/b/", "abc"));
        assert!(!matches("/^b/", "abc"));
        assert!(!matches("/b$/", "abc"));
        assert!(matches("/^abc$/", "abc"));
        assert!(!matches("/^abc$/", "abc\n"));
        assert!(matches("/^a|c$/", "abc"), "anchors bind to their branch");
        assert!(matches("/^(cat|dog)s?$/", "dogs"));
        assert!(!matches("/^(cat|dog)s?$/", "bird"));
    }

    #[test]
    fn classes_are_ascii() {
        assert!(matches(r"/^\d{3}-\d{4}$/", "555-1234"));
        assert!(
            !matches(r"/^\d+$/", "١٢٣"),
            "Arabic-Indic digits are not \\d"
        );
        assert!(matches(r"/^\w+\s\w+$/", "hello world"));
        assert!(!matches(r"/^\w+$/", "héllo"));
        assert!(matches(r"/^\W$/", "é"));
        assert!(matches(r"/^\S+$/", "a-b"));
        assert!(matches(r"/^[^0-9]+$/", "abc"));
        assert!(!matches(r"/^[^0-9]+$/", "a1c"));
        assert!(matches(r"/^[\d.-]+$/", "1.5-2"));
        assert!(
            matches(r"/^[a-\d]+$/", "-a1"),
            "'-' next to a set is literal"
        );
        assert!(matches(r"/^[-a]+$/", "-a"));
        assert!(matches(r"/^[a-]+$/", "-a"));
        assert!(matches(r"/^[\]]$/", "]"));
        assert!(matches(r"/^[a-z0-9._+-]+$/i", "Alice.Smith+x"));
    }

    #[test]
    fn escapes_other_than_classes_are_literal() {
        assert!(matches(r"/^a\.b$/", "a.b"));
        assert!(!matches(r"/^a\.b$/", "axb"));
        assert!(matches(r"/^\n$/", "n"), "\\n is a plain n (spec §9.2)");
        assert!(matches(r"/^\b$/", "b"));
        assert!(matches(r"/\{foo}/", "{foo}"));
        assert!(matches(r"/^a{$/", "a{"));
        assert!(matches(r"/^x{2,}$/", "xxx"));
        assert!(matches(r"/^x{1,2}$/", "xx"));
        assert!(!matches(r"/^x{1,2}$/", "xxx"));
        assert!(matches(r"/^[.]$/", "."));
        assert!(matches("/^a b$/", "a b"));
        assert!(
            matches("/^a/b$/", "a/b"),
            "the lexer has already unescaped \\/"
        );
    }

    #[test]
    fn dot_and_case() {
        assert!(matches("/^......$/", "q-7 %!"));
        assert!(!matches("/^......$/", "q-7"));
        assert!(matches("/^.$/", "é"));
        assert!(!matches("/^.$/", "\n"));
        assert!(matches("/^[a-z]+$/i", "Hello"));
        assert!(!matches("/^[a-z]+$/i", "Hello world"));
        assert!(!matches("/^[a-z]+$/", "Hello"));
    }

    #[test]
    fn unsupported_syntax_is_refused() {
        assert!(refused("(^foo$|bar)").contains("'^'"));
        assert!(refused("^(foo|)$").contains("empty alternative"));
        assert!(refused("|a").contains("empty alternative"));
        assert!(refused("()").contains("empty alternative"));
        assert!(refused("a^b").contains("'^'"));
        assert!(refused("a$b").contains("'$'"));
        assert!(refused("(?=a)").contains("'(?'"));
        assert!(refused("(?:a)").contains("'(?'"));
        assert!(refused("a*?").contains("lazy"));
        assert!(refused("a+?").contains("lazy"));
        assert!(refused("a*+").contains("possessive"));
        assert!(refused("a**").contains("nothing to repeat"));
        assert!(refused("*a").contains("nothing to repeat"));
        assert!(refused("{2}").contains("nothing to repeat"));
        assert!(refused("(a").contains("missing ')'"));
        assert!(refused("a)").contains("unmatched"));
        assert!(refused("[a").contains("missing ']'"));
        assert!(refused("[]").contains("empty"));
        assert!(refused("[z-a]").contains("out of order"));
        assert!(refused("a{3,1}").contains("out of order"));
        assert!(refused("a{1001}").contains("limited"));
        assert!(refused("a\\").contains("end of the pattern"));
        assert!(compile("a", "g").is_err());
        assert!(refused("(a{1000}){1000}").contains("too large"));
    }
}
