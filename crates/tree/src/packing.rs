//! Nodes to and from the encoded forms of objects: packed (`packed`) and in chunks (`chunked`).
//!
//! Those two files keep objects as bytes and know nothing of nodes, so that a node can hold
//! them. Here a node becomes an entry of those bytes, when it can (no priority anywhere, and
//! an object only if it is packed itself), and an entry becomes a node again: a leaf, or a
//! packed object that copies the entry's bytes. Readers of whole objects that need no nodes
//! (JSON output, hashing) walk the bytes instead (`raw`, `digest`).

use std::ops::Bound;
use std::sync::Arc;

use crate::children::ChildMap;
use crate::chunked::{self, Chunked};
use crate::key::Key;
use crate::leaf::Leaf;
use crate::node::Node;
use crate::packed::{self, Packed, Value};

impl Packed {
    /// Packs `children` (at most [`PACK_MAX_BYTES`](packed::PACK_MAX_BYTES) estimated), or
    /// gives up when a child carries a priority or is an object that is not packed itself.
    pub(crate) fn encode(children: &ChildMap<Node>, estimate: usize) -> Option<Packed> {
        let mut out = Vec::with_capacity(estimate);
        packed::put_header(&mut out, estimate, children.len());
        for (key, child) in children.iter() {
            put_entry(&mut out, key, child)?;
        }
        Some(Packed::from_slice(&out))
    }

    /// The children as a map, to build an updated object from.
    pub(crate) fn child_map(&self) -> ChildMap<Node> {
        ChildMap::from_entries(self.entries())
    }
}

impl<H> Packed<H> {
    /// The child named `key`, decoded (found by [`Packed::child_value`]'s scan).
    pub(crate) fn get(&self, key: &Key) -> Option<Node> {
        self.child_value(key).map(value_node)
    }

    /// Every child, decoded, in key order.
    pub(crate) fn entries(&self) -> Vec<(Key, Node)> {
        let mut entries = Vec::with_capacity(self.len());
        packed::for_each(self.bytes(), |name, value| {
            entries.push((Key::new_unchecked(name), value_node(value)));
            true
        });
        entries
    }

    /// The children with keys between the bounds, decoded, in key order.
    pub(crate) fn range(&self, from: Bound<&Key>, to: Bound<&Key>) -> Vec<(Key, Node)> {
        let mut entries = self.entries();
        entries.retain(|(key, _)| packed::after(key, from) && packed::before(key, to));
        entries
    }
}

/// Appends one entry, `key` and its value; nothing useful when `child` cannot be packed (it
/// carries a priority or is an object that is not packed itself), which returns `None`.
pub(crate) fn put_entry(out: &mut Vec<u8>, key: &Key, child: &Node) -> Option<()> {
    packed::put_key(out, key.as_str());
    put_node(out, child)
}

/// Appends the value of `node`, or gives up as [`put_entry`] does.
fn put_node(out: &mut Vec<u8>, node: &Node) -> Option<()> {
    if !node.priority().is_none() {
        return None;
    }
    if let Some(leaf) = node.leaf_value() {
        match leaf {
            Leaf::Bool(b) => packed::put_bool(out, *b),
            Leaf::Number(n) => packed::put_number(out, *n),
            Leaf::String(text) => packed::put_string(out, text),
        }
        return Some(());
    }
    let packed = node.packed()?;
    packed::put_object(out, packed.bytes());
    Some(())
}

fn value_node(value: Value<'_>) -> Node {
    match value {
        Value::Bool(b) => Node::scalar(Leaf::Bool(b)),
        Value::Number(n) => Node::scalar(Leaf::Number(n)),
        Value::Str(s) => Node::scalar(Leaf::String(Arc::from(s))),
        Value::Object(bytes) => Node::from_packed(Packed::from_slice(bytes)),
    }
}

