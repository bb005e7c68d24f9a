//! Building an object from a stream of children in key order, straight into its stored form.
//!
//! A decoder (the store's snapshot reader) that made a [`Node`] of every child and then an
//! object of those nodes would copy each record several times on its way to the packed bytes
//! it ends up in: a string into its leaf, the leaves into a packed record, the record into a
//! chunk of its collection. [`ObjectBuilder`] instead encodes each child as it arrives, while
//! every child so far packs, into the bytes of the packed object (or of the chunked
//! collection) it will become; a nested object that packs is appended to its parent's bytes
//! without being made a node. A child over the packing bound that is in chunks itself is kept
//! aside, to take its place among the chunks. The first child that does not pack otherwise (a
//! priority in it, or a large map of nodes) turns the builder into a list of nodes, so the
//! result is always the node that [`Node::from_children`] makes of the same children: same
//! form, same hash, same JSON.

use crate::chunk_cutter::Cutter;
use crate::estimate::{number_bytes, priority_bytes, ENTRY_OVERHEAD};
use crate::key::Key;
use crate::leaf::Leaf;
use crate::node::{Node, ObjectData, Repr};
use crate::packed::{self, Packed, HEADER_ROOM, PACK_MAX_BYTES};
use crate::packing;
use crate::priority::{normalize_zero, Priority};
use crate::update::packing_enabled;

/// An object under construction from children given in strictly ascending key order. Reusable:
/// [`ObjectBuilder::finish`] and [`ObjectBuilder::push_object`] leave the builder empty with
/// its buffer's capacity, so a decoder keeps one per nesting level.
pub struct ObjectBuilder {
    /// [`HEADER_ROOM`] bytes for the header of the packed object, then the children encoded as
    /// packed entries while all of them pack.
    entries: Vec<u8>,
    /// The chunks cut so far, while every child packs or is a collection in chunks itself (a
    /// large child): each large child cuts the entries before it out of `entries`.
    cut: Cutter,
    /// The children as nodes, once one did not pack (`entries` and `cut` are then empty).
    nodes: Vec<(Key, Node)>,
    /// Whether a child did not pack, so that the children are in `nodes`.
    unpacked: bool,
    count: usize,
    /// The estimated JSON size of the children's entries (without braces and priority).
    bytes: usize,
}

impl Default for ObjectBuilder {
    fn default() -> ObjectBuilder {
        ObjectBuilder::new()
    }
}

impl ObjectBuilder {
    pub fn new() -> ObjectBuilder {
        ObjectBuilder {
            entries: vec![0; HEADER_ROOM],
            cut: Cutter::default(),
            nodes: Vec::new(),
            unpacked: false,
            count: 0,
            bytes: 0,
        }
    }

    /// The number of children added.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds a boolean child.
    pub fn push_bool(&mut self, key: &Key, value: bool) {
        if self.packing() {
            packed::put_key(&mut self.entries, key.as_str());
            packed::put_bool(&mut self.entries, value);
            self.added(key, if value { 4 } else { 5 });
        } else {
            self.push_node(key, Node::leaf(Leaf::Bool(value)));
        }
    }

    /// Adds a number child; a number that is not finite is left out, as [`Node::leaf`] makes
    /// it the empty node.
    pub fn push_number(&mut self, key: &Key, value: f64) {
        if !value.is_finite() {
            return;
        }
        let value = normalize_zero(value);
        if self.packing() {
            packed::put_key(&mut self.entries, key.as_str());
            packed::put_number(&mut self.entries, value);
            self.added(key, number_bytes(value));
        } else {
            self.push_node(key, Node::leaf(Leaf::Number(value)));
        }
    }

    /// Adds a string child, copied once into the object's bytes.
    pub fn push_str(&mut self, key: &Key, value: &str) {
        if self.packing() {
            packed::put_key(&mut self.entries, key.as_str());
            packed::put_string(&mut self.entries, value);
            self.added(key, value.len() + 2);
        } else {
            self.push_node(key, Node::leaf(Leaf::String(value.into())));
        }
    }

    /// Adds the object built in `child` (without priority), leaving `child` empty. While both
    /// pack, the child's bytes are appended to this object's without a node of its own.
    pub fn push_object(&mut self, key: &Key, child: &mut ObjectBuilder) {
        if child.count == 0 {
            return;
        }
        let estimate = 2 + child.bytes;
        if self.packing() && child.packing() && estimate <= PACK_MAX_BYTES {
            packed::put_key(&mut self.entries, key.as_str());
            packed::put_object_in_place(
                &mut self.entries,
                &mut child.entries,
                estimate,
                child.count,
            );
            child.clear();
            self.added(key, estimate);
        } else {
            let node = child.finish(Priority::None);
            self.push_node(key, node);
        }
    }

