//! Fault injection for tests: spurious conflicts, commits that applied but report
//! `commit_unknown_result`, the failures a disk gives on a write or an fsync of the commit
//! log (which [`super::commit_log`] raises) or of the data file a checkpoint writes (which
//! the data file's I/O seam, [`super::data_file`], raises), and a pretended free space for
//! the free-disk alarm ([`super::free_space`]).

use std::io;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// A failure of the disk under the data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFault {
    /// `ENOSPC`: no space left on the device.
    NoSpace,
    /// `EIO`: the device failed the operation.
    Io,
}

impl DiskFault {
    fn code(self) -> u8 {
        match self {
            Self::NoSpace => 1,
            Self::Io => 2,
        }
    }

    /// The operating system's error for the fault stored as `code` (0: none).
    fn error(code: u8) -> Option<io::Error> {
        match code {
            1 => Some(io::Error::from_raw_os_error(libc::ENOSPC)),
            2 => Some(io::Error::from_raw_os_error(libc::EIO)),
            _ => None,
        }
    }
}

/// Probabilities of injected failures, changeable while the store runs.
#[derive(Debug, Default)]
pub struct Faults {
    /// Probability (as `f64` bits) that a commit is refused with `not_committed`.
    conflict: AtomicU64,
    /// Probability (as `f64` bits) that an applied commit reports `commit_unknown_result`.
    unknown_result: AtomicU64,
    /// The failure the commit log's next write gets, once ([`DiskFault::code`]).
    write: AtomicU8,
    /// The failure the commit log's next fsync gets, once.
    sync: AtomicU8,
    /// The failure the data file's next write (or resize) gets, once.
    checkpoint_write: AtomicU8,
    /// The failure the data file's next fsync gets, once.
    checkpoint_sync: AtomicU8,
    /// Free bytes the free-disk alarm reads instead of the file system's, plus one (0:
    /// read the file system).
    free_bytes: AtomicU64,
}

impl Faults {
    /// Sets the probability that a commit fails with a retryable conflict although it did
    /// not conflict (nothing is applied).
    pub fn set_conflict_rate(&self, p: f64) {
        self.conflict.store(p.to_bits(), Ordering::Relaxed);
    }

    /// Sets the probability that a commit is applied but reported as
    /// `commit_unknown_result`.
    pub fn set_unknown_result_rate(&self, p: f64) {
        self.unknown_result.store(p.to_bits(), Ordering::Relaxed);
    }

    /// Makes the next commit's write to the commit log fail with `fault`.
    pub fn fail_next_write(&self, fault: DiskFault) {
        self.write.store(fault.code(), Ordering::Relaxed);
    }

    /// Makes the next commit's fsync of the commit log fail with `fault`.
    pub fn fail_next_sync(&self, fault: DiskFault) {
        self.sync.store(fault.code(), Ordering::Relaxed);
    }

    /// Makes the next checkpoint's write to the data file fail with `fault`.
    pub fn fail_next_checkpoint_write(&self, fault: DiskFault) {
        self.checkpoint_write.store(fault.code(), Ordering::Relaxed);
    }

    /// Makes the next checkpoint's fsync of the data file fail with `fault`.
    pub fn fail_next_checkpoint_sync(&self, fault: DiskFault) {
        self.checkpoint_sync.store(fault.code(), Ordering::Relaxed);
    }

    /// Makes the free-disk alarm read `free` bytes (`None`: the file system's again).
    pub fn pretend_free_bytes(&self, free: Option<u64>) {
        let stored = free.map_or(0, |f| f.saturating_add(1));
        self.free_bytes.store(stored, Ordering::Relaxed);
    }

    /// The free space a test pretends, if any.
    pub(super) fn pretended_free_bytes(&self) -> Option<u64> {
        self.free_bytes.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Before a write to the commit log: the injected failure, if one is due (once).
    pub(super) fn on_write(&self) -> Result<(), io::Error> {
        take(&self.write)
    }

    /// Before an fsync of the commit log: the injected failure, if one is due (once).
    pub(super) fn on_sync(&self) -> Result<(), io::Error> {
        take(&self.sync)
    }

    /// Before a write to the data file: the injected failure, if one is due (once).
    pub(super) fn on_checkpoint_write(&self) -> Result<(), io::Error> {
        take(&self.checkpoint_write)
    }

    /// Before an fsync of the data file: the injected failure, if one is due (once).
    pub(super) fn on_checkpoint_sync(&self) -> Result<(), io::Error> {
        take(&self.checkpoint_sync)
    }

    /// Draws whether to inject a conflict now.
    pub(super) fn conflict(&self) -> bool {
        draw(&self.conflict)
    }

    /// Draws whether to report an applied commit as unknown now.
    pub(super) fn unknown_result(&self) -> bool {
        draw(&self.unknown_result)
    }
}

fn take(fault: &AtomicU8) -> Result<(), io::Error> {
    DiskFault::error(fault.swap(0, Ordering::Relaxed)).map_or(Ok(()), Err)
}

fn draw(p: &AtomicU64) -> bool {
    let p = f64::from_bits(p.load(Ordering::Relaxed));
    p > 0.0 && fastrand::f64() < p
}
