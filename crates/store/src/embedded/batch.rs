//! A group commit's net effect, resolved: what the commit log stores and the window
//! applies.
//!
//! The committer resolves every accepted transaction's mutations, in order, into one
//! [`Batch`]: versionstamps filled in, atomic adds summed over the value committed before
//! the batch, and later writes of a key replacing earlier ones. What is left is a list of
//! cleared ranges and each written key's final value — replaying it needs no reads, so
//! recovery is a plain replay of the log, and a key written many times in a batch (a
//! stage's push counter) is stored once.
//!
//! Order inside a batch: the cleared ranges come first, then the points. A point that
//! survives in the batch was written after every range clear of the batch that covers it
//! (a later range clear removes it from the batch), so the points win over the ranges at
//! the batch's version.
//!
//! Record format (little-endian), as the commit log frames it:
//!
//! ```text
//! version u64 | previous u64 | ranges u32 | (len u32, begin, len u32, end)*
//!             | points u32 | (len u32, key, tag u8 [0 clear, 1 set], [len u32, value])*
//! ```
//!
//! `previous` is the version of the batch before it, so a replay can tell a gap in the log
//! (a lost record) from its end.

use super::mutation::{Mutation, apply_add, fill_versionstamp};
use crate::StoreError;
use crate::keys::VERSIONSTAMP_LEN;
use bytes::{Buf, Bytes};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// One group commit's net effect at `version`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Batch {
    /// The commit version.
    pub(super) version: u64,
    /// The version of the batch committed before it (0: none).
    pub(super) previous: u64,
    /// Ranges `[begin, end)` cleared, applied before the points.
    pub(super) cleared: Vec<(Vec<u8>, Vec<u8>)>,
    /// Each written key's final value in the batch (`None`: cleared), in key order.
    pub(super) points: BTreeMap<Vec<u8>, Option<Bytes>>,
    /// Keys a versionstamp made: new keys, which no checkpoint holds (not logged: a
    /// replayed batch has none, which only keeps its keys in the window longer).
    pub(super) fresh: BTreeSet<Vec<u8>>,
}

impl Batch {
    /// An empty batch at `version`, following `previous`.
    pub(super) fn new(version: u64, previous: u64) -> Self {
        Self {
            version,
            previous,
            ..Self::default()
        }
    }

    /// Adds one transaction's mutation, with `stamp` as the transaction's versionstamp;
    /// `committed` reads a key's value before the batch (for atomic adds).
    ///
    /// # Errors
    /// The error `committed` gave.
    pub(super) fn resolve(
        &mut self,
        m: &Mutation,
        stamp: &[u8; VERSIONSTAMP_LEN],
        committed: &mut impl FnMut(&[u8]) -> Result<Option<Bytes>, StoreError>,
    ) -> Result<(), StoreError> {
        match m {
            Mutation::Set { key, value } => {
                self.points.insert(key.clone(), Some(value.clone()));
            }
            Mutation::Clear { key } => {
                self.points.insert(key.clone(), None);
            }
            Mutation::ClearRange { begin, end } => {
                let inside: Vec<Vec<u8>> = self
                    .points
                    .range::<[u8], _>((Bound::Included(&begin[..]), Bound::Excluded(&end[..])))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in inside {
                    self.points.remove(&k);
                }
                self.cleared.push((begin.clone(), end.clone()));
            }
            Mutation::Add { key, param } => {
                let current = match self.points.get(key) {
                    Some(v) => v.clone(),
                    None if self.clears(key) => None,
                    None => committed(key)?,
                };
                let sum = apply_add(current.as_deref(), param);
                self.points.insert(key.clone(), Some(sum.into()));
            }
            Mutation::SetVersionstampedKey { key, offset, value } => {
                let key = fill_versionstamp(key, *offset, stamp);
                self.fresh.insert(key.clone());
                self.points.insert(key, Some(value.clone()));
            }
            Mutation::SetVersionstampedValue { key, value, offset } => {
                let filled = fill_versionstamp(value, *offset, stamp);
                self.points.insert(key.clone(), Some(filled.into()));
            }
        }
        Ok(())
    }

    /// Whether a range cleared in this batch covers `key`.
    fn clears(&self, key: &[u8]) -> bool {
        self.cleared
            .iter()
            .any(|(b, e)| b.as_slice() <= key && key < e.as_slice())
    }

