//! The total order of children under a query index, and the range test (§7.2, §9).
//!
//! Every child is placed by the pair (V, K): its index value and its key. The three value-based indexes share
//! one comparison: priority order (§9.3) is value order (§9.2) restricted to null / numbers / strings, so a
//! priority, a child value and a bound value are all reduced to an [`IndexValue`] and compared the same way.
//! The key index is the odd one out: its post is the key alone, so children compare by key and bounds compare
//! their string value against the key as a name (§9.1).

use std::cmp::Ordering;
use std::sync::Arc;

use hearth_tree::{compare_keys, compare_utf16, Key, Leaf, Node, Priority};

use crate::params::{Bound, BoundName, BoundValue, Index, QueryParams, MAX_NAME, MIN_NAME};

/// An index value reduced to what the orders of §9.2 / §9.3 look at.
///
/// Owning (rather than borrowing) is deliberate: a child-path index value is a node fetched from inside the
/// child, which does not outlive the lookup; cloning the `Arc<str>` of a string is only a reference count bump.
#[derive(Clone, Debug)]
pub(crate) enum IndexValue {
    /// Missing value, or no priority.
    Null,
    Bool(bool),
    Number(f64),
    String(Arc<str>),
    /// Any non-empty object; all objects are equal to each other.
    Object,
}

impl IndexValue {
    fn of_node(node: &Node) -> IndexValue {
        match node.leaf_value() {
            Some(Leaf::Bool(flag)) => IndexValue::Bool(*flag),
            Some(Leaf::Number(number)) => IndexValue::Number(*number),
            Some(Leaf::String(text)) => IndexValue::String(text.clone()),
            None if node.is_empty() => IndexValue::Null,
            None => IndexValue::Object,
        }
    }

    fn of_priority(priority: &Priority) -> IndexValue {
        match priority {
            Priority::None => IndexValue::Null,
            Priority::Number(number) => IndexValue::Number(*number),
            Priority::String(text) => IndexValue::String(text.clone()),
        }
    }

    fn of_bound(value: &BoundValue) -> IndexValue {
        match value {
            BoundValue::Null => IndexValue::Null,
            BoundValue::Bool(flag) => IndexValue::Bool(*flag),
            BoundValue::Number(number) => IndexValue::Number(number.get()),
            BoundValue::String(text) => IndexValue::String(text.clone()),
        }
    }

    /// Position of the value's type in value order.
    fn tier(&self) -> u8 {
        match self {
            IndexValue::Null => 0,
            IndexValue::Bool(_) => 1,
            IndexValue::Number(_) => 2,
            IndexValue::String(_) => 3,
            IndexValue::Object => 4,
        }
    }
}

/// Numbers compare as doubles; `-0 == 0` as in JavaScript. `total_cmp` only decides between unequal values, so
/// the order stays total (and agrees with `<`) even though the tree never holds NaN.
fn compare_numbers(a: f64, b: f64) -> Ordering {
    if a == b {
        Ordering::Equal
    } else {
        a.total_cmp(&b)
    }
}

impl Ord for IndexValue {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (IndexValue::Bool(a), IndexValue::Bool(b)) => a.cmp(b),
            (IndexValue::Number(a), IndexValue::Number(b)) => compare_numbers(*a, *b),
            (IndexValue::String(a), IndexValue::String(b)) => compare_utf16(a, b),
            _ => self.tier().cmp(&other.tier()),
        }
    }
}

impl PartialOrd for IndexValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for IndexValue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for IndexValue {}

/// The value part V of a child's position. For the key index every child gets the same `Null`, so that the
/// (V, K) order collapses to key order and one comparator serves all indexes.
pub(crate) fn sort_value(index: &Index, child: &Node) -> IndexValue {
    match index {
        Index::Priority => IndexValue::of_priority(child.priority()),
        Index::Key => IndexValue::Null,
        Index::Value => IndexValue::of_node(child),
        Index::Child(path) => IndexValue::of_node(&child.get(path)),
    }
}

/// A key tie-breaker borrowed from a bound, with the sentinels made explicit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NamePost<'q> {
    Min,
    Max,
    Name(&'q str),
}