impl Chunked {
    /// `children` (in key order, `len` of them, `bytes` estimated) in chunks, or `None` when
    /// one of them cannot be packed.
    pub(crate) fn encode<'a>(
        children: impl Iterator<Item = (&'a Key, &'a Node)>,
        len: usize,
        bytes: usize,
    ) -> Option<Chunked> {
        let mut builder = chunked::Builder::new();
        for (key, child) in children {
            builder.push(key, |out| put_entry(out, key, child))?;
        }
        Some(builder.into_chunked(len, bytes))
    }

    pub(crate) fn get(&self, key: &Key) -> Option<Node> {
        self.chunk_for(key)?.1.packed().get(key)
    }

    /// A copy with child `key` set to `child` (removed when empty). `None` when `child` cannot
    /// be packed, or the chunk does not decode; the caller then holds the collection as nodes.
    /// The result may be empty (`len` 0).
    pub(crate) fn with_child(&self, key: &Key, child: &Node) -> Option<Chunked> {
        if child.is_empty() {
            return self.with_entry(key, None);
        }
        let mut value = Vec::new();
        put_node(&mut value, child)?;
        self.with_entry(key, Some((&value, child.estimated_bytes())))
    }

    /// Every child, decoded, in key order, chunk by chunk as the iterator advances.
    pub(crate) fn iter(&self) -> ChunkedIter<'_> {
        ChunkedIter(Box::new(
            self.all_chunks().flat_map(|chunk| chunk.packed().entries()),
        ))
    }

    /// The children with keys between the bounds (not inverted), decoded chunk by chunk, in
    /// key order.
    pub(crate) fn range(&self, from: Bound<&Key>, to: Bound<&Key>) -> ChunkedIter<'_> {
        let chunks = self.chunks_between(from, to);
        let (from, to) = (from.cloned(), to.cloned());
        ChunkedIter(Box::new(
            chunks
                .flat_map(|chunk| chunk.packed().entries())
                .filter(move |(key, _)| {
                    packed::after(key, from.as_ref()) && packed::before(key, to.as_ref())
                }),
        ))
    }
}

/// Children of a chunked collection, decoded one chunk at a time from either end.
pub(crate) struct ChunkedIter<'a>(Box<dyn DoubleEndedIterator<Item = (Key, Node)> + 'a>);

impl Iterator for ChunkedIter<'_> {
    type Item = (Key, Node);

    fn next(&mut self) -> Option<(Key, Node)> {
        self.0.next()
    }
}

