//! The rules document: from relaxed JSON to the tree of rule nodes (spec §2.2, §3).
//!
//! Loading is all-or-nothing (spec §2.4): structure, every expression and every regex are
//! checked here, and the first problem refuses the whole document with its line and column.

use std::sync::Arc;

use hearth_tree::Key;

use crate::check::{check_rule, Scope};
use crate::decision::RuleKind;
use crate::error::{LoadError, RulesError};
use crate::expr::{Expr, ExprKind};
use crate::json::{Json, JsonKind, JsonStr, LineIndex, Member};
use crate::limits::{self, LimitSpec, MAX_LIMIT_DECLARATIONS};
use crate::parser;

/// A compiled rule and where it came from.
#[derive(Debug)]
pub(crate) struct Rule {
    pub expr: Expr,
    pub line: u32,
    pub column: u32,
    /// Source offset of the rule's value (the string's opening quote, or `true`/`false`).
    pub at: usize,
    /// The expression string with the source offset of each of its bytes, for the coverage
    /// report (`None` for a literal `true` or `false`).
    pub source: Option<JsonStr>,
    /// Its place in the document as the author wrote it, wildcards unfilled:
    /// `/rules/users/$uid/.write`. Shared with the denials that name it.
    pub pattern: Arc<str>,
}

/// A rule node: the rules of one location pattern and its children.
#[derive(Debug, Default)]
pub(crate) struct RuleNode {
    pub read: Option<Rule>,
    pub write: Option<Rule>,
    pub validate: Option<Rule>,
    pub index_on: Box<[String]>,
    /// Literal children, sorted by key text for binary search.
    pub children: Box<[(Key, RuleNode)]>,
    pub wildcard: Option<Box<RuleNode>>,
    /// Whether any node below this one has `.validate`; writes skip walking the written
    /// subtree when none does, which is what keeps large writes cheap.
    pub validates_below: bool,
    /// `.volatile: true`: data here and below is held in memory only (see `volatile.rs`).
    pub volatile: bool,
    /// Whether this node or any node below it is marked volatile, so that stripping volatile
    /// data walks only the branches of the rules that hold a mark.
    pub volatile_here_or_below: bool,
    /// Its `.limits` declaration, as an index into the document's (`limits.rs`).
    pub limits: Option<usize>,
    /// The declarations of the nodes below it, literal and wildcard, in document order: a
    /// write here replaces their locations and a listen here reads them.
    pub limits_below: Box<[usize]>,
}

impl RuleNode {
    /// The rule node for child `key`: the literal child if there is one (literal keys hide the
    /// wildcard, spec §3.2), else the wildcard.
    pub fn child(&self, key: &str) -> Option<&RuleNode> {
        match self.children.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
            Ok(i) => self.children.get(i).map(|(_, node)| node),
            Err(_) => self.wildcard.as_deref(),
        }
    }

    /// Whether validation must look at this node or below it.
    pub fn validates(&self) -> bool {
        self.validate.is_some() || self.validates_below
    }
}

type Failure = (usize, LoadError);

/// Builds the rule tree of a parsed document, and the `.limits` declarations its nodes index.
pub(crate) fn build(
    doc: &Json,
    lines: &LineIndex<'_>,
) -> Result<(RuleNode, Vec<LimitSpec>), RulesError> {
    let fail = |(offset, reason): Failure| {
        let (line, column) = lines.position(offset);
        RulesError {
            line,
            column,
            reason,
        }
    };
    let JsonKind::Object(members) = &doc.kind else {
        return Err(fail((doc.at, LoadError::ExpectedRules)));
    };
    let mut rules = None;
    for member in members {
        if member.name.text == "rules" {
            rules = Some(&member.value);
        } else {
            return Err(fail((
                member.name.source_offset(0).saturating_sub(1),
                LoadError::UnexpectedTopLevel(member.name.text.clone()),
            )));
        }
    }
    let rules = rules.ok_or_else(|| fail((doc.at, LoadError::ExpectedRules)))?;
    let mut builder = Builder {
        lines,
        wildcards: Vec::new(),
        names: vec!["rules".to_owned()],
        limits: Vec::new(),
    };
    let root = builder.node(rules, "rules", 0).map_err(fail)?;
    Ok((root, builder.limits))
}

