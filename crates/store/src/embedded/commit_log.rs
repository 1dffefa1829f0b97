//! The commit log: every group commit's [`Batch`], appended with one write and one
//! `fdatasync`, in segment files under `log/` that recovery replays after the checkpoint.
//!
//! - **Framing**: `crc32c u32 | length u32 | record` (little-endian; the checksum covers
//!   the length and the record). A replay reads a segment until the first frame that is
//!   short, fails its checksum, or does not continue the chain of versions (each record
//!   names the version before it): that is the end of what was written — a torn tail after
//!   a crash, or the stale bytes of a recycled segment. A record that continues past a
//!   gap (its `previous` is not the last version replayed) means a record was lost, and
//!   opening fails rather than skip it.
//! - **Segments** are named by their first version (`00000000001234567890.log`). When the
//!   current one passes [`SEGMENT_BYTES`] the next record starts a new one. After each
//!   checkpoint, the segments whose every record it holds are released: the newest is kept
//!   as a spare, renamed to become the next segment (its blocks are already allocated, so
//!   `fdatasync` writes only data), the others are deleted — so the log holds what the
//!   checkpoint does not, plus at most two segments. A new or renamed segment's directory
//!   entry is synced before its first record, so a synced record is always found.
//! - **Faults**: every write and sync passes [`Faults`], where tests inject `ENOSPC` and
//!   `EIO`.

use super::batch::Batch;
use super::disk::sync_dir;
use super::faults::Faults;
use crate::StoreError;
use bytes::Bytes;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The log's directory inside the store's.
pub const LOG_DIR: &str = "log";
/// Size past which the next record starts a new segment.
pub(super) const SEGMENT_BYTES: u64 = 16 << 20;
/// Bytes before each record: checksum and length.
const FRAME_HEADER: usize = 8;

/// A segment before the current one.
#[derive(Debug)]
struct Sealed {
    path: PathBuf,
    /// The version of its last record (0: it holds none).
    last: u64,
}

/// The open log; the committer appends to it.
#[derive(Debug)]
pub(super) struct CommitLog {
    dir: PathBuf,
    /// The current segment.
    path: PathBuf,
    file: File,
    /// Where the next record goes in the current segment.
    offset: u64,
    /// Older segments, oldest first.
    sealed: VecDeque<Sealed>,
    /// A released segment kept to become the next one.
    spare: Option<PathBuf>,
    /// The version of the current segment's last record (0: none yet).
    last: u64,
    faults: Arc<Faults>,
}

/// What opening the log found.
pub(super) struct Recovered {
    pub(super) log: CommitLog,
    /// The batches after the checkpoint, in commit order.
    pub(super) batches: Vec<Batch>,
}

