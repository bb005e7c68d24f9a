//! Property test: `QueryParams::apply` agrees with a naive reference that sorts every child with a comparator
//! written independently here (from the generated data itself, not from the tree's nodes or comparators).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use hearth_query::{
    Bound, BoundName, BoundValue, Index, Limit, LimitFrom, OrderedF64, QueryParams,
};
use hearth_tree::{Key, Leaf, Node, Path, Priority};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Keys mixing integer-like ones (with leading zeros, negatives, the 32-bit edge) and UTF-16 edge cases.
const KEYS: &[&str] = &[
    "0",
    "00",
    "1",
    "7",
    "007",
    "10",
    "-3",
    "2147483647",
    "2147483648",
    "a",
    "b",
    "B",
    "k",
    "z",
    "aa",
    "😀",
    "｡",
];
const NUMBERS: &[f64] = &[-1.0, 0.0, 1.0, 2.5, 5.0, 1e10];
const STRINGS: &[&str] = &["", "5", "B", "a", "k", "😀", "｡"];

#[derive(Clone, Debug)]
enum GenValue {
    Bool(bool),
    Number(f64),
    String(&'static str),
    Object(BTreeMap<&'static str, GenValue>),
}

#[derive(Clone, Debug)]
enum GenPriority {
    None,
    Number(f64),
    String(&'static str),
}

#[derive(Clone, Debug)]
struct GenChild {
    value: GenValue,
    priority: GenPriority,
}

fn leaf_value() -> impl Strategy<Value = GenValue> {
    prop_oneof![
        any::<bool>().prop_map(GenValue::Bool),
        prop::sample::select(NUMBERS).prop_map(GenValue::Number),
        prop::sample::select(STRINGS).prop_map(GenValue::String),
    ]
}

fn child_value() -> impl Strategy<Value = GenValue> {
    let inner = leaf_value().prop_recursive(2, 8, 3, |inner| {
        prop::collection::btree_map(prop::sample::select(&["a", "b", "n", "x"][..]), inner, 1..3)
            .prop_map(GenValue::Object)
    });
    prop_oneof![leaf_value(), inner]
}

fn priority() -> impl Strategy<Value = GenPriority> {
    prop_oneof![
        Just(GenPriority::None),
        prop::sample::select(&[0.0, 1.0, 2.0][..]).prop_map(GenPriority::Number),
        prop::sample::select(&["a", "b"][..]).prop_map(GenPriority::String),
    ]
}

fn tree() -> impl Strategy<Value = (BTreeMap<&'static str, GenChild>, GenPriority)> {
    let child =
        (child_value(), priority()).prop_map(|(value, priority)| GenChild { value, priority });
    (
        prop::collection::btree_map(prop::sample::select(KEYS), child, 0..10),
        priority(),
    )
}

fn index() -> impl Strategy<Value = Index> {
    prop_oneof![
        Just(Index::Priority),
        Just(Index::Key),
        Just(Index::Value),
        Just(Index::Child(path("n"))),
        Just(Index::Child(path("a/b"))),
    ]
}

fn bound_value(index: &Index) -> BoxedStrategy<BoundValue> {
    let number = prop::sample::select(&[-1.0, 0.0, 1.0, 2.0, 3.0, 5.0][..])
        .prop_map(|n| BoundValue::Number(n.into()));
    let string = prop::sample::select(STRINGS).prop_map(|s| BoundValue::String(Arc::from(s)));
    match index {
        Index::Key => {
            let mut names: Vec<&'static str> = KEYS.to_vec();
            names.extend(["[MIN_NAME]", "[MAX_NAME]", "a.b", "", "["]);
            prop::sample::select(names)
                .prop_map(|s| BoundValue::String(Arc::from(s)))
                .boxed()
        }
        Index::Priority => prop_oneof![Just(BoundValue::Null), number, string].boxed(),
        Index::Value | Index::Child(_) => prop_oneof![
            Just(BoundValue::Null),
            any::<bool>().prop_map(BoundValue::Bool),
            number,
            string
        ]
        .boxed(),
    }
}

fn bound(index: &Index) -> impl Strategy<Value = Option<Bound>> {
    let name = prop_oneof![
        Just(BoundName::Min),
        Just(BoundName::Max),
        prop::sample::select(KEYS).prop_map(|k| BoundName::Name(Arc::from(k))),
    ];
    prop::option::of((bound_value(index), name, any::<bool>()).prop_map(
        |(value, name, inclusive)| Bound {
            value,
            name,
            inclusive,
        },
    ))
}

fn query() -> impl Strategy<Value = QueryParams> {
    let limit = prop::option::of(
        (
            1u32..6,
            prop_oneof![Just(LimitFrom::First), Just(LimitFrom::Last)],
        )
            .prop_map(|(count, from)| Limit { count, from }),
    );
    index().prop_flat_map(move |index| {
        (bound(&index), bound(&index), limit.clone()).prop_map(move |(start, end, limit)| {
            QueryParams {
                index: index.clone(),
                start,
                end,
                limit,
            }
        })
    })
}

fn path(text: &str) -> Path {
    Path::parse(text).expect("valid test path")
}

fn key(name: &str) -> Key {
    Key::new(name).expect("valid test key")
}

// ---- building nodes from generated data ----

fn to_priority(priority: &GenPriority) -> Priority {
    match priority {
        GenPriority::None => Priority::None,
        GenPriority::Number(n) => Priority::Number(*n),
        GenPriority::String(s) => Priority::String(Arc::from(*s)),
    }
}

fn to_node(value: &GenValue) -> Node {
    match value {
        GenValue::Bool(b) => Node::leaf(Leaf::Bool(*b)),
        GenValue::Number(n) => Node::leaf(Leaf::Number(*n)),
        GenValue::String(s) => Node::leaf(Leaf::String(Arc::from(*s))),
        GenValue::Object(children) => children.iter().fold(Node::empty(), |node, (name, child)| {
            node.with_child(&key(name), to_node(child))
        }),
    }
}

fn to_child_node(child: &GenChild) -> Node {
    to_node(&child.value).with_priority(to_priority(&child.priority))
}

// ---- the reference order, written from the definitions in §9 ----

/// Name order: 32-bit integer-like names (leading zeros allowed) first by value then length, then UTF-16.
fn ref_name_cmp(a: &str, b: &str) -> Ordering {
    fn integer(s: &str) -> Option<i64> {
        let digits = s.strip_prefix('-').unwrap_or(s);
        let significant = digits.trim_start_matches('0');
        let ok = !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && significant.len() <= 10;
        let magnitude: i64 = if !ok {
            return None;
        } else if significant.is_empty() {
            0
        } else {
            significant.parse().ok()?
        };
        let value = if s.starts_with('-') {
            -magnitude
        } else {
            magnitude
        };
        (i64::from(i32::MIN)..=i64::from(i32::MAX))
            .contains(&value)
            .then_some(value)
    }
    match (integer(a), integer(b)) {
        (Some(x), Some(y)) => x.cmp(&y).then(a.len().cmp(&b.len())),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a
            .encode_utf16()
            .collect::<Vec<_>>()
            .cmp(&b.encode_utf16().collect::<Vec<_>>()),
    }
}

/// A value reduced to (type tier, number, UTF-16 units); compared lexicographically.
#[derive(Clone, Debug)]
struct RefValue(u8, f64, Vec<u16>);

fn ref_value_cmp(a: &RefValue, b: &RefValue) -> Ordering {
    a.0.cmp(&b.0)
        .then(a.1.partial_cmp(&b.1).unwrap_or(Ordering::Equal))
        .then(a.2.cmp(&b.2))
}

fn ref_of_value(value: Option<&GenValue>) -> RefValue {
    match value {
        None => RefValue(0, 0.0, vec![]),
        Some(GenValue::Bool(b)) => RefValue(1, if *b { 1.0 } else { 0.0 }, vec![]),
        Some(GenValue::Number(n)) => RefValue(2, *n, vec![]),
        Some(GenValue::String(s)) => RefValue(3, 0.0, s.encode_utf16().collect()),
        Some(GenValue::Object(_)) => RefValue(4, 0.0, vec![]),
    }
}

fn ref_of_bound(value: &BoundValue) -> RefValue {
    match value {
        BoundValue::Null => RefValue(0, 0.0, vec![]),
        BoundValue::Bool(b) => RefValue(1, if *b { 1.0 } else { 0.0 }, vec![]),
        BoundValue::Number(n) => RefValue(2, n.get(), vec![]),
        BoundValue::String(s) => RefValue(3, 0.0, s.encode_utf16().collect()),
    }
}

fn lookup<'a>(value: &'a GenValue, segments: &[&str]) -> Option<&'a GenValue> {
    match segments.split_first() {
        None => Some(value),
        Some((first, rest)) => match value {
            GenValue::Object(children) => {
                children.get(*first).and_then(|child| lookup(child, rest))
            }
            _ => None,
        },
    }
}

fn ref_index_value(index: &Index, child: &GenChild) -> RefValue {
    match index {
        Index::Key => RefValue(0, 0.0, vec![]),
        Index::Priority => match &child.priority {
            GenPriority::None => RefValue(0, 0.0, vec![]),
            GenPriority::Number(n) => RefValue(2, *n, vec![]),
            GenPriority::String(s) => RefValue(3, 0.0, s.encode_utf16().collect()),
        },
        Index::Value => ref_of_value(Some(&child.value)),
        Index::Child(path) => {
            let segments: Vec<&str> = path.keys().iter().map(Key::as_str).collect();
            ref_of_value(lookup(&child.value, &segments))
        }
    }
}

/// How a child's key compares with a bound's name (sentinels are infinitely small / large).
fn ref_name_vs(key: &str, name: &BoundName) -> Ordering {
    match name {
        BoundName::Min => Ordering::Greater,
        BoundName::Max => Ordering::Less,
        BoundName::Name(n) => ref_name_cmp(key, n),
    }
}

/// How the child (key, child) compares with the post of `bound`.
fn ref_vs_bound(index: &Index, key: &str, child: &GenChild, bound: &Bound) -> Ordering {
    match (index, &bound.value) {
        (Index::Key, BoundValue::String(s)) if &**s == "[MIN_NAME]" => Ordering::Greater,
        (Index::Key, BoundValue::String(s)) if &**s == "[MAX_NAME]" => Ordering::Less,
        (Index::Key, BoundValue::String(s)) => ref_name_cmp(key, s),
        (Index::Key, _) => unreachable!("generator only makes string key bounds"),
        _ => ref_value_cmp(&ref_index_value(index, child), &ref_of_bound(&bound.value))
            .then_with(|| ref_name_vs(key, &bound.name)),
    }
}

fn reference_apply(
    q: &QueryParams,
    children: &BTreeMap<&'static str, GenChild>,
) -> Vec<&'static str> {
    let mut kept: Vec<(&'static str, &GenChild)> = children
        .iter()
        .map(|(k, c)| (*k, c))
        .filter(|(k, c)| {
            let after_start = q.start.as_ref().is_none_or(|b| {
                let ord = ref_vs_bound(&q.index, k, c, b);
                ord == Ordering::Greater || (ord == Ordering::Equal && b.inclusive)
            });
            let before_end = q.end.as_ref().is_none_or(|b| {
                let ord = ref_vs_bound(&q.index, k, c, b);
                ord == Ordering::Less || (ord == Ordering::Equal && b.inclusive)
            });
            after_start && before_end
        })
        .collect();
    kept.sort_by(|(ka, ca), (kb, cb)| {
        ref_value_cmp(
            &ref_index_value(&q.index, ca),
            &ref_index_value(&q.index, cb),
        )
        .then(ref_name_cmp(ka, kb))
    });
    let mut names: Vec<&'static str> = kept.into_iter().map(|(k, _)| k).collect();
    if let Some(limit) = &q.limit {
        let count = limit.count as usize;
        if names.len() > count {
            names = match limit.from {
                LimitFrom::First => names[..count].to_vec(),
                LimitFrom::Last => names[names.len() - count..].to_vec(),
            };
        }
    }
    names
}

/// The wire form of generated params, to check that parsing reproduces them.
fn to_wire(q: &QueryParams) -> Value {
    let mut out = serde_json::Map::new();
    let mut put_bound = |bound: &Option<Bound>, value: &str, name: &str, inclusive: &str| {
        if let Some(b) = bound {
            out.insert(value.into(), b.value.to_json());
            if let BoundName::Name(n) = &b.name {
                out.insert(name.into(), json!(&**n));
            } else if b.name == BoundName::Max && name == "sn" {
                out.insert(name.into(), json!("[MAX_NAME]"));
            } else if b.name == BoundName::Min && name == "en" {
                out.insert(name.into(), json!("[MIN_NAME]"));
            }
            out.insert(inclusive.into(), json!(b.inclusive));
        }
    };
    put_bound(&q.start, "sp", "sn", "sin");
    put_bound(&q.end, "ep", "en", "ein");
    if let Some(limit) = &q.limit {
        out.insert("l".into(), json!(limit.count));
        out.insert(
            "vf".into(),
            json!(if limit.from == LimitFrom::First {
                "l"
            } else {
                "r"
            }),
        );
    }
    match &q.index {
        Index::Priority => {}
        Index::Key => {
            out.insert("i".into(), json!(".key"));
        }
        Index::Value => {
            out.insert("i".into(), json!(".value"));
        }
        Index::Child(p) => {
            let text: Vec<&str> = p.keys().iter().map(Key::as_str).collect();
            out.insert("i".into(), json!(text.join("/")));
        }
    }
    Value::Object(out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn apply_matches_reference((children, own_priority) in tree(), q in query()) {
        let node = children
            .iter()
            .fold(Node::empty(), |node, (name, child)| node.with_child(&key(name), to_child_node(child)))
            .with_priority(to_priority(&own_priority));
        let result = q.apply(&node);
        if !q.is_filtered() {
            // Unfiltered queries hand back the node itself, priority included.
            prop_assert!(result.ptr_eq(&node));
            return Ok(());
        }
        let expected_names = reference_apply(&q, &children);
        let expected = expected_names
            .iter()
            .fold(Node::empty(), |acc, name| acc.with_child(&key(name), to_child_node(&children[name])));
        prop_assert_eq!(&result, &expected, "query {:?}", q);
        prop_assert_eq!(result.priority(), &Priority::None);

        // The window order agrees with the reference order too.
        let mut ordered: Vec<_> = result.children().collect();
        ordered.sort_by(|a, b| q.compare_children((&a.0, &a.1), (&b.0, &b.1)));
        let ordered: Vec<&str> = ordered.iter().map(|(k, _)| k.as_str()).collect();
        prop_assert_eq!(ordered, expected_names.clone());

        // in_range agrees with the reference for every child (without the limit).
        let unlimited = QueryParams { limit: None, ..q.clone() };
        let mut in_range: Vec<&str> =
            children.keys().copied().filter(|k| q.in_range(&key(k), &to_child_node(&children[k]))).collect();
        let mut reference_in_range = reference_apply(&unlimited, &children);
        in_range.sort_unstable();
        reference_in_range.sort_unstable();
        prop_assert_eq!(in_range, reference_in_range);

        // Unfiltered queries hand back the node itself.
        let plain = QueryParams { index: q.index.clone(), ..QueryParams::default() };
        prop_assert!(plain.apply(&node).ptr_eq(&node));
    }

    #[test]
    fn wire_round_trip(q in query()) {
        let mut expected = q.clone();
        if expected.index == Index::Key {
            // The key is the whole post: tie-breakers are dropped on parsing.
            for (bound, default) in [(&mut expected.start, BoundName::Min), (&mut expected.end, BoundName::Max)] {
                if let Some(b) = bound {
                    b.name = default;
                }
            }
        }
        let wire = to_wire(&q);
        prop_assert_eq!(QueryParams::from_wire(&wire), Ok(expected), "wire {}", wire);
    }
}

#[test]
fn reference_name_order_sanity() {
    let mut names = vec![
        "b",
        "a",
        "B",
        "2147483648",
        "10",
        "007",
        "9",
        "00",
        "0",
        "-1",
        "😀",
        "｡",
    ];
    names.sort_by(|a, b| ref_name_cmp(a, b));
    assert_eq!(
        names,
        [
            "-1",
            "0",
            "00",
            "007",
            "9",
            "10",
            "2147483648",
            "B",
            "a",
            "b",
            "😀",
            "｡"
        ]
    );
    let _ = OrderedF64::new(1.0);
}