    /// Whether the batch changes nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.cleared.is_empty() && self.points.is_empty()
    }

    /// Bytes of keys and values the batch holds.
    pub(super) fn size(&self) -> usize {
        let ranges: usize = self.cleared.iter().map(|(b, e)| b.len() + e.len()).sum();
        let points: usize = self
            .points
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len))
            .sum();
        ranges + points
    }

    /// Bytes the record takes, at most.
    pub(super) fn encoded_len(&self) -> usize {
        24 + self.size() + 8 * self.cleared.len() + 9 * self.points.len()
    }

    /// Appends the record's bytes to `out`.
    pub(super) fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.previous.to_le_bytes());
        out.extend_from_slice(&(self.cleared.len() as u32).to_le_bytes());
        for (b, e) in &self.cleared {
            put_bytes(out, b);
            put_bytes(out, e);
        }
        out.extend_from_slice(&(self.points.len() as u32).to_le_bytes());
        for (k, v) in &self.points {
            put_bytes(out, k);
            match v {
                None => out.push(0),
                Some(v) => {
                    out.push(1);
                    put_bytes(out, v);
                }
            }
        }
    }

    /// Reads a record; values share `record`'s buffer. `None` when it does not parse.
    pub(super) fn decode(mut record: Bytes) -> Option<Self> {
        let version = get_u64(&mut record)?;
        let previous = get_u64(&mut record)?;
        let ranges = get_u32(&mut record)?;
        let mut batch = Self::new(version, previous);
        for _ in 0..ranges {
            let b = get_bytes(&mut record)?.to_vec();
            let e = get_bytes(&mut record)?.to_vec();
            batch.cleared.push((b, e));
        }
        let points = get_u32(&mut record)?;
        for _ in 0..points {
            let k = get_bytes(&mut record)?.to_vec();
            let value = match get_u8(&mut record)? {
                0 => None,
                1 => Some(get_bytes(&mut record)?),
                _ => return None,
            };
            batch.points.insert(k, value);
        }
        record.is_empty().then_some(batch)
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn get_u8(b: &mut Bytes) -> Option<u8> {
    (b.remaining() >= 1).then(|| b.get_u8())
}

fn get_u32(b: &mut Bytes) -> Option<u32> {
    (b.remaining() >= 4).then(|| b.get_u32_le())
}

fn get_u64(b: &mut Bytes) -> Option<u64> {
    (b.remaining() >= 8).then(|| b.get_u64_le())
}

fn get_bytes(b: &mut Bytes) -> Option<Bytes> {
    let len = get_u32(b)? as usize;
    (b.remaining() >= len).then(|| b.split_to(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAMP: [u8; VERSIONSTAMP_LEN] = [9; VERSIONSTAMP_LEN];

    fn none(_: &[u8]) -> Result<Option<Bytes>, StoreError> {
        Ok(None)
    }

    #[test]
    fn later_writes_replace_earlier_ones_and_a_range_clear_drops_the_points_it_covers() {
        let mut b = Batch::new(7, 3);
        let set = |k: &[u8], v: &'static [u8]| Mutation::Set {
            key: k.to_vec(),
            value: Bytes::from_static(v),
        };
        b.resolve(&set(b"a", b"1"), &STAMP, &mut none).unwrap();
        b.resolve(&set(b"m", b"1"), &STAMP, &mut none).unwrap();
        b.resolve(
            &Mutation::ClearRange {
                begin: b"l".to_vec(),
                end: b"n".to_vec(),
            },
            &STAMP,
            &mut none,
        )
        .unwrap();
        b.resolve(&set(b"a", b"2"), &STAMP, &mut none).unwrap();
        assert_eq!(b.points.len(), 1);
        assert_eq!(b.points[&b"a"[..]].as_deref(), Some(&b"2"[..]));
        assert_eq!(b.cleared, vec![(b"l".to_vec(), b"n".to_vec())]);
    }

    #[test]
    fn adds_read_the_committed_value_once_then_sum_in_the_batch() {
        let mut b = Batch::new(1, 0);
        let mut reads = 0;
        let mut committed = |_: &[u8]| {
            reads += 1;
            Ok(Some(Bytes::from(10u64.to_le_bytes().to_vec())))
        };
        for _ in 0..3 {
            let add = Mutation::Add {
                key: b"n".to_vec(),
                param: 1u64.to_le_bytes().to_vec(),
            };
            b.resolve(&add, &STAMP, &mut committed).unwrap();
        }
        assert_eq!(reads, 1);
        let v = b.points[&b"n"[..]].clone().unwrap();
        assert_eq!(u64::from_le_bytes(v[..].try_into().unwrap()), 13);
    }

    #[test]
    fn a_record_round_trips_and_a_truncated_one_does_not_parse() {
        let mut b = Batch::new(42, 41);
        b.cleared.push((b"a".to_vec(), b"c".to_vec()));
        b.points
            .insert(b"k".to_vec(), Some(Bytes::from_static(b"v")));
        b.points.insert(b"x".to_vec(), None);
        let mut bytes = Vec::new();
        b.encode_into(&mut bytes);
        assert!(bytes.len() <= b.encoded_len());
        assert_eq!(Batch::decode(Bytes::from(bytes.clone())), Some(b));
        for cut in 0..bytes.len() {
            assert_eq!(Batch::decode(Bytes::copy_from_slice(&bytes[..cut])), None);
        }
    }
}
