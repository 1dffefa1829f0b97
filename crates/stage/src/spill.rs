//! Spills: payloads too large for one store transaction, kept outside the stages that
//! reference them.
//!
//! A spill is written in segments of at most [`SEGMENT`] bytes, one transaction each, under
//! `(P, "spill", id, chunk)`; nothing refers to it until one more, small transaction stores
//! the messages whose envelopes name it ([`super::NewMessage::spill`]). A spill is freed when
//! its last reference goes, and only then:
//!
//! - **References** are counted in `(P, "spills", "refs", id)` by atomic add: one per stage
//!   entry whose envelope names it (a fanout to several queues shares one spill; a
//!   dead-lettered copy takes its own), one per other holder — a delayed-message hold, a
//!   lease holder ([`Spills::hold_in`]) while it writes the spill or reads it after its
//!   message left its stage. A stage lists its entries' spills under `(…, "x", vs)`, so
//!   deleting a stage drops their references.
//! - **Holding** ties a reference to a lease holder (`(P, "spills", "held", holder, id)`).
//!   The writer of a spill holds it from its first segment until the commit that stores its
//!   messages ([`Spills::let_go_in`]), so a writer that dies — a kill -9 in the middle of a
//!   large publish — leaves a spill whose holder is released at the next start (or when its
//!   deadline passes), and its reference with it.
//! - **Collecting.** Dropping a reference marks the spill `(P, "spills", "free", id)` and
//!   bumps a change counter; the collector ([`Spills::run`]) wakes, and frees every marked
//!   spill whose count is 0 with one range clear. Its read of the count conflicts with any
//!   concurrent change of it, and a spill whose count reached 0 never gains a reference
//!   again (only a holder of one hands one on), so nothing referenced is ever freed.
//!
//! Readers read a spill in pieces, one transaction each ([`Spills::read`]): its chunks never
//! change while it is referenced, and the reader's own reference (a lease on its message,
//! or a hold) keeps it.
//!
//! **When to spill** ([`spills`]): one rule for every writer (the AMQP front's publishes,
//! the bridge's sources and in-store sinks). A body is spilled when it is larger than
//! [`SPILL_ABOVE`], or when the copies one transaction would store of it (one per queue or
//! stage it reaches) together exceed [`COMMIT_BUDGET`]: a 3.5 MiB message fanned out to
//! three queues is stored once, by reference, not three times in one 10.5 MB transaction.
//! A writer whose one transaction stores several messages counts the others' copies too
//! ([`spills_beside`]: tx.commit of a transactional channel's held publishes).

use super::error::StageError;
use super::keys::RootKeys;
pub use super::record::Spill;
use super::record::decode_counter;
use crate::MAX_BODY_SIZE;
use bytes::{Bytes, BytesMut};
use ferry_store::{ChangeCounter, Database, RangeOption, Transaction, chunked};
use ferry_telemetry::names;
use std::ops::Range;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Bytes one spill-writing transaction carries: 40 chunks (4,000,000 bytes), well inside
/// FoundationDB's 10 MB transaction limit.
pub const SEGMENT: usize = 40 * chunked::CHUNK;
/// Bodies larger than this many bytes are always spilled: 4 MiB, the largest message
/// Ferry's default accepted before large messages, so every message it accepted then
/// still takes the one-transaction path when it is stored once.
pub const SPILL_ABOVE: u64 = 4 * 1024 * 1024;
/// Body bytes one transaction may carry: the largest body a stage holds (8 MiB), which
/// leaves FoundationDB's 10 MB limit room for keys, envelopes and counters. Writers that
/// batch messages into one transaction keep their batches inside it too.
pub const COMMIT_BUDGET: u64 = MAX_BODY_SIZE as u64;
/// Marked spills one collecting transaction looks at.
const COLLECT_BATCH: usize = 100;
/// Pause after the collector failed.
const RETRY: Duration = Duration::from_secs(1);

/// Whether a body of `len` bytes that one transaction would store `copies` times (once
/// per queue or stage it reaches) goes through a spill instead: when it is larger than
/// [`SPILL_ABOVE`], or when its copies together exceed [`COMMIT_BUDGET`].
pub fn spills(len: u64, copies: usize) -> bool {
    spills_beside(0, len, copies)
}

