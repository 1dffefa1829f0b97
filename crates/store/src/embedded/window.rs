//! The versioned window: every change committed since the checkpoint, by key and version,
//! in memory — what FoundationDB's storage servers keep as their MVCC window.
//!
//! - **Points**: a lock-free ordered map (`crossbeam_skiplist::SkipMap`) from each key to
//!   its chain of `(version, value)` entries, oldest first (`None`: cleared). The committer
//!   adds each batch's entries; readers walk the map concurrently and lock only the one
//!   chain they read, for a moment. No reader copies anything per commit, and a commit
//!   copies nothing a reader holds.
//! - **Cleared ranges**: disjoint key spans, each with the versions at which a range clear
//!   covered it, so a read at the head of a queue (whose taken keys one range clear
//!   removed) steps over a cleared span in one seek instead of visiting each key in it.
//!   Each span also remembers the newest version of a point written inside it, so a
//!   reader knows when no later write hides inside a span it skips.
//! - **State of a key at version `v`**: its newest entry at or below `v`, unless a range
//!   clear at or below `v` is newer (a point and a range clear of the same batch: the point
//!   was written after the clear, see [`super::batch`]); neither: the checkpoint below
//!   decides ([`State::Below`]).
//! - **Pruning**: entries a newer entry of the same key hides from every live reader go as
//!   commits add entries (a stage's push counter gains one version per commit); entries
//!   and cleared versions at or below the oldest checkpoint a live reader uses go after
//!   each checkpoint, and keys left without entries leave the map.
//! - **Size**: the bytes of keys and values held, which the checkpoint keeps within
//!   `store.window_mb`.

use super::batch::Batch;
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the window says about a key at a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum State {
    /// The window decides: the value (`None`: absent).
    Decided(Option<Bytes>),
    /// The window holds nothing about the key at that version: the checkpoint decides.
    Below,
}

/// Bytes a key's map node and chain cost beyond its key and values, roughly.
const ENTRY_OVERHEAD: usize = 96;

/// One key's versions, oldest first.
type Chain = Mutex<Vec<(u64, Option<Bytes>)>>;

/// A span of keys some range clears covered.
#[derive(Debug, Clone)]
struct Span {
    end: Vec<u8>,
    /// Versions of the range clears that covered it, ascending.
    versions: Vec<u64>,
    /// The newest version of a point written inside the span (0: none).
    newest_point: u64,
}

/// A cleared span `[begin, end)` a reader may step over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Skip {
    pub(super) begin: Vec<u8>,
    pub(super) end: Vec<u8>,
}

/// One thing a checkpoint writes.
pub(super) enum Change<'a> {
    /// Delete every key in `[begin, end)`.
    Cleared(&'a [u8], &'a [u8]),
    /// Set the key to the value, or remove it.
    Point(&'a [u8], Option<&'a Bytes>),
}

/// The window.
#[derive(Default)]
pub(super) struct Window {
    /// Held shared by range reads and by the committer while it adds a batch, exclusively
    /// by [`Window::prune`]'s caller: pruning removes emptied keys from the map, which
    /// must not happen under a writer adding to them or a range read that already decided
    /// which side yields them.
    pub(super) structure: RwLock<()>,
    points: SkipMap<Vec<u8>, Chain>,
    /// Disjoint spans by their first key.
    cleared: RwLock<BTreeMap<Vec<u8>, Span>>,
    /// Bytes of keys and values held.
    bytes: AtomicUsize,
}

impl Window {
    /// Bytes of keys and values held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Adds `batch`; entries that no reader at or above `oldest_read` can see any more are
    /// dropped from the chains it touches. Only the committer (and recovery) call this.
    pub(super) fn apply(&self, batch: &Batch, oldest_read: u64) {
        let v = batch.version;
        if !batch.cleared.is_empty() {
            let mut cleared = self.cleared.write();
            for (b, e) in &batch.cleared {
                insert_span(&mut cleared, b, e, v);
                self.bytes.fetch_add(b.len() + e.len(), Ordering::Relaxed);
            }
        }
        let mut grown = 0usize;
        let mut written = Vec::new();
        for (key, value) in &batch.points {
            let entry = self.points.get_or_insert_with(key.clone(), || {
                grown += key.len() + ENTRY_OVERHEAD;
                Mutex::new(Vec::new())
            });
            let mut chain = entry.value().lock();
            grown += value.as_ref().map_or(0, Bytes::len);
            chain.push((v, value.clone()));
            if chain.len() > 2 {
                grown = grown.saturating_sub(trim(&mut chain, oldest_read));
            }
            written.push(key);
        }
        self.bytes.fetch_add(grown, Ordering::Relaxed);
        let has_spans = !self.cleared.read().is_empty();
        if has_spans {
            let mut cleared = self.cleared.write();
            for key in written {
                if let Some((_, span)) = span_at(&mut cleared, key) {
                    span.newest_point = v;
                }
            }
        }
    }