impl DoubleEndedIterator for ChunkedIter<'_> {
    fn next_back(&mut self) -> Option<(Key, Node)> {
        self.0.next_back()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packed::PACK_MAX_BYTES;
    use crate::path::Path;
    use crate::priority::Priority;
    use crate::testing::{key, node, path};
    use crate::update::without_packing;
    use serde_json::json;

    #[test]
    fn small_objects_without_priorities_are_packed() {
        let record = node(json!({"uid": "u1", "text": "hi", "ts": 1_700_000_000_000u64}));
        assert!(record.packed().is_some());
        assert!(node(json!({"x": 1, ".priority": 2})).packed().is_none());
        assert!(node(json!({"x": {".value": 1, ".priority": 2}}))
            .packed()
            .is_none());
        assert!(node(json!({"t": "x".repeat(PACK_MAX_BYTES)}))
            .packed()
            .is_none());
        // Growing past the bound unpacks; shrinking back packs again.
        let grown = record.with_child(&key("body"), node(json!("y".repeat(PACK_MAX_BYTES + 88))));
        assert!(grown.packed().is_none() && grown.child(&key("uid")) == node(json!("u1")));
        let shrunk = grown.with_child(&key("body"), Node::empty());
        assert!(shrunk.packed().is_some());
        assert_eq!(shrunk, record);
        // A priority set on a packed object unpacks it.
        let prioritized = record.with_priority(Priority::Number(1.0));
        assert!(prioritized.packed().is_none());
        assert_eq!(prioritized.with_priority(Priority::None), record);
        // Both forms hash alike.
        let plain = without_packing(|| {
            node(json!({"uid": "u1", "text": "hi", "ts": 1_700_000_000_000u64}))
        });
        assert!(plain.packed().is_none());
        assert_eq!(plain.hash(), record.hash());
    }

    #[test]
    fn large_collections_of_packable_records_are_chunked() {
        let records = collection(400);
        let root = node(records.clone());
        let chunked = root.chunked().expect("a collection of records is chunked");
        assert!(chunked.chunks().count() > 10);
        // The property tests' collections are chunked too.
        assert!(has_chunked(&node(collection(26))));
        assert!(has_chunked(&node(json!({"10": collection(30), "b": 2.25}))));
        let plain = without_packing(|| node(records.clone()));
        assert!(!has_packed(&plain));
        assert_eq!(root.hash(), plain.hash());
        assert_eq!(root.to_json(true), plain.to_json(true));
        // Writes inside one record, of new records (splitting a chunk), and removals keep
        // every reading the same as the plain form's, and the collection chunked.
        let writes: [(&str, serde_json::Value); 6] = [
            ("/17/t", json!("short")),
            ("/b/x/y", json!(12.5)),
            ("/99x", json!({"t": "z".repeat(3000)})),
            ("/a", json!(null)),
            ("/150", json!(null)),
            ("/0new", json!(true)),
        ];
        let (mut chunked_root, mut plain_root) = (root, plain);
        for (at, value) in writes {
            chunked_root = chunked_root.set(&path(at), node(value.clone()));
            plain_root = without_packing(|| plain_root.set(&path(at), node(value.clone())));
            assert!(chunked_root.chunked().is_some());
            assert_eq!(chunked_root.hash(), plain_root.hash(), "after {at}");
            assert_eq!(chunked_root.to_json(true), plain_root.to_json(true));
            assert_eq!(chunked_root.estimated_bytes(), plain_root.estimated_bytes());
            assert_eq!(chunked_root.child_count(), plain_root.child_count());
        }
        // A priority below turns the collection into a map of nodes; a priority on it too.
        let prioritized =
            chunked_root.set(&path("/17/p"), node(json!({".value": 1, ".priority": 2})));
        assert!(prioritized.chunked().is_none() && prioritized.packed().is_none());
        assert_eq!(prioritized.get(&path("/17/t")), node(json!("short")));
        let on_top = chunked_root.with_priority(Priority::Number(1.0));
        assert!(on_top.chunked().is_none());
        assert_eq!(on_top.with_priority(Priority::None), chunked_root);
        // Equal collections in different chunks are equal; one changed entry is not.
        let rebuilt = node(chunked_root.to_json(true));
        assert!(rebuilt.chunked().is_some() && !rebuilt.ptr_eq(&chunked_root));
        assert_eq!(rebuilt, chunked_root);
        assert_ne!(
            rebuilt.set(&path("/17/t"), node(json!("other"))),
            chunked_root
        );
        // Shrinking to a small object packs it whole again.
        let mut shrinking = chunked_root;
        let keys: Vec<Key> = shrinking.children().map(|(k, _)| k.into_owned()).collect();
        for key in keys.iter().skip(3) {
            shrinking = shrinking.with_child(key, Node::empty());
        }
        assert!(shrinking.packed().is_some());
        assert_eq!(shrinking.child_count(), 3);
    }

    #[test]
    fn a_packed_object_that_grows_large_is_chunked() {
        let mut root = Node::empty();
        for i in 0..8000 {
            root = root.set(
                &path(&format!("/m{i:04}")),
                node(json!({"uid": "u1", "ts": i})),
            );
            if i == 200 {
                // A few chunks, indexed by a slice.
                assert!(root.chunked().is_some());
                let plain = without_packing(|| node(root.to_json(true)));
                assert_eq!(root.hash(), plain.hash());
            }
        }
        // Past 32 chunks the index is a map; emptying most chunks brings the slice back.
        assert!(root.chunked().is_some_and(|c| c.chunks().count() > 32));
        let plain = without_packing(|| node(root.to_json(true)));
        assert_eq!(root.hash(), plain.hash());
        for i in 0..7000 {
            root = root.set(&path(&format!("/m{i:04}")), Node::empty());
        }
        let plain = without_packing(|| node(root.to_json(true)));
        assert_eq!(root.to_json(true), plain.to_json(true));
        assert_eq!(root.hash(), plain.hash());
        assert_eq!(root.child_count(), 1000);
        assert!(root.chunked().is_some_and(|c| c.chunks().count() <= 32));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(Vec<&'static str>, serde_json::Value),
        Prioritize(Vec<&'static str>, serde_json::Value),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let segments =
            proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("10")], 0..4);
        let value = prop_oneof![
            Just(json!(null)),
            Just(json!(1)),
            Just(json!("s")),
            Just(json!({"x": 1, "y": {"z": true}})),
            Just(json!({".value": 2, ".priority": "p"})),
            Just(json!({"x": 3, ".priority": 1})),
            Just(json!("t".repeat(PACK_MAX_BYTES * 3 / 5))),
            Just(json!({"k": [1, 2.5, "u"], "w": -7, "f": 9_007_199_254_740_993.0})),
            Just(json!({"n": {"d": {"e": 1e300, "g": false}}, "0": "zero"})),
            // Large enough to be kept in chunks, with keys the paths above reach.
            Just(collection(26)),
            Just(json!({"10": collection(30), "b": 2.25})),
        ];
        let priority = prop_oneof![Just(json!(null)), Just(json!(5)), Just(json!("q"))];
        prop_oneof![
            3 => (segments.clone(), value).prop_map(|(p, v)| Op::Set(p, v)),
            1 => (segments, priority).prop_map(|(p, v)| Op::Prioritize(p, v)),
        ]
    }

    fn apply(root: &Node, op: &Op) -> Node {
        match op {
            Op::Set(segments, v) => {
                let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                root.set(&target, node(v.clone()))
            }
            Op::Prioritize(segments, p) => {
                let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                let priority = Priority::from_json(p).expect("valid priority");
                root.set(&target, root.get(&target).with_priority(priority))
            }
        }
    }

    /// A map of `n` records under the keys "0", "1", ... with "a" and "b" among them.
    fn collection(n: usize) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for i in 0..n {
            let key = match i {
                0 => "a".to_string(),
                1 => "b".to_string(),
                _ => i.to_string(),
            };
            let text = "r".repeat(150 + i * 7);
            map.insert(
                key,
                json!({"t": text, "n": i as f64 / 4.0, "x": {"y": i % 3 == 0}}),
            );
        }
        serde_json::Value::Object(map)
    }

    fn has_packed(node: &Node) -> bool {
        node.packed().is_some()
            || node.chunked().is_some()
            || node.children().any(|(_, child)| has_packed(&child))
    }

    fn has_chunked(node: &Node) -> bool {
        node.chunked().is_some() || node.children().any(|(_, child)| has_chunked(&child))
    }

    /// Everything a reader can observe of `a` and `b` at `at` is the same.
    fn same_reading(
        a: &Node,
        b: &Node,
        at: &Path,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let (a, b) = (a.get(at), b.get(at));
        proptest::prop_assert_eq!(&a, &b);
        proptest::prop_assert_eq!(a.to_json(true), b.to_json(true));
        for export in [false, true] {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            a.write_json(&mut x, export);
            b.write_json(&mut y, export);
            proptest::prop_assert_eq!(x, y);
        }
        proptest::prop_assert_eq!(a.hash(), b.hash());
        proptest::prop_assert_eq!(a.estimated_bytes(), b.estimated_bytes());
        proptest::prop_assert_eq!(a.child_count(), b.child_count());
        proptest::prop_assert!(a.children().eq(b.children()));
        proptest::prop_assert!(a.children().rev().eq(b.children().rev()));
        proptest::prop_assert_eq!(a.first_child(), b.first_child());
        proptest::prop_assert_eq!(a.last_child(), b.last_child());
        let (from, to) = (key("10"), key("b"));
        for (lo, hi) in [
            (Bound::Included(&from), Bound::Excluded(&to)),
            (Bound::Excluded(&from), Bound::Included(&to)),
            (Bound::Unbounded, Bound::Excluded(&from)),
        ] {
            proptest::prop_assert!(a.children_range(lo, hi).eq(b.children_range(lo, hi)));
        }
        Ok(())
    }

    proptest::proptest! {
        /// Packing and chunks are invisible: the same writes applied with and without them read the same
        /// everywhere, hashes and JSON bytes included.
        #[test]
        fn packed_and_unpacked_forms_agree(ops in proptest::collection::vec(op(), 1..24)) {
            let (mut packed, mut plain) = (Node::empty(), Node::empty());
            for op in &ops {
                packed = apply(&packed, op);
                plain = without_packing(|| apply(&plain, op));
                proptest::prop_assert!(!has_packed(&plain));
                for at in ["/", "/a", "/b", "/10", "/a/b", "/10/a/b", "/a/x", "/b/n/d", "/10/10"] {
                    same_reading(&packed, &plain, &path(at))?;
                }
            }
        }

        #[test]
        fn updates_keep_invariants(ops in proptest::collection::vec(op(), 1..24)) {
            let mut root = Node::empty();
            for op in ops {
                let before = root.clone();
                let before_json = before.to_json(true);
                let before_hash = before.hash();
                let (target, next) = match &op {
                    Op::Set(segments, v) => {
                        let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                        let value = node(v.clone());
                        let next = root.set(&target, value.clone());
                        proptest::prop_assert_eq!(next.get(&target), value);
                        (target, next)
                    }
                    Op::Prioritize(segments, p) => {
                        let target = Path::from_keys(segments.iter().map(|s| key(s)).collect());
                        let priority = Priority::from_json(p).expect("valid priority");
                        let current = root.get(&target);
                        let next = root.set(&target, current.with_priority(priority.clone()));
                        if !current.is_empty() {
                            proptest::prop_assert_eq!(next.get(&target).priority().clone(), priority);
                        }
                        (target, next)
                    }
                };
                // The old version is untouched, cached hash included.
                proptest::prop_assert_eq!(before.to_json(true), before_json);
                proptest::prop_assert_eq!(before.hash(), before_hash);
                // The new version is canonical (no empty objects) and its incremental
                // bookkeeping (hash cache, size estimate) equals a fresh build.
                let rebuilt = node(next.to_json(true));
                proptest::prop_assert_eq!(&rebuilt, &next);
                proptest::prop_assert_eq!(rebuilt.hash(), next.hash());
                proptest::prop_assert_eq!(rebuilt.estimated_bytes(), next.estimated_bytes());
                // Siblings of the written path are shared, not copied (a packed object's
                // children are bytes, copied by design).
                if let Some(first) = target.first() {
                    for (k, child) in before.children() {
                        let of_nodes = |n: &Node| n.packed().is_none() && n.chunked().is_none();
                        if *k != *first && of_nodes(&before) && of_nodes(&next) {
                            proptest::prop_assert!(child.ptr_eq(&next.child(&k)) || next.is_leaf());
                        }
                    }
                }
                root = next;
            }
        }
    }
}
