//! The node hash of spec §10: SHA-1 of a canonical text, in standard padded base64.
//!
//! Clients send this hash with every compare-and-set (transactions) and listen, so the server
//! must produce the very same string for the same data, quirks included: children are visited
//! in priority order, and numbers are rendered through the client's arithmetic reconstruction
//! of the IEEE-754 bits rather than the real bits (`digest`, which also reads the hash of a
//! packed or chunked object straight from its bytes). A hash is computed once and cached in
//! the node it describes.

use std::sync::{Arc, LazyLock};

use crate::children::ChildMap;
use crate::digest::{self, client_double_bits, object_text_hash};
use crate::key::Key;
use crate::node::{Node, Repr};
use crate::priority::Priority;

/// The hash of the empty node, shared so that hashing empty nodes does not allocate.
static EMPTY_HASH: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));

impl Node {
    /// The node hash of spec §10 (`""` for the empty node), cached inside the node.
    pub fn hash(&self) -> Arc<str> {
        match &self.0 {
            Repr::Empty => EMPTY_HASH.clone(),
            Repr::Scalar(value) => digest::leaf_hash(value, &Priority::None),
            Repr::Leaf(leaf) => leaf
                .hash
                .get_or_init(|| digest::leaf_hash(&leaf.value, &leaf.priority))
                .clone(),
            Repr::Object(object) => object
                .hash
                .get_or_init(|| object_hash(&object.children, &object.priority))
                .clone(),
            Repr::Packed(packed) => {
                Arc::from(digest::digest_base64(&packed.digest(digest::packed_digest)))
            }
            Repr::Chunked(chunked) => chunked.hash(),
        }
    }
}