    /// The state of `key` at `version`.
    pub(super) fn state(&self, key: &[u8], version: u64) -> State {
        let point = self.points.get(key).and_then(|e| {
            let chain = e.value().lock();
            newest_at(&chain, version).map(|(v, value)| (*v, value.clone()))
        });
        let clear = self.cleared_at(key, version).map(|(v, _, _)| v);
        decide(point, clear)
    }

    /// The newest range clear at or below `version` that covers `key`: its version, and
    /// the span it belongs to with whether a point was written inside since.
    fn cleared_at(&self, key: &[u8], version: u64) -> Option<(u64, Skip, bool)> {
        let cleared = self.cleared.read();
        let (begin, span) = cleared
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        if key >= span.end.as_slice() {
            return None;
        }
        let at = span
            .versions
            .iter()
            .rev()
            .find(|v| **v <= version)
            .copied()?;
        let skip = Skip {
            begin: begin.clone(),
            end: span.end.clone(),
        };
        Some((at, skip, span.newest_point >= at))
    }

    /// The cleared span around `key` when a range clear at or below `version` covers it:
    /// the checkpoint's keys in it are gone for a reader at `version`.
    pub(super) fn clears(&self, key: &[u8], version: u64) -> Option<Skip> {
        self.cleared_at(key, version).map(|(_, skip, _)| skip)
    }

    /// The keys in `[begin, end)` the window holds, each with its state at `version`, in
    /// key order (descending when `reverse`); keys it decides as absent are skipped, and
    /// so are whole cleared spans.
    pub(super) fn range<'a>(
        &'a self,
        begin: &'a [u8],
        end: &'a [u8],
        version: u64,
        reverse: bool,
    ) -> impl Iterator<Item = (Vec<u8>, State)> + Send + 'a {
        let mut lower: Vec<u8> = begin.to_vec();
        let mut upper: Vec<u8> = end.to_vec();
        let mut done = false;
        std::iter::from_fn(move || {
            while !done {
                let entry = if reverse {
                    self.points
                        .upper_bound(Bound::Excluded(upper.as_slice()))
                        .filter(|e| e.key().as_slice() >= lower.as_slice())
                } else {
                    self.points
                        .lower_bound(Bound::Included(lower.as_slice()))
                        .filter(|e| e.key().as_slice() < upper.as_slice())
                };
                let Some(entry) = entry else {
                    done = true;
                    break;
                };
                let key = entry.key().clone();
                if reverse {
                    upper.clone_from(&key);
                } else {
                    lower = crate::keys::key_after(&key);
                }
                let point = {
                    let chain = entry.value().lock();
                    newest_at(&chain, version).map(|(v, value)| (*v, value.clone()))
                };
                let clear = self.cleared_at(&key, version);
                match decide(point, clear.as_ref().map(|(v, _, _)| *v)) {
                    State::Decided(None) => {
                        // Nothing written inside the span since it was cleared: skip it.
                        if let Some((_, skip, false)) = clear {
                            if reverse {
                                upper = skip.begin.max(lower.clone());
                            } else {
                                lower = skip.end.min(upper.clone());
                            }
                        }
                    }
                    state => return Some((key, state)),
                }
            }
            None
        })
    }

    /// Hands `write` what a checkpoint from `after` to `version` writes: first every
    /// cleared span a range clear in that interval touched, then the state at `version` of
    /// every key changed in it. Stops at the first error `write` returns.
    pub(super) fn changes<E>(
        &self,
        after: u64,
        version: u64,
        write: &mut impl FnMut(Change<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let spans: Vec<(Vec<u8>, Vec<u8>)> = self
            .cleared
            .read()
            .iter()
            .filter(|(_, span)| span.versions.iter().any(|v| *v > after && *v <= version))
            .map(|(begin, span)| (begin.clone(), span.end.clone()))
            .collect();
        for (begin, end) in &spans {
            write(Change::Cleared(begin, end))?;
        }
        for entry in &self.points {
            let changed = {
                let chain = entry.value().lock();
                newest_at(&chain, version).is_some_and(|(v, _)| *v > after)
            };
            if !changed {
                continue;
            }
            if let State::Decided(value) = self.state(entry.key(), version) {
                write(Change::Point(entry.key(), value.as_ref()))?;
            }
        }
        Ok(())
    }

    /// Forgets everything at or below `version`, which every live reader's checkpoint
    /// holds. The caller holds the engine's structure lock exclusively, so no chain it
    /// empties is being added to or walked by a range read.
    pub(super) fn prune(&self, version: u64) {
        let mut freed = 0usize;
        for entry in &self.points {
            let empty = {
                let mut chain = entry.value().lock();
                let keep = chain.partition_point(|(v, _)| *v <= version);
                for (_, value) in chain.drain(..keep) {
                    freed += value.map_or(0, |v| v.len());
                }
                chain.is_empty()
            };
            if empty {
                freed += entry.key().len() + ENTRY_OVERHEAD;
                entry.remove();
            }
        }
        let mut cleared = self.cleared.write();
        cleared.retain(|begin, span| {
            span.versions.retain(|v| *v > version);
            let keep = !span.versions.is_empty();
            if !keep {
                freed += begin.len() + span.end.len();
            }
            keep
        });
        let _ = self
            .bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(freed))
            });
    }
}

