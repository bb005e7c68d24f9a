//! Large collections of small records, kept as chunks of packed entries.
//!
//! A collection too large to pack whole (a feed of thousands of push-id messages, an array of
//! 200,000 readings) held as a map of nodes costs about 50 bytes per entry for the map (a key
//! and a node) plus a packed allocation with its header for each record: 2.5 to 3 times the
//! JSON of a record of a few numbers. When every child can be packed (no priority, no object
//! larger than `PACK_MAX_BYTES`), the collection is kept instead as runs of consecutive
//! entries, each run encoded as one packed object of up to [`CHUNK_MAX_BYTES`], in a
//! persistent map from each chunk's first key (`chunk_index`). An entry then costs its key and
//! its value's bytes; a write re-encodes one chunk (splitting it when it grows past the bound)
//! and the chunk map is updated in O(log n) with copy-on-write, so old versions stay intact.
//!
//! A child larger than `PACK_MAX_BYTES` without a priority anywhere is itself a collection in
//! chunks, and sits in the map as a part of its own ([`Part::Large`]) between the runs: one
//! record of 4.4 KB among 7,638 small ones (the icons of `@iconify-json/mdi`) no longer turns
//! all of them into nodes. Such a child shares its node's allocation, so reading it copies
//! nothing, and it carries no priority, so the collection still carries none anywhere: key
//! order is still the order of its hash text, and its JSON is the same in export form.
//!
//! Hashing keeps writes cheap: each chunk caches the digests of its children once computed,
//! so rehashing the collection after a write digests the rewritten chunk's children only, and
//! the collection's hash text is streamed from the cached digests (and the large children's
//! cached hashes) as for a map of nodes.
//!
//! Like `packed`, this file knows encoded entries but not nodes, so that a node can hold a
//! `Chunked`: a collection is built, written to and read as nodes by `packing`.

use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use crate::chunk_index::{Index, IndexIter};
use crate::digest::{self, HashedPart};
use crate::estimate::ENTRY_OVERHEAD;
use crate::key::Key;
use crate::packed::{self, Packed};

/// Largest encoded size of a chunk of two entries or more: a write copies one chunk, and the
/// map from first keys costs about 150 bytes per chunk, 7% of a full one.
pub(crate) const CHUNK_MAX_BYTES: usize = 2048;

/// One run of consecutive entries, with its children's digests in key order once computed,
/// in one allocation: a separate small allocation per chunk would be left on the pages of the
/// records freed while a collection is built, and keep them resident.
#[derive(Clone)]
pub(crate) struct Chunk(Packed<OnceLock<Box<[[u8; 20]]>>>);

/// One part of a collection, under the key of its first child.
#[derive(Clone)]
pub(crate) enum Part {
    /// A run of consecutive packed entries.
    Run(Chunk),
    /// One child too large to pack, a collection in chunks itself (so without a priority
    /// anywhere), held as its node holds it.
    Large(Arc<Chunked>),
}

/// A child undecoded: a packed entry (its key and encoded value), or a large child.
#[derive(Clone, Copy)]
pub(crate) enum Item<'a> {
    Encoded(&'a str, &'a [u8]),
    Large(&'a Key, &'a Arc<Chunked>),
}

/// A child to write into a collection.
pub(crate) enum NewChild<'a> {
    /// Its encoded value and the estimated JSON size of its node.
    Encoded(&'a [u8], usize),
    Large(&'a Arc<Chunked>),
}

/// A collection in chunks: never empty, no priority anywhere, every child packable or itself
/// a collection in chunks.
pub(crate) struct Chunked {
    parts: Index<Part>,
    len: usize,
    /// Estimated JSON size of the whole object, as `ObjectData` keeps it.
    bytes: usize,
    hash: OnceLock<Arc<str>>,
}

impl Chunk {
    fn new(count: usize, entries: &[u8]) -> Chunk {
        Chunk(Packed::from_entries(count, entries))
    }

    /// The chunk of the `count` entries `buffer[start..end]`, its header written in front
    /// of them (see [`Packed::from_entries_in_place`]).
    pub(crate) fn in_place(buffer: &mut [u8], start: usize, end: usize, count: usize) -> Chunk {
        Chunk(Packed::from_entries_in_place(buffer, start, end, 0, count))
    }

    /// The chunk's entries, as one packed object.
    pub(crate) fn packed(&self) -> &Packed<OnceLock<Box<[[u8; 20]]>>> {
        &self.0
    }

    fn digests(&self) -> &[[u8; 20]] {
        self.0
            .cache()
            .get_or_init(|| digest::packed_child_digests(self.0.bytes()))
    }
}

impl Item<'_> {
    fn name(&self) -> &str {
        match self {
            Item::Encoded(name, _) => name,
            Item::Large(key, _) => key.as_str(),
        }
    }

    fn precedes(&self, key: &Key) -> bool {
        match self {
            Item::Encoded(name, _) => Key::new_unchecked(name) < *key,
            Item::Large(first, _) => *first < key,
        }
    }

    /// The estimated JSON size of the child's node.
    fn estimate(&self) -> usize {
        match self {
            Item::Encoded(_, encoded) => packed::value_estimate(encoded),
            Item::Large(_, child) => child.estimate(),
        }
    }
}

