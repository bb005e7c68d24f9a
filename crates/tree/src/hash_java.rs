//! The node hash as the Java clients compute it: the Android SDK, and the Admin SDK for Java,
//! whose realtime client is the Android one. Its canonical text is that of spec §10 with two
//! differences from the JS client's, which [`crate::hash`] reproduces:
//!
//! * numbers are printed from their exact IEEE-754 bits, where the JS client reconstructs the
//!   bits arithmetically and gets some wrong (just below some powers of two, so 2^53−1 prints
//!   as 2^53; normals below 2^-971);
//! * a key is integer-like only when it is at most [`JAVA_MAX_INTEGER_KEY_CHARS`] characters
//!   long, so a key padded with more leading zeros (`000000000007`) sorts among the other keys
//!   rather than first, which changes the order of the children in the text.
//!
//! A compare-and-set from a Java client carries this form, so the server accepts either form.
//! They differ only when a subtree holds such a number or key: [`java_hash`] finds out with a
//! walk that hashes nothing, then hashes only the objects on the paths down to those values,
//! reusing the (cached) JS hash of every other subtree. It runs only when a hash a client sent
//! is not the JS form, never on the path of a matching compare-and-set.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

#[cfg(test)]
use crate::digest::push_priority_prefix;
use crate::digest::{client_double_bits, leaf_text, object_text_hash, sha1_text};
use crate::key::{compare_utf16, integer_like, Key};
use crate::leaf::Leaf;
use crate::node::Node;
use crate::packed::{self, Value};
use crate::priority::Priority;

impl Node {
    /// Whether `hash` is this node's hash as a client computes it: the JS client's form
    /// ([`Node::hash`], cached) or else the Java client's, which differs only for some numbers
    /// and keys and is computed only when the first does not match.
    pub fn hash_matches(&self, hash: &str) -> bool {
        *self.hash() == *hash || java_hash(self).is_some_and(|java| *java == *hash)
    }

    /// The node hash as the Java (Android) client computes it; equal to [`Node::hash`] unless
    /// the subtree holds a number or key the two clients hash differently.
    pub fn java_hash(&self) -> Arc<str> {
        java_hash(self).unwrap_or_else(|| self.hash())
    }
}

/// The longest key the Java client reads as an integer (`Utilities.tryParseInt` gives up on
/// longer text, whatever its value). The JS client allows any number of leading zeros.
pub(crate) const JAVA_MAX_INTEGER_KEY_CHARS: usize = 11;

/// The Java client prints a number from its exact bits.
fn exact_bits(v: f64) -> u64 {
    v.to_bits()
}

/// Whether the two clients print `v` differently.
fn number_diverges(v: f64) -> bool {
    client_double_bits(v) != v.to_bits()
}

fn priority_diverges(priority: &Priority) -> bool {
    matches!(priority, Priority::Number(n) if number_diverges(*n))
}

fn leaf_diverges(value: &Leaf) -> bool {
    matches!(value, Leaf::Number(n) if number_diverges(*n))
}

/// Whether the JS client reads `key` as an integer and the Java client does not. Keys are
/// ASCII digits (and a sign) when either reads them as integers, so bytes count characters.
fn key_diverges(key: &str) -> bool {
    key.len() > JAVA_MAX_INTEGER_KEY_CHARS && integer_like(key).is_some()
}

/// The Java client's integer reading of a key: the JS one, for keys short enough.
fn java_integer(key: &Key) -> Option<i32> {
    key.integer_value()
        .filter(|_| key.as_str().len() <= JAVA_MAX_INTEGER_KEY_CHARS)
}

/// The Java client's key order: integers first, by value then length, then UTF-16 order.
pub(crate) fn compare_java_keys(a: &Key, b: &Key) -> Ordering {
    match (java_integer(a), java_integer(b)) {
        (Some(x), Some(y)) => x
            .cmp(&y)
            .then_with(|| a.as_str().len().cmp(&b.as_str().len()))
            .then_with(|| a.as_str().cmp(b.as_str())),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => compare_utf16(a.as_str(), b.as_str()),
    }
}

/// Whether a packed object (no priorities anywhere) holds a number or key the clients hash
/// differently, read from its bytes without decoding a child.
fn packed_diverges(bytes: &[u8]) -> bool {
    let mut diverges = false;
    packed::for_each(bytes, |key, value| {
        diverges = key_diverges(key)
            || match value {
                Value::Number(n) => number_diverges(n),
                Value::Object(inner) => packed_diverges(inner),
                Value::Bool(_) | Value::Str(_) => false,
            };
        !diverges
    });
    diverges
}