/// The newest entry at or below `version`.
fn newest_at(chain: &[(u64, Option<Bytes>)], version: u64) -> Option<&(u64, Option<Bytes>)> {
    let n = chain.partition_point(|(v, _)| *v <= version);
    n.checked_sub(1).map(|i| &chain[i])
}

/// A key's state from its newest point entry and newest range clear at a version.
fn decide(point: Option<(u64, Option<Bytes>)>, clear: Option<u64>) -> State {
    match (point, clear) {
        (Some((pv, value)), Some(cv)) if pv >= cv => State::Decided(value),
        (Some(_), Some(_)) | (None, Some(_)) => State::Decided(None),
        (Some((_, value)), None) => State::Decided(value),
        (None, None) => State::Below,
    }
}

/// Drops the entries before the newest one at or below `oldest_read`: no live reader sees
/// them. Returns the bytes freed.
fn trim(chain: &mut Vec<(u64, Option<Bytes>)>, oldest_read: u64) -> usize {
    let visible = chain.partition_point(|(v, _)| *v <= oldest_read);
    let drop = visible.saturating_sub(1);
    chain
        .drain(..drop)
        .map(|(_, v)| v.map_or(0, |v| v.len()))
        .sum()
}

/// The span containing `key`.
fn span_at<'m>(
    cleared: &'m mut BTreeMap<Vec<u8>, Span>,
    key: &[u8],
) -> Option<(&'m Vec<u8>, &'m mut Span)> {
    cleared
        .range_mut::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
        .next_back()
        .filter(|(_, span)| key < span.end.as_slice())
}

/// Records a range clear of `[begin, end)` at `version`: spans it partly covers are split
/// at its bounds, spans inside gain the version, gaps become new spans.
fn insert_span(cleared: &mut BTreeMap<Vec<u8>, Span>, begin: &[u8], end: &[u8], version: u64) {
    split_at(cleared, begin);
    split_at(cleared, end);
    let inside: Vec<Vec<u8>> = cleared
        .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
        .map(|(b, _)| b.clone())
        .collect();
    let mut cursor = begin.to_vec();
    for b in inside {
        if cursor < b {
            cleared.insert(
                cursor.clone(),
                Span {
                    end: b.clone(),
                    versions: vec![version],
                    newest_point: 0,
                },
            );
        }
        let span = cleared.get_mut(&b).expect("listed above");
        span.versions.push(version);
        cursor.clone_from(&span.end);
    }
    if cursor.as_slice() < end {
        cleared.insert(
            cursor,
            Span {
                end: end.to_vec(),
                versions: vec![version],
                newest_point: 0,
            },
        );
    }
}