/// Equal children. An encoded child never equals a large one: equal data have equal size
/// estimates, and a large child's is over the packing bound while a packed object's is not.
impl PartialEq for Item<'_> {
    fn eq(&self, other: &Item<'_>) -> bool {
        match (self, other) {
            (Item::Encoded(a, x), Item::Encoded(b, y)) => a == b && x == y,
            (Item::Large(a, x), Item::Large(b, y)) => a == b && x.same_children(y),
            _ => false,
        }
    }
}

/// Collects encoded entries into chunks of at most [`CHUNK_MAX_BYTES`] (a single entry may be
/// larger), and large children into parts of their own.
pub(crate) struct Builder {
    parts: Vec<(Key, Part)>,
    entries: Vec<u8>,
    first: Option<Key>,
    count: usize,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder {
            parts: Vec::new(),
            entries: Vec::with_capacity(CHUNK_MAX_BYTES),
            first: None,
            count: 0,
        }
    }

    /// Adds the entry `key` whose bytes `encode` appends, or gives up (`None`) when `encode`
    /// does.
    pub(crate) fn push(
        &mut self,
        key: &Key,
        encode: impl FnOnce(&mut Vec<u8>) -> Option<()>,
    ) -> Option<()> {
        let start = self.entries.len();
        encode(&mut self.entries)?;
        self.added(key, start);
        Some(())
    }

    /// Adds a child too large to pack, as a part of its own after the entries so far.
    pub(crate) fn push_large(&mut self, key: &Key, child: Arc<Chunked>) {
        self.flush();
        self.parts.push((key.clone(), Part::Large(child)));
    }

    fn push_item(&mut self, item: Item<'_>) {
        match item {
            Item::Encoded(name, encoded) => {
                let start = self.entries.len();
                packed::put_raw_entry(&mut self.entries, name, encoded);
                self.added(&Key::new_unchecked(name), start);
            }
            Item::Large(key, child) => self.push_large(key, child.clone()),
        }
    }

    /// Adds the entry `key` whose bytes were just appended to `self.entries` from `start`.
    fn added(&mut self, key: &Key, start: usize) {
        if self.entries.len() > CHUNK_MAX_BYTES && self.count > 0 {
            let tail = self.entries.split_off(start);
            self.flush();
            self.entries = tail;
        }
        if self.first.is_none() {
            self.first = Some(key.clone());
        }
        self.count += 1;
    }

    fn flush(&mut self) {
        if let Some(first) = self.first.take() {
            let chunk = Chunk::new(self.count, &self.entries);
            self.parts.push((first, Part::Run(chunk)));
        }
        self.entries.clear();
        self.count = 0;
    }

    fn finish(mut self) -> Vec<(Key, Part)> {
        self.flush();
        self.parts
    }

    /// The collection of the children added, `len` of them with `bytes` estimated.
    pub(crate) fn into_chunked(self, len: usize, bytes: usize) -> Chunked {
        Chunked::from_parts(self.finish(), len, bytes)
    }
}

impl Chunked {
    /// The collection of `parts` (in key order, never empty), `len` children with `bytes`
    /// estimated.
    pub(crate) fn from_parts(parts: Vec<(Key, Part)>, len: usize, bytes: usize) -> Chunked {
        Chunked {
            parts: Index::from_vec(parts),
            len,
            bytes,
            hash: OnceLock::new(),
        }
    }
}

impl Chunked {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn estimate(&self) -> usize {
        self.bytes
    }

    /// The part that holds `key` if anything does: the last one starting at or before it.
    pub(crate) fn part_for(&self, key: &Key) -> Option<(&Key, &Part)> {
        self.parts.at_or_before(key)
    }

    /// A copy with child `key` set to `value`, or removed when `value` is `None`. `None` when
    /// a chunk does not decode; the caller then holds the collection as nodes. The result may
    /// be empty (`len` 0).
    pub(crate) fn with_entry(&self, key: &Key, value: Option<NewChild<'_>>) -> Option<Chunked> {
        if let (Some((first, Part::Large(old))), Some(NewChild::Large(child))) =
            (self.part_for(key), &value)
        {
            if first == key {
                // A write below a large child, made at every level above it: only the index
                // changes, as a map of nodes would.
                return Some(Chunked {
                    parts: self.parts.replace(key, Part::Large(Arc::clone(child))),
                    len: self.len,
                    bytes: self.bytes - old.estimate() + child.estimate(),
                    hash: OnceLock::new(),
                });
            }
        }
        let encoded = matches!(value, Some(NewChild::Encoded(..)));
        let old = self.parts_around(key, encoded);
        let old = old.iter().flatten();
        // Room for one more: no growth when a child is added.
        let room = old.clone().map(|(_, part)| part_len(part)).sum::<usize>() + 1;
        let mut items = Vec::with_capacity(room);
        for (first, part) in old.clone() {
            push_items(&mut items, first, part)?;
        }
        let at = items.partition_point(|item| item.precedes(key));
        let present = items
            .get(at)
            .is_some_and(|item| item.name() == key.as_str());
        let mut bytes = self.bytes;
        let mut len = self.len;
        if present {
            bytes -= key.as_str().len() + ENTRY_OVERHEAD + items[at].estimate();
            items.remove(at);
            len -= 1;
        }
        if let Some(value) = value {
            let (item, estimate) = match value {
                NewChild::Encoded(encoded, estimate) => {
                    (Item::Encoded(key.as_str(), encoded), estimate)
                }
                NewChild::Large(child) => (Item::Large(key, child), child.estimate()),
            };
            bytes += key.as_str().len() + ENTRY_OVERHEAD + estimate;
            items.insert(at, item);
            len += 1;
        }
        let mut builder = Builder::new();
        for item in items {
            builder.push_item(item);
        }
        Some(Chunked {
            parts: self
                .parts
                .splice(old.map(|(first, _)| *first), builder.finish()),
            len,
            bytes,
            hash: OnceLock::new(),
        })
    }

