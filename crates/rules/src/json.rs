//! The relaxed JSON of rules files (spec §2.1), read with positions.
//!
//! Rules files are JSON plus `//` and `/* */` comments, raw line breaks inside strings (long
//! expressions are spread over lines) and trailing commas. No general-purpose JSON parser
//! accepts exactly that, and none keeps what we need for error reporting: the source offset of
//! every character of every string, so that a type error inside an expression can point at the
//! right line and column of the file. Duplicate member names are refused, because an ambiguous
//! security policy is worse than a refused one.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::error::LoadError;

/// Deepest nesting of arrays and objects accepted. Data below depth 32 cannot exist (tree
/// limits), so a deeper rules tree is a mistake; the bound also keeps the recursive reader off
/// the end of the stack.
pub const MAX_NESTING: usize = 100;

/// A JSON value and the byte offset in the source where it starts.
#[derive(Debug, Clone)]
pub(crate) struct Json {
    pub kind: JsonKind,
    pub at: usize,
}

#[derive(Debug, Clone)]
pub(crate) enum JsonKind {
    Null,
    Bool(bool),
    /// The number as written (rules documents never use numbers; kept for the strict form).
    Number(String),
    String(JsonStr),
    Array(Vec<Json>),
    Object(Vec<Member>),
}

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub name: JsonStr,
    pub value: Json,
}

/// A decoded string with the source offset of each of its bytes.
#[derive(Debug, Clone)]
pub(crate) struct JsonStr {
    pub text: String,
    /// `offsets[i]` is the source offset of the character that produced byte `i` of `text`.
    offsets: Vec<u32>,
    /// Source offset of the closing quote, for errors at the end of the text.
    end: u32,
}

impl JsonStr {
    /// Source offset of byte `i` of the decoded text (the closing quote for `i == len`).
    pub fn source_offset(&self, i: usize) -> usize {
        self.offsets.get(i).copied().unwrap_or(self.end) as usize
    }
}

/// A failure while reading: the source offset and the reason.
pub(crate) type Failure = (usize, LoadError);

/// Reads a whole document.
pub(crate) fn parse(text: &str) -> Result<Json, Failure> {
    let mut reader = Reader {
        src: text.as_bytes(),
        text,
        pos: 0,
    };
    if text.starts_with('\u{feff}') {
        reader.pos = '\u{feff}'.len_utf8();
    }
    reader.skip_blank()?;
    let value = reader.value(0)?;
    reader.skip_blank()?;
    if reader.pos < reader.src.len() {
        return Err(reader.fail("unexpected text after the document"));
    }
    Ok(value)
}

