//! The ids of a core's connections and event streams: unique in the server, because the
//! cores' sequences interleave, so that an owner can key the sessions of connections held by
//! every core by their id. The edge and the owner of a core draw from one sequence.

use std::cell::Cell;

use hearth_sync::ConnId;

/// One core's sequence of connection ids.
#[derive(Debug)]
pub struct ConnIds {
    next: Cell<u64>,
    index: u64,
    cores: u64,
}

impl ConnIds {
    /// The sequence of core `index` among `cores`.
    pub fn new(index: usize, cores: usize) -> ConnIds {
        ConnIds {
            next: Cell::new(1),
            index: index as u64,
            cores: cores.max(1) as u64,
        }
    }

    /// A new id: `n * cores + index` for the core's `n`th id.
    pub fn next(&self) -> ConnId {
        let id = self.next.get();
        self.next.set(id + 1);
        id * self.cores + self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cores_never_draw_the_same_id() {
        let (a, b) = (ConnIds::new(0, 2), ConnIds::new(1, 2));
        let first: Vec<_> = (0..100).map(|_| a.next()).collect();
        let second: Vec<_> = (0..100).map(|_| b.next()).collect();
        assert!(first.iter().all(|id| !second.contains(id)));
        assert!(first.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