impl CommitLog {
    /// Opens the log in `store_dir` (creating it), reading the batches newer than
    /// `checkpoint`, the version the data file holds.
    ///
    /// # Errors
    /// [`StoreError::Storage`] for an I/O failure or a gap in the log.
    pub(super) fn open(
        store_dir: &Path,
        checkpoint: u64,
        faults: Arc<Faults>,
    ) -> Result<Recovered, StoreError> {
        let dir = store_dir.join(LOG_DIR);
        let io = |what: &str, path: &Path, e: io::Error| {
            StoreError::Storage(format!("cannot {what} '{}': {e}", path.display()))
        };
        std::fs::create_dir_all(&dir).map_err(|e| io("create", &dir, e))?;
        let mut segments: Vec<(u64, PathBuf)> = std::fs::read_dir(&dir)
            .map_err(|e| io("read", &dir, e))?
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name();
                let first = name.to_str()?.strip_suffix(".log")?.parse().ok()?;
                Some((first, entry.path()))
            })
            .collect();
        segments.sort();
        let mut batches = Vec::new();
        let mut sealed = VecDeque::new();
        let mut last_replayed = 0u64;
        let mut current = None;
        let count = segments.len();
        for (i, (_, path)) in segments.into_iter().enumerate() {
            let bytes = Bytes::from(std::fs::read(&path).map_err(|e| io("read", &path, e))?);
            let (end, last) = replay(&bytes, checkpoint, &mut last_replayed, &mut batches)
                .map_err(|gap| {
                    StoreError::Storage(format!(
                        "the commit log '{}' is missing the commits between versions {} and {}: \
                         a record was lost or damaged; restore the store from a backup",
                        path.display(),
                        gap.0,
                        gap.1
                    ))
                })?;
            if i + 1 == count {
                current = Some((path, end, last));
            } else {
                sealed.push_back(Sealed { path, last });
            }
        }
        let (path, file, offset, last) = match current {
            Some((path, end, last)) => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .map_err(|e| io("open", &path, e))?;
                (path, file, end, last)
            }
            None => {
                let path = dir.join(segment_name(checkpoint + 1));
                let file = create(&path).map_err(|e| io("create", &path, e))?;
                sync_dir(&dir).map_err(|e| io("sync", &dir, e))?;
                (path, file, 0, 0)
            }
        };
        Ok(Recovered {
            log: Self {
                dir,
                path,
                file,
                offset,
                sealed,
                spare: None,
                last,
                faults,
            },
            batches,
        })
    }

    /// Appends `batch` durably: one write, one `fdatasync`. `checkpoint` is the version the
    /// data file holds now, so a new segment can recycle one it covers.
    ///
    /// # Errors
    /// The operating system's error (or an injected one); the engine stops on it.
    pub(super) fn append(&mut self, batch: &Batch, checkpoint: u64) -> io::Result<()> {
        if self.offset >= SEGMENT_BYTES {
            self.rotate(batch.version, checkpoint)?;
        }
        // The record is encoded straight into its frame: the values are copied once.
        let mut frame = Vec::with_capacity(FRAME_HEADER + batch.encoded_len());
        frame.extend_from_slice(&[0; FRAME_HEADER]);
        batch.encode_into(&mut frame);
        let len = (frame.len() - FRAME_HEADER) as u32;
        frame[4..FRAME_HEADER].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c(&frame[4..]);
        frame[..4].copy_from_slice(&crc.to_le_bytes());
        self.faults.on_write()?;
        self.file.write_all_at(&frame, self.offset)?;
        self.faults.on_sync()?;
        self.file.sync_data()?;
        self.offset += frame.len() as u64;
        self.last = batch.version;
        Ok(())
    }

    /// Releases the sealed segments `checkpoint` covers: the newest becomes the spare (a
    /// spare it replaces is deleted), the others are deleted.
    ///
    /// # Errors
    /// The operating system's error deleting a segment or syncing the directory.
    pub(super) fn release(&mut self, checkpoint: u64) -> io::Result<()> {
        let mut covered: Vec<PathBuf> = Vec::new();
        while self.sealed.front().is_some_and(|s| s.last <= checkpoint) {
            covered.extend(self.sealed.pop_front().map(|s| s.path));
        }
        let Some(newest) = covered.pop() else {
            return Ok(());
        };
        covered.extend(self.spare.replace(newest));
        for old in &covered {
            std::fs::remove_file(old)?;
        }
        if !covered.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Seals the current segment and starts one at `first`, from the spare when there is
    /// one.
    fn rotate(&mut self, first: u64, checkpoint: u64) -> io::Result<()> {
        self.release(checkpoint)?;
        let next = self.dir.join(segment_name(first));
        self.faults.on_write()?;
        let file = match self.spare.take() {
            Some(spare) => {
                std::fs::rename(&spare, &next)?;
                OpenOptions::new().read(true).write(true).open(&next)?
            }
            None => create(&next)?,
        };
        sync_dir(&self.dir)?;
        self.file = file;
        self.sealed.push_back(Sealed {
            path: std::mem::replace(&mut self.path, next),
            last: self.last,
        });
        self.offset = 0;
        self.last = 0;
        Ok(())
    }
}

/// Reads the frames of one segment: appends the batches newer than `checkpoint` to `out`
/// and advances `last` along the chain. Returns where the segment's records end and the
/// version of its last one, or the gap `(last, record's previous)` a record skips over.
fn replay(
    bytes: &Bytes,
    checkpoint: u64,
    last: &mut u64,
    out: &mut Vec<Batch>,
) -> Result<(u64, u64), (u64, u64)> {
    let mut at = 0usize;
    let mut segment_last = 0;
    while bytes.len() - at >= FRAME_HEADER {
        let crc = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
        let end = at + FRAME_HEADER + len;
        if end > bytes.len() || crc32c::crc32c(&bytes[at + 4..end]) != crc {
            break;
        }
        let Some(batch) = Batch::decode(bytes.slice(at + FRAME_HEADER..end)) else {
            break;
        };
        if batch.version <= *last {
            // Stale bytes of a recycled segment: older than what was replayed.
            break;
        }
        if batch.previous != *last && batch.previous > checkpoint {
            return Err((*last, batch.previous));
        }
        *last = batch.version;
        segment_last = batch.version;
        if batch.version > checkpoint {
            out.push(batch);
        }
        at = end;
    }
    Ok((at as u64, segment_last))
}

fn segment_name(first: u64) -> String {
    format!("{first:020}.log")
}

fn create(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
}
