//! The versioned window: every change committed since the checkpoint, by key and version,
//! in memory — what FoundationDB's storage servers keep as their MVCC window.
//!
//! - **Points**: a lock-free ordered map (`crossbeam_skiplist::SkipMap`) from each key to
//!   its chain of `(version, value)` entries, oldest first (`None`: cleared). The committer
//!   adds each batch's entries; readers walk the map concurrently and lock only the one
//!   chain they read, for a moment. No reader copies anything per commit, and a commit
//!   copies nothing a reader holds.
//! - **Cleared ranges**: disjoint key spans, each with the versions at which a range clear
//!   covered it. A read at the head of a queue (whose taken keys range clears removed)
//!   steps over a run of adjacent cleared spans in one seek instead of visiting each key in
//!   them. Each span also remembers the newest version of a point written inside it, so a
//!   reader knows when no later write hides inside a span it skips.
//! - **State of a key at version `v`**: its newest entry at or below `v`, unless a range
//!   clear at or below `v` is newer (a point and a range clear of the same batch: the point
//!   was written after the clear, see [`super::batch`]); neither: the checkpoint below
//!   decides ([`State::Below`]).
//! - **Pruning**: entries a newer entry of the same key hides from every live reader go as
//!   commits add entries (a stage's push counter gains one version per commit). A *fresh*
//!   key — one no checkpoint holds, such as a versionstamped key (a new message) — goes
//!   from the map as soon as no live reader is older than the clear that removed it, so a
//!   message published and consumed between two checkpoints leaves nothing behind. The
//!   rest (entries and cleared versions at or below the oldest checkpoint a live reader
//!   uses) goes after each checkpoint, and keys left without entries leave the map.
//! - **Size**: the bytes of keys and values held, which the checkpoint keeps within
//!   `store.window_mb`.

use super::batch::Batch;
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use crossbeam_skiplist::map::Entry;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
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

/// One key's versions.
#[derive(Debug, Default)]
struct Versions {
    /// Oldest first.
    entries: Vec<(u64, Option<Bytes>)>,
    /// No checkpoint holds the key (it was created by a versionstamp, and no checkpoint
    /// has written it since).
    fresh: bool,
}

type Chain = Mutex<Versions>;

/// A span of keys some range clears covered.
#[derive(Debug, Clone)]
struct Span {
    end: Vec<u8>,
    /// Versions of the range clears that covered it, ascending.
    versions: Vec<u64>,
    /// The newest version of a point written inside the span (0: none).
    newest_point: u64,
}

impl Span {
    /// The newest clear at or below `version`.
    fn cleared_at(&self, version: u64) -> Option<u64> {
        self.versions.iter().rev().find(|v| **v <= version).copied()
    }

    /// Whether a reader at `version` may step over the whole span: a clear it sees covers
    /// it, and (when `points` matter) no point was written inside since.
    fn skippable(&self, version: u64, points: bool) -> bool {
        self.cleared_at(version)
            .is_some_and(|at| !points || self.newest_point < at)
    }
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
    /// Fresh keys a clear removed, with the clear's version, in commit order.
    dead: Mutex<VecDeque<(Vec<u8>, u64)>>,
    /// Bytes of keys and values held.
    bytes: AtomicUsize,
}

