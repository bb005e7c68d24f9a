//! Large collections of small records, kept as chunks of packed entries.
//!
//! A collection too large to pack whole (a feed of thousands of push-id messages, an array of
//! 200,000 readings) held as a map of nodes costs about 50 bytes per entry for the map (a key
//! and a node) plus a packed allocation with its header for each record: 2.5 to 3 times the
//! JSON of a record of a few numbers. When every child can be packed (no priority, no object
//! larger than `PACK_MAX_BYTES`), the collection is kept instead as runs of consecutive
//! entries, each run encoded as one packed object of up to [`CHUNK_MAX_BYTES`], in a
//! persistent map from each chunk's first key. An entry then costs its key and its value's
//! bytes; a write re-encodes one chunk (splitting it when it grows past the bound) and the
//! chunk map is updated in O(log n) with copy-on-write, so old versions stay intact.
//!
//! Hashing keeps writes cheap: each chunk caches the digests of its children once computed,
//! so rehashing the collection after a write digests the rewritten chunk's children only, and
//! the collection's hash text is streamed from the cached digests as for a map of nodes.
//!
//! Like `packed`, this file knows encoded entries but not nodes, so that a node can hold a
//! `Chunked`: a collection is built, written to and read as nodes by `packing`.

use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use imbl::OrdMap;

use crate::digest;
use crate::estimate::ENTRY_OVERHEAD;
use crate::key::Key;
use crate::packed::{self, Packed, HEADER_ROOM};

/// Largest encoded size of a chunk of two entries or more: a write copies one chunk, and the
/// map from first keys costs about 150 bytes per chunk, 7% of a full one.
pub(crate) const CHUNK_MAX_BYTES: usize = 2048;

/// One run of consecutive entries, with its children's digests in key order once computed,
/// in one allocation: a separate small allocation per chunk would be left on the pages of the
/// records freed while a collection is built, and keep them resident.
#[derive(Clone)]
pub(crate) struct Chunk(Packed<OnceLock<Box<[[u8; 20]]>>>);

/// Most chunks indexed by a sorted slice: an `imbl` map allocates a full node of 64 entries
/// (about 2 KiB) even for one chunk, more than a small collection's own bytes, while copying
/// a slice of 32 entries on a write costs what updating the map does.
const SMALL_INDEX_MAX: usize = 32;

/// The chunks by first key, in key order.
#[derive(Clone)]
enum Index {
    Small(Arc<[(Key, Chunk)]>),
    Large(OrdMap<Key, Chunk>),
}

type IndexIter<'a> = Box<dyn DoubleEndedIterator<Item = (&'a Key, &'a Chunk)> + 'a>;

impl Index {
    fn from_vec(chunks: Vec<(Key, Chunk)>) -> Index {
        if chunks.len() <= SMALL_INDEX_MAX {
            Index::Small(chunks.into())
        } else {
            Index::Large(chunks.into_iter().collect())
        }
    }

    /// The last chunk starting at or before `key`.
    fn at_or_before(&self, key: &Key) -> Option<(&Key, &Chunk)> {
        match self {
            Index::Small(chunks) => {
                let after = chunks.partition_point(|(first, _)| first <= key);
                after
                    .checked_sub(1)
                    .map(|at| (&chunks[at].0, &chunks[at].1))
            }
            Index::Large(chunks) => chunks
                .range::<_, Key>((Bound::Unbounded, Bound::Included(key)))
                .next_back(),
        }
    }

    fn first(&self) -> Option<(&Key, &Chunk)> {
        self.iter().next()
    }

