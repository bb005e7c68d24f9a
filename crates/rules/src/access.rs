//! Reads and writes against the rules: the cascade of `.read`/`.write` and the validation
//! walk (spec §4).
//!
//! The evaluator needs the old and new node at every depth of the location a rule is attached
//! to (for `data`, `newData` and `parent()`). Those are kept in stacks that grow as the walk
//! goes down and are reused for every target of an update, so a check costs a few small
//! allocations per operation, not per rule.

use hearth_query::QueryParams;
use hearth_tree::{Key, Node, Path};

use crate::coverage::Coverage;
use crate::decision::{Decision, Denial, DenialReason, RuleKind, RuleOutcome, RuleSite};
use crate::document::{Rule, RuleNode};
use crate::eval::{eval_rule, Budget, Env};
use crate::query::{QueryVars, UNQUERIED};
use crate::rules::Rules;
use crate::snapshot::Frames;
use crate::value::EvalError;

impl Rules {
    /// May a client read (get or listen to) `path`? (spec §4.2)
    ///
    /// `root` is the whole current database; `auth` the auth variable (`null` when
    /// unauthenticated); `query` the query of a listen or get, `None` for a plain read (a
    /// query that parses to the default, `q: {}`, counts as plain too). Rules at `path` and its
    /// ancestors are tried top-down; the first that grants allows the read.
    pub fn can_read(
        &self,
        root: &Node,
        path: &Path,
        auth: &serde_json::Value,
        query: Option<&QueryParams>,
        now_ms: u64,
    ) -> Decision {
        self.can_read_with(root, path, auth, query, now_ms, None)
    }

    /// [`Rules::can_read`], recording what its expressions evaluate to in `coverage` (when it
    /// is the record of these rules).
    pub fn can_read_with(
        &self,
        root: &Node,
        path: &Path,
        auth: &serde_json::Value,
        query: Option<&QueryParams>,
        now_ms: u64,
        coverage: Option<&mut Coverage>,
    ) -> Decision {
        let owned;
        let vars = match query {
            None => &UNQUERIED,
            Some(q) => {
                owned = QueryVars::from_params(q);
                &owned
            }
        };
        let keys = path.keys();
        let mut old: Vec<Node> = Vec::with_capacity(keys.len() + 1);
        old.push(root.clone());
        let mut budget = Budget::observed(self.step_budget, self.observer(coverage));
        let mut node = &self.root;
        let mut last: Option<(&Rule, usize, Option<EvalError>)> = None;
        for depth in 0..=keys.len() {
            if let Some(key) = depth.checked_sub(1).and_then(|i| keys.get(i)) {
                match node.child(key.as_str()) {
                    Some(child) => node = child,
                    None => break,
                }
                let below = old[depth - 1].child(key);
                old.push(below);
            }
            let Some(rule) = &node.read else { continue };
            let env = Env {
                auth,
                now: now_ms as f64,
                query: vars,
                keys,
                frames: Frames {
                    old: &old,
                    new: &[],
                },
                depth,
            };
            match eval_rule(&rule.expr, &env, &mut budget) {
                Ok(true) => return Decision::Allow,
                Ok(false) => last = Some((rule, depth, None)),
                Err(EvalError::Budget) => return self.over_budget(path),
                Err(error) => last = Some((rule, depth, Some(error))),
            }
        }
        let last =
            last.map(|(rule, depth, error)| outcome(rule, RuleKind::Read, keys, depth, error));
        Decision::Deny(Box::new(Denial {
            path: path.clone(),
            reason: DenialReason::NotGranted {
                kind: RuleKind::Read,
                last,
            },
        }))
    }

    /// May a client set `path`? `old_root` is the database before the write, `new_root` the
    /// database with the write applied (server values resolved with `now_ms`, emptied
    /// objects pruned). A delete is a set whose new value is null. (spec §4.4–§4.6)
    pub fn can_write(
        &self,
        old_root: &Node,
        new_root: &Node,
        path: &Path,
        auth: &serde_json::Value,
        now_ms: u64,
    ) -> Decision {
        self.can_write_with(old_root, new_root, path, auth, now_ms, None)
    }

