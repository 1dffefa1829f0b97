//! A read version: the store as of one commit version, shared by every transaction that
//! began while it was the newest.

use super::disk::DATA;
use crate::StoreError;
use redb::ReadOnlyTable;

/// The committed state at `version`.
pub(super) struct Snapshot {
    /// The commit version this snapshot shows.
    pub(super) version: u64,
    /// redb's MVCC view of the data table at that version.
    table: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

/// A key-value pair read from a snapshot, or the storage error that stopped the read.
pub(super) type Pair = Result<(Vec<u8>, Vec<u8>), StoreError>;

impl Snapshot {
    /// Captures the newest committed state of `db`, which is `version`.
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

    /// The pairs in `[begin, end)`, lazily, forwards or backwards.
    pub(super) fn range(
        &self,
        begin: &[u8],
        end: &[u8],
        reverse: bool,
    ) -> Result<Box<dyn Iterator<Item = Pair> + Send + '_>, StoreError> {
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