    fn iter(&self) -> IndexIter<'_> {
        match self {
            Index::Small(chunks) => Box::new(chunks.iter().map(|(key, chunk)| (key, chunk))),
            Index::Large(chunks) => Box::new(chunks.iter()),
        }
    }

    /// The chunks whose first keys lie between the bounds (not inverted).
    fn range(&self, from: Bound<Key>, to: Bound<Key>) -> IndexIter<'_> {
        match self {
            Index::Small(chunks) => Box::new(
                chunks
                    .iter()
                    .filter(move |(first, _)| {
                        packed::after(first, from.as_ref()) && packed::before(first, to.as_ref())
                    })
                    .map(|(key, chunk)| (key, chunk)),
            ),
            Index::Large(chunks) => Box::new(chunks.range::<_, Key>((from, to))),
        }
    }

    /// A copy with the chunk starting at `old` replaced by `new` (in key order, all of them
    /// between the neighbours of the old one).
    fn replace(&self, old: &Key, new: Vec<(Key, Chunk)>) -> Index {
        match self {
            Index::Small(chunks) => {
                let at = chunks.partition_point(|(first, _)| first < old);
                let mut next = Vec::with_capacity(chunks.len() + new.len());
                next.extend_from_slice(&chunks[..at]);
                next.extend(new);
                next.extend_from_slice(chunks.get(at + 1..).unwrap_or_default());
                Index::from_vec(next)
            }
            Index::Large(chunks) => {
                let mut next = chunks.without(old);
                for (first, chunk) in new {
                    next.insert(first, chunk);
                }
                if next.len() <= SMALL_INDEX_MAX / 2 {
                    Index::Small(next.into_iter().collect())
                } else {
                    Index::Large(next)
                }
            }
        }
    }

    fn ptr_eq(&self, other: &Index) -> bool {
        match (self, other) {
            (Index::Small(a), Index::Small(b)) => Arc::ptr_eq(a, b),
            (Index::Large(a), Index::Large(b)) => a.ptr_eq(b),
            _ => false,
        }
    }
}

/// A collection in chunks: never empty, no priority, every child packable.
pub(crate) struct Chunked {
    chunks: Index,
    len: usize,
    /// Estimated JSON size of the whole object, as `ObjectData` keeps it.
    bytes: usize,
    hash: OnceLock<Arc<str>>,
}

