//! Estimated JSON sizes, for size limits.
//!
//! Every object keeps a rough estimate of the size of its JSON in export form, updated as it
//! is written, so that a size check is O(1) at any depth. Its parts live here, below nodes,
//! because packed and chunked objects keep the same estimate for their encoded children.

use crate::leaf::Leaf;
use crate::priority::Priority;

/// Rough JSON overhead of one object entry: two quotes, a colon and a comma.
pub(crate) const ENTRY_OVERHEAD: usize = 4;

/// Rough JSON overhead of an export wrapper `{".value":…,".priority":…}` or `,".priority":…`.
const PRIORITY_OVERHEAD: usize = 26;

pub(crate) fn priority_bytes(priority: &Priority) -> usize {
    match priority {
        Priority::None => 0,
        Priority::Number(n) => PRIORITY_OVERHEAD + number_bytes(*n),
        Priority::String(s) => PRIORITY_OVERHEAD + s.len() + 2,
    }
}

/// Approximate printed length of a number: exact for integers below 10^15, generous otherwise.
pub(crate) fn number_bytes(n: f64) -> usize {
    let magnitude = n.abs();
    if n.fract() == 0.0 && magnitude < 1e15 {
        // The range check makes the conversion exact.
        let digits = (magnitude as u64)
            .checked_ilog10()
            .map_or(1, |d| d as usize + 1);
        digits + usize::from(n < 0.0)
    } else {
        24
    }
}

pub(crate) fn leaf_bytes(value: &Leaf) -> usize {
    match value {
        Leaf::Bool(true) => 4,
        Leaf::Bool(false) => 5,
        Leaf::Number(n) => number_bytes(*n),
        Leaf::String(s) => s.len() + 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_count_their_digits_and_sign() {
        assert_eq!(number_bytes(-120.0), 4);
        assert_eq!(number_bytes(0.0), 1);
        assert_eq!(number_bytes(0.5), 24);
    }
}
