//! The data file's I/O: redb's file backend behind the one seam where the engine's file
//! operations pass, so tests inject the failures a disk gives ([`Faults`]): `ENOSPC` or
//! `EIO` on a write (or a resize), `EIO` on an fsync. Everything else goes to redb's own
//! backend unchanged, its file locks included.

use super::faults::Faults;
use redb::backends::FileBackend;
use redb::{BackendError, DatabaseError, StorageBackend};
use std::fs::OpenOptions;
use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

/// The data file, as redb's storage.
#[derive(Debug)]
pub(super) struct DataFile {
    file: FileBackend,
    faults: Arc<Faults>,
}

impl DataFile {
    /// Opens (or creates) the file at `path`.
    ///
    /// # Errors
    /// The file's error, as redb reports one.
    pub(super) fn open(path: &Path, faults: Arc<Faults>) -> Result<Self, DatabaseError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        Ok(Self {
            file: FileBackend::new(file)?,
            faults,
        })
    }
}

impl StorageBackend for DataFile {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.file.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.faults.on_checkpoint_write()?;
        self.file.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.faults.on_checkpoint_sync()?;
        self.file.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.faults.on_checkpoint_write()?;
        self.file.write(offset, data)
    }

    fn close(&self) -> Result<(), io::Error> {
        self.file.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}
