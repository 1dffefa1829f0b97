//! The set of keys a commit (or a batch of commits) wrote, for conflict checks and watches.
//!
//! Most writes are single keys, kept in an ordered set so checking a read range costs one
//! ordered lookup; range writes (`clear_range`, explicit write conflict ranges) are few and
//! kept in a list.

use std::collections::BTreeSet;
use std::ops::Bound;

/// Keys and key ranges written.
#[derive(Debug, Default, Clone)]
pub(super) struct WriteSet {
    /// Single keys written.
    points: BTreeSet<Vec<u8>>,
    /// Ranges `[begin, end)` written.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

impl WriteSet {
    /// Records a write of `key`.
    pub(super) fn add_point(&mut self, key: Vec<u8>) {
        self.points.insert(key);
    }

    /// Records a write of every key in `[begin, end)`.
    pub(super) fn add_range(&mut self, begin: Vec<u8>, end: Vec<u8>) {
        if begin < end {
            self.ranges.push((begin, end));
        }
    }

    /// Whether any write falls in `[begin, end)`.
    pub(super) fn intersects(&self, begin: &[u8], end: &[u8]) -> bool {
        let point_hit = self
            .points
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
            .next()
            .is_some();
        point_hit
            || self
                .ranges
                .iter()
                .any(|(b, e)| b.as_slice() < end && begin < e.as_slice())
    }

    /// Whether nothing was written.
    pub(super) fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_and_range_intersections() {
        let mut w = WriteSet::default();
        w.add_point(b"b".to_vec());
        w.add_range(b"m".to_vec(), b"p".to_vec());
        assert!(w.intersects(b"a", b"c"));
        assert!(!w.intersects(b"c", b"m"));
        assert!(w.intersects(b"o", b"z"));
        assert!(!w.intersects(b"p", b"z"));
        assert!(!w.intersects(b"a", b"b"));
    }
}