impl Window {
    /// Bytes of keys and values held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Adds `batch`, whose keys in `fresh` no checkpoint can hold; entries no reader at
    /// or above `oldest_read` can see any more are dropped first. Only the committer (and
    /// recovery) call this, holding the structure lock shared.
    pub(super) fn apply(&self, batch: &Batch, oldest_read: u64) {
        self.drop_dead(oldest_read);
        let v = batch.version;
        if !batch.cleared.is_empty() {
            let mut cleared = self.cleared.write();
            let mut dead = self.dead.lock();
            for (b, e) in &batch.cleared {
                insert_span(&mut cleared, b, e, v);
                self.bytes.fetch_add(b.len() + e.len(), Ordering::Relaxed);
                for entry in self
                    .points
                    .range::<[u8], _>((Bound::Included(&b[..]), Bound::Excluded(&e[..])))
                {
                    if entry.value().lock().fresh {
                        dead.push_back((entry.key().clone(), v));
                    }
                }
            }
        }
        let mut grown = 0usize;
        let mut freed = 0usize;
        let mut written = Vec::new();
        for (key, value) in &batch.points {
            let entry = self.points.get_or_insert_with(key.clone(), || {
                grown += key.len() + ENTRY_OVERHEAD;
                Mutex::new(Versions {
                    entries: Vec::new(),
                    fresh: batch.fresh.contains(key),
                })
            });
            let mut chain = entry.value().lock();
            grown += value.as_ref().map_or(0, Bytes::len);
            chain.entries.push((v, value.clone()));
            if chain.entries.len() > 2 {
                freed += trim(&mut chain.entries, oldest_read);
            }
            if value.is_none() && chain.fresh {
                self.dead.lock().push_back((key.clone(), v));
            }
            written.push(key);
        }
        self.bytes.fetch_add(grown, Ordering::Relaxed);
        self.release(freed);
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

    /// Removes the fresh keys cleared at or below `oldest_read` that nothing set again:
    /// every live reader sees them absent, and no checkpoint holds them.
    fn drop_dead(&self, oldest_read: u64) {
        let mut freed = 0;
        let mut dead = self.dead.lock();
        while dead.front().is_some_and(|(_, at)| *at <= oldest_read) {
            let Some((key, cleared_at)) = dead.pop_front() else {
                break;
            };
            let Some(entry) = self.points.get(&key) else {
                continue;
            };
            let gone = {
                let chain = entry.value().lock();
                chain.fresh
                    && chain.entries.last().is_none_or(|(v, value)| {
                        *v <= oldest_read && (value.is_none() || *v < cleared_at)
                    })
            };
            if gone {
                freed += weight(&entry);
                entry.remove();
            }
        }
        drop(dead);
        self.release(freed);
    }

    fn release(&self, freed: usize) {
        if freed > 0 {
            let _ = self
                .bytes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some(b.saturating_sub(freed))
                });
        }
    }

    /// The state of `key` at `version`.
    pub(super) fn state(&self, key: &[u8], version: u64) -> State {
        let point = self.points.get(key).and_then(|e| {
            let chain = e.value().lock();
            newest_at(&chain.entries, version).map(|(v, value)| (*v, value.clone()))
        });
        decide(point, self.clear_version(key, version))
    }

    /// Whether the window holds an entry of `key` at or below `version`.
    pub(super) fn holds(&self, key: &[u8], version: u64) -> bool {
        self.points.get(key).is_some_and(|e| {
            let chain = e.value().lock();
            newest_at(&chain.entries, version).is_some()
        })
    }

    /// The version of the newest range clear at or below `version` that covers `key`.
    fn clear_version(&self, key: &[u8], version: u64) -> Option<u64> {
        let cleared = self.cleared.read();
        let (_, span) = cleared
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        (key < span.end.as_slice())
            .then(|| span.cleared_at(version))
            .flatten()
    }

    /// Where a reader at `version` going forwards (or backwards, when `reverse`) from
    /// `key` may resume when a cleared span covers `key`: past the run of adjacent spans
    /// it may step over (when `points` matter, only spans with no point written inside
    /// since their clear). `None`: no such span covers `key`.
    pub(super) fn skip(
        &self,
        key: &[u8],
        version: u64,
        reverse: bool,
        points: bool,
    ) -> Option<Vec<u8>> {
        let cleared = self.cleared.read();
        let (begin, span) = cleared
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        if key >= span.end.as_slice() || !span.skippable(version, points) {
            return None;
        }
        if reverse {
            let mut bound = begin;
            for (b, s) in cleared
                .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(&begin[..])))
                .rev()
            {
                if s.end != *bound || !s.skippable(version, points) {
                    break;
                }
                bound = b;
            }
            Some(bound.clone())
        } else {
            let mut bound = &span.end;
            for (b, s) in cleared.range::<[u8], _>((Bound::Excluded(&begin[..]), Bound::Unbounded))
            {
                if b != bound || !s.skippable(version, points) {
                    break;
                }
                bound = &s.end;
            }
            Some(bound.clone())
        }
    }

    /// The keys in `[begin, end)` the window holds, each with its state at `version`, in
    /// key order (descending when `reverse`); keys it decides as absent are skipped, and
    /// so are whole runs of cleared spans.
    pub(super) fn range<'a>(
        &'a self,
        begin: &[u8],
        end: &[u8],
        version: u64,
        reverse: bool,
    ) -> impl Iterator<Item = (Vec<u8>, State)> + 'a {
        let mut lower = begin.to_vec();
        let mut upper = end.to_vec();
        let mut cursor = Some(self.cursor(&lower, &upper, reverse));
        std::iter::from_fn(move || {
            loop {
                let entry = cursor.as_mut()?.next();
                let Some(entry) = entry else {
                    cursor = None;
                    return None;
                };
                let point = {
                    let chain = entry.value().lock();
                    newest_at(&chain.entries, version).map(|(v, value)| (*v, value.clone()))
                };
                let key = entry.key();
                match decide(point, self.clear_version(key, version)) {
                    State::Decided(None) => {
                        if let Some(bound) = self.skip(key, version, reverse, true) {
                            if reverse {
                                upper = bound.max(lower.clone());
                            } else {
                                lower = bound.min(upper.clone());
                            }
                            cursor = Some(self.cursor(&lower, &upper, reverse));
                        }
                    }
                    state => return Some((key.clone(), state)),
                }
            }
        })
    }

    /// The map's entries in `[lower, upper)`, forwards or backwards.
    fn cursor<'a>(
        &'a self,
        lower: &[u8],
        upper: &[u8],
        reverse: bool,
    ) -> Box<dyn Iterator<Item = Entry<'a, Vec<u8>, Chain>> + 'a> {
        let range = self.points.range::<Vec<u8>, _>((
            Bound::Included(lower.to_vec()),
            Bound::Excluded(upper.to_vec()),
        ));
        if reverse {
            Box::new(range.rev())
        } else {
            Box::new(range)
        }
    }

    /// Hands `write` what a checkpoint from `after` to `version` writes: first every
    /// cleared span a range clear in that interval touched, then the state at `version` of
    /// every key changed in it. A key written into the checkpoint is no longer fresh.
    /// Stops at the first error `write` returns.
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
                newest_at(&chain.entries, version).is_some_and(|(v, _)| *v > after)
            };
            if !changed {
                continue;
            }
            if let State::Decided(value) = self.state(entry.key(), version) {
                if value.is_some() {
                    entry.value().lock().fresh = false;
                }
                write(Change::Point(entry.key(), value.as_ref()))?;
            }
        }
        Ok(())
    }

    /// Forgets everything at or below `version`, which every live reader's checkpoint
    /// holds. The caller holds the structure lock exclusively, so no chain it empties is
    /// being added to or walked by a range read.
    pub(super) fn prune(&self, version: u64) {
        let mut freed = 0usize;
        for entry in &self.points {
            let empty = {
                let mut chain = entry.value().lock();
                let keep = chain.entries.partition_point(|(v, _)| *v <= version);
                for (_, value) in chain.entries.drain(..keep) {
                    freed += value.map_or(0, |v| v.len());
                }
                chain.entries.is_empty()
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
        self.release(freed);
    }
}

/// The bytes an entry counts for.
fn weight(entry: &Entry<'_, Vec<u8>, Chain>) -> usize {
    let values: usize = entry
        .value()
        .lock()
        .entries
        .iter()
        .map(|(_, v)| v.as_ref().map_or(0, Bytes::len))
        .sum();
    entry.key().len() + ENTRY_OVERHEAD + values
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
    fn a_fresh_key_cleared_before_every_live_reader_leaves_the_map() {
        let w = Window::default();
        let mut set = batch(10, &[(b"m1", Some(b"body")), (b"m2", Some(b"body"))], &[]);
        set.fresh.extend([b"m1".to_vec(), b"m2".to_vec()]);
        w.apply(&set, 0);
        w.apply(&batch(20, &[(b"m1", None)], &[]), 10);
        w.apply(&batch(30, &[], &[(b"m2", b"m3")]), 10);
        // The oldest live reader at 25 sees m1 cleared, m2 not yet.
        w.apply(&batch(40, &[(b"other", Some(b"x"))], &[]), 25);
        assert!(
            w.points.get(&b"m1"[..]).is_none(),
            "a cleared fresh key stays"
        );
        assert!(
            w.points.get(&b"m2"[..]).is_some(),
            "a key a live reader sees went"
        );
        w.apply(&batch(50, &[(b"other", Some(b"y"))], &[]), 40);
        assert!(
            w.points.get(&b"m2"[..]).is_none(),
            "a range-cleared fresh key stays"
        );
        assert_eq!(w.state(b"m1", 50), State::Below);
    }

    #[test]
    fn a_key_the_checkpoint_may_hold_stays_until_pruned() {
        let w = Window::default();
        w.apply(&batch(10, &[(b"k", Some(b"v"))], &[]), 0);
        w.apply(&batch(20, &[(b"k", None)], &[]), 10);
        w.apply(&batch(30, &[(b"x", Some(b"v"))], &[]), 30);
        assert_eq!(w.state(b"k", 30), State::Decided(None));
    }

    #[test]
    fn a_run_of_adjacent_cleared_spans_is_skipped_in_one_step() {
        let w = Window::default();
        w.apply(
            &batch(
                10,
                &[
                    (b"a", Some(b"1")),
                    (b"c", Some(b"1")),
                    (b"e", Some(b"1")),
                    (b"g", Some(b"1")),
                ],
                &[],
            ),
            0,
        );
        w.apply(&batch(20, &[], &[(b"a", b"b")]), 0);
        w.apply(&batch(30, &[], &[(b"b", b"d")]), 0);
        w.apply(&batch(40, &[], &[(b"d", b"f")]), 0);
        assert_eq!(w.skip(b"a", 40, false, true), Some(b"f".to_vec()));
        assert_eq!(w.skip(b"a", 30, false, true), Some(b"d".to_vec()));
        assert_eq!(w.skip(b"e", 40, true, true), Some(b"a".to_vec()));
        assert_eq!(w.skip(b"g", 40, false, true), None);
    }

    #[test]
    fn a_hot_key_keeps_only_what_live_readers_can_see() {
        let w = Window::default();
        for v in 1..=100 {
            w.apply(&batch(v, &[(b"counter", Some(b"x"))], &[]), v - 1);
        }
        let len = w
            .points
            .get(&b"counter"[..])
            .unwrap()
            .value()
            .lock()
            .entries
            .len();
        assert!(len <= 3, "{len} entries kept");
    }
}
