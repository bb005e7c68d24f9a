//! Iterators over the children of a node: borrowed from an object of nodes, decoded from a
//! packed one.

use std::borrow::Cow;

use crate::children::ChildIter;
use crate::chunked::ChunkedIter;
use crate::key::Key;
use crate::node::Node;

/// Where the children of an iterator come from.
pub(crate) enum Inner<'a> {
    Nothing,
    Map(ChildIter<'a>),
    Decoded(std::vec::IntoIter<(Key, Node)>),
    /// Decoded chunk by chunk, with the count still to come when known (all children).
    Chunked(ChunkedIter<'a>, Option<usize>),
}

impl<'a> Inner<'a> {
    fn next(&mut self) -> Option<(Cow<'a, Key>, Cow<'a, Node>)> {
        match self {
            Inner::Nothing => None,
            Inner::Map(it) => it.next().map(|(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v))),
            Inner::Decoded(it) => it.next().map(|(k, v)| (Cow::Owned(k), Cow::Owned(v))),
            Inner::Chunked(it, left) => {
                let next = it.next()?;
                *left = left.map(|n| n.saturating_sub(1));
                Some((Cow::Owned(next.0), Cow::Owned(next.1)))
            }
        }
    }

    fn next_back(&mut self) -> Option<(Cow<'a, Key>, Cow<'a, Node>)> {
        match self {
            Inner::Nothing => None,
            Inner::Map(it) => it
                .next_back()
                .map(|(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v))),
            Inner::Decoded(it) => it.next_back().map(|(k, v)| (Cow::Owned(k), Cow::Owned(v))),
            Inner::Chunked(it, left) => {
                let next = it.next_back()?;
                *left = left.map(|n| n.saturating_sub(1));
                Some((Cow::Owned(next.0), Cow::Owned(next.1)))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Inner::Nothing => (0, Some(0)),
            Inner::Map(it) => it.size_hint(),
            Inner::Decoded(it) => it.size_hint(),
            Inner::Chunked(_, Some(left)) => (*left, Some(*left)),
            Inner::Chunked(_, None) => (0, None),
        }
    }
}

/// Iterator over the children of a node, in key order. Double-ended, so the last children
/// (limitToLast windows) are as cheap to reach as the first.
pub struct Children<'a>(pub(crate) Inner<'a>);

impl<'a> Iterator for Children<'a> {
    type Item = (Cow<'a, Key>, Cow<'a, Node>);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Children<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl ExactSizeIterator for Children<'_> {}

/// Iterator over a key range of the children of a node, in key order, from either end.
pub struct ChildrenRange<'a>(pub(crate) Inner<'a>);

impl<'a> Iterator for ChildrenRange<'a> {
    type Item = (Cow<'a, Key>, Cow<'a, Node>);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

impl DoubleEndedIterator for ChildrenRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}