/// The hash of `node` as the Java client computes it, or `None` when it is the JS form
/// ([`Node::hash`]) because nothing in the subtree is hashed differently.
pub(crate) fn java_hash(node: &Node) -> Option<Arc<str>> {
    if let Some(value) = node.leaf_value() {
        let priority = node.priority();
        return (leaf_diverges(value) || priority_diverges(priority))
            .then(|| sha1_text(&leaf_text(value, priority, exact_bits)));
    }
    if node
        .packed()
        .is_some_and(|packed| !packed_diverges(packed.bytes()))
    {
        return None;
    }
    // First pass: which children hash differently. `alternates[i]` is child i's Java hash
    // when it differs; the vector stays unallocated while none does.
    let mut alternates: Vec<Option<Arc<str>>> = Vec::new();
    let mut keys_diverge = false;
    for (i, (key, child)) in node.children().enumerate() {
        keys_diverge |= key_diverges(key.as_str());
        if let Some(alternate) = java_hash(&child) {
            alternates.resize(i, None);
            alternates.push(Some(alternate));
        }
    }
    if alternates.is_empty() && !keys_diverge && !priority_diverges(node.priority()) {
        return None;
    }
    let mut ordered: Vec<(Cow<'_, Key>, Cow<'_, Node>, Arc<str>)> = node
        .children()
        .enumerate()
        .map(|(i, (key, child))| {
            let hash = alternates
                .get(i)
                .cloned()
                .flatten()
                .unwrap_or_else(|| child.hash());
            (key, child, hash)
        })
        .collect();
    // As the client does: priority order, ties by key, when some child has a priority; key
    // order otherwise (which is the map's order unless some key reads differently).
    let by_priority = ordered
        .iter()
        .any(|(_, child, _)| !child.priority().is_none());
    if by_priority || keys_diverge {
        ordered.sort_by(|a, b| {
            a.1.priority()
                .cmp(b.1.priority())
                .then_with(|| compare_java_keys(&a.0, &b.0))
        });
    }
    Some(object_text_hash(
        node.priority(),
        exact_bits,
        ordered.iter().map(|(key, _, hash)| (key.as_str(), hash)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value as Json};

    fn node(v: Json) -> Node {
        Node::from_json(&v).expect("valid test data")
    }

    /// The Java hash built the plain way: the whole text, every child hashed again, children
    /// always sorted, as the Java client's `getHashRepresentation` does.
    fn naive_java_hash(node: &Node) -> String {
        if let Some(value) = node.leaf_value() {
            return sha1_text(&leaf_text(value, node.priority(), exact_bits)).to_string();
        }
        let mut children: Vec<(Key, Node)> = node
            .children()
            .map(|(k, c)| (k.into_owned(), c.into_owned()))
            .collect();
        children.sort_by(|a, b| {
            a.1.priority()
                .cmp(b.1.priority())
                .then_with(|| compare_java_keys(&a.0, &b.0))
        });
        let mut text = String::new();
        push_priority_prefix(&mut text, node.priority(), exact_bits);
        for (key, child) in &children {
            let hash = naive_java_hash(child);
            if !hash.is_empty() {
                text.push(':');
                text.push_str(key.as_str());
                text.push(':');
                text.push_str(&hash);
            }
        }
        if text.is_empty() {
            String::new()
        } else {
            sha1_text(&text).to_string()
        }
    }

    #[test]
    fn exact_bits_only_where_the_js_reconstruction_is_wrong() {
        assert!(number_diverges(9007199254740991.0));
        assert!(number_diverges(281474976710655.0));
        assert!(number_diverges(3.9999999999999996));
        assert!(number_diverges(1.5e-300));
        for v in [
            0.0,
            1.0,
            12345.0,
            0.1,
            -2.5,
            9007199254740992.0,
            1e21,
            f64::MAX,
        ] {
            assert!(!number_diverges(v), "{v}");
        }
    }

    #[test]
    fn java_integer_keys_stop_at_eleven_characters() {
        assert!(!key_diverges("00000000007"));
        assert!(key_diverges("000000000007"));
        assert!(key_diverges("-00000000007"));
        assert!(!key_diverges("-0000000007"));
        assert!(!key_diverges("2147483648000"));
        assert!(!key_diverges("abcdefghijkl"));
        let long = Key::new("000000000007").expect("valid key");
        let five = Key::new("5").expect("valid key");
        let b = Key::new("B").expect("valid key");
        assert_eq!(long.cmp(&five), Ordering::Greater);
        assert_eq!(compare_java_keys(&long, &five), Ordering::Greater);
        assert_eq!(long.cmp(&b), Ordering::Less);
        // For Java it is a string: "0…" < "B".
        assert_eq!(compare_java_keys(&long, &b), Ordering::Less);
        let one = Key::new("000000000001").expect("valid key");
        assert_eq!(one.cmp(&five), Ordering::Less);
        assert_eq!(compare_java_keys(&one, &five), Ordering::Greater);
    }

    #[test]
    fn ordinary_data_has_no_second_form() {
        for v in [
            json!(1),
            json!("x"),
            json!(true),
            json!({"a": 1, "b": {"c": [1, 2, 3]}, "d": {".value": 3, ".priority": 2}}),
            json!({".priority": "p", "k": 9007199254740992u64}),
        ] {
            let n = node(v.clone());
            assert_eq!(java_hash(&n), None, "{v}");
            assert_eq!(*n.hash(), naive_java_hash(&n), "{v}");
        }
        assert_eq!(java_hash(&Node::empty()), None);
    }

    #[test]
    fn the_numbers_of_the_issue() {
        // The JS texts are what the JS client's routine prints (2^48−1 gets the exponent of
        // 2^48 and a negative mantissa); the Java ones are the exact bits.
        for (v, js, java) in [
            (9007199254740991.0, "4340000000000000", "433fffffffffffff"),
            (281474976710655.0, "42fffffffffffff0", "42efffffffffffe0"),
            (3.9999999999999996, "4010000000000000", "400fffffffffffff"),
        ] {
            let n = Node::leaf(Leaf::Number(v));
            assert_eq!(&*n.hash(), &*sha1_text(&format!("number:{js}")), "{v}");
            let alternate = java_hash(&n).expect("a second form");
            assert_eq!(&*alternate, &*sha1_text(&format!("number:{java}")), "{v}");
            assert!(n.hash_matches(&alternate));
            assert!(n.hash_matches(&n.hash()));
            assert!(!n.hash_matches(&Node::leaf(Leaf::Number(12345.0)).hash()));
        }
    }

    /// Hashes printed by the Java client itself (`NodeUtilities.NodeFromJSON(…).getHash()` of
    /// the Admin SDK for Java 9.10.0, on the JSON the server sends).
    #[test]
    fn java_client_vectors() {
        let vectors: &[(Json, &str)] = &[
            (json!(9007199254740991u64), "zP1cy9AKj8mOJfzxsijijNJ8QdY="),
            (json!(281474976710655u64), "6+qUJVTNnLle4vjSTXZoA5mieF0="),
            (json!(3.9999999999999996), "2eCNgYLHgwmBI2kB51qgoNrEVIQ="),
            (json!(12345), "Dlf4ot4Qej2fpsa9yUMkNSdwbYw="),
            (json!(1.5e-300), "A+jiaYoMEabQ/tk7WVGNrloI9cE="),
            (json!(1e20), "FaOVJq8m9xhBagpNCrJ1U1M1tGk="),
            (
                json!({"v": 9007199254740991u64}),
                "PydbCFXjyOaoBNoxE7Qgca2C630=",
            ),
            (
                json!({".value": 1, ".priority": 9007199254740991u64}),
                "xsvlThQhwDJuZHRK5o82/48DD8Y=",
            ),
            (
                json!({".priority": 3.9999999999999996, "k": 1}),
                "qJscjtRgUseSucKvg9xjCt4dPBg=",
            ),
            (
                json!({"000000000001": "a", "5": "b", "B": "c"}),
                "QZToVJ63Q0ZM4splIFqyYpXWXrE=",
            ),
            (
                json!({"a": {"x": 9007199254740991u64, "y": 1}, "b": {"z": 2}}),
                "an3ohA44MYx9pR8GZZw1rCMYYHo=",
            ),
            (
                json!({"00000000007": 1, "7": 2, "-0000000007": 3, "-00000000007": 4}),
                "4b8LWCCmIgxSpZX67FdWZU63wCo=",
            ),
            (
                json!({"x": {".value": "A", ".priority": 10}, "y": {".value": "B", ".priority": "aa"}, "z": "C"}),
                "HEczgxEDQZl5FeQDqp7Lm1MfVR0=",
            ),
        ];
        for (value, hash) in vectors {
            let n = node(value.clone());
            assert_eq!(&*n.java_hash(), *hash, "{value}");
            assert!(n.hash_matches(hash), "{value}");
            let unpacked = crate::update::without_packing(|| node(value.clone()));
            assert_eq!(&*unpacked.java_hash(), *hash, "{value}");
        }
    }

    #[test]
    fn only_divergent_paths_change() {
        let n = node(json!({"a": {"x": 9007199254740991u64, "y": 1}, "b": {"z": 2}}));
        let alternate = java_hash(&n).expect("a second form");
        assert_ne!(alternate, n.hash());
        assert_eq!(*alternate, naive_java_hash(&n));
        // The untouched sibling keeps its JS hash inside the text.
        let b = n.child(&Key::new("b").expect("valid key"));
        assert_eq!(java_hash(&b), None);
    }

    #[test]
    fn priorities_and_key_order() {
        for v in [
            json!({"k": {".value": 1, ".priority": 9007199254740991u64}}),
            json!({".priority": 3.9999999999999996, "k": 1}),
            json!({"000000000001": "a", "5": "b", "B": "c"}),
            json!({"000000000001": {".value": "a", ".priority": 1}, "5": {".value": "b", ".priority": 1}}),
        ] {
            let n = node(v.clone());
            let alternate = java_hash(&n).expect("a second form");
            assert_ne!(alternate, n.hash(), "{v}");
            assert_eq!(*alternate, naive_java_hash(&n), "{v}");
        }
        // A lone long key sorts the same way for both clients: the same hash, computed twice.
        let n = node(json!({"000000000001": "a"}));
        assert_eq!(java_hash(&n), Some(n.hash()));
    }

    #[test]
    fn packed_and_unpacked_agree() {
        let v = json!({"a": 1, "b": {"c": 281474976710655u64}});
        let packed = node(v.clone());
        assert!(packed.packed().is_some());
        let unpacked = crate::update::without_packing(|| node(v));
        assert!(unpacked.packed().is_none());
        assert_eq!(java_hash(&packed), java_hash(&unpacked));
        assert_eq!(
            java_hash(&packed).as_deref(),
            Some(naive_java_hash(&packed).as_str())
        );
    }

    /// Random trees whose leaves mix ordinary numbers with those the clients print
    /// differently, keys with long leading zeros and priorities.
    fn arbitrary_tree() -> impl proptest::strategy::Strategy<Value = Json> {
        use proptest::prelude::*;
        let number = prop_oneof![
            Just(json!(9007199254740991u64)),
            Just(json!(281474976710655u64)),
            Just(json!(3.9999999999999996)),
            Just(json!(1.5e-300)),
            (-1000i64..1000).prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
        ];
        let leaf = prop_oneof![
            number.clone(),
            "[a-c]{0,3}".prop_map(Json::String),
            any::<bool>().prop_map(Json::Bool),
        ];
        let priority = prop_oneof![
            Just(Json::Null),
            number,
            "[a-b]{1,2}".prop_map(Json::String)
        ];
        let key = prop_oneof!["[a-cB]{1,2}", "[0-9]{1,3}", "0{9,11}[1-9]", "-0{10}[1-9]",];
        let with_priority = move |value: BoxedStrategy<Json>| {
            (value, priority.clone()).prop_map(|(value, priority)| {
                if priority.is_null() {
                    value
                } else if let Json::Object(mut map) = value {
                    map.insert(".priority".into(), priority);
                    Json::Object(map)
                } else {
                    json!({".value": value, ".priority": priority})
                }
            })
        };
        let leaf = with_priority.clone()(leaf.boxed());
        leaf.prop_recursive(4, 48, 6, move |inner| {
            with_priority(
                proptest::collection::btree_map(key.clone(), inner, 1..6)
                    .prop_map(|m| Json::Object(m.into_iter().collect()))
                    .boxed(),
            )
        })
    }

    proptest::proptest! {
        /// The lazy Java hash equals the plain one on every tree, packed or not, and is `None`
        /// only where the JS form is the Java form.
        #[test]
        fn lazy_equals_naive(v in arbitrary_tree()) {
            let n = node(v.clone());
            let expected = naive_java_hash(&n);
            let lazy = java_hash(&n);
            let js = n.hash();
            proptest::prop_assert_eq!(lazy.as_deref().unwrap_or(&js), expected.as_str());
            let unpacked = crate::update::without_packing(|| node(v));
            proptest::prop_assert_eq!(java_hash(&unpacked), lazy);
            proptest::prop_assert!(n.hash_matches(&expected));
            proptest::prop_assert!(n.hash_matches(&n.hash()));
        }
    }
}