    /// [`Rules::can_write`], recording in `coverage` (see [`Rules::can_read_with`]).
    pub fn can_write_with(
        &self,
        old_root: &Node,
        new_root: &Node,
        path: &Path,
        auth: &serde_json::Value,
        now_ms: u64,
        coverage: Option<&mut Coverage>,
    ) -> Decision {
        let targets = std::slice::from_ref(path);
        self.check_targets(old_root, new_root, targets, auth, now_ms, coverage, None)
    }

    /// [`Rules::can_write_with`], also naming the `.write` rule that granted the write (for
    /// an audit trail: who wrote, and which rule let them). On [`Decision::Allow`] the site of
    /// that rule, as reached from the root (`kind` [`RuleKind::Write`], the location with
    /// wildcards filled in), is appended to `grants`; on a denial nothing is appended, so
    /// `grants` is left as it was given.
    #[allow(clippy::too_many_arguments)]
    pub fn can_write_granted(
        &self,
        old_root: &Node,
        new_root: &Node,
        path: &Path,
        auth: &serde_json::Value,
        now_ms: u64,
        coverage: Option<&mut Coverage>,
        grants: &mut Vec<RuleSite>,
    ) -> Decision {
        let targets = std::slice::from_ref(path);
        self.check_targets(
            old_root,
            new_root,
            targets,
            auth,
            now_ms,
            coverage,
            Some(grants),
        )
    }

    /// May a client apply a multi-location update at `base`, writing each of
    /// `relative_paths` below it? `new_root` has the whole update applied. Every target needs
    /// its own `.write` grant (none is needed at `base` itself), and validation sees the merged
    /// result; one failure denies the whole update. The caller refuses overlapping paths
    /// before asking (they are a request error, not a permission failure); an update without
    /// paths changes nothing and is allowed.
    pub fn can_update(
        &self,
        old_root: &Node,
        new_root: &Node,
        base: &Path,
        relative_paths: &[Path],
        auth: &serde_json::Value,
        now_ms: u64,
    ) -> Decision {
        self.can_update_with(old_root, new_root, base, relative_paths, auth, now_ms, None)
    }

    /// [`Rules::can_update`], recording in `coverage` (see [`Rules::can_read_with`]).
    #[allow(clippy::too_many_arguments)]
    pub fn can_update_with(
        &self,
        old_root: &Node,
        new_root: &Node,
        base: &Path,
        relative_paths: &[Path],
        auth: &serde_json::Value,
        now_ms: u64,
        coverage: Option<&mut Coverage>,
    ) -> Decision {
        let mut targets: Vec<Path> = relative_paths.iter().map(|rel| base.join(rel)).collect();
        // Sorted, consecutive targets share their longest common ancestors, which then need
        // validating only once.
        targets.sort();
        self.check_targets(old_root, new_root, &targets, auth, now_ms, coverage, None)
    }

    /// [`Rules::can_update_with`], also naming the `.write` rules that granted its targets
    /// (see [`Rules::can_write_granted`]). On [`Decision::Allow`] `grants` gets the granting
    /// rule of each target, in the order of the sorted targets and once per rule: targets
    /// granted by the same rule (same pattern, line and column; under a wildcard, at
    /// different locations) give one entry, with the location of the first. On a denial
    /// nothing is appended.
    #[allow(clippy::too_many_arguments)]
    pub fn can_update_granted(
        &self,
        old_root: &Node,
        new_root: &Node,
        base: &Path,
        relative_paths: &[Path],
        auth: &serde_json::Value,
        now_ms: u64,
        coverage: Option<&mut Coverage>,
        grants: &mut Vec<RuleSite>,
    ) -> Decision {
        let mut targets: Vec<Path> = relative_paths.iter().map(|rel| base.join(rel)).collect();
        targets.sort();
        self.check_targets(
            old_root,
            new_root,
            &targets,
            auth,
            now_ms,
            coverage,
            Some(grants),
        )
    }