    /// The consecutive parts a write of child `key` rewrites, in key order (at most three,
    /// in an array: a write allocates no list of them); `encoded` when the child written is
    /// a packed entry, which needs a run to go into.
    fn parts_around(&self, key: &Key, encoded: bool) -> [Option<(&Key, &Part)>; 3] {
        match self.part_for(key) {
            // The run whose place `key` is in (at its end, for a key past its last one).
            Some(at @ (_, Part::Run(_))) => [Some(at), None, None],
            Some(at @ (first, Part::Large(_))) if first == key => match encoded {
                // A large child that shrinks below the bound joins the runs beside it, so
                // that it leaves no run of one entry behind.
                true => [
                    only_run(self.parts.before(key)),
                    Some(at),
                    only_run(self.parts.after(key)),
                ],
                false => [Some(at), None, None],
            },
            // Before every part, or between a large child and the next part.
            _ if encoded => [only_run(self.parts.after(key)), None, None],
            _ => [None, None, None],
        }
    }

    /// Every part with its first key, in key order.
    pub(crate) fn parts(&self) -> IndexIter<'_, Part> {
        self.parts.iter()
    }

    /// The parts that may hold keys between the bounds (not inverted), in key order.
    pub(crate) fn parts_between(&self, from: Bound<&Key>, to: Bound<&Key>) -> IndexIter<'_, Part> {
        // The first part that may hold keys in range starts at or before `from`; a part
        // starting past `to` holds nothing in range.
        let start = match from {
            Bound::Included(key) | Bound::Excluded(key) => {
                self.part_for(key).map_or(Bound::Unbounded, |(first, _)| {
                    Bound::Included(first.clone())
                })
            }
            Bound::Unbounded => Bound::Unbounded,
        };
        self.parts.range(start, to.cloned())
    }

    /// Whether both hold the same children. The encoding of an entry is canonical (keys in
    /// order, each value in one form), so this compares bytes, whatever the chunk boundaries,
    /// and decodes nothing: sync compares query windows built apart on every write.
    pub(crate) fn same_children(&self, other: &Chunked) -> bool {
        if self.parts.ptr_eq(&other.parts) {
            return true;
        }
        self.len == other.len && self.items().eq(other.items())
    }

    /// Every child undecoded, in key order.
    fn items(&self) -> impl Iterator<Item = Item<'_>> {
        self.parts.iter().flat_map(|(first, part)| {
            let mut items = Vec::new();
            // A chunk that does not decode reads as holding nothing, as elsewhere.
            if push_items(&mut items, first, part).is_none() {
                items.clear();
            }
            items
        })
    }

    pub(crate) fn hash(&self) -> Arc<str> {
        self.hash
            .get_or_init(|| {
                digest::chunked_hash(self.parts.iter().map(|(first, part)| match part {
                    Part::Run(chunk) => HashedPart::Run(chunk.packed().bytes(), chunk.digests()),
                    Part::Large(child) => HashedPart::Child(first.as_str(), child.hash()),
                }))
            })
            .clone()
    }

    pub(crate) fn cached_hash(&self) -> Option<&Arc<str>> {
        self.hash.get()
    }
}

/// Appends the children of `part`, whose first key is `first`; `None` when its chunk does
/// not decode.
fn push_items<'a>(items: &mut Vec<Item<'a>>, first: &'a Key, part: &'a Part) -> Option<()> {
    match part {
        Part::Run(chunk) => chunk.packed().raw_entries_into(items, Item::Encoded),
        Part::Large(child) => {
            items.push(Item::Large(first, child));
            Some(())
        }
    }
}

/// `part` if it is a run.
fn only_run<'a>(part: Option<(&'a Key, &'a Part)>) -> Option<(&'a Key, &'a Part)> {
    part.filter(|(_, part)| matches!(part, Part::Run(_)))
}

/// The number of children of `part`.
fn part_len(part: &Part) -> usize {
    match part {
        Part::Run(chunk) => chunk.packed().len(),
        Part::Large(_) => 1,
    }
}