/// [`spills`] for a body stored in a transaction that copies `already` bytes of other
/// messages (a transactional channel's held publishes, all stored by one commit): it is
/// also spilled when its copies would take the transaction's past [`COMMIT_BUDGET`].
pub fn spills_beside(already: u64, len: u64, copies: usize) -> bool {
    len > SPILL_ABOVE || already.saturating_add(len.saturating_mul(copies as u64)) > COMMIT_BUDGET
}

/// Copied body bytes one transaction of several messages carries at most; a message alone
/// carries up to [`COMMIT_BUDGET`].
pub const RUN_BYTES: u64 = 4 * 1024 * 1024;

/// Splits messages that copy `bytes[i]` body bytes each into consecutive runs of one
/// transaction each: several while their total stays within [`RUN_BYTES`], a larger one
/// alone.
pub fn runs(bytes: &[u64]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let (mut end, mut total) = (start, 0);
        while end < bytes.len() && (end == start || total + bytes[end] <= RUN_BYTES) {
            total += bytes[end];
            end += 1;
        }
        out.push(start..end);
        start = end;
    }
    out
}

/// The spills of one keyspace; cheap to clone.
#[derive(Clone)]
pub struct Spills {
    db: Database,
    root: RootKeys,
}

impl std::fmt::Debug for Spills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spills").field("root", &self.root).finish()
    }
}

impl Spills {
    /// The spills under `root`.
    pub fn new(db: Database, root: RootKeys) -> Self {
        Self { db, root }
    }

    /// A new, unused spill id.
    pub fn new_id() -> u64 {
        fastrand::u64(1..)
    }

    /// Writes `segment`, the bytes of spill `id` from `offset` (a multiple of
    /// [`SEGMENT`]), in one transaction; the first segment makes `holder` hold the spill.
    /// A retry after an unknown commit result writes nothing twice.
    ///
    /// # Errors
    /// The store's error; [`StageError::Corrupt`] when `id` is taken by another spill.
    pub async fn write(
        &self,
        holder: u64,
        id: u64,
        offset: u64,
        segment: &Bytes,
    ) -> Result<(), StageError> {
        let end = offset + segment.len() as u64;
        let first = (offset / chunked::CHUNK as u64) as u32;
        let root = &self.root;
        self.db
            .run(|tx| async move {
                let size = root.spill_count("size", id);
                if tx.maybe_committed() && read_count(&tx, &size).await? >= end as i64 {
                    return Ok(());
                }
                if offset == 0 {
                    if tx
                        .get(&root.spill_count("refs", id), false)
                        .await?
                        .is_some()
                    {
                        return Err(StageError::Corrupt(format!("spill {id} exists already")));
                    }
                    self.hold_in(&tx, holder, id);
                }
                for (i, chunk) in chunked::split(segment) {
                    tx.set(&root.spill_chunk(id, first + i), chunk);
                }
                tx.set(&size, (end as i64).to_le_bytes().to_vec());
                tx.atomic_add(&root.spills_counter("bytes"), segment.len() as i64);
                Ok(())
            })
            .await
    }

    /// Writes `payload` (not empty) to a new spill held by `holder`, one [`SEGMENT`] per
    /// transaction, each a slice of `payload` (no copy); returns the spill. The hold lasts
    /// until the commit that stores the message lets go of it ([`Spills::let_go_in`]) or
    /// the holder is released.
    ///
    /// # Errors
    /// As [`Spills::write`].
    pub async fn write_all(&self, holder: u64, payload: &Bytes) -> Result<Spill, StageError> {
        let id = Self::new_id();
        let mut offset = 0;
        while offset < payload.len() {
            let end = (offset + SEGMENT).min(payload.len());
            self.write(holder, id, offset as u64, &payload.slice(offset..end))
                .await?;
            offset = end;
        }
        Ok(Spill {
            id,
            len: payload.len() as u64,
        })
    }

    /// Within `tx`: one more reference to spill `id`, for a record outside the stages that
    /// names it (its caller holds one already).
    pub fn add_ref_in(&self, tx: &Transaction, id: u64) {
        add_ref_in(tx, &self.root, id);
    }