struct Reader<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Reader<'_> {
    fn fail(&self, message: &str) -> Failure {
        (self.pos, LoadError::Json(message.to_owned()))
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Skips whitespace and comments.
    fn skip_blank(&mut self) -> Result<(), Failure> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') => match self.src.get(self.pos + 1) {
                    Some(b'/') => {
                        while !matches!(self.peek(), None | Some(b'\n')) {
                            self.pos += 1;
                        }
                    }
                    Some(b'*') => {
                        let start = self.pos;
                        match self.text[self.pos + 2..].find("*/") {
                            Some(end) => self.pos += 2 + end + 2,
                            None => {
                                return Err((start, LoadError::Json("unterminated comment".into())))
                            }
                        }
                    }
                    _ => return Err(self.fail("unexpected '/'")),
                },
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, Failure> {
        let at = self.pos;
        let kind = match self.peek() {
            None => return Err(self.fail("unexpected end of the document")),
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => JsonKind::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(b't') => self.word("true", JsonKind::Bool(true))?,
            Some(b'f') => self.word("false", JsonKind::Bool(false))?,
            Some(b'n') => self.word("null", JsonKind::Null)?,
            Some(_) => return Err(self.fail("expected a value")),
        };
        Ok(Json { kind, at })
    }

    fn word(&mut self, word: &str, kind: JsonKind) -> Result<JsonKind, Failure> {
        if self.src[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(kind)
        } else {
            Err(self.fail("expected a value"))
        }
    }

    fn nest(&self, depth: usize) -> Result<usize, Failure> {
        if depth >= MAX_NESTING {
            return Err((self.pos, LoadError::NestingTooDeep(MAX_NESTING)));
        }
        Ok(depth + 1)
    }

    fn object(&mut self, depth: usize) -> Result<JsonKind, Failure> {
        let depth = self.nest(depth)?;
        self.pos += 1;
        let mut members: Vec<Member> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        loop {
            self.skip_blank()?;
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(JsonKind::Object(members));
                }
                Some(b'"') => {}
                _ => return Err(self.fail("expected a member name in double quotes or '}'")),
            }
            let name_at = self.pos;
            let name = self.string()?;
            if !seen.insert(name.text.clone()) {
                return Err((name_at, LoadError::DuplicateMember(name.text)));
            }
            self.skip_blank()?;
            if self.peek() != Some(b':') {
                return Err(self.fail("expected ':'"));
            }
            self.pos += 1;
            self.skip_blank()?;
            let value = self.value(depth)?;
            members.push(Member { name, value });
            self.skip_blank()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(self.fail("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<JsonKind, Failure> {
        let depth = self.nest(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_blank()?;
            if self.peek() == Some(b']') {
                self.pos += 1;
                return Ok(JsonKind::Array(items));
            }
            items.push(self.value(depth)?);
            self.skip_blank()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {}
                _ => return Err(self.fail("expected ',' or ']'")),
            }
        }
    }

    fn number(&mut self) -> Result<JsonKind, Failure> {
        let start = self.pos;
        let digits = |r: &mut Self| {
            let from = r.pos;
            while matches!(r.peek(), Some(b'0'..=b'9')) {
                r.pos += 1;
            }
            r.pos > from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        if !digits(self) {
            return Err(self.fail("expected digits"));
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !digits(self) {
                return Err(self.fail("expected digits after '.'"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.fail("expected exponent digits"));
            }
        }
        Ok(JsonKind::Number(self.text[start..self.pos].to_owned()))
    }

    /// Reads a double-quoted string. Raw line breaks and tabs are allowed (spec §2.1); other
    /// control characters are not.
    fn string(&mut self) -> Result<JsonStr, Failure> {
        let open = self.pos;
        self.pos += 1;
        let mut text = String::new();
        let mut offsets: Vec<u32> = Vec::new();
        loop {
            let at = self.pos;
            let Some(c) = self.text[self.pos..].chars().next() else {
                return Err((open, LoadError::Json("unterminated string".into())));
            };
            match c {
                '"' => {
                    self.pos += 1;
                    return Ok(JsonStr {
                        text,
                        offsets,
                        end: at as u32,
                    });
                }
                '\\' => {
                    let decoded = self.escape()?;
                    push_char(&mut text, &mut offsets, decoded, at);
                }
                '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' => {
                    return Err(self.fail("control character in a string"));
                }
                c => {
                    self.pos += c.len_utf8();
                    push_char(&mut text, &mut offsets, c, at);
                }
            }
        }
    }

    /// Decodes the escape at `pos` (which is a backslash).
    fn escape(&mut self) -> Result<char, Failure> {
        let at = self.pos;
        self.pos += 1;
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let first = self.hex4(at)?;
                if !(0xD800..0xDC00).contains(&first) {
                    return char::from_u32(first)
                        .ok_or((at, LoadError::Json("lone surrogate in \\u escape".into())));
                }
                if !self.src[self.pos..].starts_with(b"\\u") {
                    return Err((at, LoadError::Json("lone surrogate in \\u escape".into())));
                }
                self.pos += 2;
                let second = self.hex4(at)?;
                if !(0xDC00..0xE000).contains(&second) {
                    return Err((at, LoadError::Json("lone surrogate in \\u escape".into())));
                }
                let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return char::from_u32(combined)
                    .ok_or((at, LoadError::Json("invalid \\u escape".into())));
            }
            _ => return Err((at, LoadError::Json("invalid escape".into()))),
        };
        self.pos += 1;
        Ok(c)
    }

    fn hex4(&mut self, at: usize) -> Result<u32, Failure> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or((at, LoadError::Json("invalid \\u escape".into())))?;
        let value = u32::from_str_radix(digits, 16)
            .map_err(|_| (at, LoadError::Json("invalid \\u escape".into())))?;
        self.pos += 4;
        Ok(value)
    }
}

fn push_char(text: &mut String, offsets: &mut Vec<u32>, c: char, at: usize) {
    text.push(c);
    offsets.resize(text.len(), at as u32);
}

