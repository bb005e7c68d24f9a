//! [`Rules`]: a loaded, checked rules document.

use std::fmt;

use hearth_query::Index;
use hearth_tree::Path;

use crate::document::{self, RuleNode};
use crate::error::{LoadError, RulesError};
use crate::json::{self, LineIndex};
use crate::limits::LimitSpec;

/// Largest accepted rules source: 256 KB (spec §2.3, the hosted service's documented limit).
pub const MAX_RULES_BYTES: usize = 256 * 1024;

/// Evaluation steps one operation may use before it is denied.
///
/// A step is one expression node evaluated, one key walked by `child()`/`hasChild()`/
/// `hasChildren()`, one node of a written subtree visited for validation, or 64 bytes of
/// string work. A typical write against a realistic rules file takes tens to a few hundred
/// steps; a million allows validating tens of thousands of written children (a bulk import)
/// while bounding the worst case to a few milliseconds of one shard thread. The spec leaves
/// the number open (§12); [`Rules::with_step_budget`] changes it.
pub const DEFAULT_STEP_BUDGET: u64 = 1_000_000;

/// A loaded rules document, ready to evaluate. Immutable and `Send + Sync`: share it behind an
/// `Arc` and replace it wholesale when new rules load.
pub struct Rules {
    pub(crate) root: RuleNode,
    pub(crate) step_budget: u64,
    /// Its `.limits` declarations (`limits.rs`).
    pub(crate) limits: Vec<LimitSpec>,
    source: String,
    strict: String,
}

impl Rules {
    /// Loads a rules document: relaxed JSON (comments, multi-line strings, trailing commas),
    /// structure checks, and parsing and static type checking of every expression (spec §2,
    /// §5.3). The first problem refuses the whole document.
    pub fn parse(text: &str) -> Result<Rules, RulesError> {
        if text.len() > MAX_RULES_BYTES {
            return Err(RulesError {
                line: 1,
                column: 1,
                reason: LoadError::TooLarge {
                    bytes: text.len(),
                    limit: MAX_RULES_BYTES,
                },
            });
        }
        let lines = LineIndex::new(text);
        let doc = json::parse(text).map_err(|(offset, reason)| {
            let (line, column) = lines.position(offset);
            RulesError {
                line,
                column,
                reason,
            }
        })?;
        let (root, limits) = document::build(&doc, &lines)?;
        let mut strict = String::with_capacity(text.len());
        json::write_strict(&doc, &mut strict);
        Ok(Rules {
            root,
            step_budget: DEFAULT_STEP_BUDGET,
            limits,
            source: text.to_owned(),
            strict,
        })
    }

    /// The source exactly as loaded, comments included (for a "get rules" call).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The document as compact, comment-free JSON (`?format=strict`).
    pub fn strict_json(&self) -> &str {
        &self.strict
    }

    /// These rules with another per-operation step budget (see [`DEFAULT_STEP_BUDGET`]).
    pub fn with_step_budget(mut self, steps: u64) -> Rules {
        self.step_budget = steps;
        self
    }

    /// The per-operation step budget.
    pub fn step_budget(&self) -> u64 {
        self.step_budget
    }

    /// The `.indexOn` entries of the rule node for `path` (spec §10): child paths such as
    /// `"score"` or `"meta/created"`, or `".value"`. Empty when nothing is declared.
    pub fn indexed_on(&self, path: &Path) -> &[String] {
        let mut node = &self.root;
        for key in path.keys() {
            match node.child(key.as_str()) {
                Some(child) => node = child,
                None => return &[],
            }
        }
        &node.index_on
    }

    /// Whether a query at `path` ordered by `index` is covered by `.indexOn`. Key and priority
    /// order never need a declaration. An uncovered query still runs; the realtime protocol
    /// only adds a `no_index` warning to the listen reply, and REST refuses it (spec §10).
    pub fn is_indexed(&self, path: &Path, index: &Index) -> bool {
        let wanted = match index {
            Index::Key | Index::Priority => return true,
            Index::Value => ".value".to_owned(),
            Index::Child(child) => child.to_string().trim_start_matches('/').to_owned(),
        };
        self.indexed_on(path).contains(&wanted)
    }
}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rules")
            .field("source_bytes", &self.source.len())
            .field("step_budget", &self.step_budget)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Path {
        Path::parse(s).expect("valid path")
    }

    #[test]
    fn keeps_source_and_strict_form() {
        let text = "{\n  // who may read\n  \"rules\": {\".read\": \"auth != null\",},\n}\n";
        let rules = Rules::parse(text).expect("valid");
        assert_eq!(rules.source(), text);
        assert_eq!(rules.strict_json(), r#"{"rules":{".read":"auth != null"}}"#);
        assert_eq!(rules.step_budget(), DEFAULT_STEP_BUDGET);
        assert_eq!(rules.with_step_budget(10).step_budget(), 10);
    }

    #[test]
    fn size_limit() {
        let padding = " ".repeat(MAX_RULES_BYTES - 12);
        let fits = format!("{{\"rules\":{{}}}}{padding}");
        assert_eq!(fits.len(), MAX_RULES_BYTES);
        assert!(Rules::parse(&fits).is_ok());
        let too_big = format!("{fits} ");
        let err = Rules::parse(&too_big).expect_err("too large");
        assert_eq!(
            err.to_string(),
            "line 1, column 1: the rules source is 262145 bytes; the limit is 262144 bytes"
        );
    }

    #[test]
    fn index_declarations() {
        let rules = Rules::parse(
            r#"{"rules": {
                "scores": {".indexOn": ".value"},
                "tasks": {"$day": {".indexOn": ["driver", "meta/created"]}},
                "fixed": {"$x": {".indexOn": "a"}, "special": {}}
            }}"#,
        )
        .expect("valid");
        assert_eq!(rules.indexed_on(&path("/scores")), [".value"]);
        assert_eq!(
            rules.indexed_on(&path("/tasks/monday")),
            ["driver", "meta/created"]
        );
        assert!(rules.indexed_on(&path("/tasks")).is_empty());
        assert!(rules.indexed_on(&path("/fixed/special")).is_empty());
        assert_eq!(rules.indexed_on(&path("/fixed/other")), ["a"]);
        assert!(rules.indexed_on(&path("/nowhere/deep")).is_empty());
        let day = path("/tasks/monday");
        assert!(rules.is_indexed(&day, &Index::Child(path("driver"))));
        assert!(rules.is_indexed(&day, &Index::Child(path("meta/created"))));
        assert!(!rules.is_indexed(&day, &Index::Child(path("other"))));
        assert!(!rules.is_indexed(&day, &Index::Value));
        assert!(rules.is_indexed(&path("/scores"), &Index::Value));
        assert!(rules.is_indexed(&day, &Index::Key));
        assert!(rules.is_indexed(&day, &Index::Priority));
    }

    #[test]
    fn rules_are_shareable() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Rules>();
    }
}