    /// `coverage` if it is the record of these rules.
    fn observer<'c>(&self, coverage: Option<&'c mut Coverage>) -> Option<&'c mut Coverage> {
        coverage.filter(|coverage| coverage.is_for(self))
    }

    /// Checks each target in turn. `grants`, when given, gets the granting `.write` rule of
    /// each target (see [`Rules::can_update_granted`]); the plain checks pass `None` and build
    /// no site at all.
    #[allow(clippy::too_many_arguments)]
    fn check_targets(
        &self,
        old_root: &Node,
        new_root: &Node,
        targets: &[Path],
        auth: &serde_json::Value,
        now_ms: u64,
        coverage: Option<&mut Coverage>,
        mut grants: Option<&mut Vec<RuleSite>>,
    ) -> Decision {
        // A denial takes back what the targets before it added.
        let given = grants.as_ref().map_or(0, |grants| grants.len());
        let mut writer = Writer {
            rules: self,
            auth,
            now: now_ms as f64,
            old_root,
            new_root,
            target: Path::root(),
            keys: Vec::new(),
            old: Vec::new(),
            new: Vec::new(),
            budget: Budget::observed(self.step_budget, self.observer(coverage)),
        };
        let mut previous: Option<&Path> = None;
        for target in targets {
            // Ancestors this target shares with the previous one were validated with it.
            let validated = previous.map_or(0, |p| common_prefix(p, target) + 1);
            if let Err(denial) = writer.check(target, validated, grants.as_deref_mut()) {
                if let Some(grants) = grants {
                    grants.truncate(given);
                }
                return Decision::Deny(denial);
            }
            previous = Some(target);
        }
        Decision::Allow
    }

    fn over_budget(&self, path: &Path) -> Decision {
        Decision::Deny(Box::new(Denial {
            path: path.clone(),
            reason: DenialReason::BudgetExhausted {
                steps: self.step_budget,
            },
        }))
    }
}

/// Number of leading keys two paths share.
fn common_prefix(a: &Path, b: &Path) -> usize {
    a.keys()
        .iter()
        .zip(b.keys())
        .take_while(|(x, y)| x == y)
        .count()
}

fn outcome(
    rule: &Rule,
    kind: RuleKind,
    keys: &[Key],
    depth: usize,
    error: Option<EvalError>,
) -> RuleOutcome {
    RuleOutcome {
        site: RuleSite {
            kind,
            pattern: rule.pattern.clone(),
            location: Path::from_keys(keys.get(..depth).unwrap_or(keys).to_vec()),
            line: rule.line,
            column: rule.column,
        },
        error,
    }
}

/// Adds the site of `rule`, which granted a write at the first `depth` keys, to `grants`,
/// unless the same rule (pattern, line and column) is there already.
fn record_grant(grants: &mut Vec<RuleSite>, rule: &Rule, keys: &[Key], depth: usize) {
    let known = grants.iter().any(|site| {
        site.pattern == rule.pattern && site.line == rule.line && site.column == rule.column
    });
    if !known {
        grants.push(outcome(rule, RuleKind::Write, keys, depth, None).site);
    }
}

/// The state of one write check: the trees, the current location and its node stacks.
struct Writer<'r, 'c> {
    rules: &'r Rules,
    auth: &'r serde_json::Value,
    now: f64,
    old_root: &'r Node,
    new_root: &'r Node,
    /// The target being checked (for denial reports).
    target: Path,
    /// The location being evaluated: the target's keys, then keys below it while the
    /// written subtree is validated.
    keys: Vec<Key>,
    /// `old[i]`/`new[i]`: the nodes at the first `i` keys, filled on demand.
    old: Vec<Node>,
    new: Vec<Node>,
    budget: Budget<'c>,
}

