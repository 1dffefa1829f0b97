//! The committer: one thread that turns concurrent commit requests into durable,
//! ordered batches.
//!
//! Each round it takes every waiting request (up to `max_batch`), gives the batch one
//! commit version, resolves each transaction in arrival order against recent commits and
//! against the transactions accepted before it in the same batch, resolves the accepted
//! ones' mutations into the batch's net effect ([`Batch`]), appends it to the commit log
//! with one write and one fsync (group commit), adds it to the window, publishes the new
//! snapshot, fires watches, and only then answers the callers — from this thread, with no
//! hand-off to another. No B-tree is written on this path: the checkpointer writes the
//! data file later. Transaction `i` of the batch receives versionstamp `version (8 bytes,
//! big-endian) ++ i (2 bytes, big-endian)`, so versionstamp order is commit order.
//! Versions are `max(last + 1, now in µs)` and every record in the log and every
//! checkpoint holds its version, so they keep increasing across restarts.
//!
//! While the window holds more than `store.window_mb`, the committer waits for the
//! checkpointer before it commits the next batch, so memory stays within the budget.

use super::Shared;
use super::batch::Batch;
use super::checkpoint::Signal;
use super::commit_log::CommitLog;
use super::history::{History, Verdict};
use super::mutation::{Mutation, fill_versionstamp};
use super::snapshot::storage;
use super::window::State;
use super::write_set::WriteSet;
use crate::keys::{VERSIONSTAMP_LEN, key_after};
use crate::{CommitInfo, StoreError};
use bytes::Bytes;
use ferry_telemetry::names;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;
use tokio::sync::oneshot;

/// A watch created by a committing transaction, with the value that transaction saw.
pub(super) struct PendingWatch {
    pub(super) key: Vec<u8>,
    pub(super) seen: Option<Vec<u8>>,
    pub(super) wake: oneshot::Sender<()>,
}

/// A transaction asking to commit.
pub(super) struct CommitRequest {
    /// The version its reads saw.
    pub(super) read_version: u64,
    /// Ranges it read without snapshot isolation.
    pub(super) reads: Vec<(Vec<u8>, Vec<u8>)>,
    /// Its mutations in order.
    pub(super) mutations: Vec<Mutation>,
    /// Write conflict ranges it added explicitly.
    pub(super) extra_writes: Vec<(Vec<u8>, Vec<u8>)>,
    /// Watches to activate once it commits.
    pub(super) watches: Vec<PendingWatch>,
    /// Where the outcome goes.
    pub(super) reply: oneshot::Sender<Result<CommitInfo, StoreError>>,
}

/// What the committer thread receives.
pub(super) enum Request {
    /// Commit a transaction.
    Commit(CommitRequest),
    /// Finish, checkpoint and release the data file, then acknowledge.
    Close(oneshot::Sender<()>),
}

/// A request accepted into the batch being committed.
pub(super) struct Accepted {
    request: CommitRequest,
    stamp: [u8; VERSIONSTAMP_LEN],
}

/// A batch whose outcome is decided.
enum Completion {
    /// Applied durably at `version`.
    Committed {
        version: u64,
        writes: Arc<WriteSet>,
        accepted: Vec<Accepted>,
    },
    /// Not applied.
    Failed {
        error: StoreError,
        accepted: Vec<Accepted>,
    },
}

/// The committer's state; lives on its own thread.
pub(super) struct Committer {
    /// Shared with the checkpointer, which releases the segments it covers.
    pub(super) log: Arc<Mutex<CommitLog>>,
    pub(super) shared: Arc<Shared>,
    pub(super) history: History,
    /// The newest committed version.
    pub(super) last_version: u64,
    /// The newest version in the log (batches that write nothing are not logged).
    pub(super) last_logged: u64,
    pub(super) max_batch: usize,
    /// `store.window_mb`, in bytes.
    pub(super) window_budget: usize,
    /// The checkpointer's inbox.
    pub(super) checkpointer: Sender<Signal>,
}

impl Committer {
    /// Serves requests until asked to close or every sender is gone.
    pub(super) fn run(mut self, requests: Receiver<Request>) {
        let mut closing = None;
        while closing.is_none() {
            let Ok(first) = requests.recv() else { break };
            let mut batch = Vec::new();
            match first {
                Request::Commit(c) => batch.push(c),
                Request::Close(ack) => closing = Some(ack),
            }
            while closing.is_none() && batch.len() < self.max_batch {
                match requests.try_recv() {
                    Ok(Request::Commit(c)) => batch.push(c),
                    Ok(Request::Close(ack)) => closing = Some(ack),
                    Err(_) => break,
                }
            }
            if !batch.is_empty() {
                self.commit_batch(batch);
            }
        }
        // Nothing new can arrive (the store is marked closed); refuse what is queued.
        while let Ok(r) = requests.try_recv() {
            if let Request::Commit(c) = r {
                let _ = c.reply.send(Err(StoreError::Closed));
            }
        }
        // A last checkpoint, so the next start replays nothing; then the file is released.
        let (checkpointed, done) = std::sync::mpsc::channel();
        if self.checkpointer.send(Signal::Close(checkpointed)).is_ok() {
            let _ = done.recv();
        }
        if let Some(ack) = closing {
            let _ = ack.send(());
        }
    }

    fn next_version(&self) -> u64 {
        let now_micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        (self.last_version + 1).max(now_micros)
    }

