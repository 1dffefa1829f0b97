//! A transaction's own writes, layered over its snapshot so reads see them
//! (read-your-writes), plus the ordered mutation log the commit applies.

use super::mutation::{Mutation, apply_add};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::ops::Bound;

/// What the transaction knows locally about one key.
#[derive(Debug, Clone)]
pub(super) enum Local {
    /// The key's value is fully decided by this transaction (`None`: cleared); the same
    /// buffer as the mutation log's.
    Value(Option<Bytes>),
    /// Atomic adds over a value this transaction has not read; the snapshot's value plus
    /// these parameters, in order, give the key's value.
    Adds(Vec<Vec<u8>>),
}

impl Local {
    /// The key's value given its value in the snapshot.
    pub(super) fn resolve(&self, base: Option<&[u8]>) -> Option<Vec<u8>> {
        match self {
            Self::Value(v) => v.as_deref().map(<[u8]>::to_vec),
            Self::Adds(params) => {
                let mut value = base.map(<[u8]>::to_vec);
                for p in params {
                    value = Some(apply_add(value.as_deref(), p));
                }
                value
            }
        }
    }
}

/// The transaction's writes.
#[derive(Debug, Default)]
pub(super) struct Overlay {
    /// Keys written individually, with what is known of their value.
    points: BTreeMap<Vec<u8>, Local>,
    /// Ranges cleared by `clear_range`, sorted and disjoint; a key in one of them that is
    /// not in `points` is absent.
    cleared: Vec<(Vec<u8>, Vec<u8>)>,
    /// Every mutation in the order made, as the commit applies them.
    pub(super) log: Vec<Mutation>,
}

impl Overlay {
    /// Records `set(key, value)`; the point and the log share `value`'s buffer.
    pub(super) fn set(&mut self, key: Vec<u8>, value: Bytes) {
        self.points
            .insert(key.clone(), Local::Value(Some(value.clone())));
        self.log.push(Mutation::Set { key, value });
    }

    /// Records `clear(key)`.
    pub(super) fn clear(&mut self, key: &[u8]) {
        self.points.insert(key.to_vec(), Local::Value(None));
        self.log.push(Mutation::Clear { key: key.to_vec() });
    }

    /// Records `clear_range(begin, end)`.
    pub(super) fn clear_range(&mut self, begin: &[u8], end: &[u8]) {
        if begin >= end {
            return;
        }
        let inside: Vec<Vec<u8>> = self
            .points
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in inside {
            self.points.remove(&k);
        }
        self.insert_cleared(begin.to_vec(), end.to_vec());
        self.log.push(Mutation::ClearRange {
            begin: begin.to_vec(),
            end: end.to_vec(),
        });
    }

    /// Records an atomic add of `param` to `key`.
    pub(super) fn add(&mut self, key: &[u8], param: &[u8]) {
        let cleared = self.is_cleared(key);
        match self.points.get_mut(key) {
            Some(Local::Value(v)) => *v = Some(apply_add(v.as_deref(), param).into()),
            Some(Local::Adds(params)) => params.push(param.to_vec()),
            None if cleared => {
                self.points.insert(
                    key.to_vec(),
                    Local::Value(Some(apply_add(None, param).into())),
                );
            }
            None => {
                self.points
                    .insert(key.to_vec(), Local::Adds(vec![param.to_vec()]));
            }
        }
        self.log.push(Mutation::Add {
            key: key.to_vec(),
            param: param.to_vec(),
        });
    }

    /// Records a mutation that reads cannot see (versionstamped keys and values).
    pub(super) fn push_unreadable(&mut self, mutation: Mutation) {
        if let Mutation::SetVersionstampedValue { key, .. } = &mutation {
            // The final value is unknown until commit; forget any local knowledge.
            self.points.remove(key);
        }
        self.log.push(mutation);
    }

    /// What the transaction knows about `key`: `Some(local)` when it wrote the key,
    /// `Some(Value(None))` when a cleared range covers it, `None` when the snapshot decides.
    pub(super) fn lookup(&self, key: &[u8]) -> Option<Local> {
        match self.points.get(key) {
            Some(l) => Some(l.clone()),
            None if self.is_cleared(key) => Some(Local::Value(None)),
            None => None,
        }
    }

    /// Whether the snapshot's value of `key` is hidden by this transaction's writes.
    pub(super) fn hides(&self, key: &[u8]) -> bool {
        self.points.contains_key(key) || self.is_cleared(key)
    }

    /// The individually written keys in `[begin, end)`, in key order.
    pub(super) fn points_in<'a>(
        &'a self,
        begin: &'a [u8],
        end: &'a [u8],
    ) -> impl DoubleEndedIterator<Item = (&'a Vec<u8>, &'a Local)> + 'a {
        self.points
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
    }

    fn is_cleared(&self, key: &[u8]) -> bool {
        let i = self.cleared.partition_point(|(b, _)| b.as_slice() <= key);
        i > 0 && key < self.cleared[i - 1].1.as_slice()
    }

    fn insert_cleared(&mut self, mut begin: Vec<u8>, mut end: Vec<u8>) {
        // Merge with every cleared range that overlaps or touches [begin, end).
        let mut merged = Vec::with_capacity(self.cleared.len() + 1);
        for (b, e) in self.cleared.drain(..) {
            if e < begin || end < b {
                merged.push((b, e));
            } else {
                begin = begin.min(b);
                end = end.max(e);
            }
        }
        let at = merged.partition_point(|(b, _)| *b < begin);
        merged.insert(at, (begin, end));
        self.cleared = merged;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_after_clear_range_is_visible() {
        let mut o = Overlay::default();
        o.clear_range(b"a", b"z");
        o.set(b"m".to_vec(), Bytes::from_static(b"1"));
        assert!(matches!(o.lookup(b"m"), Some(Local::Value(Some(v))) if v[..] == b"1"[..]));
        assert!(matches!(o.lookup(b"n"), Some(Local::Value(None))));
        assert!(o.lookup(b"z").is_none());
    }

    #[test]
    fn overlapping_cleared_ranges_merge() {
        let mut o = Overlay::default();
        o.clear_range(b"c", b"f");
        o.clear_range(b"a", b"d");
        o.clear_range(b"x", b"y");
        assert_eq!(o.cleared.len(), 2);
        assert!(o.hides(b"e"));
        assert!(!o.hides(b"f"));
    }

    #[test]
    fn add_over_unread_key_resolves_against_snapshot() {
        let mut o = Overlay::default();
        o.add(b"n", &2i64.to_le_bytes());
        o.add(b"n", &3i64.to_le_bytes());
        let local = o.lookup(b"n").unwrap();
        let v = local.resolve(Some(&10i64.to_le_bytes())).unwrap();
        assert_eq!(i64::from_le_bytes(v.try_into().unwrap()), 15);
    }
}