impl Chunk {
    fn new(count: usize, entries: &[u8]) -> Chunk {
        Chunk(Packed::from_entries(count, entries))
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

/// Collects encoded entries into chunks of at most [`CHUNK_MAX_BYTES`] (a single entry may be
/// larger).
pub(crate) struct Builder {
    chunks: Vec<(Key, Chunk)>,
    entries: Vec<u8>,
    first: Option<Key>,
    count: usize,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder {
            chunks: Vec::new(),
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
            self.chunks
                .push((first, Chunk::new(self.count, &self.entries)));
        }
        self.entries.clear();
        self.count = 0;
    }

    fn finish(mut self) -> Vec<(Key, Chunk)> {
        self.flush();
        self.chunks
    }

    /// The collection of the entries added, `len` of them with `bytes` estimated.
    pub(crate) fn into_chunked(self, len: usize, bytes: usize) -> Chunked {
        Chunked {
            chunks: Index::from_vec(self.finish()),
            len,
            bytes,
            hash: OnceLock::new(),
        }
    }
}

impl Chunked {
    /// The collection of `count` children already encoded one after the other in
    /// `buffer[HEADER_ROOM..]` (keys ascending; `bytes` estimated), cut into chunks as
    /// `Chunked::encode` (in `packing`) cuts them, without a node per child, each chunk
    /// copied once (its header goes in front of its entries, over bytes of the chunk before,
    /// already copied). `None` if the entries do not parse, which is a bug of the caller.
    pub(crate) fn from_encoded(buffer: &mut [u8], count: usize, bytes: usize) -> Option<Chunked> {
        let mut chunks = Vec::new();
        let mut first: Option<(Key, usize)> = None;
        let mut in_chunk = 0;
        let mut at = HEADER_ROOM;
        for _ in 0..count {
            let (name, end) = packed::skip_entry(buffer, at)?;
            match &first {
                // As `Builder::added`: an entry that takes the chunk past the bound starts
                // the next one, unless it is the chunk's only entry.
                Some((_, start)) if end - start > CHUNK_MAX_BYTES => {
                    let start = *start;
                    let key = Key::new_unchecked(name);
                    let chunk = Chunk(Packed::from_entries_in_place(
                        buffer, start, at, 0, in_chunk,
                    ));
                    if let Some((first_key, _)) = first.replace((key, at)) {
                        chunks.push((first_key, chunk));
                    }
                    in_chunk = 0;
                }
                Some(_) => {}
                None => first = Some((Key::new_unchecked(name), at)),
            }
            in_chunk += 1;
            at = end;
        }
        if at != buffer.len() {
            return None;
        }
        let (key, start) = first?;
        let chunk = Chunk(Packed::from_entries_in_place(
            buffer, start, at, 0, in_chunk,
        ));
        chunks.push((key, chunk));
        Some(Chunked {
            chunks: Index::from_vec(chunks),
            len: count,
            bytes,
            hash: OnceLock::new(),
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn estimate(&self) -> usize {
        self.bytes
    }

    /// The chunk that holds `key` if anything does: the last one starting at or before it.
    pub(crate) fn chunk_for(&self, key: &Key) -> Option<(&Key, &Chunk)> {
        self.chunks.at_or_before(key)
    }

    /// A copy with entry `key` set to `value` (its encoded value and the estimated JSON size
    /// of its node), or removed when `value` is `None`. `None` when the chunk does not decode;
    /// the caller then holds the collection as nodes. The result may be empty (`len` 0).
    pub(crate) fn with_entry(&self, key: &Key, value: Option<(&[u8], usize)>) -> Option<Chunked> {
        // The chunk to change: the one holding `key`, or the first when `key` precedes all.
        let (first, chunk) = self.chunk_for(key).or_else(|| self.chunks.first())?;
        let mut entries = chunk.packed().raw_entries()?;
        let at = entries.partition_point(|(name, _)| Key::new_unchecked(name) < *key);
        let present = entries
            .get(at)
            .is_some_and(|(name, _)| *name == key.as_str());
        let mut bytes = self.bytes;
        let mut len = self.len;
        if present {
            bytes -= key.as_str().len() + ENTRY_OVERHEAD + packed::value_estimate(entries[at].1);
            entries.remove(at);
            len -= 1;
        }
        if let Some((value, estimate)) = value {
            bytes += key.as_str().len() + ENTRY_OVERHEAD + estimate;
            entries.insert(at, (key.as_str(), value));
            len += 1;
        }
        let mut builder = Builder::new();
        for (name, encoded) in entries {
            let start = builder.entries.len();
            packed::put_raw_entry(&mut builder.entries, name, encoded);
            builder.added(&Key::new_unchecked(name), start);
        }
        Some(Chunked {
            chunks: self.chunks.replace(first, builder.finish()),
            len,
            bytes,
            hash: OnceLock::new(),
        })
    }

    /// Every chunk, in key order.
    pub(crate) fn all_chunks(&self) -> impl DoubleEndedIterator<Item = &Chunk> {
        self.chunks.iter().map(|(_, chunk)| chunk)
    }

    /// The chunks that may hold keys between the bounds (not inverted), in key order.
    pub(crate) fn chunks_between(
        &self,
        from: Bound<&Key>,
        to: Bound<&Key>,
    ) -> impl DoubleEndedIterator<Item = &Chunk> {
        // The first chunk that may hold keys in range starts at or before `from`; a chunk
        // starting past `to` holds nothing in range.
        let start = match from {
            Bound::Included(key) | Bound::Excluded(key) => {
                self.chunk_for(key).map_or(Bound::Unbounded, |(first, _)| {
                    Bound::Included(first.clone())
                })
            }
            Bound::Unbounded => Bound::Unbounded,
        };
        self.chunks
            .range(start, to.cloned())
            .map(|(_, chunk)| chunk)
    }

    /// The chunks' bytes in key order, for serialization straight from them.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        self.chunks.iter().map(|(_, chunk)| chunk.packed().bytes())
    }

    /// Whether both hold the same children. The encoding of an entry is canonical (keys in
    /// order, each value in one form), so this compares bytes, whatever the chunk boundaries,
    /// and decodes nothing: sync compares query windows built apart on every write.
    pub(crate) fn same_children(&self, other: &Chunked) -> bool {
        if self.chunks.ptr_eq(&other.chunks) {
            return true;
        }
        self.len == other.len && self.raw_entries().eq(other.raw_entries())
    }

    /// Every entry undecoded, key and encoded value, in key order.
    fn raw_entries(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.chunks
            .iter()
            .flat_map(|(_, chunk)| chunk.packed().raw_entries().unwrap_or_default())
    }

    pub(crate) fn hash(&self) -> Arc<str> {
        self.hash
            .get_or_init(|| {
                digest::chunked_hash(
                    self.chunks
                        .iter()
                        .map(|(_, chunk)| (chunk.packed().bytes(), chunk.digests())),
                )
            })
            .clone()
    }

    pub(crate) fn cached_hash(&self) -> Option<&Arc<str>> {
        self.hash.get()
    }
}
