//! Volatile paths: `".volatile": true` at a rule node marks its location and everything below
//! it as data that lives in memory only (cursors, positions, presence). The engine asks these
//! questions of the compiled rules; what volatile means for writes and pushes is decided there.

use hearth_tree::{Node, Path};

use crate::document::RuleNode;
use crate::rules::Rules;

impl Rules {
    /// Whether `path` lies wholly under a volatile mark: the rule node of `path` or of one of
    /// its ancestors says `".volatile": true`. Wildcards match like they do for `.read`, and a
    /// literal key hides its sibling wildcard.
    pub fn is_volatile(&self, path: &Path) -> bool {
        let mut node = &self.root;
        if node.volatile {
            return true;
        }
        for key in path.keys() {
            match node.child(key.as_str()) {
                Some(child) if child.volatile => return true,
                // No mark below this point of the rules: the walk can stop early.
                Some(child) if child.volatile_here_or_below => node = child,
                _ => return false,
            }
        }
        false
    }

    /// Whether the document marks any location volatile.
    pub fn has_volatile(&self) -> bool {
        self.root.volatile_here_or_below
    }

    /// `root` without the data under volatile marks: what a snapshot keeps and what a start
    /// recovers. Only the branches of the rules that hold a mark are walked, so a document
    /// without marks costs nothing and the walk is bounded by the data under the wildcards
    /// that lead to a mark.
    pub fn without_volatile(&self, root: &Node) -> Node {
        strip(&self.root, root)
    }
}

fn strip(rules: &RuleNode, data: &Node) -> Node {
    if rules.volatile {
        return Node::empty();
    }
    if !rules.volatile_here_or_below || data.child_count() == 0 {
        return data.clone();
    }
    let mut result = data.clone();
    for (key, child) in data.children() {
        let Some(child_rules) = rules.child(key.as_str()) else {
            continue;
        };
        if !child_rules.volatile_here_or_below {
            continue;
        }
        let stripped = strip(child_rules, &child);
        if !stripped.ptr_eq(&child) {
            result = result.with_child(&key, stripped);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(text: &str) -> Rules {
        Rules::parse(text).expect("valid rules")
    }

    fn path(text: &str) -> Path {
        Path::parse(text).expect("valid path")
    }

    const CURSORS: &str = r#"{"rules": {
        "rooms": {"$room": {
            "cursors": {".volatile": true, "$uid": {".write": "auth.uid === $uid"}},
            "pinned": {".volatile": false},
            "title": {}
        }},
        "typing": {".volatile": true}
    }}"#;

    #[test]
    fn marks_a_path_and_everything_below_it() {
        let rules = rules(CURSORS);
        assert!(rules.has_volatile());
        assert!(rules.is_volatile(&path("/typing")));
        assert!(rules.is_volatile(&path("/typing/alice/deep")));
        assert!(rules.is_volatile(&path("/rooms/r1/cursors")));
        assert!(rules.is_volatile(&path("/rooms/r1/cursors/alice")));
        assert!(rules.is_volatile(&path("/rooms/r1/cursors/alice/x")));
        // Above a mark, beside it, or marked false: durable.
        assert!(!rules.is_volatile(&Path::root()));
        assert!(!rules.is_volatile(&path("/rooms")));
        assert!(!rules.is_volatile(&path("/rooms/r1")));
        assert!(!rules.is_volatile(&path("/rooms/r1/title")));
        assert!(!rules.is_volatile(&path("/rooms/r1/pinned/x")));
        assert!(!rules.is_volatile(&path("/rooms/r1/other")));
        assert!(!rules.is_volatile(&path("/elsewhere/typing")));
    }

    #[test]
    fn literal_keys_hide_a_volatile_wildcard() {
        let rules = rules(r#"{"rules": {"$any": {".volatile": true}, "kept": {}}}"#);
        assert!(rules.is_volatile(&path("/x/y")));
        assert!(!rules.is_volatile(&path("/kept/y")));
    }

    #[test]
    fn documents_without_marks_have_no_volatile_paths() {
        let rules = rules(r#"{"rules": {".read": true, "a": {".volatile": false}}}"#);
        assert!(!rules.has_volatile());
        assert!(!rules.is_volatile(&path("/a/b")));
        let data = Node::from_json(&json!({"a": {"b": 1}})).expect("node");
        assert!(rules.without_volatile(&data).ptr_eq(&data));
        let everything = self::rules(r#"{"rules": {".volatile": true}}"#);
        assert!(everything.is_volatile(&Path::root()));
        assert!(everything.without_volatile(&data).is_empty());
    }

    #[test]
    fn strips_only_the_data_under_marks() {
        let rules = rules(CURSORS);
        let data = Node::from_json(&json!({
            "rooms": {
                "r1": {"cursors": {"alice": {"x": 1}}, "title": "one", "pinned": {"p": 1}},
                "r2": {"cursors": {"bob": 2}},
                "r3": {"title": "three"}
            },
            "typing": {"alice": true},
            "users": {"alice": "A"}
        }))
        .expect("node");
        let stripped = rules.without_volatile(&data);
        let expected = Node::from_json(&json!({
            "rooms": {
                "r1": {"title": "one", "pinned": {"p": 1}},
                "r3": {"title": "three"}
            },
            "users": {"alice": "A"}
        }))
        .expect("node");
        assert_eq!(stripped, expected);
    }
}