struct Builder<'a> {
    lines: &'a LineIndex<'a>,
    /// Wildcards bound on the path to the node being built, with the index of their key.
    wildcards: Vec<(String, usize)>,
    /// The member names from the document's root to the node being built.
    names: Vec<String>,
    /// The `.limits` declarations read so far.
    limits: Vec<LimitSpec>,
}

impl Builder<'_> {
    /// Builds the node for `value`, found under `name`, whose location has `depth` keys.
    fn node(&mut self, value: &Json, name: &str, depth: usize) -> Result<RuleNode, Failure> {
        let JsonKind::Object(members) = &value.kind else {
            return Err((value.at, LoadError::NotAnObject(name.to_owned())));
        };
        let mut node = RuleNode::default();
        let mut children: Vec<(Key, RuleNode)> = Vec::new();
        let mut wildcard_name: Option<&str> = None;
        for member in members {
            let key = member.name.text.as_str();
            let key_at = name_offset(&member.name);
            match key {
                ".read" => node.read = Some(self.rule(member, RuleKind::Read)?),
                ".write" => node.write = Some(self.rule(member, RuleKind::Write)?),
                ".validate" => node.validate = Some(self.rule(member, RuleKind::Validate)?),
                ".indexOn" => node.index_on = index_on(&member.value)?,
                ".volatile" => match member.value.kind {
                    JsonKind::Bool(flag) => node.volatile = flag,
                    _ => return Err((member.value.at, LoadError::InvalidVolatile)),
                },
                ".limits" => {
                    if self.limits.len() >= MAX_LIMIT_DECLARATIONS {
                        return Err((
                            key_at,
                            LoadError::InvalidLimits(format!(
                                "a document may declare at most {MAX_LIMIT_DECLARATIONS}"
                            )),
                        ));
                    }
                    let id = self.limits.len();
                    let pattern = format!("/{}/.limits", self.names.join("/"));
                    let spec = limits::parse(&member.value, id, Arc::from(pattern), depth == 0)?;
                    self.limits.push(spec);
                    node.limits = Some(id);
                }
                _ if key.starts_with('.') => {
                    return Err((key_at, LoadError::InvalidProperty(key.to_owned())))
                }
                _ if key.starts_with('$') => {
                    let ident = &key[1..];
                    if ident.is_empty()
                        || !ident
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    {
                        return Err((key_at, LoadError::InvalidWildcard(key.to_owned())));
                    }
                    if let Some(previous) = wildcard_name {
                        return Err((
                            key_at,
                            LoadError::MultipleWildcards(previous.to_owned(), key.to_owned()),
                        ));
                    }
                    if self.wildcards.iter().any(|(bound, _)| bound == key) {
                        return Err((key_at, LoadError::RepeatedWildcard(key.to_owned())));
                    }
                    wildcard_name = Some(key);
                    self.wildcards.push((key.to_owned(), depth));
                    self.names.push(key.to_owned());
                    let child = self.node(&member.value, key, depth + 1);
                    self.names.pop();
                    self.wildcards.pop();
                    node.wildcard = Some(Box::new(child?));
                }
                _ => {
                    let parsed = Key::new(key).map_err(|err| {
                        (
                            key_at,
                            LoadError::InvalidKey {
                                key: key.to_owned(),
                                reason: err.to_string(),
                            },
                        )
                    })?;
                    self.names.push(key.to_owned());
                    let child = self.node(&member.value, key, depth + 1);
                    self.names.pop();
                    children.push((parsed, child?));
                }
            }
        }
        // Duplicate names were refused by the JSON reader, so the sort leaves no ties.
        children.sort_by(|(a, _), (b, _)| a.as_str().cmp(b.as_str()));
        node.validates_below = children.iter().any(|(_, child)| child.validates())
            || node
                .wildcard
                .as_ref()
                .is_some_and(|child| child.validates());
        node.volatile_here_or_below = node.volatile
            || children
                .iter()
                .any(|(_, child)| child.volatile_here_or_below)
            || node
                .wildcard
                .as_ref()
                .is_some_and(|child| child.volatile_here_or_below);
        let mut below: Vec<usize> = Vec::new();
        for child in children
            .iter()
            .map(|(_, child)| child)
            .chain(node.wildcard.as_deref())
        {
            below.extend(child.limits);
            below.extend(child.limits_below.iter().copied());
        }
        below.sort_unstable();
        node.limits_below = below.into_boxed_slice();
        node.children = children.into_boxed_slice();
        Ok(node)
    }

    /// Compiles the rule held by a `.read`/`.write`/`.validate` member.
    fn rule(&self, member: &Member, kind: RuleKind) -> Result<Rule, Failure> {
        let value = &member.value;
        let (line, column) = self.lines.position(value.at);
        let mut source = None;
        let expr = match &value.kind {
            JsonKind::Bool(b) => Expr::from(ExprKind::Bool(*b)),
            JsonKind::String(text) => {
                source = Some(text.clone());
                let scope = Scope {
                    kind,
                    wildcards: &self.wildcards,
                };
                // Offsets inside the expression map back to the source through the string.
                let at = |offset: usize| text.source_offset(offset);
                let ast = parser::parse(&text.text).map_err(|(o, reason)| (at(o), reason))?;
                check_rule(&ast, &scope).map_err(|(o, reason)| (at(o), reason))?
            }
            _ => {
                return Err((
                    value.at,
                    LoadError::InvalidRuleValue(member.name.text.clone()),
                ))
            }
        };
        let pattern = format!("/{}/{kind}", self.names.join("/"));
        Ok(Rule {
            expr,
            line,
            column,
            at: value.at,
            source,
            pattern: Arc::from(pattern),
        })
    }
}