    /// Adds any child; the empty node is left out.
    pub fn push_node(&mut self, key: &Key, child: Node) {
        if child.is_empty() {
            return;
        }
        let estimate = child.estimated_bytes();
        if self.packing() {
            if let Repr::Chunked(large) = &child.0 {
                let pending = self.pending();
                if self.cut.cut(&mut self.entries, pending).is_some() {
                    self.entries.truncate(HEADER_ROOM);
                    self.cut.push_large(key, large.clone());
                    self.added(key, estimate);
                    return;
                }
            }
            let start = self.entries.len();
            if packing::put_entry(&mut self.entries, key, &child).is_some() {
                self.added(key, estimate);
                return;
            }
            self.entries.truncate(start);
        }
        self.unpack();
        self.nodes.push((key.clone(), child));
        self.count += 1;
        self.bytes += entry_bytes(key, estimate);
    }

    /// The object of the children added, with `priority`: the node [`Node::from_children`]
    /// makes of them. Leaves the builder empty.
    pub fn finish(&mut self, priority: Priority) -> Node {
        let priority = priority.normalized();
        if self.count == 0 {
            self.clear();
            return Node::empty();
        }
        let bytes = 2 + priority_bytes(&priority) + self.bytes;
        if self.packing() && priority.is_none() {
            // Large children are over the bound: with any, the object is too.
            let node = if bytes <= PACK_MAX_BYTES && self.cut.is_empty() {
                let end = self.entries.len();
                Some(Node::from_packed(Packed::from_entries_in_place(
                    &mut self.entries,
                    HEADER_ROOM,
                    end,
                    bytes,
                    self.count,
                )))
            } else {
                let pending = self.pending();
                self.cut
                    .cut(&mut self.entries, pending)
                    .and_then(|()| self.cut.take_chunked(bytes).map(Node::from_chunked))
            };
            if let Some(node) = node {
                self.clear();
                return node;
            }
        }
        self.unpack();
        let nodes = std::mem::take(&mut self.nodes);
        self.clear();
        ObjectData::build_from_entries(nodes, priority)
    }

    fn packing(&self) -> bool {
        !self.unpacked && packing_enabled()
    }

    /// The number of children encoded in `entries`, not yet cut.
    fn pending(&self) -> usize {
        self.count - self.cut.len()
    }

    fn added(&mut self, key: &Key, estimate: usize) {
        self.count += 1;
        self.bytes += entry_bytes(key, estimate);
    }

    /// Turns the packed entries and the large children into nodes, in key order, for a
    /// child that does not pack.
    fn unpack(&mut self) {
        if !self.unpacked {
            self.unpacked = true;
            for (first, part) in self.cut.parts() {
                self.nodes.extend(packing::part_entries(first, part));
            }
            // Empty when packing is off (tests), where every child came as a node.
            if self.entries.len() > HEADER_ROOM {
                let entries = &self.entries[HEADER_ROOM..];
                let packed: Packed = Packed::from_encoded(0, self.pending(), entries);
                self.nodes.extend(packed.entries());
            }
            self.cut.clear();
            self.entries.truncate(HEADER_ROOM);
        }
    }

    fn clear(&mut self) {
        self.entries.truncate(HEADER_ROOM);
        self.cut.clear();
        self.nodes.clear();
        self.unpacked = false;
        self.count = 0;
        self.bytes = 0;
    }
}

