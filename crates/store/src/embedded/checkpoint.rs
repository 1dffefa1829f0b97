//! The checkpointer: a thread that writes the window's net effect into the data file (redb)
//! in one large transaction, then lets the window and the commit log forget what the data
//! file now holds.
//!
//! A checkpoint runs when the window holds half of `store.window_mb`, when
//! [`CHECKPOINT_INTERVAL`] has passed since the last one with something to write, when a
//! test asks ([`super::EmbeddedDb::checkpoint`]), and once more when the store closes. It
//! reads the window at the newest published version `v` and, for everything changed since
//! the last checkpoint: deletes the keys of each cleared span, then writes each changed
//! key's value at `v` (or removes it) — so a key set and cleared between two checkpoints (a
//! message published and acknowledged) never reaches the file. It stores `v` beside the
//! data and commits durably; then new readers use the new checkpoint, the window prunes
//! what every live reader's checkpoint holds, and the log recycles the segments before `v`.
//!
//! A crash before the redb commit leaves the previous checkpoint and the whole log; after
//! it, the new checkpoint and a log whose records up to `v` are skipped on replay. A failed
//! write or fsync of the data file stops the engine, as a failed log write does.

use super::Shared;
use super::commit_log::CommitLog;
use super::disk::{DATA, LAST_VERSION, META};
use super::snapshot::{Checkpoint, Snapshot, storage};
use super::window::Change;
use crate::StoreError;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The longest a window with changes waits for a checkpoint.
pub(super) const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(30);

/// What the checkpointer receives.
pub(super) enum Signal {
    /// The window grew past half its budget.
    Full,
    /// Checkpoint now and say when it is done.
    Now(oneshot::Sender<Result<(), StoreError>>),
    /// Checkpoint a last time, release the data file, then acknowledge.
    Close(std::sync::mpsc::Sender<()>),
}

/// The checkpointer's state; lives on its own thread.
pub(super) struct Checkpointer {
    pub(super) db: redb::Database,
    pub(super) shared: Arc<Shared>,
    /// The commit log, whose covered segments each checkpoint releases.
    pub(super) log: Arc<Mutex<CommitLog>>,
}

impl Checkpointer {
    /// Checkpoints on each signal and interval until asked to close.
    pub(super) fn run(self, signals: Receiver<Signal>) {
        let mut last = Instant::now();
        loop {
            let wait = CHECKPOINT_INTERVAL.saturating_sub(last.elapsed());
            let signal = match signals.recv_timeout(wait) {
                Ok(signal) => Some(signal),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            match signal {
                Some(Signal::Close(ack)) => {
                    let _ = self.checkpoint();
                    drop(self.db);
                    let _ = ack.send(());
                    return;
                }
                Some(Signal::Now(done)) => {
                    let _ = done.send(self.checkpoint());
                }
                Some(Signal::Full) | None => {
                    let _ = self.checkpoint();
                }
            }
            last = Instant::now();
        }
    }

    /// Writes the window's changes since the last checkpoint. A failure stops the engine.
    fn checkpoint(&self) -> Result<(), StoreError> {
        self.shared.checkpoint_asked.store(false, Ordering::Release);
        if let Some(e) = self.shared.failure.lock().clone() {
            return Err(e);
        }
        let snapshot = self.shared.latest();
        let after = self.shared.checkpoint.read().version;
        let version = snapshot.version;
        if version > after {
            if let Err(error) = self.write(after, &snapshot) {
                let error = StoreError::Failed(error.to_string());
                tracing::error!(%error, "checkpoint failed; the engine stops");
                *self.shared.failure.lock() = Some(error.clone());
                return Err(error);
            }
            let base = Arc::new(Checkpoint::capture(&self.db, version)?);
            self.shared.use_checkpoint(base);
            if let Err(e) = self.log.lock().release(version) {
                // The segments stay; the next rotation tries again.
                tracing::warn!(error = %e, "cannot release the commit log's checkpointed segments");
            }
        }
        drop(snapshot);
        let _structure = self.shared.window.structure.write();
        let oldest = self.shared.oldest_live_checkpoint();
        self.shared.window.prune(oldest);
        Ok(())
    }

    /// One durable redb transaction: the window's changes in `(after, snapshot.version]`.
    fn write(&self, after: u64, snapshot: &Snapshot) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(storage)?;
        {
            let mut table = tx.open_table(DATA).map_err(storage)?;
            snapshot
                .window
                .changes(after, snapshot.version, &mut |change| match change {
                    Change::Cleared(begin, end) => {
                        table.retain_in::<&[u8], _>(begin..end, |_, _| false)
                    }
                    Change::Point(key, Some(value)) => table.insert(key, &value[..]).map(drop),
                    Change::Point(key, None) => table.remove(key).map(drop),
                })
                .map_err(storage)?;
            let mut meta = tx.open_table(META).map_err(storage)?;
            meta.insert(LAST_VERSION, snapshot.version)
                .map_err(storage)?;
        }
        tx.commit().map_err(storage)
    }
}