    fn commit_batch(&mut self, batch: Vec<CommitRequest>) {
        if let Some(e) = self.shared.failure.lock().clone() {
            for request in batch {
                let _ = request.reply.send(Err(e.clone()));
            }
            return;
        }
        let version = self.next_version();
        let mut accepted: Vec<Accepted> = Vec::with_capacity(batch.len());
        let mut batch_writes = WriteSet::default();
        for request in batch {
            let verdict = if self.shared.faults.conflict() {
                Verdict::Conflict
            } else {
                match self.history.check(request.read_version, &request.reads) {
                    Verdict::Clean
                        if request
                            .reads
                            .iter()
                            .any(|(b, e)| batch_writes.intersects(b, e)) =>
                    {
                        Verdict::Conflict
                    }
                    v => v,
                }
            };
            match verdict {
                Verdict::Conflict => {
                    let _ = request.reply.send(Err(StoreError::NotCommitted));
                }
                Verdict::TooOld => {
                    let _ = request.reply.send(Err(StoreError::TransactionTooOld));
                }
                Verdict::Clean => {
                    let mut stamp = [0u8; VERSIONSTAMP_LEN];
                    stamp[..8].copy_from_slice(&version.to_be_bytes());
                    stamp[8..].copy_from_slice(&(accepted.len() as u16).to_be_bytes());
                    write_set_of(&request, &stamp, &mut batch_writes);
                    accepted.push(Accepted { request, stamp });
                }
            }
        }
        if accepted.is_empty() {
            return;
        }
        metrics::histogram!(names::STORE_COMMIT_BATCH_SIZE, names::LABEL_ENGINE => "embedded")
            .record(accepted.len() as f64);

        self.wait_for_room();
        let logged = self.resolve(version, &accepted).and_then(|batch| {
            if !batch.is_empty() {
                let checkpoint = self.shared.checkpoint.read().version;
                self.log
                    .lock()
                    .append(&batch, checkpoint)
                    .map_err(storage)?;
                self.last_logged = version;
            }
            Ok(batch)
        });
        let completion = match logged {
            Ok(batch) => {
                {
                    let _structure = self.shared.window.structure.read();
                    let oldest_read = self.shared.oldest_live_read();
                    self.shared.window.apply(&batch, oldest_read);
                }
                self.last_version = version;
                let writes = Arc::new(batch_writes);
                self.history.record(version, writes.clone());
                Completion::Committed {
                    version,
                    writes,
                    accepted,
                }
            }
            Err(error) => {
                let error = StoreError::Failed(error.to_string());
                tracing::error!(%error, "group commit failed; no transaction of the batch was applied");
                *self.shared.failure.lock() = Some(error.clone());
                Completion::Failed { error, accepted }
            }
        };
        complete(&self.shared, completion);
    }

    /// The accepted transactions' mutations, in order, as one batch at `version`.
    fn resolve(&self, version: u64, accepted: &[Accepted]) -> Result<Batch, StoreError> {
        let mut batch = Batch::new(version, self.last_logged);
        let shared = &self.shared;
        let last = self.last_version;
        let mut committed = |key: &[u8]| match shared.window.state(key, last) {
            State::Decided(value) => Ok(value),
            State::Below => Ok(shared.checkpoint.read().get(key)?.map(Bytes::from)),
        };
        for a in accepted {
            for m in &a.request.mutations {
                batch.resolve(m, &a.stamp, &mut committed)?;
            }
        }
        Ok(batch)
    }

    /// Asks for a checkpoint once the window holds half its budget, and waits while it
    /// holds more than all of it.
    fn wait_for_room(&self) {
        let window = &self.shared.window;
        if window.bytes() < self.window_budget / 2 {
            return;
        }
        self.ask_for_checkpoint();
        while window.bytes() >= self.window_budget && self.shared.failure.lock().is_none() {
            std::thread::sleep(Duration::from_millis(1));
            self.ask_for_checkpoint();
        }
    }

    /// Signals the checkpointer unless a request is already pending.
    fn ask_for_checkpoint(&self) {
        if !self.shared.checkpoint_asked.swap(true, Ordering::AcqRel) {
            let _ = self.checkpointer.send(Signal::Full);
        }
    }
}

/// Publishes a committed batch's snapshot (firing the watches it touched), activates its
/// transactions' watches and answers every caller, in batch order.
fn complete(shared: &Shared, completion: Completion) {
    match completion {
        Completion::Committed {
            version,
            writes,
            accepted,
        } => {
            shared.publish(version, &writes);
            for a in accepted {
                let outcome = if shared.faults.unknown_result() {
                    // Applied, but reported as unknown; the caller's watches fail with it.
                    Err(StoreError::CommitUnknownResult)
                } else {
                    shared.register_watches(a.request.watches);
                    Ok(CommitInfo {
                        version,
                        versionstamp: Some(a.stamp),
                    })
                };
                let _ = a.request.reply.send(outcome);
            }
        }
        Completion::Failed { error, accepted } => {
            for a in accepted {
                let _ = a.request.reply.send(Err(error.clone()));
            }
        }
    }
}

/// Adds the keys `request` writes (with its versionstamp filled in) to `writes`.
fn write_set_of(request: &CommitRequest, stamp: &[u8; VERSIONSTAMP_LEN], writes: &mut WriteSet) {
    for m in &request.mutations {
        match m {
            Mutation::Set { key, .. }
            | Mutation::Clear { key }
            | Mutation::Add { key, .. }
            | Mutation::SetVersionstampedValue { key, .. } => writes.add_point(key.clone()),
            Mutation::ClearRange { begin, end } => writes.add_range(begin.clone(), end.clone()),
            Mutation::SetVersionstampedKey { key, offset, .. } => {
                writes.add_point(fill_versionstamp(key, *offset, stamp));
            }
        }
    }
    for (b, e) in &request.extra_writes {
        if *e == key_after(b) {
            writes.add_point(b.clone());
        } else {
            writes.add_range(b.clone(), e.clone());
        }
    }
}