impl<'q> NamePost<'q> {
    fn of_name(name: &'q BoundName) -> NamePost<'q> {
        match name {
            BoundName::Min => NamePost::Min,
            BoundName::Max => NamePost::Max,
            BoundName::Name(text) => NamePost::Name(text),
        }
    }

    /// The post of a key-index bound. Its value should be a string (a key, or a sentinel spelled out, since
    /// the client's own name order treats the sentinel strings as sentinels). Other primitives sort before
    /// every string in value order, hence before every key.
    fn of_key_bound(value: &'q BoundValue) -> NamePost<'q> {
        match value {
            BoundValue::String(text) => match &**text {
                MIN_NAME => NamePost::Min,
                MAX_NAME => NamePost::Max,
                other => NamePost::Name(other),
            },
            BoundValue::Null | BoundValue::Bool(_) | BoundValue::Number(_) => NamePost::Min,
        }
    }

    /// How `key` compares with this post.
    fn compare_key(self, key: &Key) -> Ordering {
        match self {
            NamePost::Min => Ordering::Greater,
            NamePost::Max => Ordering::Less,
            NamePost::Name(name) => compare_keys(key.as_str(), name),
        }
    }
}

/// The post of a bound under a value-based index: its value and its key tie-breaker.
pub(crate) fn value_post(bound: &Bound) -> (IndexValue, NamePost<'_>) {
    (
        IndexValue::of_bound(&bound.value),
        NamePost::of_name(&bound.name),
    )
}

/// One end of the range, prepared for repeated comparisons (the bound's value converted once).
#[derive(Debug)]
enum Post<'q> {
    Key(NamePost<'q>),
    Value(IndexValue, NamePost<'q>),
}

impl<'q> Post<'q> {
    fn new(index: &Index, bound: &'q Bound) -> Post<'q> {
        match index {
            Index::Key => Post::Key(NamePost::of_key_bound(&bound.value)),
            _ => Post::Value(
                IndexValue::of_bound(&bound.value),
                NamePost::of_name(&bound.name),
            ),
        }
    }

    /// How the child at (value, key) compares with this post.
    fn compare_child(&self, value: &IndexValue, key: &Key) -> Ordering {
        match self {
            Post::Key(name) => name.compare_key(key),
            Post::Value(post_value, name) => {
                value.cmp(post_value).then_with(|| name.compare_key(key))
            }
        }
    }

    /// The key-index post as a name, if this is one.
    fn key_name(&self) -> Option<NamePost<'q>> {
        match self {
            Post::Key(name) => Some(*name),
            Post::Value(..) => None,
        }
    }
}

/// One end of a key-index range: the name post and whether it is inclusive; `None` when that end is open.
pub(crate) type KeyPost<'q> = Option<(NamePost<'q>, bool)>;

/// The range of a query, ready to test many children against it.
#[derive(Debug)]
pub(crate) struct Range<'q> {
    index: &'q Index,
    start: Option<(Post<'q>, bool)>,
    end: Option<(Post<'q>, bool)>,
}

impl<'q> Range<'q> {
    pub(crate) fn new(query: &'q QueryParams) -> Range<'q> {
        let prepare = |bound: &'q Option<Bound>| {
            bound
                .as_ref()
                .map(|bound| (Post::new(&query.index, bound), bound.inclusive))
        };
        Range {
            index: &query.index,
            start: prepare(&query.start),
            end: prepare(&query.end),
        }
    }

    /// The value part of a child's position under this range's index.
    pub(crate) fn sort_value(&self, child: &Node) -> IndexValue {
        sort_value(self.index, child)
    }

    /// Whether the child at (value, key) lies between the two posts.
    pub(crate) fn contains(&self, value: &IndexValue, key: &Key) -> bool {
        let after_start = self.start.as_ref().is_none_or(|(post, inclusive)| {
            match post.compare_child(value, key) {
                Ordering::Greater => true,
                Ordering::Equal => *inclusive,
                Ordering::Less => false,
            }
        });
        after_start
            && self.end.as_ref().is_none_or(|(post, inclusive)| {
                match post.compare_child(value, key) {
                    Ordering::Less => true,
                    Ordering::Equal => *inclusive,
                    Ordering::Greater => false,
                }
            })
    }

    /// The key-index start and end posts with their inclusive flags (`None` for an open end), which let the
    /// window code seek in the key-ordered children instead of scanning them all.
    pub(crate) fn key_posts(&self) -> (KeyPost<'q>, KeyPost<'q>) {
        let name = |end: &Option<(Post<'q>, bool)>| {
            end.as_ref()
                .and_then(|(post, inclusive)| post.key_name().map(|name| (name, *inclusive)))
        };
        (name(&self.start), name(&self.end))
    }
}

impl QueryParams {
    /// Whether the child `(key, child)` falls inside this query's range (the limit is not considered).
    pub fn in_range(&self, key: &Key, child: &Node) -> bool {
        let range = Range::new(self);
        range.contains(&range.sort_value(child), key)
    }

    /// Orders two children by this query's index: index value first, then key. This is the order in which
    /// windows are cut, and in which the client lists the children.
    pub fn compare_children(&self, a: (&Key, &Node), b: (&Key, &Node)) -> Ordering {
        match self.index {
            Index::Key => a.0.cmp(b.0),
            _ => sort_value(&self.index, a.1)
                .cmp(&sort_value(&self.index, b.1))
                .then_with(|| a.0.cmp(b.0)),
        }
    }

    /// The index value of a child as a node: a leaf of its priority (or empty) for the priority index, the child
    /// itself for the value index, the node at the index path for a child index, a string leaf of the key for
    /// the key index. Useful to the sync layer for deciding whether a write can move a child.
    pub fn index_value(&self, key: &Key, child: &Node) -> Node {
        match &self.index {
            Index::Priority => match child.priority() {
                Priority::None => Node::empty(),
                Priority::Number(number) => Node::leaf(Leaf::Number(*number)),
                Priority::String(text) => Node::leaf(Leaf::String(text.clone())),
            },
            Index::Key => Node::leaf(Leaf::String(Arc::from(key.as_str()))),
            Index::Value => child.clone(),
            Index::Child(path) => child.get(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_tree::Path;
    use serde_json::{json, Value};

    fn node(value: Value) -> Node {
        Node::from_json(&value).expect("valid test data")
    }

    fn key(name: &str) -> Key {
        Key::new(name).expect("valid test key")
    }

    fn query(q: Value) -> QueryParams {
        QueryParams::from_wire(&q).expect("valid test query")
    }

    #[test]
    fn value_order_chain() {
        let chain = [
            IndexValue::Null,
            IndexValue::Bool(false),
            IndexValue::Bool(true),
            IndexValue::Number(-1e300),
            IndexValue::Number(-1.0),
            IndexValue::Number(0.0),
            IndexValue::Number(2.5),
            IndexValue::String(Arc::from("")),
            IndexValue::String(Arc::from("B")),
            IndexValue::String(Arc::from("a")),
            IndexValue::String(Arc::from("😀")),
            IndexValue::String(Arc::from("｡")),
            IndexValue::Object,
        ];
        for (i, a) in chain.iter().enumerate() {
            for (j, b) in chain.iter().enumerate() {
                assert_eq!(a.cmp(b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
        assert_eq!(
            IndexValue::Number(-0.0).cmp(&IndexValue::Number(0.0)),
            Ordering::Equal
        );
    }

    #[test]
    fn index_values_of_children() {
        let child = node(json!({"a": {"b": "deep"}, "x": 1, ".priority": 4}));
        let k = key("k");
        let by_priority = QueryParams::default();
        assert_eq!(
            by_priority.index_value(&k, &child),
            Node::leaf(Leaf::Number(4.0))
        );
        assert!(by_priority.index_value(&k, &node(json!(1))).is_empty());
        let by_string_priority = node(json!({".value": 1, ".priority": "p"}));
        assert_eq!(
            by_priority.index_value(&k, &by_string_priority),
            Node::leaf(Leaf::String(Arc::from("p")))
        );
        let by_key = QueryParams {
            index: Index::Key,
            ..QueryParams::default()
        };
        assert_eq!(
            by_key.index_value(&k, &child),
            Node::leaf(Leaf::String(Arc::from("k")))
        );
        let by_value = QueryParams {
            index: Index::Value,
            ..QueryParams::default()
        };
        assert!(by_value.index_value(&k, &child).ptr_eq(&child));
        let by_path = QueryParams {
            index: Index::Child(Path::parse("a/b").expect("path")),
            ..QueryParams::default()
        };
        assert_eq!(
            by_path.index_value(&k, &child),
            Node::leaf(Leaf::String(Arc::from("deep")))
        );
        let by_missing = QueryParams {
            index: Index::Child(Path::parse("zz").expect("path")),
            ..QueryParams::default()
        };
        assert!(by_missing.index_value(&k, &child).is_empty());
    }

    #[test]
    fn compare_children_per_index() {
        let (a, b) = (key("a"), key("b"));
        let low = node(json!({".value": "z", ".priority": 1}));
        let high = node(json!({".value": 1, ".priority": "a"}));
        let none = node(json!(true));
        let by_priority = QueryParams::default();
        assert_eq!(
            by_priority.compare_children((&b, &low), (&a, &high)),
            Ordering::Less
        );
        assert_eq!(
            by_priority.compare_children((&b, &none), (&a, &low)),
            Ordering::Less
        );
        assert_eq!(
            by_priority.compare_children((&a, &none), (&b, &none)),
            Ordering::Less
        );
        let by_value = QueryParams {
            index: Index::Value,
            ..QueryParams::default()
        };
        assert_eq!(
            by_value.compare_children((&a, &low), (&b, &high)),
            Ordering::Greater
        );
        assert_eq!(
            by_value.compare_children((&b, &none), (&a, &high)),
            Ordering::Less
        );
        assert_eq!(
            by_value.compare_children((&b, &high), (&b, &high)),
            Ordering::Equal
        );
        let by_key = QueryParams {
            index: Index::Key,
            ..QueryParams::default()
        };
        let (nine, ten) = (key("9"), key("10"));
        assert_eq!(
            by_key.compare_children((&ten, &none), (&nine, &none)),
            Ordering::Greater
        );
        assert_eq!(
            by_key.compare_children((&ten, &none), (&a, &none)),
            Ordering::Less
        );
    }

    #[test]
    fn in_range_single_children() {
        let q = query(json!({"sp": 5, "sn": "k", "ep": 6, "ein": false, "i": "score"}));
        let five = node(json!({"score": 5}));
        let six = node(json!({"score": 6}));
        assert!(!q.in_range(&key("j"), &five));
        assert!(q.in_range(&key("k"), &five));
        assert!(q.in_range(&key("z"), &five));
        // endBefore(6) without a name ends at (6, [MAX_NAME]): every child valued 6 is still before it.
        assert!(q.in_range(&key("a"), &six));
        assert!(!q.in_range(&key("a"), &node(json!({"score": 6.5}))));
        let by_key = query(json!({"sp": "b", "ep": "d", "l": 1, "i": ".key"}));
        assert!(by_key.in_range(&key("c"), &six));
        assert!(by_key.in_range(&key("d"), &six));
        assert!(!by_key.in_range(&key("e"), &six));
        assert!(!by_key.in_range(&key("1"), &six));
        assert!(QueryParams::default().in_range(&key("any"), &six));
    }

    #[test]
    fn key_index_sentinel_and_non_string_bounds() {
        let child = node(json!(1));
        let min = query(json!({"sp": "[MIN_NAME]", "i": ".key"}));
        assert!(min.in_range(&key("-5"), &child));
        let max = query(json!({"ep": "[MAX_NAME]", "ein": false, "i": ".key"}));
        assert!(max.in_range(&key("zzz"), &child));
        // Not produced by the parser, but defined: non-string values sort before every key.
        let null_start = QueryParams {
            index: Index::Key,
            start: Some(Bound {
                value: BoundValue::Null,
                name: BoundName::Min,
                inclusive: true,
            }),
            ..QueryParams::default()
        };
        assert!(null_start.in_range(&key("0"), &child));
        let null_end = QueryParams {
            end: null_start.start.clone(),
            start: None,
            ..null_start
        };
        assert!(!null_end.in_range(&key("0"), &child));
    }

    #[test]
    fn priority_bound_null_means_no_priority() {
        let q = query(json!({"sp": null, "ep": null}));
        assert!(q.in_range(&key("a"), &node(json!(1))));
        assert!(!q.in_range(&key("a"), &node(json!({".value": 1, ".priority": 0}))));
        let from_zero = query(json!({"sp": 0}));
        assert!(!from_zero.in_range(&key("a"), &node(json!(1))));
        assert!(from_zero.in_range(&key("a"), &node(json!({".value": 1, ".priority": "s"}))));
    }
}