fn entry_bytes(key: &Key, estimate: usize) -> usize {
    key.as_str().len() + ENTRY_OVERHEAD + estimate
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Map, Value};

    /// Feeds `node`'s children to a builder the way a decoder meets them: leaves and objects
    /// without priority through the typed calls (objects in a nested builder), the rest as
    /// nodes.
    fn rebuild(node: &Node) -> Node {
        let mut builder = ObjectBuilder::new();
        fill(&mut builder, node);
        builder.finish(node.priority().clone())
    }

    fn fill(builder: &mut ObjectBuilder, node: &Node) {
        for (key, child) in node.children() {
            match (child.leaf_value(), child.priority().is_none()) {
                (Some(Leaf::Bool(b)), true) => builder.push_bool(&key, *b),
                (Some(Leaf::Number(n)), true) => builder.push_number(&key, *n),
                (Some(Leaf::String(s)), true) => builder.push_str(&key, s),
                (None, true) => {
                    let mut nested = ObjectBuilder::new();
                    fill(&mut nested, &child);
                    builder.push_object(&key, &mut nested);
                    assert!(nested.is_empty(), "push_object leaves the child empty");
                }
                _ => builder.push_node(&key, child.into_owned()),
            }
        }
    }

    /// The stored form of a node, which the builder must reproduce.
    fn form(node: &Node) -> &'static str {
        if node.packed().is_some() {
            "packed"
        } else if node.chunked().is_some() {
            "chunked"
        } else if node.is_leaf() {
            "leaf"
        } else if node.is_empty() {
            "empty"
        } else {
            "object"
        }
    }

    fn assert_same(built: &Node, original: &Node) {
        assert_eq!(form(built), form(original));
        assert_eq!(built, original);
        assert_eq!(built.hash(), original.hash());
        assert_eq!(built.estimated_bytes(), original.estimated_bytes());
        assert_eq!(built.to_json(true), original.to_json(true));
        for (key, child) in original.children() {
            assert_eq!(form(&built.child(&key)), form(&child), "child {key}");
        }
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            (-3i64..3, 0u32..3).prop_map(|(m, k)| json!(m as f64 / 10f64.powi(k as i32))),
            "[a-z\"é]{0,8}".prop_map(Value::String),
            // Long strings take objects past the packing bound and into chunks.
            "[a-z]{1000,3000}".prop_map(Value::String),
            Just(Value::Null),
            (any::<i16>(), "[a-z]{0,3}").prop_map(|(v, p)| json!({".value": v, ".priority": p})),
        ];
        leaf.prop_recursive(4, 200, 40, |inner| {
            prop_oneof![
                (
                    proptest::collection::btree_map(
                        "[a-c]{1,3}|[0-9]{1,3}|-[1-9]",
                        inner.clone(),
                        0..40
                    ),
                    prop_oneof![3 => Just(Value::Null), 1 => any::<i16>().prop_map(|p| json!(p))],
                )
                    .prop_map(|(children, priority)| {
                        let mut map: Map<String, Value> = children.into_iter().collect();
                        if !priority.is_null() {
                            map.insert(".priority".into(), priority);
                        }
                        Value::Object(map)
                    }),
                proptest::collection::vec(inner, 0..40).prop_map(Value::Array),
            ]
        })
    }

    #[test]
    fn every_form_is_reproduced() {
        let record =
            |n: usize| json!({"text": "x".repeat(1000), "n": n, "ok": n.is_multiple_of(2)});
        let cases = [
            json!({"a": 1, "b": "two", "c": {"d": true}}),
            Value::Object((0..50).map(|n| (format!("m{n:03}"), record(n))).collect()),
            json!({"a": {".value": 1, ".priority": 2}, "b": 2}),
            json!({"a": {"x": "y".repeat(5000)}, "b": {"c": 1}}),
            json!({"a": -0.0, "b": 0.25, "c": 1e300, ".priority": "p"}),
        ];
        for value in cases {
            let original = Node::from_json(&value).expect("a valid value");
            assert_same(&rebuild(&original), &original);
        }
        // Records over the packing bound among small ones, first, between and last, one
        // beside another: parts of their own in a collection still in chunks.
        let large = |n: usize| json!({"text": "y".repeat(PACK_MAX_BYTES + n), "n": n});
        let mut records: Map<String, Value> =
            (0..50).map(|n| (format!("m{n:03}"), record(n))).collect();
        for at in ["a", "m010x", "m020x", "m020y", "z"] {
            records.insert(at.into(), large(at.len()));
        }
        let original = Node::from_json(&Value::Object(records)).expect("a valid value");
        let built = rebuild(&original);
        assert_eq!(form(&built), "chunked");
        assert_same(&built, &original);
        // With a priority on top, the same children become nodes, in key order.
        let prioritized = original.with_priority(Priority::Number(3.0));
        assert_same(&rebuild(&prioritized), &prioritized);
        assert_eq!(form(&prioritized), "object");
        let mut builder = ObjectBuilder::new();
        builder.push_number(&Key::new("a").expect("a key"), f64::NAN);
        assert!(builder.finish(Priority::None).is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the children, the builder makes the node `from_children` makes: the same
        /// form (packed, chunked, object), hash, size estimate and JSON; with packing off too.
        #[test]
        fn the_builder_makes_what_from_children_makes(value in value()) {
            // An object at the top, whatever was generated.
            let value = json!({"v": value, "w": 1});
            let original = Node::from_json(&value).expect("generated values are valid");
            assert_same(&rebuild(&original), &original);
            let plain = crate::update::without_packing(|| Node::from_json(&value))
                .expect("generated values are valid");
            let rebuilt = crate::update::without_packing(|| rebuild(&plain));
            assert_same(&rebuilt, &plain);
        }
    }
}
