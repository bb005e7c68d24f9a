//! Loading and evaluating never panic, whatever the document: rules files come from operators,
//! but a crash while loading one would take down a shard thread.

use hearth_rules::Rules;
use hearth_tree::{Node, Path};
use proptest::prelude::*;
use serde_json::json;

const BASE: &str = r#"{
  // base document for mutations
  "rules": {
    ".read": "auth != null && root.child('a/' + auth.uid).exists()",
    "items": {
      "$id": {
        ".write": "!data.exists() || data.child('owner').val() === auth.uid",
        ".validate": "newData.hasChildren(['owner', 'n']) && newData.child('n').val() % 2 == 0",
        "name": {".validate": "newData.isString() && newData.val().matches(/^[a-z]{1,8}$/i)"},
        "$other": {".validate": "$other.length < 4 ? true : newData.val() + '' === 'x'"}
      }
    }
  }
}"#;

/// Characters that matter to the JSON reader, the expression lexer and the regex translator.
fn noise() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("\""),
            Just("\\"),
            Just("/"),
            Just("*"),
            Just("("),
            Just(")"),
            Just("["),
            Just("]"),
            Just("{"),
            Just("}"),
            Just("."),
            Just("$"),
            Just("'"),
            Just("\n"),
            Just("!"),
            Just("&&"),
            Just("?"),
            Just(":"),
            Just(","),
            Just("é"),
            Just("😀"),
            Just("^"),
            Just("|"),
            Just("-"),
            Just("1e"),
            Just("child("),
            Just("\\u12"),
        ],
        1..4,
    )
    .prop_map(|parts| parts.concat())
}

fn char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn exercise(rules: &Rules) {
    let old = Node::from_json(&json!({"a": {"u": true}, "items": {"i1": {"owner": "u", "n": 2}}}))
        .expect("valid data");
    let auth = json!({"uid": "u"});
    for p in ["/", "/items/i1", "/items/i2/name", "/a/u"] {
        let path = Path::parse(p).expect("valid path");
        let _ = rules.can_read(&old, &path, &auth, None, 0);
        let new = old.set(
            &path,
            Node::from_json(&json!({"owner": "u", "n": 4, "name": "ab", "zzzz": 1}))
                .expect("valid"),
        );
        let _ = rules.can_write(&old, &new, &path, &auth, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mutated_documents_never_panic(edits in proptest::collection::vec((0usize..2000, noise(), 0usize..3), 1..4)) {
        let mut text = BASE.to_owned();
        for (at, insert, delete) in edits {
            let at = char_boundary(&text, at);
            let end = char_boundary(&text, at + delete);
            text.replace_range(at..end.max(at), &insert);
        }
        if let Ok(rules) = Rules::parse(&text) {
            exercise(&rules);
        }
    }

    #[test]
    fn arbitrary_expressions_never_panic(expr in "[a-zA-Z$.()'\\[\\] =!&|+*/%<>?:,0-9^\\\\-]{0,40}") {
        let text = json!({"rules": {".read": expr.clone(), "$x": {".validate": expr}}}).to_string();
        if let Ok(rules) = Rules::parse(&text) {
            exercise(&rules);
        }
    }
}

#[test]
fn the_base_document_loads() {
    let rules = Rules::parse(BASE).expect("valid base");
    exercise(&rules);
}