    /// Within `tx`: one reference fewer to spill `id` (a record outside the stages that
    /// named it is gone).
    pub fn drop_ref_in(&self, tx: &Transaction, id: u64) {
        drop_ref_in(tx, &self.root, id);
    }

    /// Within `tx`: `holder` takes a reference to spill `id` (its caller has one already,
    /// which it drops in the same transaction, or wrote the spill's first segment).
    pub fn hold_in(&self, tx: &Transaction, holder: u64, id: u64) {
        tx.set(&self.root.spill_held(holder, id), b"");
        add_ref_in(tx, &self.root, id);
    }

    /// Within `tx`: `holder` drops its reference to spill `id`; returns whether it held one
    /// (a conflicting read, so a concurrent release of the holder conflicts).
    ///
    /// # Errors
    /// The store's error.
    pub async fn let_go_in(
        &self,
        tx: &Transaction,
        holder: u64,
        id: u64,
    ) -> Result<bool, StageError> {
        let key = self.root.spill_held(holder, id);
        if tx.get(&key, false).await?.is_none() {
            return Ok(false);
        }
        tx.clear(&key);
        drop_ref_in(tx, &self.root, id);
        Ok(true)
    }

    /// [`Spills::let_go_in`] in a transaction of its own.
    ///
    /// # Errors
    /// The store's error.
    pub async fn let_go(&self, holder: u64, id: u64) -> Result<bool, StageError> {
        self.db
            .run(|tx| async move { self.let_go_in(&tx, holder, id).await })
            .await
    }

    /// Reads `len` bytes of `spill` from `offset` (a multiple of the chunk size) in one
    /// transaction: at most a few MB at a time, so a reader holds one piece, not the
    /// payload.
    ///
    /// # Errors
    /// The store's error; [`StageError::Corrupt`] when chunks are missing.
    pub async fn read(&self, spill: Spill, offset: u64, len: usize) -> Result<Bytes, StageError> {
        let first = (offset / chunked::CHUNK as u64) as u32;
        let root = &self.root;
        let piece = self
            .db
            .run(|tx| async move {
                Ok::<_, StageError>(
                    chunked::read(&tx, len, |i| root.spill_chunk(spill.id, first + i)).await?,
                )
            })
            .await?;
        if piece.len() != len {
            return Err(StageError::Corrupt(format!(
                "spill {} has {} of the {len} bytes at {offset}",
                spill.id,
                piece.len()
            )));
        }
        Ok(piece)
    }

    /// The whole payload of `spill`, read in pieces: for readers that need it in memory
    /// (a bridge route's sink, the management API's get).
    ///
    /// # Errors
    /// As [`Spills::read`].
    pub async fn read_all(&self, spill: Spill) -> Result<Bytes, StageError> {
        let mut out = BytesMut::with_capacity(spill.len as usize);
        let mut offset = 0;
        while offset < spill.len {
            let len = (spill.len - offset).min(SEGMENT as u64) as usize;
            out.extend_from_slice(&self.read(spill, offset, len).await?);
            offset += len as u64;
        }
        Ok(out.freeze())
    }

    /// Frees every spill marked free whose references are gone; returns the bytes freed.
    ///
    /// # Errors
    /// The store's error.
    pub async fn collect(&self) -> Result<u64, StageError> {
        let root = &self.root;
        let mut freed = 0;
        loop {
            let (marked, bytes) = self
                .db
                .run(|tx| async move {
                    let (b, e) = root.spills_free();
                    let marks = tx
                        .get_range(&RangeOption::new(b, e).limit(COLLECT_BATCH), false)
                        .await?;
                    let mut bytes = 0;
                    for kv in &marks {
                        tx.clear(&kv.key);
                        let Some(id) = root.spill_free_of(&kv.key) else {
                            continue;
                        };
                        let refs = root.spill_count("refs", id);
                        if read_count(&tx, &refs).await? > 0 {
                            continue;
                        }
                        let size = root.spill_count("size", id);
                        let len = read_count(&tx, &size).await?;
                        let (b, e) = root.spill_chunks(id);
                        tx.clear_range(&b, &e);
                        tx.clear(&refs);
                        tx.clear(&size);
                        tx.atomic_add(&root.spills_counter("bytes"), -len);
                        bytes += len as u64;
                    }
                    Ok::<_, StageError>((marks.len(), bytes))
                })
                .await?;
            freed += bytes;
            if marked < COLLECT_BATCH {
                return Ok(freed);
            }
        }
    }

