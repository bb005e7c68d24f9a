//! The query string of a request, decoded by the one parser every consumer uses: the router
//! (which shard owns the database), the WebSocket upgrade (`ls`) and the REST parser. Two
//! parsers that disagreed on a repeated `ns` once sent an event stream to the shard of one
//! name while the stream's handler looked at the other, redirecting it to itself forever.
//!
//! The rules, the same for every parameter:
//! - a name given more than once counts with its first value only (as `URLSearchParams.get`
//!   does); the later ones are dropped while parsing, so no consumer can pick another;
//! - `%XX` with two hex digits is a byte; any other `%` stays as it is (`%+1` is three
//!   characters, not the byte 0x01);
//! - `+` is a plus sign, not a space: REST clients put JSON into query values without escaping
//!   it (`startAt="a+b"`), and no name the server routes on may contain either;
//! - bytes that are not UTF-8 after decoding become U+FFFD.

use std::borrow::Cow;
use std::collections::HashSet;

use percent_encoding::percent_decode_str;

/// A decoded query string: each parameter name once, with its first value, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryString(Vec<(String, String)>);

impl QueryString {
    /// Parses the text after `?` (without the `?`).
    pub fn parse(raw: &str) -> QueryString {
        let mut seen = HashSet::new();
        let mut pairs = Vec::new();
        for pair in raw.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = percent_decode(name);
            if seen.insert(name.clone()) {
                pairs.push((name, percent_decode(value)));
            }
        }
        QueryString(pairs)
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Every parameter, each name once.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }
}

/// Decodes `%XX` escapes (see the module's rules); used for request paths too.
pub fn percent_decode(text: &str) -> String {
    match percent_decode_str(text).decode_utf8_lossy() {
        Cow::Borrowed(text) => text.to_owned(),
        Cow::Owned(text) => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_only_well_formed_escapes() {
        assert_eq!(percent_decode("%22z%22"), "\"z\"");
        assert_eq!(percent_decode("%41"), "A");
        assert_eq!(percent_decode("caf%C3%A9"), "café");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%4"), "%4");
        // A sign is not a hex digit: this was once the byte 0x01.
        assert_eq!(percent_decode("a%+1b"), "a%+1b");
        assert_eq!(percent_decode("a%-1b"), "a%-1b");
        assert_eq!(percent_decode("a+b"), "a+b");
        assert_eq!(percent_decode("%FF"), "\u{FFFD}");
    }

    #[test]
    fn the_first_of_a_repeated_name_counts() {
        let query = QueryString::parse("ns=a&ns=b&orderBy=%22%24key%22&flag&&ns=c");
        assert_eq!(query.get("ns"), Some("a"));
        assert_eq!(query.get("orderBy"), Some("\"$key\""));
        assert_eq!(query.get("flag"), Some(""));
        assert_eq!(query.get("missing"), None);
        assert_eq!(
            query.pairs().collect::<Vec<_>>(),
            vec![("ns", "a"), ("orderBy", "\"$key\""), ("flag", "")]
        );
    }

    #[test]
    fn an_escaped_name_is_the_same_name() {
        let query = QueryString::parse("n%73=a&ns=b");
        assert_eq!(query.get("ns"), Some("a"));
    }
}
