//! A collection in chunks cut out of the buffer of an `ObjectBuilder` (`builder`), in place.
//!
//! The builder encodes children one after the other into one buffer while they pack. Cutting
//! that buffer into chunks copies each entry once more, into its chunk: a chunk's header goes
//! in front of its entries, over bytes of the chunk before, already copied. A child over the
//! packing bound that is in chunks itself (a large child, see `chunked`) is a part of its own:
//! when one comes, the builder cuts what its buffer holds, so that the buffer holds only the
//! entries since the last large child rather than a whole collection of large records and
//! small ones, which would leave a freed buffer of megabytes resident after a load.

use std::sync::Arc;

use crate::chunked::{Chunk, Chunked, Part, CHUNK_MAX_BYTES};
use crate::key::Key;
use crate::packed::{self, HEADER_ROOM};

/// The parts of a collection cut so far, in key order.
#[derive(Default)]
pub(crate) struct Cutter {
    parts: Vec<(Key, Part)>,
    /// The children in `parts`.
    len: usize,
}

impl Cutter {
    /// The number of children cut so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The parts cut so far, in key order.
    pub(crate) fn parts(&self) -> &[(Key, Part)] {
        &self.parts
    }

    /// Cuts the `count` children encoded one after the other in `buffer[HEADER_ROOM..]` (keys
    /// ascending, after those cut so far) into chunks, as `Chunked::encode` (in `packing`)
    /// cuts them. `None`, with nothing cut, if the entries do not parse, which is a bug of the
    /// caller; the buffer is then as it was.
    pub(crate) fn cut(&mut self, buffer: &mut [u8], count: usize) -> Option<()> {
        // Checked whole first, so that a failure leaves no chunk and no header written.
        let mut at = HEADER_ROOM;
        for _ in 0..count {
            at = packed::skip_entry(buffer, at)?.1;
        }
        if at != buffer.len() {
            return None;
        }
        // The first key and the offset of the run being cut, and its count of entries.
        let mut run: Option<(Key, usize)> = None;
        let mut in_run = 0;
        let mut at = HEADER_ROOM;
        for _ in 0..count {
            let Some((name, end)) = packed::skip_entry(buffer, at) else {
                break; // Not reached: checked above.
            };
            // As `chunked::Builder::added`: an entry that takes the run past the bound starts
            // the next one, unless it is the run's only entry.
            let split = run
                .as_ref()
                .is_some_and(|(_, start)| end - start > CHUNK_MAX_BYTES);
            // A key only for the first entry of a run (the borrow of `name` ends here).
            let first = (split || run.is_none()).then(|| Key::new_unchecked(name));
            if split {
                self.flush(buffer, run.take(), at, in_run);
                in_run = 0;
            }
            if let Some(first) = first {
                run = Some((first, at));
            }
            in_run += 1;
            at = end;
        }
        self.flush(buffer, run, at, in_run);
        self.len += count;
        Some(())
    }

    /// Ends the run `run` (its first key and offset) at `end`.
    fn flush(&mut self, buffer: &mut [u8], run: Option<(Key, usize)>, end: usize, count: usize) {
        if let Some((first, start)) = run {
            let chunk = Chunk::in_place(buffer, start, end, count);
            self.parts.push((first, Part::Run(chunk)));
        }
    }

    /// Adds a large child, after every child cut so far.
    pub(crate) fn push_large(&mut self, key: &Key, child: Arc<Chunked>) {
        self.parts.push((key.clone(), Part::Large(child)));
        self.len += 1;
    }

    /// The collection of the parts cut (`bytes` estimated), leaving the cutter empty; `None`
    /// when nothing was cut.
    pub(crate) fn take_chunked(&mut self, bytes: usize) -> Option<Chunked> {
        if self.parts.is_empty() {
            return None;
        }
        let len = std::mem::take(&mut self.len);
        let parts = std::mem::take(&mut self.parts);
        Some(Chunked::from_parts(parts, len, bytes))
    }

    pub(crate) fn clear(&mut self) {
        self.parts.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_that_do_not_parse_are_left_uncut() {
        let mut buffer = vec![0; HEADER_ROOM];
        packed::put_key(&mut buffer, "a");
        packed::put_bool(&mut buffer, true);
        let before = buffer.clone();
        let mut cutter = Cutter::default();
        // One entry where two are said to be, and bytes past the one said to be there.
        assert!(cutter.cut(&mut buffer, 2).is_none());
        assert!(cutter.cut(&mut buffer, 0).is_none());
        assert_eq!(buffer, before);
        assert!(cutter.is_empty());
        assert_eq!(cutter.len(), 0);
        assert!(cutter.cut(&mut buffer, 1).is_some());
        assert_eq!(cutter.len(), 1);
        let chunked = cutter.take_chunked(10).expect("one chunk");
        assert_eq!((chunked.len(), chunked.estimate()), (1, 10));
        assert!(cutter.is_empty() && cutter.take_chunked(10).is_none());
    }
}