    /// Bytes held in spills now (a snapshot read).
    ///
    /// # Errors
    /// The store's error.
    pub async fn bytes(&self) -> Result<i64, StageError> {
        let tx = self.db.begin()?;
        Ok(decode_counter(
            tx.get(&self.root.spills_counter("bytes"), true)
                .await?
                .as_deref(),
        ))
    }

    /// Collects freed spills until `shutdown`, waking whenever a reference is dropped, and
    /// keeps `ferry_stage_spill_bytes` up to date.
    pub async fn run(self, shutdown: CancellationToken) {
        let counter = ChangeCounter::new(self.root.spills_counter("ver"));
        loop {
            let wake = async {
                match self.pass(&counter).await {
                    Ok(seen) if counter.changed_since(&self.db, seen).await.is_ok() => return,
                    Ok(_) => {}
                    Err(e) => warn!(error = %e, "cannot collect freed spills; retrying"),
                }
                tokio::time::sleep(RETRY).await;
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = wake => {}
            }
        }
    }

    /// One collection: returns the change counter as it was before.
    async fn pass(&self, counter: &ChangeCounter) -> Result<i64, StageError> {
        let seen = counter.read(&self.db).await?;
        self.collect().await?;
        metrics::gauge!(names::STAGE_SPILL_BYTES).set(self.bytes().await? as f64);
        Ok(seen)
    }
}

/// Within `tx`: one more reference to spill `id`.
pub(crate) fn add_ref_in(tx: &Transaction, root: &RootKeys, id: u64) {
    tx.atomic_add(&root.spill_count("refs", id), 1);
}

/// Within `tx`: one reference fewer to spill `id`; the collector looks at it.
pub(crate) fn drop_ref_in(tx: &Transaction, root: &RootKeys, id: u64) {
    tx.atomic_add(&root.spill_count("refs", id), -1);
    tx.set(&root.spill_free(id), b"");
    ChangeCounter::new(root.spills_counter("ver")).bump(tx);
}

/// Within `tx`: drops every reference `holder` holds (its release).
///
/// # Errors
/// The store's error.
pub(crate) async fn let_go_all_in(
    tx: &Transaction,
    root: &RootKeys,
    holder: u64,
) -> Result<(), StageError> {
    let (b, e) = root.spills_held_by(holder);
    for kv in tx.get_range(&RangeOption::new(b, e), false).await? {
        if let Some(id) = root.spill_held_of(&kv.key) {
            tx.clear(&kv.key);
            drop_ref_in(tx, root, id);
        }
    }
    Ok(())
}

/// An atomic-add counter, read with a conflict.
async fn read_count(tx: &Transaction, key: &[u8]) -> Result<i64, StageError> {
    Ok(decode_counter(tx.get(key, false).await?.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn a_fanout_too_large_for_one_transaction_is_spilled() {
        assert!(!spills(SPILL_ABOVE, 1), "4 MiB stored once stays inline");
        assert!(
            !spills(SPILL_ABOVE, 2),
            "two copies of 4 MiB fit the budget"
        );
        assert!(spills(SPILL_ABOVE + 1, 1), "above 4 MiB always spills");
        assert!(
            spills(3 * MIB + MIB / 2, 3),
            "three copies of 3.5 MiB do not fit"
        );
        assert!(!spills(1, 0) && !spills(0, 1_000));
    }

    #[test]
    fn a_body_beside_others_in_one_transaction_is_spilled_past_the_budget() {
        assert!(!spills_beside(6 * MIB, 2 * MIB, 1), "8 MiB in all fits");
        assert!(spills_beside(6 * MIB, 3 * MIB, 1), "9 MiB in all does not");
        assert!(
            spills_beside(0, SPILL_ABOVE + 1, 1),
            "above 4 MiB always spills"
        );
    }

    #[test]
    fn runs_stay_within_the_budget_and_a_large_message_goes_alone() {
        let runs = runs(&[MIB, MIB, 2 * MIB, 7 * MIB, MIB, 0, 0]);
        assert_eq!(runs, [0..3, 3..4, 4..7]);
        assert!(super::runs(&[]).is_empty());
    }
}