/// Writes `value` as compact strict JSON, members in source order (the comment-free form a
/// "get rules" call with `format=strict` returns).
pub(crate) fn write_strict(value: &Json, out: &mut String) {
    match &value.kind {
        JsonKind::Null => out.push_str("null"),
        JsonKind::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        JsonKind::Number(n) => out.push_str(n),
        JsonKind::String(s) => write_string(&s.text, out),
        JsonKind::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_strict(item, out);
            }
            out.push(']');
        }
        JsonKind::Object(members) => {
            out.push('{');
            for (i, member) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(&member.name.text, out);
                out.push(':');
                write_strict(&member.value, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Turns byte offsets into 1-based line and column numbers (columns count characters).
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// The (line, column) of byte `offset`.
    pub fn position(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&start| start <= offset);
        let start = self
            .starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |prefix| prefix.chars().count());
        (
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(column + 1).unwrap_or(u32::MAX),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict(text: &str) -> String {
        let mut out = String::new();
        write_strict(&parse(text).expect("valid"), &mut out);
        out
    }

    fn error(text: &str) -> (usize, LoadError) {
        parse(text).expect_err("invalid")
    }

    #[test]
    fn reads_plain_json() {
        assert_eq!(
            strict(r#"{"a": [1, -2.5e3, true, false, null, "x\"y\u00e9"], "b": {}}"#),
            r#"{"a":[1,-2.5e3,true,false,null,"x\"yé"],"b":{}}"#
        );
    }

    #[test]
    fn accepts_comments_raw_line_breaks_and_trailing_commas() {
        let text = "// head\n{ /* inline */ \"rules\": {\n  \".read\": \"auth != null &&\n  true\", // tail\n},\n}\n/* end */";
        assert_eq!(
            strict(text),
            r#"{"rules":{".read":"auth != null &&\n  true"}}"#
        );
        assert_eq!(strict("\u{feff}[1,]"), "[1]");
    }

    #[test]
    fn refuses_broken_documents() {
        assert!(
            matches!(error(r#"{"a": 1, "a": 2}"#), (9, LoadError::DuplicateMember(name)) if name == "a")
        );
        assert_eq!(error(r#"{"a" 1}"#).0, 5);
        assert!(matches!(error(r#"{"a": "x"#).1, LoadError::Json(_)));
        assert!(matches!(error("{} /* open").1, LoadError::Json(_)));
        assert!(matches!(error("{} x").1, LoadError::Json(_)));
        assert!(matches!(error("[,]").1, LoadError::Json(_)));
        assert!(matches!(error("{'a': 1}").1, LoadError::Json(_)));
        assert!(matches!(error(r#""\ud800""#).1, LoadError::Json(_)));
        assert!(matches!(error("\"a\u{1}\"").1, LoadError::Json(_)));
        let deep = "[".repeat(MAX_NESTING + 1);
        assert!(matches!(error(&deep).1, LoadError::NestingTooDeep(_)));
    }

    #[test]
    fn string_offsets_point_into_the_source() {
        let text = r#"{"k": "a\nb\u00e9c"}"#;
        let json = parse(text).expect("valid");
        let JsonKind::Object(members) = json.kind else {
            panic!("object expected")
        };
        let s = match &members[0].value.kind {
            JsonKind::String(s) => s,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(s.text, "a\nbéc");
        assert_eq!(s.source_offset(0), 7);
        assert_eq!(s.source_offset(1), 8); // the escape
        assert_eq!(s.source_offset(2), 10);
        assert_eq!(s.source_offset(3), 11); // both bytes of é map to its escape
        assert_eq!(s.source_offset(4), 11);
        assert_eq!(s.source_offset(5), 17);
        assert_eq!(s.source_offset(6), 18); // the closing quote
        assert_eq!(&text[18..19], "\"");
    }

    #[test]
    fn line_index_counts_characters() {
        let text = "ab\néé x\n\nz";
        let index = LineIndex::new(text);
        assert_eq!(index.position(0), (1, 1));
        assert_eq!(index.position(2), (1, 3));
        assert_eq!(index.position(3), (2, 1));
        assert_eq!(index.position(8), (2, 4)); // 'x' after two 2-byte characters and a space
        assert_eq!(index.position(10), (3, 1));
        assert_eq!(index.position(11), (4, 1));
        assert_eq!(index.position(99), (4, 2));
    }
}