/// Offset of a member name's opening quote.
fn name_offset(name: &JsonStr) -> usize {
    name.source_offset(0).saturating_sub(1)
}

/// Reads `.indexOn`: a string or an array of strings, each `.value` or a child path.
fn index_on(value: &Json) -> Result<Box<[String]>, Failure> {
    let entries: Vec<&Json> = match &value.kind {
        JsonKind::String(_) => vec![value],
        JsonKind::Array(items) => items.iter().collect(),
        _ => {
            return Err((
                value.at,
                LoadError::InvalidIndexOn("expected a string or an array".into()),
            ))
        }
    };
    entries
        .into_iter()
        .map(|entry| {
            let JsonKind::String(s) = &entry.kind else {
                return Err((
                    entry.at,
                    LoadError::InvalidIndexOn("expected a string".into()),
                ));
            };
            let text = s.text.as_str();
            if text == ".value" {
                return Ok(text.to_owned());
            }
            let segments: Vec<&str> = text.split('/').filter(|s| !s.is_empty()).collect();
            if segments.is_empty() {
                return Err((entry.at, LoadError::InvalidIndexOn(format!("'{text}'"))));
            }
            for segment in &segments {
                Key::new(segment).map_err(|err| {
                    (
                        entry.at,
                        LoadError::InvalidIndexOn(format!("'{text}': {err}")),
                    )
                })?;
            }
            Ok(segments.join("/"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn load(text: &str) -> Result<RuleNode, RulesError> {
        let doc = json::parse(text).map_err(|(offset, reason)| {
            let (line, column) = LineIndex::new(text).position(offset);
            RulesError {
                line,
                column,
                reason,
            }
        })?;
        build(&doc, &LineIndex::new(text)).map(|(root, _)| root)
    }

    fn refused(text: &str) -> String {
        load(text).expect_err(text).to_string()
    }

    #[test]
    fn builds_the_tree() {
        let root = load(
            r#"{"rules": {
                ".read": true,
                "users": {"$uid": {".write": "auth.uid === $uid", "name": {".validate": "newData.isString()"}}},
                "a": {}, "b": {".indexOn": ["x", "y/z", ".value"]}
            }}"#,
        )
        .expect("valid");
        assert!(root.read.is_some() && root.write.is_none());
        assert!(root.validates_below);
        let users = root.child("users").expect("users");
        assert!(root.child("other").is_none());
        let uid = users.child("anyone").expect("wildcard");
        assert!(uid.write.is_some());
        assert!(uid.child("name").is_some_and(|n| n.validate.is_some()));
        assert!(!root.child("a").expect("a").validates());
        assert_eq!(
            &*root.child("b").expect("b").index_on,
            ["x", "y/z", ".value"]
        );
    }

    #[test]
    fn literal_children_hide_the_wildcard() {
        let root =
            load(r#"{"rules": {"title": {}, "$other": {".validate": false}}}"#).expect("valid");
        assert!(root.child("title").is_some_and(|n| n.validate.is_none()));
        assert!(root.child("body").is_some_and(|n| n.validate.is_some()));
    }

    #[test]
    fn structural_errors_point_at_the_source() {
        assert_eq!(
            refused(r#"{"rulez": {}}"#),
            "line 1, column 2: unexpected top-level member 'rulez' (only 'rules' is allowed)"
        );
        assert_eq!(
            refused("{}"),
            "line 1, column 1: Expected 'rules' property."
        );
        assert_eq!(
            refused("[]"),
            "line 1, column 1: Expected 'rules' property."
        );
        assert!(refused(r#"{"rules": true}"#).contains("must be an object"));
        assert!(refused(r#"{"rules": {"a": true}}"#).contains("'a' must be an object"));
        assert_eq!(
            refused("{\"rules\": {\n  \".raed\": true}}"),
            "line 2, column 3: Invalid rule property '.raed'."
        );
        assert!(refused(r#"{"rules": {".read": 1}}"#).contains(".read must be true, false"));
        assert!(refused(r#"{"rules": {"a#b": {}}}"#).contains("invalid key 'a#b'"));
        assert!(refused(r#"{"rules": {"a/b": {}}}"#).contains("invalid key 'a/b'"));
        assert!(refused(r#"{"rules": {"$": {}}}"#).contains("invalid wildcard"));
        assert!(refused(r#"{"rules": {"$a-b": {}}}"#).contains("invalid wildcard"));
        assert_eq!(
            refused(r#"{"rules": {"a": {"$x": {}, "$y": {}}}}"#),
            "line 1, column 28: Cannot have multiple default rules ('$x' and '$y')."
        );
        assert!(refused(r#"{"rules": {"$x": {"$x": {}}}}"#).contains("already bound"));
        assert!(refused(r#"{"rules": {".indexOn": 5}}"#).contains(".indexOn"));
        assert!(refused(r#"{"rules": {".indexOn": ["a", 5]}}"#).contains(".indexOn"));
        assert!(refused(r#"{"rules": {".indexOn": "a.b"}}"#).contains(".indexOn"));
        assert!(refused(r#"{"rules": {".indexOn": ""}}"#).contains(".indexOn"));
        assert_eq!(
            refused(r#"{"rules": {"a": {".volatile": "true"}}}"#),
            "line 1, column 31: .volatile must be true or false"
        );
        assert!(refused(r#"{"rules": {".volatile": 1}}"#).contains(".volatile must be"));
        assert!(refused(r#"{"rules": {".volatil": true}}"#).contains("Invalid rule property"));
    }

    #[test]
    fn expression_errors_point_inside_the_string() {
        let text = "{\n  \"rules\": {\n    \"$uid\": {\n      \".read\": \"auth != null && x === 1\"\n    }\n  }\n}";
        assert_eq!(refused(text), "line 4, column 33: Unknown variable 'x'.");
        // Escapes and raw line breaks inside the string keep positions exact.
        let text = "{\"rules\": {\".write\": \"auth != null &&\n  \\\"a\\\" === newData.vall()\"}}";
        assert_eq!(
            refused(text),
            "line 2, column 21: No such method/property 'vall'."
        );
        assert_eq!(
            refused(r#"{"rules": {"a": {".read": "$x === 'y'"}}}"#),
            "line 1, column 28: Unknown variable '$x'."
        );
    }

    #[test]
    fn wildcards_are_scoped_to_their_subtree() {
        assert!(load(r#"{"rules": {"$a": {"$b": {".read": "$a !== $b"}}}}"#).is_ok());
        assert!(
            refused(r#"{"rules": {"$a": {}, "b": {".read": "$a === 'x'"}}}"#)
                .contains("Unknown variable '$a'")
        );
    }
}