/// Splits the span that strictly contains `at` into two at `at`.
fn split_at(cleared: &mut BTreeMap<Vec<u8>, Span>, at: &[u8]) {
    let Some((begin, span)) = cleared
        .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(at)))
        .next_back()
    else {
        return;
    };
    if at >= span.end.as_slice() || begin.as_slice() == at {
        return;
    }
    let begin = begin.clone();
    let span = cleared.get_mut(&begin).expect("found above");
    let tail = Span {
        end: std::mem::replace(&mut span.end, at.to_vec()),
        versions: span.versions.clone(),
        newest_point: span.newest_point,
    };
    cleared.insert(at.to_vec(), tail);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(
        version: u64,
        sets: &[(&[u8], Option<&'static [u8]>)],
        clears: &[(&[u8], &[u8])],
    ) -> Batch {
        let mut b = Batch::new(version, 0);
        for (k, v) in sets {
            b.points.insert(k.to_vec(), v.map(Bytes::from_static));
        }
        for (s, e) in clears {
            b.cleared.push((s.to_vec(), e.to_vec()));
        }
        b
    }

    #[test]
    fn a_reader_sees_the_newest_entry_at_its_version() {
        let w = Window::default();
        w.apply(&batch(10, &[(b"k", Some(b"1"))], &[]), 0);
        w.apply(&batch(20, &[(b"k", None)], &[]), 0);
        assert_eq!(w.state(b"k", 5), State::Below);
        assert_eq!(
            w.state(b"k", 10),
            State::Decided(Some(Bytes::from_static(b"1")))
        );
        assert_eq!(w.state(b"k", 25), State::Decided(None));
    }

    #[test]
    fn a_range_clear_hides_older_points_and_a_later_point_shows_through() {
        let w = Window::default();
        w.apply(
            &batch(10, &[(b"b", Some(b"1")), (b"c", Some(b"1"))], &[]),
            0,
        );
        w.apply(&batch(20, &[], &[(b"a", b"d")]), 0);
        w.apply(&batch(30, &[(b"c", Some(b"2"))], &[]), 0);
        assert_eq!(w.state(b"b", 25), State::Decided(None));
        assert_eq!(w.state(b"x", 25), State::Below);
        assert_eq!(w.state(b"a", 25), State::Decided(None));
        assert_eq!(
            w.state(b"c", 30),
            State::Decided(Some(Bytes::from_static(b"2")))
        );
        let keys: Vec<Vec<u8>> = w.range(b"a", b"z", 30, false).map(|(k, _)| k).collect();
        assert_eq!(keys, vec![b"c".to_vec()]);
        let keys: Vec<Vec<u8>> = w.range(b"a", b"z", 15, true).map(|(k, _)| k).collect();
        assert_eq!(keys, vec![b"c".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn overlapping_clears_split_spans_and_keep_every_version() {
        let mut spans = BTreeMap::new();
        insert_span(&mut spans, b"b", b"f", 1);
        insert_span(&mut spans, b"d", b"h", 2);
        let listed: Vec<(Vec<u8>, Vec<u8>, Vec<u64>)> = spans
            .iter()
            .map(|(b, s)| (b.clone(), s.end.clone(), s.versions.clone()))
            .collect();
        assert_eq!(
            listed,
            vec![
                (b"b".to_vec(), b"d".to_vec(), vec![1]),
                (b"d".to_vec(), b"f".to_vec(), vec![1, 2]),
                (b"f".to_vec(), b"h".to_vec(), vec![2]),
            ]
        );
    }

    #[test]
    fn pruning_forgets_what_the_checkpoint_holds_and_frees_its_bytes() {
        let w = Window::default();
        w.apply(&batch(10, &[(b"k", Some(b"value"))], &[(b"a", b"b")]), 0);
        w.apply(&batch(20, &[(b"n", Some(b"v"))], &[]), 0);
        let before = w.bytes();
        w.prune(10);
        assert_eq!(w.state(b"k", 30), State::Below);
        assert_eq!(
            w.state(b"n", 30),
            State::Decided(Some(Bytes::from_static(b"v")))
        );
        assert_eq!(w.bytes(), before - (1 + 5 + ENTRY_OVERHEAD + 2));
    }

    #[test]
    fn a_hot_key_keeps_only_what_live_readers_can_see() {
        let w = Window::default();
        for v in 1..=100 {
            w.apply(&batch(v, &[(b"counter", Some(b"x"))], &[]), v - 1);
        }
        let len = w.points.get(&b"counter"[..]).unwrap().value().lock().len();
        assert!(len <= 3, "{len} entries kept");
    }
}
