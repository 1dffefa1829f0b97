//! A read version: the store as of one commit version — the window's entries up to that
//! version over the checkpoint a reader started on — shared by every transaction that
//! began while it was the newest.
//!
//! A reader keeps the checkpoint it started on (redb's MVCC view of the data file) for
//! its whole life, even after a newer checkpoint is written: the window keeps every entry
//! newer than the oldest checkpoint a live reader uses ([`super::window::Window::prune`]).

use super::disk::DATA;
use super::window::{State, Window};
use crate::StoreError;
use parking_lot::RwLockReadGuard;
use redb::ReadOnlyTable;
use std::cmp::Ordering as KeyOrder;
use std::sync::Arc;

/// The data file as of one checkpoint.
pub(super) struct Checkpoint {
    /// The commit version it holds.
    pub(super) version: u64,
    /// redb's view of the data table at that checkpoint.
    table: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

/// A key-value pair read from a snapshot, or the storage error that stopped the read.
pub(super) type Pair = Result<(Vec<u8>, Vec<u8>), StoreError>;

impl Checkpoint {
    /// Captures the newest checkpoint of `db`, which holds `version`.
    pub(super) fn capture(db: &redb::Database, version: u64) -> Result<Self, StoreError> {
        use redb::ReadableDatabase;
        let tx = db.begin_read().map_err(storage)?;
        let table = tx.open_table(DATA).map_err(storage)?;
        Ok(Self { version, table })
    }

    /// The value of `key`.
    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .table
            .get(key)
            .map_err(storage)?
            .map(|v| v.value().to_vec()))
    }

    /// The pairs in `[begin, end)`, forwards or backwards.
    pub(super) fn range(
        &self,
        begin: &[u8],
        end: &[u8],
        reverse: bool,
    ) -> Result<Box<dyn Iterator<Item = Pair> + '_>, StoreError> {
        if begin >= end {
            return Ok(Box::new(std::iter::empty()));
        }
        let range = self.table.range::<&[u8]>(begin..end).map_err(storage)?;
        Ok(if reverse {
            Box::new(range.rev().map(owned))
        } else {
            Box::new(range.map(owned))
        })
    }
}

/// The committed state at `version`.
pub(super) struct Snapshot {
    /// The commit version this snapshot shows.
    pub(super) version: u64,
    pub(super) window: Arc<Window>,
    /// The checkpoint below the window.
    pub(super) base: Arc<Checkpoint>,
}

impl Snapshot {
    /// The value of `key`.
    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match self.window.state(key, self.version) {
            State::Decided(value) => Ok(value.map(|v| v.to_vec())),
            State::Below => self.base.get(key),
        }
    }

    /// The pairs in `[begin, end)`, lazily, forwards or backwards: the window's keys
    /// merged with the checkpoint's, the window deciding where it holds a key, cleared
    /// spans skipped in one seek on both sides.
    pub(super) fn range<'a>(
        &'a self,
        begin: &'a [u8],
        end: &'a [u8],
        reverse: bool,
    ) -> Result<Box<dyn Iterator<Item = Pair> + 'a>, StoreError> {
        if begin >= end {
            return Ok(Box::new(std::iter::empty()));
        }
        let structure = self.window.structure.read();
        let window = self
            .window
            .range(begin, end, self.version, reverse)
            .filter_map(move |(key, state)| match state {
                State::Decided(value) => value.map(|v| Ok((key, v.to_vec()))),
                State::Below => match self.base.get(&key) {
                    Ok(value) => value.map(|v| Ok((key, v))),
                    Err(e) => Some(Err(e)),
                },
            });
        let below = Below {
            snapshot: self,
            begin: begin.to_vec(),
            end: end.to_vec(),
            reverse,
            cursor: Some(self.base.range(begin, end, reverse)?),
        };
        Ok(Box::new(Holding {
            pairs: merge(window, below, reverse),
            _structure: structure,
        }))
    }
}

/// A range read's pairs, holding the window's structure lock until dropped.
struct Holding<'a, I> {
    pairs: I,
    _structure: RwLockReadGuard<'a, ()>,
}

impl<I: Iterator<Item = Pair>> Iterator for Holding<'_, I> {
    type Item = Pair;

    fn next(&mut self) -> Option<Pair> {
        self.pairs.next()
    }
}

/// The checkpoint's pairs a snapshot shows: those the window holds nothing about, with
/// the spans a range clear removed skipped by seeking past them.
struct Below<'a> {
    snapshot: &'a Snapshot,
    /// What is left to read: `[begin, end)`.
    begin: Vec<u8>,
    end: Vec<u8>,
    reverse: bool,
    cursor: Option<Box<dyn Iterator<Item = Pair> + 'a>>,
}

impl Iterator for Below<'_> {
    type Item = Pair;

    fn next(&mut self) -> Option<Pair> {
        let snapshot = self.snapshot;
        loop {
            let (key, value) = match self.cursor.as_mut()?.next()? {
                Ok(pair) => pair,
                Err(e) => return Some(Err(e)),
            };
            if let Some(bound) = snapshot
                .window
                .skip(&key, snapshot.version, self.reverse, false)
            {
                // Range clears removed the checkpoint's keys of these spans (the window's
                // side yields what was written since): seek past them.
                if self.reverse {
                    self.end = bound.max(self.begin.clone());
                } else {
                    self.begin = bound.min(self.end.clone());
                }
                match snapshot.base.range(&self.begin, &self.end, self.reverse) {
                    Ok(cursor) => self.cursor = Some(cursor),
                    Err(e) => {
                        self.cursor = None;
                        return Some(Err(e));
                    }
                }
                continue;
            }
            if !snapshot.window.holds(&key, snapshot.version) {
                return Some(Ok((key, value)));
            }
            // Otherwise the window decides this key, and its side yields it if present.
        }
    }
}

/// Merges two key-ordered streams of pairs (descending when `reverse`); where both hold a
/// key, the first stream's pair wins.
pub(super) fn merge<'a>(
    a: impl Iterator<Item = Pair> + 'a,
    b: impl Iterator<Item = Pair> + 'a,
    reverse: bool,
) -> impl Iterator<Item = Pair> + 'a {
    let mut a = a.peekable();
    let mut b = b.peekable();
    std::iter::from_fn(move || {
        let order = match (a.peek(), b.peek()) {
            (None, None) => return None,
            (Some(_), None) | (Some(Err(_)), _) => KeyOrder::Less,
            (None, Some(_)) | (_, Some(Err(_))) => KeyOrder::Greater,
            (Some(Ok((ka, _))), Some(Ok((kb, _)))) => {
                let order = ka.cmp(kb);
                if reverse { order.reverse() } else { order }
            }
        };
        match order {
            KeyOrder::Less => a.next(),
            KeyOrder::Greater => b.next(),
            KeyOrder::Equal => {
                b.next();
                a.next()
            }
        }
    })
}

/// A redb range entry as an owned pair.
type RedbEntry<'a> = (
    redb::AccessGuard<'a, &'static [u8]>,
    redb::AccessGuard<'a, &'static [u8]>,
);

fn owned(entry: Result<RedbEntry<'_>, redb::StorageError>) -> Pair {
    entry
        .map(|(k, v)| (k.value().to_vec(), v.value().to_vec()))
        .map_err(storage)
}

/// Maps a redb failure onto the store's storage error.
pub(super) fn storage(e: impl std::fmt::Display) -> StoreError {
    StoreError::Storage(e.to_string())
}