/// Hash of an object (spec §10.2): the priority prefix, then `:key:childHash` for every child
/// in priority order, ties broken by key. The text is streamed into SHA-1 rather than built.
fn object_hash(children: &ChildMap<Node>, priority: &Priority) -> Arc<str> {
    let mut ordered: Vec<(&Key, &Node)> = children.iter().collect();
    if ordered.iter().any(|(_, child)| !child.priority().is_none()) {
        // The map yields key order and the sort is stable, so equal priorities stay in key
        // order: exactly priority order with key tiebreak.
        ordered.sort_by(|a, b| a.1.priority().cmp(b.1.priority()));
    }
    object_text_hash(
        priority,
        client_double_bits,
        ordered
            .into_iter()
            .map(|(key, child)| (key.as_str(), child.hash())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::{leaf_hash_text, sha1_text};
    use crate::leaf::Leaf;
    use crate::packed::PACK_MAX_BYTES;
    use crate::testing::{node, path};
    use serde_json::{json, Value};

    fn hash_of(v: Value) -> String {
        Node::from_json(&v)
            .expect("valid vector")
            .hash()
            .to_string()
    }

    fn text_hash(text: &str) -> String {
        sha1_text(text).to_string()
    }

    #[test]
    fn hash_cache_never_goes_stale() {
        let text = "x".repeat(PACK_MAX_BYTES + 88);
        let root = node(json!({"a": {"x": 1}, "b": 2, "t": text}));
        let h1 = root.hash();
        assert!(
            Arc::ptr_eq(&h1, &root.hash()),
            "the second call is served from the cache"
        );
        let next = root.set(&path("/a/x"), node(json!(2)));
        assert_ne!(next.hash(), h1);
        assert_eq!(root.hash(), h1);
        assert_eq!(
            next.hash(),
            node(json!({"a": {"x": 2}, "b": 2, "t": text})).hash()
        );
        let back = next.set(&path("/a/x"), node(json!(1)));
        assert_eq!(back.hash(), h1);
        let prioritized = root.with_priority(Priority::Number(1.0));
        assert_ne!(prioritized.hash(), h1);
    }

    #[test]
    fn negative_zero_hash_via_raw_leaf() {
        // Spec §10.4: -0 can only be computed (JSON and normalization turn it into 0).
        let leaf = Node::leaf_raw(Leaf::Number(-0.0), Priority::None);
        assert_eq!(
            leaf_hash_text(&Leaf::Number(-0.0), &Priority::None),
            "number:8000000000000000"
        );
        assert_eq!(&*leaf.hash(), "m/gA365Q5OBo06Bg8wdybAAiMSQ=");
        assert_eq!(
            text_hash("number:8000000000000000"),
            "m/gA365Q5OBo06Bg8wdybAAiMSQ="
        );
        // Normalized input hashes as plain 0.
        assert_eq!(hash_of(json!(-0.0)), "7ysMph9WPitGP7poMnMHMVPtUlI=");
    }

    #[test]
    fn leaf_vectors() {
        let vectors: &[(Value, &str, &str)] = &[
            (
                json!(1),
                "number:3ff0000000000000",
                "YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=",
            ),
            (
                json!(2),
                "number:4000000000000000",
                "WtSt2Xo3L0JtPuArzQHofPrZOuU=",
            ),
            (
                json!(0),
                "number:0000000000000000",
                "7ysMph9WPitGP7poMnMHMVPtUlI=",
            ),
            (
                json!(-2.5),
                "number:c004000000000000",
                "eBj7htp2uFU6m+ykmQDcicyETbY=",
            ),
            (
                json!(0.1),
                "number:3fb999999999999a",
                "wtQjBi5TBE+ZcdekL6INiSeCSQI=",
            ),
            (
                json!(1e21),
                "number:444b1ae4d6e2ef50",
                "rZwDOBGJ9Z0+flzyrCWzeSigSyE=",
            ),
            (
                json!(9007199254740991u64),
                "number:4340000000000000",
                "m4qsp/5BbIWTdjthNlnOX+WCTB0=",
            ),
            (
                json!("hello"),
                "string:hello",
                "z6sRbrNLwbHX5fdjpvsTtWgXUFc=",
            ),
            (json!(""), "string:", "Ki0Xy0V6morg0TO3Sxi/jwugYDQ="),
            (json!("true"), "string:true", "SguBQTzes2fMe/fIMwCRPdBZ4MI="),
            (json!("a:b"), "string:a:b", "ee/A/JrO8JDeNIboBwpC0jeeV1A="),
            (
                json!("héllo ☃ 😀"),
                "string:héllo ☃ 😀",
                "L+Mhwgn0TEsl7P+R+faHiJ9x3YA=",
            ),
            (json!(true), "boolean:true", "E5z61QM0lN/U2WsOnusszCTkR8M="),
            (
                json!(false),
                "boolean:false",
                "aSSNoqcS4oQwJ2xxH20rvpp3zP0=",
            ),
            (
                json!({".value": 5, ".priority": 1}),
                "priority:number:3ff0000000000000:number:4014000000000000",
                "oUSZ9VFwUrevB81K4PcN+7BHDJw=",
            ),
            (
                json!({".value": "v", ".priority": "p"}),
                "priority:string:p:string:v",
                "R0MIwvHETT8eZK7iUSai21aukVY=",
            ),
        ];
        for (value, text, hash) in vectors {
            let node = Node::from_json(value).expect("valid vector");
            let leaf = node.leaf_value().expect("a leaf vector");
            assert_eq!(leaf_hash_text(leaf, node.priority()), *text, "{value}");
            assert_eq!(&*node.hash(), *hash, "{value}");
            assert_eq!(text_hash(text), *hash, "{value}");
        }
        assert_eq!(hash_of(json!(null)), "");
        assert_eq!(hash_of(json!({".value": null, ".priority": 1})), "");
    }

    #[test]
    fn useful_leaf_hashes() {
        let expected = [
            (3, "3tYODYzGXwaGnXNech4jb4T9las="),
            (4, "eVih19a6ZDz3NL32uVBtg9KSgQY="),
            (5, "w28swksk9+tXf5jEdS9R5oSFAv8="),
            (6, "qb1N9GrUXfC3JyZPF8EXiNYcv4I="),
            (7, "7wQgMram7RVqVIg/xRZWPfygGx0="),
            (8, "pITK737CVleu2Q4bHJTdQ4dJnCg="),
        ];
        for (n, hash) in expected {
            assert_eq!(hash_of(json!(n)), hash, "{n}");
        }
    }

    #[test]
    fn object_vectors() {
        let vectors: &[(Value, &str)] = &[
            (json!({"v": 1}), "LjeXjzTaaVqwN8qlkUuwnS01bqc="),
            (json!({"b": 2, "a": 1}), "AUZnXhNqrfbznYVxcCvNpzpjvTU="),
            (json!({"a": null, "b": 1}), "lUwqxaYTHjA4XN/UJjS/cI8JKaM="),
            (
                json!({"a": {"b": {"c": true}}}),
                "pmWQZosLZcmOAI2E0uzAv0YR+pY=",
            ),
            (json!({"b": {"c": true}}), "04cMMA12ys0zo89wA3Al6NPUfQY="),
            (json!({"c": true}), "T1+Y2YoCHRrslEfQR/R3tWSsmuE="),
            (
                json!({"k": 1, ".priority": 7}),
                "J1LdWH4UCHgPTViUKE3k4gG2c6A=",
            ),
            (
                json!({"b": true, "a": true, "10": true, "9": true}),
                "Od8YvdDki5GIUiHw8xMry7kpE8s=",
            ),
            (json!({"｡": 1, "😀": 2}), "2fN5oqKMOu/lsitR3bnFuIvCIVU="),
            (json!([10, 20, 30]), "tMGA6pAlogHlYbSsiBcteCsl3xs="),
            (
                json!({"x": {".value": "A", ".priority": 10}, "y": {".value": "B", ".priority": "aa"}, "z": "C"}),
                "HEczgxEDQZl5FeQDqp7Lm1MfVR0=",
            ),
            (
                json!({"a": {"x": 1, ".priority": 2}, "b": {"x": 2, ".priority": 1}, "c": 3, "d": {".value": "s", ".priority": "z"}}),
                "sm+iYigSUhLzb8Ip9cGuVXFb4Xw=",
            ),
        ];
        for (value, hash) in vectors {
            assert_eq!(hash_of(value.clone()), *hash, "{value}");
        }
    }

    #[test]
    fn object_canonical_texts() {
        // The texts of spec §10.4 hash to the listed values, and the children appear in the
        // documented (priority, then key) order.
        let cases = [
            (":v:YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=", "LjeXjzTaaVqwN8qlkUuwnS01bqc="),
            (
                ":a:YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=:b:WtSt2Xo3L0JtPuArzQHofPrZOuU=",
                "AUZnXhNqrfbznYVxcCvNpzpjvTU=",
            ),
            (
                "priority:number:401c000000000000::k:YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=",
                "J1LdWH4UCHgPTViUKE3k4gG2c6A=",
            ),
            (
                ":😀:WtSt2Xo3L0JtPuArzQHofPrZOuU=:｡:YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=",
                "2fN5oqKMOu/lsitR3bnFuIvCIVU=",
            ),
            (
                ":z:DNjuzT+Ia56e0mQnSEe3WNKAjcQ=:x:l+EXxIpgkD85/9HT5EPJ9gZoE58=:y:sKCVliDxWZ/mMOnq9u8DCS1g6zc=",
                "HEczgxEDQZl5FeQDqp7Lm1MfVR0=",
            ),
            (
                ":c:3tYODYzGXwaGnXNech4jb4T9las=:b:QAJ+Mea5w+AO02PjmBoKjA/bcsU=:a:lRMED0cKJv5l0dtDR4+2vh6d8oQ=:d:XD0BRxpcjWJPtWfvIfd1KdUTALY=",
                "sm+iYigSUhLzb8Ip9cGuVXFb4Xw=",
            ),
        ];
        for (text, hash) in cases {
            assert_eq!(text_hash(text), hash, "{text}");
        }
        // Code-point order would give another hash, which we must not produce.
        assert_ne!(
            hash_of(json!({"｡": 1, "😀": 2})),
            "7nu/Or28CBhbC/BPFX+r+tYunAw="
        );
        // Child hashes quoted in the texts above.
        assert_eq!(hash_of(json!("C")), "DNjuzT+Ia56e0mQnSEe3WNKAjcQ=");
        assert_eq!(
            hash_of(json!({".value": "A", ".priority": 10})),
            "l+EXxIpgkD85/9HT5EPJ9gZoE58="
        );
        assert_eq!(
            hash_of(json!({".value": "B", ".priority": "aa"})),
            "sKCVliDxWZ/mMOnq9u8DCS1g6zc="
        );
        assert_eq!(
            hash_of(json!({"x": 2, ".priority": 1})),
            "QAJ+Mea5w+AO02PjmBoKjA/bcsU="
        );
        assert_eq!(
            hash_of(json!({"x": 1, ".priority": 2})),
            "lRMED0cKJv5l0dtDR4+2vh6d8oQ="
        );
        assert_eq!(
            hash_of(json!({".value": "s", ".priority": "z"})),
            "XD0BRxpcjWJPtWfvIfd1KdUTALY="
        );
    }

    #[test]
    fn negative_zero_key_vectors() {
        // `-0` keys are refused by `Key::new`; the client's captured hashes are reproduced by
        // building the nodes with unchecked keys (spec §9.1 item 5, §10.4).
        let build = |entries: &[(&str, f64)]| {
            entries.iter().fold(Node::empty(), |node, (k, v)| {
                node.with_child(&Key::new_unchecked(k), Node::leaf(Leaf::Number(*v)))
            })
        };
        let four = build(&[("0", 1.0), ("-0", 2.0), ("00", 3.0), ("-1", 4.0)]);
        let order: Vec<String> = four
            .children()
            .map(|(k, _)| k.as_str().to_owned())
            .collect();
        assert_eq!(order, ["-1", "0", "-0", "00"]);
        assert_eq!(&*four.hash(), "Hrgx59zleYHwKX4mR8G5nkPZX0M=");
        // Of the two arrival orders the client hashes differently, ours is the first one.
        let two = build(&[("-0", 2.0), ("00", 3.0)]);
        assert_eq!(&*two.hash(), "fLHpmRwY9Kt05f2HsrADYOYLgXw=");
    }
}
