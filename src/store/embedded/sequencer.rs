//! The commit sequencer: one thread that turns concurrent commit requests into durable,
//! ordered batches.
//!
//! Each round it takes every waiting request (up to `max_batch`), gives the batch one
//! commit version, resolves each transaction in arrival order against recent commits and
//! against the transactions accepted before it in the same batch, applies the accepted
//! ones in one redb write transaction with a single fsync (group commit), publishes the
//! new snapshot, fires watches, and only then answers the callers. Transaction `i` of the
//! batch receives versionstamp `version (8 bytes, big-endian) ++ i (2 bytes, big-endian)`,
//! so versionstamp order is commit order. Versions are `max(last + 1, now in µs)` and the
//! last one is stored with every batch, so they keep increasing across restarts.

use super::Shared;
use super::disk::{DATA, LAST_VERSION, META};
use super::history::{History, Verdict};
use super::mutation::{Mutation, apply_add, fill_versionstamp};
use super::snapshot::{Snapshot, storage};
use super::write_set::WriteSet;
use crate::store::keys::{VERSIONSTAMP_LEN, key_after};
use crate::store::{CommitInfo, StoreError};
use crate::telemetry::names;
use redb::ReadableTable;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
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

/// What the sequencer thread receives.
pub(super) enum Request {
    /// Commit a transaction.
    Commit(CommitRequest),
    /// Finish, release the data file, then acknowledge.
    Close(oneshot::Sender<()>),
}

/// A request accepted into the batch being committed.
struct Accepted {
    request: CommitRequest,
    stamp: [u8; VERSIONSTAMP_LEN],
}

/// The sequencer's state; lives on its own thread.
pub(super) struct Sequencer {
    pub(super) db: redb::Database,
    pub(super) shared: Arc<Shared>,
    pub(super) history: History,
    pub(super) last_version: u64,
    pub(super) max_batch: usize,
}

impl Sequencer {
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
        drop(self.db);
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

        let applied = self
            .apply(version, &accepted)
            .and_then(|()| Snapshot::capture(&self.db, version));
        let snapshot = match applied {
            Ok(s) => Arc::new(s),
            Err(e) => {
                tracing::error!(error = %e, "group commit failed; no transaction of the batch was applied");
                for a in accepted {
                    let _ = a.request.reply.send(Err(e.clone()));
                }
                return;
            }
        };
        self.last_version = version;
        self.history.record(version, batch_writes.clone());
        self.shared.publish(snapshot.clone(), &batch_writes);

        for a in accepted {
            let outcome = if self.shared.faults.unknown_result() {
                // Applied, but reported as unknown; the caller's watches fail with it.
                Err(StoreError::CommitUnknownResult)
            } else {
                self.shared.register_watches(a.request.watches);
                Ok(CommitInfo {
                    version,
                    versionstamp: Some(a.stamp),
                })
            };
            let _ = a.request.reply.send(outcome);
        }
    }

    /// Applies the accepted transactions, in order, in one durable redb transaction.
    fn apply(&self, version: u64, accepted: &[Accepted]) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(storage)?;
        {
            let mut table = tx.open_table(DATA).map_err(storage)?;
            for a in accepted {
                for m in &a.request.mutations {
                    apply_mutation(&mut table, m, &a.stamp)?;
                }
            }
            let mut meta = tx.open_table(META).map_err(storage)?;
            meta.insert(LAST_VERSION, version).map_err(storage)?;
        }
        tx.commit().map_err(storage)
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

fn apply_mutation(
    table: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    m: &Mutation,
    stamp: &[u8; VERSIONSTAMP_LEN],
) -> Result<(), StoreError> {
    match m {
        Mutation::Set { key, value } => {
            table
                .insert(key.as_slice(), value.as_slice())
                .map_err(storage)?;
        }
        Mutation::Clear { key } => {
            table.remove(key.as_slice()).map_err(storage)?;
        }
        Mutation::ClearRange { begin, end } => {
            table
                .retain_in::<&[u8], _>(begin.as_slice()..end.as_slice(), |_, _| false)
                .map_err(storage)?;
        }
        Mutation::Add { key, param } => {
            let current = table
                .get(key.as_slice())
                .map_err(storage)?
                .map(|v| v.value().to_vec());
            let sum = apply_add(current.as_deref(), param);
            table
                .insert(key.as_slice(), sum.as_slice())
                .map_err(storage)?;
        }
        Mutation::SetVersionstampedKey { key, offset, value } => {
            let key = fill_versionstamp(key, *offset, stamp);
            table
                .insert(key.as_slice(), value.as_slice())
                .map_err(storage)?;
        }
        Mutation::SetVersionstampedValue { key, value, offset } => {
            let value = fill_versionstamp(value, *offset, stamp);
            table
                .insert(key.as_slice(), value.as_slice())
                .map_err(storage)?;
        }
    }
    Ok(())
}
