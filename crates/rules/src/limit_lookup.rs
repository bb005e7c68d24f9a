//! Which `.limits` declarations an operation at a path touches (`limits.rs` reads them).

use hearth_tree::Path;

use crate::document::RuleNode;
use crate::limits::LimitSpec;
use crate::rules::Rules;

impl Rules {
    /// The document's `.limits` declarations, in document order (`LimitSpec::id` indexes it).
    pub fn limits(&self) -> &[LimitSpec] {
        &self.limits
    }

    /// Whether the document declares any limit.
    pub fn has_limits(&self) -> bool {
        !self.limits.is_empty()
    }

    /// The root's declaration, when it limits connections.
    pub fn connection_limit(&self) -> Option<&LimitSpec> {
        let id = self.root.limits?;
        self.limits
            .get(id)
            .filter(|spec| spec.connections.is_some())
    }

    /// The declarations an operation at `path` touches, appended to `out`: those at `path`
    /// and above it, and those below it (a write replaces what is below its location, and a
    /// listen reads it). Wildcards match like they do for `.read`.
    pub fn limits_touching(&self, path: &Path, out: &mut Vec<usize>) {
        let mut node: &RuleNode = &self.root;
        out.extend(node.limits);
        for key in path.keys() {
            match node.child(key.as_str()) {
                Some(child) => node = child,
                None => return,
            }
            out.extend(node.limits);
        }
        out.extend(node.limits_below.iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{LimitKey, Rate};

    fn rules(text: &str) -> Rules {
        Rules::parse(text).expect("valid rules")
    }

    fn refused(text: &str) -> String {
        Rules::parse(text).expect_err(text).to_string()
    }

    fn touching(rules: &Rules, path: &str) -> Vec<usize> {
        let mut out = Vec::new();
        rules.limits_touching(&Path::parse(path).expect("path"), &mut out);
        out
    }

    const CHAT: &str = r#"{"rules": {
        ".limits": {"connections": 5, "listens": 100, "per": "auth.uid"},
        "rooms": {"$room": {
            "messages": {".limits": {"writes": "10/s", "bytes": "100kb/min"}},
            "typing": {".limits": {"writes": "20/s", "per": "client.address"}}
        }},
        "users": {"$uid": {".write": "auth.uid === $uid"}}
    }}"#;

    #[test]
    fn declarations_read_in_document_order() {
        let rules = rules(CHAT);
        let [root, messages, typing] = rules.limits() else {
            panic!("three declarations: {:?}", rules.limits());
        };
        assert_eq!(root.connections, Some(5));
        assert_eq!(root.listens, Some(100));
        assert_eq!(&*root.pattern, "/rules/.limits");
        assert_eq!(
            messages.writes,
            Some(Rate {
                count: 10,
                period_ms: 1_000
            })
        );
        assert_eq!(
            messages.bytes,
            Some(Rate {
                count: 100 * 1024,
                period_ms: 60_000
            })
        );
        assert_eq!(messages.per, LimitKey::Uid);
        assert_eq!(&*messages.pattern, "/rules/rooms/$room/messages/.limits");
        assert_eq!(typing.per, LimitKey::Address);
        assert_eq!(rules.connection_limit().map(|spec| spec.id), Some(0));
        assert_eq!(
            messages.describe(),
            "10 writes a second, 102400 bytes a minute per user (anonymous callers by address)"
        );
        assert!(!Rules::parse(r#"{"rules": {".read": true}}"#)
            .expect("valid")
            .has_limits());
    }

    #[test]
    fn an_operation_touches_the_declarations_above_at_and_below_it() {
        let rules = rules(CHAT);
        assert_eq!(touching(&rules, "/rooms/r1/messages/m1"), [0, 1]);
        assert_eq!(touching(&rules, "/rooms/r1/messages"), [0, 1]);
        assert_eq!(touching(&rules, "/rooms/r1/typing/u"), [0, 2]);
        // A write higher up replaces both limited locations below it.
        assert_eq!(touching(&rules, "/rooms/r1"), [0, 1, 2]);
        assert_eq!(touching(&rules, "/"), [0, 1, 2]);
        assert_eq!(touching(&rules, "/users/u1"), [0]);
        assert_eq!(touching(&rules, "/elsewhere/deep"), [0]);
    }

    #[test]
    fn literal_keys_hide_the_wildcards_limits() {
        let rules = rules(
            r#"{"rules": {"$any": {".limits": {"writes": "1/s"}}, "open": {".read": true}}}"#,
        );
        assert_eq!(touching(&rules, "/x/y"), [0]);
        assert!(touching(&rules, "/open/y").is_empty());
    }

    #[test]
    fn mistakes_are_refused_where_they_are() {
        assert_eq!(
            refused(r#"{"rules": {"a": {".limits": {"connections": 2}}}}"#),
            "line 1, column 45: .limits: connections is counted per database: declare it at the root of the rules"
        );
        assert!(refused(r#"{"rules": {".limits": {}}}"#).contains("names no limit"));
        assert!(refused(r#"{"rules": {".limits": true}}"#).contains("expected an object"));
        assert!(refused(r#"{"rules": {".limits": {"writes": 10}}}"#).contains("\"10/s\""));
        assert!(refused(r#"{"rules": {".limits": {"listens": 0}}}"#).contains("from 1"));
        assert!(refused(r#"{"rules": {".limits": {"listens": 1.5}}}"#).contains("whole number"));
        assert!(
            refused(r#"{"rules": {".limits": {"writes": "1/s", "per": "auth"}}}"#)
                .contains("per must be")
        );
        assert!(refused(r#"{"rules": {".limits": {"reads": "1/s"}}}"#)
            .contains("unknown limit 'reads'"));
    }
}