impl<'r> Writer<'r, '_> {
    /// Checks one target: permission, then validation of the target and its ancestors from
    /// depth `validated` on, then of the written subtree. The rule that grants is added to
    /// `grants` when given (unless a rule with the same pattern and position is there).
    fn check(
        &mut self,
        target: &Path,
        validated: usize,
        grants: Option<&mut Vec<RuleSite>>,
    ) -> Result<(), Box<Denial>> {
        let rules = self.rules;
        self.target = target.clone();
        self.keys.clear();
        self.keys.extend_from_slice(target.keys());
        self.old.clear();
        self.old.push(self.old_root.clone());
        self.new.clear();
        self.new.push(self.new_root.clone());
        let len = self.keys.len();

        let mut node = &rules.root;
        let mut granted = false;
        let mut last = None;
        for depth in 0..=len {
            if depth > 0 {
                match node.child(self.keys[depth - 1].as_str()) {
                    Some(child) => node = child,
                    None => break,
                }
            }
            let Some(rule) = &node.write else { continue };
            match self.eval(rule, depth) {
                Ok(true) => {
                    if let Some(grants) = grants {
                        record_grant(grants, rule, &self.keys, depth);
                    }
                    granted = true;
                    break;
                }
                Ok(false) => last = Some((rule, depth, None)),
                Err(EvalError::Budget) => return Err(self.over_budget()),
                Err(error) => last = Some((rule, depth, Some(error))),
            }
        }
        if !granted {
            let last = last.map(|(rule, depth, error)| {
                outcome(rule, RuleKind::Write, &self.keys, depth, error)
            });
            return Err(Box::new(Denial {
                path: target.clone(),
                reason: DenialReason::NotGranted {
                    kind: RuleKind::Write,
                    last,
                },
            }));
        }

        let mut node = &rules.root;
        for depth in 0..=len {
            if depth > 0 {
                match node.child(self.keys[depth - 1].as_str()) {
                    Some(child) => node = child,
                    // No rule node here, so none below: nothing more to validate.
                    None => return Ok(()),
                }
            }
            if depth >= validated {
                if let Some(rule) = &node.validate {
                    self.validate(rule, depth)?;
                }
            }
        }
        if node.validates_below {
            self.frames_to(len);
            if !self.new[len].is_empty() {
                self.subtree(node, len)?;
            }
        }
        Ok(())
    }

    /// Validates the children of the written node at `depth` (non-empty, frames filled), and
    /// theirs, wherever the rules have a node that validates.
    fn subtree(&mut self, node: &'r RuleNode, depth: usize) -> Result<(), Box<Denial>> {
        self.spend(1)?;
        let new_parent = self.new[depth].clone();
        let old_parent = self.old[depth].clone();
        if node.wildcard.is_some() {
            // Every written child is matched by a literal child or the wildcard.
            for (key, new_child) in new_parent.children() {
                let Some(child_rules) = node.child(key.as_str()) else {
                    continue;
                };
                if child_rules.validates() {
                    self.descend(
                        child_rules,
                        depth,
                        &key,
                        &old_parent,
                        new_child.into_owned(),
                    )?;
                }
            }
        } else {
            // Only the named children can have rules; look them up instead of scanning.
            for (key, child_rules) in node.children.iter() {
                if !child_rules.validates() {
                    continue;
                }
                let new_child = new_parent.child(key);
                if !new_child.is_empty() {
                    self.descend(child_rules, depth, key, &old_parent, new_child)?;
                }
            }
        }
        Ok(())
    }

    fn descend(
        &mut self,
        node: &'r RuleNode,
        depth: usize,
        key: &Key,
        old_parent: &Node,
        new_child: Node,
    ) -> Result<(), Box<Denial>> {
        self.keys.push(key.clone());
        self.old.push(old_parent.child(key));
        self.new.push(new_child);
        if let Some(rule) = &node.validate {
            self.validate(rule, depth + 1)?;
        }
        if node.validates_below {
            self.subtree(node, depth + 1)?;
        }
        self.keys.pop();
        self.old.pop();
        self.new.pop();
        Ok(())
    }

    /// Runs a `.validate` rule at `depth` unless the new data there is null.
    fn validate(&mut self, rule: &Rule, depth: usize) -> Result<(), Box<Denial>> {
        self.frames_to(depth);
        if self.new[depth].is_empty() {
            return Ok(());
        }
        let error = match self.eval(rule, depth) {
            Ok(true) => return Ok(()),
            Ok(false) => None,
            Err(EvalError::Budget) => return Err(self.over_budget()),
            Err(error) => Some(error),
        };
        Err(Box::new(Denial {
            path: self.target.clone(),
            reason: DenialReason::Invalid(outcome(
                rule,
                RuleKind::Validate,
                &self.keys,
                depth,
                error,
            )),
        }))
    }

    /// Fills the node stacks down to `depth` (at most the length of `keys`).
    fn frames_to(&mut self, depth: usize) {
        while self.old.len() <= depth {
            let i = self.old.len();
            let Some(key) = self.keys.get(i - 1) else {
                return;
            };
            let old = self.old[i - 1].child(key);
            let new = self.new[i - 1].child(key);
            self.old.push(old);
            self.new.push(new);
        }
    }

    fn eval(&mut self, rule: &Rule, depth: usize) -> Result<bool, EvalError> {
        self.frames_to(depth);
        let env = Env {
            auth: self.auth,
            now: self.now,
            query: &UNQUERIED,
            keys: &self.keys,
            frames: Frames {
                old: &self.old,
                new: &self.new,
            },
            depth,
        };
        eval_rule(&rule.expr, &env, &mut self.budget)
    }

    fn spend(&mut self, steps: u64) -> Result<(), Box<Denial>> {
        self.budget.spend(steps).map_err(|_| self.over_budget())
    }

    fn over_budget(&self) -> Box<Denial> {
        Box::new(Denial {
            path: self.target.clone(),
            reason: DenialReason::BudgetExhausted {
                steps: self.rules.step_budget,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        Node::from_json(&v).expect("valid node")
    }

    fn path(s: &str) -> Path {
        Path::parse(s).expect("valid path")
    }

    fn rules(v: serde_json::Value) -> Rules {
        Rules::parse(&v.to_string()).expect("valid rules")
    }

    fn set(rules: &Rules, data: serde_json::Value, at: &str, value: serde_json::Value) -> Decision {
        let old = node(data);
        let new = old.set(&path(at), node(value));
        rules.can_write(&old, &new, &path(at), &json!(null), 0)
    }

    #[test]
    fn read_denials_name_the_last_rule_tried() {
        let r = rules(json!({"rules": {".read": "auth != null", "a": {".read": "data.exists()"}}}));
        let decision = r.can_read(&Node::empty(), &path("/a/b"), &json!(null), None, 0);
        let denial = decision.denial().expect("denied");
        assert_eq!(denial.path, path("/a/b"));
        let DenialReason::NotGranted {
            kind,
            last: Some(last),
        } = &denial.reason
        else {
            panic!("unexpected {denial:?}")
        };
        assert_eq!(*kind, RuleKind::Read);
        assert_eq!(last.site.location, path("/a"));
        assert_eq!((last.site.line, last.site.column), (1, 47));
        assert!(last.error.is_none());
        assert_eq!(
            denial.to_string(),
            "/a/b: no .read rule granted access; /rules/a/.read at /a (line 1, column 47) evaluated to false"
        );
        let open = r.can_read(&Node::empty(), &path("/a"), &json!({"uid": "u"}), None, 0);
        assert!(open.is_allowed());
    }

    #[test]
    fn validation_denials_name_the_rule_location() {
        let r = rules(
            json!({"rules": {".write": true, "items": {"$id": {"n": {".validate": "newData.isNumber()"}}}}}),
        );
        let decision = set(
            &r,
            json!(null),
            "/items",
            json!({"a": {"n": 1}, "b": {"n": "x"}}),
        );
        let denial = decision.denial().expect("denied");
        assert_eq!(denial.path, path("/items"));
        let DenialReason::Invalid(outcome) = &denial.reason else {
            panic!("unexpected {denial:?}")
        };
        assert_eq!(outcome.site.location, path("/items/b/n"));
        assert_eq!(outcome.site.kind, RuleKind::Validate);
        assert_eq!(&*outcome.site.pattern, "/rules/items/$id/n/.validate");
        assert!(set(
            &r,
            json!(null),
            "/items",
            json!({"a": {"n": 1}, "b": {"n": 2}})
        )
        .is_allowed());
    }

    #[test]
    fn the_budget_denies_expensive_operations() {
        let r = rules(
            json!({"rules": {".write": true, "items": {"$id": {".validate": "newData.isNumber()"}}}}),
        );
        let many: serde_json::Map<String, serde_json::Value> =
            (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        let value = serde_json::Value::Object(many);
        assert!(set(&r, json!(null), "/items", value.clone()).is_allowed());
        let tight = r.with_step_budget(50);
        let old = Node::empty();
        let new = old.set(&path("/items"), node(value));
        let decision = tight.can_write(&old, &new, &path("/items"), &json!(null), 0);
        assert!(matches!(
            decision.denial().map(|d| &d.reason),
            Some(DenialReason::BudgetExhausted { steps: 50 })
        ));
        let reads =
            rules(json!({"rules": {".read": "1 + 1 + 1 + 1 + 1 + 1 == 6"}})).with_step_budget(5);
        let decision = reads.can_read(&Node::empty(), &path("/"), &json!(null), None, 0);
        assert!(matches!(
            decision.denial().map(|d| &d.reason),
            Some(DenialReason::BudgetExhausted { .. })
        ));
    }

    #[test]
    fn updates_validate_shared_ancestors_once() {
        let r = rules(
            json!({"rules": {".write": true, "p": {".validate": "newData.hasChildren(['a', 'b'])"}}}),
        );
        let old = node(json!({"p": {"a": 1, "b": 2}}));
        let new = old
            .set(&path("/p/a"), node(json!(3)))
            .set(&path("/p/b"), node(json!(4)));
        let rels = [path("b"), path("a")];
        assert!(r
            .can_update(&old, &new, &path("/p"), &rels, &json!(null), 0)
            .is_allowed());
        let broken = old.set(&path("/p/a"), Node::empty());
        let decision = r.can_update(&old, &broken, &path("/p"), &[path("a")], &json!(null), 0);
        assert!(!decision.is_allowed());
        assert!(r
            .can_update(&old, &old, &path("/p"), &[], &json!(null), 0)
            .is_allowed());
    }

    /// The rules of the grant tests: a root rule that grants admins' claims, and a nested
    /// rule per room, each on a line of its own so that the lines tell them apart.
    const GRANT_RULES: &str = r#"{"rules": {
  ".write": "auth != null && auth.token.admin === true",
  "rooms": {
    "$room": {
      ".write": "auth != null",
      "title": {".validate": "newData.isString()"}
    }
  },
  "logs": {".write": "auth != null"}
}}"#;

    #[test]
    fn a_nested_grant_names_its_rule() {
        let r = Rules::parse(GRANT_RULES).expect("valid rules");
        let old = Node::empty();
        let at = path("/rooms/r1/title");
        let new = old.set(&at, node(json!("hello")));
        let alice = json!({"uid": "alice"});
        let mut grants = Vec::new();
        let decision = r.can_write_granted(&old, &new, &at, &alice, 0, None, &mut grants);
        assert!(decision.is_allowed());
        assert_eq!(grants.len(), 1, "{grants:?}");
        let site = &grants[0];
        assert_eq!(site.kind, RuleKind::Write);
        assert_eq!(&*site.pattern, "/rules/rooms/$room/.write");
        assert_eq!(site.location, path("/rooms/r1"));
        assert_eq!(site.line, 5);
        // The plain check decides the same.
        assert!(r.can_write(&old, &new, &at, &alice, 0).is_allowed());

        // The root rule grants first when it can: it is the one named.
        let admin = json!({"uid": "root", "token": {"admin": true}});
        let mut grants = Vec::new();
        let decision = r.can_write_granted(&old, &new, &at, &admin, 0, None, &mut grants);
        assert!(decision.is_allowed());
        assert_eq!(grants.len(), 1);
        assert_eq!(&*grants[0].pattern, "/rules/.write");
        assert_eq!(grants[0].location, Path::root());
        assert_eq!(grants[0].line, 2);
    }

    #[test]
    fn an_update_names_each_granting_rule_once() {
        let r = Rules::parse(GRANT_RULES).expect("valid rules");
        let old = Node::empty();
        let new = old
            .set(&path("/rooms/a/title"), node(json!("A")))
            .set(&path("/rooms/b/title"), node(json!("B")))
            .set(&path("/logs/1"), node(json!("made a and b")));
        let rels = [path("rooms/b/title"), path("logs/1"), path("rooms/a/title")];
        let alice = json!({"uid": "alice"});
        let mut grants = Vec::new();
        let decision = r.can_update_granted(
            &old,
            &new,
            &Path::root(),
            &rels,
            &alice,
            0,
            None,
            &mut grants,
        );
        assert!(decision.is_allowed());
        let named: Vec<(&str, String, u32)> = grants
            .iter()
            .map(|site| (&*site.pattern, site.location.to_string(), site.line))
            .collect();
        // Targets in sorted order; both rooms granted by one rule: one entry, the first's
        // location.
        assert_eq!(
            named,
            [
                ("/rules/logs/.write", "/logs".to_owned(), 9),
                ("/rules/rooms/$room/.write", "/rooms/a".to_owned(), 5),
            ]
        );
    }

    #[test]
    fn a_denial_adds_no_grant() {
        let r = Rules::parse(GRANT_RULES).expect("valid rules");
        let old = Node::empty();
        let alice = json!({"uid": "alice"});
        // Refused by validation after the first target was granted: what that target added
        // is taken back, and what was given stays.
        let new = old
            .set(&path("/logs/1"), node(json!("x")))
            .set(&path("/rooms/a/title"), node(json!(3)));
        let rels = [path("logs/1"), path("rooms/a/title")];
        let earlier = RuleSite {
            kind: RuleKind::Write,
            pattern: "/rules/earlier/.write".into(),
            location: path("/earlier"),
            line: 1,
            column: 1,
        };
        let mut grants = vec![earlier.clone()];
        let decision = r.can_update_granted(
            &old,
            &new,
            &Path::root(),
            &rels,
            &alice,
            0,
            None,
            &mut grants,
        );
        assert!(!decision.is_allowed());
        assert_eq!(grants, [earlier]);
        // Not granted at all.
        let at = path("/rooms/a");
        let new = old.set(&at, node(json!({"title": "t"})));
        let mut grants = Vec::new();
        let decision = r.can_write_granted(&old, &new, &at, &json!(null), 0, None, &mut grants);
        assert!(!decision.is_allowed());
        assert!(grants.is_empty());
    }

    #[test]
    fn wildcard_and_literal_subtree_walks_agree() {
        let literal =
            rules(json!({"rules": {".write": true, "p": {"a": {".validate": false}, "b": {}}}}));
        let wildcard =
            rules(json!({"rules": {".write": true, "p": {"a": {".validate": false}, "$o": {}}}}));
        for r in [&literal, &wildcard] {
            assert!(!set(r, json!(null), "/p", json!({"a": 1})).is_allowed());
            assert!(set(r, json!(null), "/p", json!({"b": 1, "c": 2})).is_allowed());
            assert!(set(r, json!({"p": {"a": 1}}), "/p/a", json!(null)).is_allowed());
        }
    }
}
