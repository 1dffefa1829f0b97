//! The stage: Ferry's durable queue, built from FoundationDB's queue recipes.
//!
//! Every idea of the seeds is here:
//! - **FIFO from ordered keys, no head pointer**: ready messages are keyed
//!   `(stage, "r", lane, versionstamp)` ([`keys`]); the head is the first key.
//! - **Conflict-free enqueue**: [`Stage::append_in`] writes versionstamped keys and bumps
//!   counters by atomic add, so concurrent appends from any number of Ferry instances never
//!   conflict.
//! - **`npush` / `npop`**: atomic counters; [`Stage::depth`] is `npush - npop`, split
//!   into ready and in flight.
//! - **`pop_k`**: [`Stage::pop_in`] and [`Stage::lease_in`] take up to k messages in one
//!   transaction, clearing the taken ready keys with one `clear_range`.
//! - **Watches**: [`Stage::watch_ready`] watches the push and return counters, so idle
//!   consumers sleep until a message arrives, never poll.
//! - **Priority lanes**: `lane = 255 - priority`, FIFO within a lane (the recipe's reverse
//!   scan would be LIFO within a priority; a forward scan over inverted lanes is not).
//! - **High-contention dequeue**: [`Consumer`] registers a dequeue request when its
//!   optimistic lease conflicts, and whichever consumer next succeeds serves every
//!   pending request in order.
//! - **Side effects outside the transaction**: the `_in` functions only read and buffer
//!   mutations; callers deliver after commit.
//!
//! Beyond the seeds: delivery leases (a leased message moves to an in-flight entry owned
//! by a holder; ack removes it; nack or the holder's expiry returns it to its original key,
//! so it keeps its place), a delivery limit and dead-letter stage, per-message expiry, and
//! idempotent appends keyed by (producer, sequence), and payloads too large for one
//! transaction kept in shared, reference-counted spills ([`spill`]).
//!
//! Beside the queue, what every layer above uses to write to the store and to hold things
//! in it: [`GroupCommit`] batches items into store commits (items queue while one commit
//! is in flight), [`Liveness`] renews what lives on a lease, and [`Incarnation`] says which
//! run of which instance owns it, so a restart frees its earlier run's at once. `[stage]`'s
//! keys are [`StageConfig`]. Built on `ferry_store` only.

mod config;
mod consumer;
mod error;
mod group_commit;
mod holders;
mod incarnation;
pub mod keys;
mod liveness;
pub(crate) mod record;
mod registry;
pub mod spill;

pub use config::{DEFAULT_LEASE_TTL_MS, StageConfig};
pub use consumer::{Consumer, Step, Wakeup};
pub use error::StageError;
pub use group_commit::GroupCommit;
pub use holders::Holders;
pub use incarnation::{Incarnation, Owner, Scope};
pub use keys::{MessageId, RootKeys, lane_of};
pub use liveness::Liveness;
pub use record::{DeadLetter, DeadLetterReason, Envelope, StageMeta};
pub use registry::{StageOptions, Stages};
pub use spill::{Spill, Spills};

use bytes::Bytes;
use ferry_store::keys::key_after;
use ferry_store::{Database, RangeOption, Transaction, chunked};
use futures::future::try_join_all;
use keys::{Counter, StageKeys};
use record::{DeadLetterCause, decode_counter, decode_u64, decode_why, encode_u64, encode_why};
use std::collections::HashMap;
use std::sync::Arc;

/// What the fuzz targets (`fuzz/`, through `ferry::fuzzing`) decode of the stage's stored
/// records; not for Ferry's own code.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::record::{DequeueRequest, decode_counter, decode_u64};
}

/// The largest body a stage holds: one append must fit FoundationDB's 10 MB transaction.
/// A larger payload is kept in a [`Spill`] written in several.
pub const MAX_BODY_SIZE: usize = 8 * 1024 * 1024;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Identifies an append for deduplication: a producer and its increasing sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Idempotency {
    /// The producer's identity.
    pub producer: u64,
    /// Its sequence number; an append whose sequence is not above the producer's last is a
    /// duplicate.
    pub sequence: u64,
}

/// A message to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// The payload (opaque to the stage). It reaches the store without a copy: each stored
    /// chunk is a slice of it.
    pub body: Bytes,
    /// 0–255; capped by the stage's `max_priority`.
    pub priority: u8,
    /// When it expires, ms since the epoch; 0: never.
    pub expires_ms: u64,
    /// Deduplication key, if the producer has one.
    pub idempotency: Option<Idempotency>,
    /// The rest of its payload, for a message too large for one transaction (the body is
    /// then only its head): the stored message references the spill.
    pub spill: Option<Spill>,
}

impl NewMessage {
    /// A message with priority 0, no expiry and no deduplication key.
    pub fn new(body: impl Into<Bytes>) -> Self {
        Self {
            body: body.into(),
            priority: 0,
            expires_ms: 0,
            idempotency: None,
            spill: None,
        }
    }

    /// Sets the spill the rest of its payload is in.
    pub fn spill(mut self, spill: Option<Spill>) -> Self {
        self.spill = spill;
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the expiry time (ms since the epoch).
    pub fn expires_ms(mut self, at: u64) -> Self {
        self.expires_ms = at;
        self
    }

    /// Sets the deduplication key.
    pub fn idempotency(mut self, producer: u64, sequence: u64) -> Self {
        self.idempotency = Some(Idempotency { producer, sequence });
        self
    }
}

/// What happened to one message of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Stored.
    Appended,
    /// Not stored: its producer already appended this sequence.
    Duplicate,
}

/// A message taken from a stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Its place in the stage (ack and release name it).
    pub id: MessageId,
    /// The payload.
    pub body: Bytes,
    /// Its envelope, with this delivery counted.
    pub envelope: Envelope,
}

impl Delivery {
    /// Whether it was delivered before (RabbitMQ's `redelivered`).
    pub fn redelivered(&self) -> bool {
        self.envelope.delivery_count > 1
    }
}

/// What to do with a leased message that is not acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Put it back at its original position (or dead-letter it past the delivery limit).
    Requeue,
    /// Dead-letter it (or drop it when the stage has no dead-letter stage).
    Reject,
}

/// A stage's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Depth {
    /// Messages waiting for delivery.
    pub ready: i64,
    /// Messages leased and not yet acknowledged.
    pub in_flight: i64,
    /// Messages ever appended (`npush`).
    pub pushed: i64,
    /// Messages ever removed (`npop`).
    pub popped: i64,
    /// Messages ever moved to the dead-letter stage.
    pub dead_lettered: i64,
    /// Appends dropped as duplicates.
    pub duplicates: i64,
}

/// What [`Stage::expire_head_in`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeadExpiry {
    /// Messages dead-lettered (or dropped) because they had expired.
    pub expired: usize,
    /// When the live message now at the head expires, if it has an expiry: the next time
    /// the head is worth checking.
    pub next_expiry_ms: Option<u64>,
}

/// The dead-letter stage of a stage, resolved when the stage is opened.
#[derive(Debug, Clone)]
struct DeadLetterTarget {
    keys: StageKeys,
    max_priority: u8,
}

/// One stage; cheap to clone.
#[derive(Clone)]
pub struct Stage {
    db: Database,
    root: RootKeys,
    keys: StageKeys,
    meta: Arc<StageMeta>,
    dead_letter: Option<DeadLetterTarget>,
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stage")
            .field("id", &self.keys.id)
            .field("meta", &self.meta)
            .finish()
    }
}

/// Whether a message with `envelope` returned now goes to the dead-letter stage instead:
/// it reached the stage's delivery limit (`limit`, 0 for none).
fn reached_limit(limit: u32, envelope: &Envelope) -> bool {
    limit > 0 && envelope.delivery_count >= limit
}

impl Stage {
    /// The stage's name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// The stage's id.
    pub fn id(&self) -> u64 {
        self.keys.id
    }

    /// The stage's settings.
    pub fn meta(&self) -> &StageMeta {
        &self.meta
    }

    /// The store the stage lives in.
    pub fn db(&self) -> &Database {
        &self.db
    }

    /// The spills its large messages' payloads are kept in.
    pub fn spills(&self) -> Spills {
        Spills::new(self.db.clone(), self.root.clone())
    }

    /// Appends `messages` in one transaction, in order. See [`Stage::append_in`].
    ///
    /// # Errors
    /// [`StageError::BodyTooLarge`], or the store's error.
    pub async fn append(&self, messages: &[NewMessage]) -> Result<Vec<AppendOutcome>, StageError> {
        let now = now_ms();
        self.db
            .run(|tx| async move { self.append_in(&tx, messages, now).await })
            .await
    }

    /// Appends `messages` within `tx`, in order: each gets a versionstamped key in its
    /// priority lane, so commit order is delivery order within a lane. A message whose
    /// (producer, sequence) is not above the producer's last appended sequence is a
    /// duplicate and is not stored, which makes a retried append idempotent.
    ///
    /// # Errors
    /// [`StageError::BodyTooLarge`], or the store's error.
    pub async fn append_in(
        &self,
        tx: &Transaction,
        messages: &[NewMessage],
        now: u64,
    ) -> Result<Vec<AppendOutcome>, StageError> {
        if let Some(m) = messages.iter().find(|m| m.body.len() > MAX_BODY_SIZE) {
            return Err(StageError::BodyTooLarge {
                size: m.body.len(),
                max: MAX_BODY_SIZE,
            });
        }
        let mut last_seq: HashMap<u64, (Option<u64>, bool)> = HashMap::new();
        let mut outcomes = Vec::with_capacity(messages.len());
        for m in messages {
            if let Some(idem) = m.idempotency {
                let entry = match last_seq.get_mut(&idem.producer) {
                    Some(e) => e,
                    None => {
                        let stored = tx.get(&self.keys.producer(idem.producer), false).await?;
                        let last = stored.as_deref().map(decode_u64).transpose()?;
                        last_seq.entry(idem.producer).or_insert((last, false))
                    }
                };
                if entry.0.is_some_and(|last| idem.sequence <= last) {
                    outcomes.push(AppendOutcome::Duplicate);
                    continue;
                }
                *entry = (Some(idem.sequence), true);
            }
            let user_version = tx.next_user_version();
            write_body(tx, &self.root, &self.keys, user_version, &m.body, m.spill);
            let envelope = Envelope {
                body_len: m.body.len() as u32,
                priority: m.priority,
                delivery_count: 0,
                enqueued_ms: now,
                expires_ms: m.expires_ms,
                dead_letter: None,
                spill: m.spill,
            };
            let lane = lane_of(m.priority, self.meta.max_priority);
            tx.set_versionstamped_key(&self.keys.new_ready(lane, user_version), envelope.encode());
            outcomes.push(AppendOutcome::Appended);
        }
        for (producer, (last, changed)) in last_seq {
            if let (Some(seq), true) = (last, changed) {
                tx.set(&self.keys.producer(producer), encode_u64(seq));
            }
        }
        let appended = outcomes
            .iter()
            .filter(|o| **o == AppendOutcome::Appended)
            .count();
        self.count(tx, Counter::Push, appended as i64);
        self.count(tx, Counter::Duplicates, (outcomes.len() - appended) as i64);
        Ok(outcomes)
    }

    /// Removes and returns up to `k` messages from the head (the seeds' `pop_k`). Expired
    /// messages at the head are dead-lettered, not returned.
    ///
    /// # Errors
    /// The store's error.
    pub async fn pop(&self, k: usize) -> Result<Vec<Delivery>, StageError> {
        let now = now_ms();
        self.db
            .run(|tx| async move { self.pop_in(&tx, k, now).await })
            .await
    }

    /// [`Stage::pop`] within `tx`.
    ///
    /// # Errors
    /// The store's error.
    pub async fn pop_in(
        &self,
        tx: &Transaction,
        k: usize,
        now: u64,
    ) -> Result<Vec<Delivery>, StageError> {
        let taken = self.take_ready(tx, k, now).await?;
        let deliveries = self.with_bodies(tx, taken).await?;
        for d in &deliveries {
            self.clear_body(tx, &d.id, &d.envelope);
        }
        self.count(tx, Counter::Pop, deliveries.len() as i64);
        Ok(deliveries)
    }

    /// [`Stage::pop_in`] for a stage whose single consumer is fenced by other means (a
    /// Kafka partition's sequencer holds a lease in the store): the head is read as a
    /// snapshot and the transaction conflicts only on the entries it takes, so appends
    /// committing meanwhile never make it retry, however often the stage runs empty. Takes
    /// up to `k` messages, stopping before the one whose body would take the total past
    /// `max_bytes` (always taking at least one). Expiry is not applied.
    ///
    /// # Errors
    /// The store's error.
    pub async fn pop_exclusive_in(
        &self,
        tx: &Transaction,
        k: usize,
        max_bytes: usize,
    ) -> Result<Vec<Delivery>, StageError> {
        let (b, e) = self.keys.ready_range();
        let head = tx
            .get_range(&RangeOption::new(b, e).limit(k.max(1)), true)
            .await?;
        let mut taken = Vec::with_capacity(head.len());
        let mut bytes = 0usize;
        for kv in &head {
            let envelope = Envelope::decode(&kv.value)?;
            if !taken.is_empty() && bytes + envelope.body_len as usize > max_bytes {
                break;
            }
            bytes += envelope.body_len as usize;
            taken.push((self.message_of(&kv.key)?, envelope));
        }
        let (Some(first), Some(last)) = (head.first(), taken.len().checked_sub(1)) else {
            return Ok(Vec::new());
        };
        let end = key_after(&head[last].key);
        tx.add_read_conflict_range(&first.key, &end);
        tx.clear_range(&first.key, &end);
        let deliveries = self.with_bodies(tx, taken).await?;
        for d in &deliveries {
            self.clear_body(tx, &d.id, &d.envelope);
        }
        self.count(tx, Counter::Pop, deliveries.len() as i64);
        Ok(deliveries)
    }

    /// Leases up to `k` messages from the head to `holder`. See [`Stage::lease_in`].
    ///
    /// # Errors
    /// The store's error.
    pub async fn lease(&self, holder: u64, k: usize) -> Result<Vec<Delivery>, StageError> {
        let now = now_ms();
        self.db
            .run(|tx| async move { self.lease_in(&tx, holder, k, now).await })
            .await
    }

    /// Leases up to `k` messages from the head to `holder` within `tx`: each moves from its
    /// ready entry to an in-flight entry (same lane and versionstamp) owned by `holder`,
    /// with its delivery counted. Expired messages are dead-lettered instead.
    ///
    /// # Errors
    /// The store's error.
    pub async fn lease_in(
        &self,
        tx: &Transaction,
        holder: u64,
        k: usize,
        now: u64,
    ) -> Result<Vec<Delivery>, StageError> {
        let taken = self.take_ready(tx, k, now).await?;
        let leased = self.lease_entries_in(tx, holder, taken);
        self.with_bodies(tx, leased).await
    }

    /// Acknowledges leased messages: each leased to `holder` is removed for good. Returns
    /// how many were; a message no longer leased to `holder` (acknowledged already, or
    /// returned after its holder expired) is skipped, so a retried ack is harmless.
    ///
    /// # Errors
    /// The store's error.
    pub async fn ack(&self, holder: u64, ids: &[MessageId]) -> Result<usize, StageError> {
        self.db
            .run(|tx| async move { self.ack_in(&tx, holder, ids).await })
            .await
    }

    /// Which of `ids` are leased to `holder` now (a conflicting read: a concurrent ack or
    /// release of one of them fails `tx`).
    ///
    /// # Errors
    /// The store's error.
    pub async fn held_in(
        &self,
        tx: &Transaction,
        holder: u64,
        ids: &[MessageId],
    ) -> Result<Vec<MessageId>, StageError> {
        Ok(self
            .leases_of(tx, holder, ids)
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }

    /// [`Stage::ack`] within `tx`.
    ///
    /// # Errors
    /// The store's error.
    pub async fn ack_in(
        &self,
        tx: &Transaction,
        holder: u64,
        ids: &[MessageId],
    ) -> Result<usize, StageError> {
        let leases = self.leases_of(tx, holder, ids).await?;
        for (id, envelope) in &leases {
            self.unlease(tx, holder, id);
            self.clear_body(tx, id, envelope);
        }
        self.count(tx, Counter::Pop, leases.len() as i64);
        Ok(leases.len())
    }

    /// Returns leased messages that were not processed. See [`Stage::release_in`].
    ///
    /// # Errors
    /// The store's error.
    pub async fn release(
        &self,
        holder: u64,
        ids: &[MessageId],
        how: Release,
    ) -> Result<usize, StageError> {
        let now = now_ms();
        self.db
            .run(|tx| async move { self.release_in(&tx, holder, ids, how, now).await })
            .await
    }

    /// Releases messages leased to `holder` within `tx`: [`Release::Requeue`] puts each
    /// back at its original key (dead-lettering it once it reached the delivery limit);
    /// [`Release::Reject`] dead-letters it. Returns how many were leased to `holder`.
    /// Dead-lettering copies each body ([`Stage::dead_letter_copies`]): a caller releasing
    /// many large messages keeps each transaction within [`spill::RUN_BYTES`] of them.
    ///
    /// # Errors
    /// The store's error.
    pub async fn release_in(
        &self,
        tx: &Transaction,
        holder: u64,
        ids: &[MessageId],
        how: Release,
        now: u64,
    ) -> Result<usize, StageError> {
        self.release_why_in(tx, holder, ids, how, |_| None, now)
            .await
    }

    /// Returns refused messages leased to `holder`, each with why its destination refused
    /// it: [`Release::Requeue`] for each, and the refusal is kept with the dead letter of
    /// one that reached the delivery limit ([`Stage::refusals`]). Returns how many were
    /// leased to `holder`.
    ///
    /// # Errors
    /// The store's error.
    pub async fn release_refused(
        &self,
        holder: u64,
        refused: &[(MessageId, String)],
    ) -> Result<usize, StageError> {
        let now = now_ms();
        let ids: Vec<MessageId> = refused.iter().map(|(id, _)| *id).collect();
        let why = |id: &MessageId| {
            refused
                .iter()
                .find(|(r, _)| r == id)
                .map(|(_, why)| why.as_str())
        };
        self.db
            .run(|tx| {
                let ids = &ids;
                async move {
                    self.release_why_in(&tx, holder, ids, Release::Requeue, why, now)
                        .await
                }
            })
            .await
    }

    /// [`Stage::release_in`], keeping `why(id)` with each message dead-lettered (read back
    /// with [`Stage::refusals`] of the dead-letter stage).
    ///
    /// # Errors
    /// The store's error.
    pub async fn release_why_in<'w>(
        &self,
        tx: &Transaction,
        holder: u64,
        ids: &[MessageId],
        how: Release,
        why: impl Fn(&MessageId) -> Option<&'w str>,
        now: u64,
    ) -> Result<usize, StageError> {
        let leases = self.leases_of(tx, holder, ids).await?;
        let mut requeued = 0;
        for (id, envelope) in &leases {
            self.unlease(tx, holder, id);
            let envelope = *envelope;
            let limit = self.meta.max_deliveries;
            let reason = match how {
                Release::Reject => Some(DeadLetterReason::Rejected),
                Release::Requeue if reached_limit(limit, &envelope) => {
                    Some(DeadLetterReason::DeliveryLimit)
                }
                Release::Requeue => None,
            };
            match reason {
                Some(reason) => {
                    let dead = DeadLetterCause {
                        reason,
                        why: why(id),
                    };
                    self.dead_letter_in(tx, id, envelope, dead, now).await?;
                }
                None => {
                    tx.set(&self.keys.ready(id), envelope.encode());
                    requeued += 1;
                }
            }
        }
        self.count(tx, Counter::Returned, requeued);
        Ok(leases.len())
    }

    /// Why each of the dead letters `ids` of this stage came, when that was kept (the
    /// last refusal of its message, [`Stage::release_refused`]); in the order of `ids`.
    ///
    /// # Errors
    /// The store's error.
    pub async fn refusals(&self, ids: &[MessageId]) -> Result<Vec<Option<String>>, StageError> {
        let tx = self.db.begin()?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(match tx.get(&self.keys.why(id), true).await? {
                Some(v) => Some(decode_why(&v)?),
                None => None,
            });
        }
        Ok(out)
    }

    /// Watches for messages becoming ready (appended or returned); create it in the
    /// transaction that found the stage empty, and wait on it after that commits.
    pub fn watch_ready(&self, tx: &Transaction) -> Wakeup {
        Wakeup::new(vec![
            tx.watch(&self.keys.counter(Counter::Push)),
            tx.watch(&self.keys.counter(Counter::Returned)),
        ])
    }

    /// The stage's counters (snapshot reads: never conflicts).
    ///
    /// # Errors
    /// The store's error.
    pub async fn depth(&self) -> Result<Depth, StageError> {
        self.depth_in(&self.db.begin()?).await
    }

    /// [`Stage::depth`] within `tx` (snapshot reads: a length check inside an append
    /// transaction does not conflict with every concurrent append and ack).
    ///
    /// # Errors
    /// The store's error.
    pub async fn depth_in(&self, tx: &Transaction) -> Result<Depth, StageError> {
        let read = |c| {
            let tx = tx.clone();
            let key = self.keys.counter(c);
            async move { Ok::<_, StageError>(decode_counter(tx.get(&key, true).await?.as_deref())) }
        };
        let (pushed, popped, in_flight, dead_lettered, duplicates) = futures::try_join!(
            read(Counter::Push),
            read(Counter::Pop),
            read(Counter::InFlight),
            read(Counter::DeadLettered),
            read(Counter::Duplicates),
        )?;
        Ok(Depth {
            ready: pushed - popped - in_flight,
            in_flight,
            pushed,
            popped,
            dead_lettered,
            duplicates,
        })
    }

    /// Whether the stage holds no message, ready or leased, as of `tx`'s read version
    /// (snapshot reads of `npush` and `npop`: it conflicts with nothing). A writer that
    /// serialises its own transactions sees its earlier appends; those are what this
    /// answers for, e.g. whether a message may overtake the ones already waiting here.
    ///
    /// # Errors
    /// The store's error.
    pub async fn is_empty_in(&self, tx: &Transaction) -> Result<bool, StageError> {
        let (push, pop) = (
            self.keys.counter(Counter::Push),
            self.keys.counter(Counter::Pop),
        );
        let (pushed, popped) = futures::try_join!(tx.get(&push, true), tx.get(&pop, true))?;
        Ok(decode_counter(pushed.as_deref()) == decode_counter(popped.as_deref()))
    }

    /// Moves up to `n` messages from the head to the dead-letter stage (or drops them)
    /// with [`DeadLetterReason::MaxLength`], making room in a stage at its length limit
    /// (AMQP `x-overflow: drop-head`). Returns how many were moved.
    ///
    /// # Errors
    /// The store's error.
    pub async fn drop_head_in(
        &self,
        tx: &Transaction,
        n: usize,
        now: u64,
    ) -> Result<usize, StageError> {
        if n == 0 {
            return Ok(0);
        }
        let head = self.read_head(tx, n).await?;
        if let (Some(first), Some(last)) = (head.first(), head.last()) {
            tx.clear_range(&first.0, &key_after(&last.0));
        }
        for (_, id, envelope) in &head {
            self.dead_letter_in(tx, id, *envelope, DeadLetterReason::MaxLength, now)
                .await?;
        }
        Ok(head.len())
    }

    /// Dead-letters the expired messages at the head, stopping at the first live one, after
    /// `limit` messages, or before the one whose body would take the bytes copied into the
    /// dead-letter stage past [`spill::RUN_BYTES`] (its expiry is then the next one), so
    /// messages expire even when no consumer takes them.
    /// Expiry is checked at the head only (as RabbitMQ does): a message behind a live one
    /// expires when it reaches the head.
    ///
    /// # Errors
    /// The store's error.
    pub async fn expire_head_in(
        &self,
        tx: &Transaction,
        limit: usize,
        now: u64,
    ) -> Result<HeadExpiry, StageError> {
        let mut outcome = HeadExpiry::default();
        let mut copied = 0;
        for (key, id, envelope) in self.read_head(tx, limit).await? {
            if !envelope.expired(now) {
                outcome.next_expiry_ms = (envelope.expires_ms != 0).then_some(envelope.expires_ms);
                break;
            }
            let copies = self.dead_letter_copies(&envelope);
            if outcome.expired > 0 && copied + copies > spill::RUN_BYTES {
                // The rest goes in the next transaction, which is due now.
                outcome.next_expiry_ms = Some(envelope.expires_ms);
                break;
            }
            copied += copies;
            tx.clear(&key);
            self.dead_letter_in(tx, &id, envelope, DeadLetterReason::Expired, now)
                .await?;
            outcome.expired += 1;
        }
        Ok(outcome)
    }

    /// Up to `limit` ready messages from the head, in delivery order, with their bodies,
    /// left where they are (snapshot reads: a look conflicts with no consumer or producer).
    ///
    /// # Errors
    /// The store's error.
    pub async fn peek(&self, limit: usize) -> Result<Vec<Delivery>, StageError> {
        let tx = self.db.begin()?;
        let (b, e) = self.keys.ready_range();
        let head = tx
            .get_range(&RangeOption::new(b, e).limit(limit.max(1)), true)
            .await?;
        let entries = head
            .iter()
            .map(|kv| Ok((self.message_of(&kv.key)?, Envelope::decode(&kv.value)?)))
            .collect::<Result<Vec<_>, StageError>>()?;
        self.with_bodies(&tx, entries).await
    }

    /// Removes every ready message (leased ones stay); returns how many were removed.
    ///
    /// # Errors
    /// The store's error.
    pub async fn purge(&self) -> Result<usize, StageError> {
        const BATCH: usize = 1000;
        let mut removed = 0;
        loop {
            let n = self
                .db
                .run(|tx| async move {
                    let (b, e) = self.keys.ready_range();
                    let head = tx
                        .get_range(&RangeOption::new(b, e).limit(BATCH), false)
                        .await?;
                    if let (Some(first), Some(last)) = (head.first(), head.last()) {
                        tx.clear_range(&first.key, &key_after(&last.key));
                    }
                    for kv in &head {
                        let id = self.message_of(&kv.key)?;
                        let envelope = Envelope::decode(&kv.value)?;
                        self.clear_body(&tx, &id, &envelope);
                    }
                    self.count(&tx, Counter::Pop, head.len() as i64);
                    Ok::<_, StageError>(head.len())
                })
                .await?;
            removed += n;
            if n < BATCH {
                return Ok(removed);
            }
        }
    }

    /// Reads the messages leased to `holder` whose ids `known` does not contain: leases
    /// a consumer has not seen yet (assigned by another consumer's dequeue, or taken by a
    /// commit whose outcome was reported unknown).
    ///
    /// # Errors
    /// The store's error.
    pub async fn unseen_leases_in(
        &self,
        tx: &Transaction,
        holder: u64,
        known: &std::collections::HashSet<MessageId>,
    ) -> Result<Vec<Delivery>, StageError> {
        let mut unseen = Vec::new();
        for (id, envelope) in self.leases_in(tx, holder, 0).await? {
            if !known.contains(&id) {
                unseen.push((id, envelope));
            }
        }
        self.with_bodies(tx, unseen).await
    }

    /// Up to `limit` (0: all) messages leased to `holder`, in delivery order. Not a
    /// snapshot read: a lease made or settled concurrently conflicts.
    ///
    /// # Errors
    /// The store's error.
    pub async fn leases_in(
        &self,
        tx: &Transaction,
        holder: u64,
        limit: usize,
    ) -> Result<Vec<(MessageId, Envelope)>, StageError> {
        let (b, e) = self.keys.leased_by(holder);
        let leased = tx
            .get_range(&RangeOption::new(b, e).limit(limit), false)
            .await?;
        leased
            .iter()
            .map(|kv| {
                let id = self
                    .keys
                    .leased_message_of(&kv.key)
                    .ok_or_else(|| StageError::Corrupt("undecodable lease key".into()))?;
                Ok((id, Envelope::decode(&kv.value)?))
            })
            .collect()
    }

    // ----- shared transaction steps -----

    fn count(&self, tx: &Transaction, c: Counter, delta: i64) {
        if delta != 0 {
            tx.atomic_add(&self.keys.counter(c), delta);
        }
    }

    fn message_of(&self, key: &[u8]) -> Result<MessageId, StageError> {
        self.keys
            .message_of(key)
            .ok_or_else(|| StageError::Corrupt("undecodable message key".into()))
    }

    /// Takes up to `k` ready entries from the head (a non-snapshot read that conflicts only
    /// on what it returned), clears them with one range clear, and dead-letters the expired
    /// — stopping before an expired one whose body would take the bytes copied into the
    /// dead-letter stage past [`spill::RUN_BYTES`], which stays for the next transaction.
    async fn take_ready(
        &self,
        tx: &Transaction,
        k: usize,
        now: u64,
    ) -> Result<Vec<(MessageId, Envelope)>, StageError> {
        let head = self.read_head(tx, k).await?;
        let mut live = Vec::with_capacity(head.len());
        let (mut taken, mut copied) = (0usize, 0);
        for (_, id, envelope) in &head {
            if envelope.expired(now) {
                let copies = self.dead_letter_copies(envelope);
                if taken > 0 && copied + copies > spill::RUN_BYTES {
                    break;
                }
                copied += copies;
                self.dead_letter_in(tx, id, *envelope, DeadLetterReason::Expired, now)
                    .await?;
            } else {
                live.push((*id, *envelope));
            }
            taken += 1;
        }
        if let (Some(first), Some(last)) = (head.first(), taken.checked_sub(1)) {
            tx.clear_range(&first.0, &key_after(&head[last].0));
        }
        Ok(live)
    }

    /// Bytes releasing a message with `envelope` as `how` copies: what
    /// [`Stage::dead_letter_copies`] says when it is dead-lettered (rejected, or requeued at
    /// the delivery limit), else nothing.
    pub fn release_copies(&self, envelope: &Envelope, how: Release) -> u64 {
        match how {
            Release::Requeue if !reached_limit(self.meta.max_deliveries, envelope) => 0,
            _ => self.dead_letter_copies(envelope),
        }
    }

    /// Bytes dead-lettering a message with `envelope` copies into the dead-letter stage: its
    /// stage body (of a spilled message, only its head; the spill is shared by reference),
    /// or nothing when the stage has no dead-letter stage and drops it.
    pub fn dead_letter_copies(&self, envelope: &Envelope) -> u64 {
        if self.dead_letter.is_some() {
            u64::from(envelope.body_len)
        } else {
            0
        }
    }

    /// Reads up to `n` ready entries from the head (non-snapshot: conflicts only on what
    /// it returned), decoded.
    async fn read_head(
        &self,
        tx: &Transaction,
        n: usize,
    ) -> Result<Vec<(Vec<u8>, MessageId, Envelope)>, StageError> {
        let (b, e) = self.keys.ready_range();
        let head = tx
            .get_range(&RangeOption::new(b, e).limit(n.max(1)), false)
            .await?;
        head.into_iter()
            .map(|kv| {
                let id = self.message_of(&kv.key)?;
                let envelope = Envelope::decode(&kv.value)?;
                Ok((kv.key, id, envelope))
            })
            .collect()
    }

    /// Moves taken ready entries to in-flight entries owned by `holder`.
    fn lease_entries_in(
        &self,
        tx: &Transaction,
        holder: u64,
        taken: Vec<(MessageId, Envelope)>,
    ) -> Vec<(MessageId, Envelope)> {
        let mut leased = Vec::with_capacity(taken.len());
        for (id, mut envelope) in taken {
            envelope.delivery_count += 1;
            tx.set(&self.keys.leased(holder, &id), envelope.encode());
            leased.push((id, envelope));
        }
        if !leased.is_empty() {
            tx.set(&self.root.holder_stage(holder, self.id()), b"");
        }
        self.count(tx, Counter::InFlight, leased.len() as i64);
        leased
    }

    /// The leases among `ids` that `holder` owns, with their envelopes (reads conflict, so
    /// a concurrent ack or release of the same message makes one of them retry).
    async fn leases_of(
        &self,
        tx: &Transaction,
        holder: u64,
        ids: &[MessageId],
    ) -> Result<Vec<(MessageId, Envelope)>, StageError> {
        let reads = ids.iter().map(|id| {
            let key = self.keys.leased(holder, id);
            async move { tx.get(&key, false).await.map(|v| (*id, v)) }
        });
        let mut out = Vec::new();
        for (id, value) in try_join_all(reads).await? {
            if let Some(v) = value {
                out.push((id, Envelope::decode(&v)?));
            }
        }
        Ok(out)
    }

    /// Removes a lease's in-flight entry.
    fn unlease(&self, tx: &Transaction, holder: u64, id: &MessageId) {
        tx.clear(&self.keys.leased(holder, id));
        self.count(tx, Counter::InFlight, -1);
    }

    /// Reads the bodies of `entries` (snapshot reads: bodies never change while their
    /// message exists, and the entries' own keys carry the conflicts).
    async fn with_bodies(
        &self,
        tx: &Transaction,
        entries: Vec<(MessageId, Envelope)>,
    ) -> Result<Vec<Delivery>, StageError> {
        let reads = entries.into_iter().map(|(id, envelope)| async move {
            let body = read_body(tx, &self.keys, &id, envelope.body_len).await?;
            Ok::<_, StageError>(Delivery { id, body, envelope })
        });
        try_join_all(reads).await
    }

    /// Moves a message out of this stage: into the dead-letter stage with `reason`
    /// recorded, or dropped when there is none.
    async fn dead_letter_in(
        &self,
        tx: &Transaction,
        id: &MessageId,
        envelope: Envelope,
        cause: impl Into<DeadLetterCause<'_>>,
        now: u64,
    ) -> Result<(), StageError> {
        let DeadLetterCause { reason, why } = cause.into();
        if let Some(target) = &self.dead_letter {
            let body = read_body(tx, &self.keys, id, envelope.body_len).await?;
            let user_version = tx.next_user_version();
            write_body(
                tx,
                &self.root,
                &target.keys,
                user_version,
                &body,
                envelope.spill,
            );
            let moved = Envelope {
                delivery_count: 0,
                expires_ms: 0,
                enqueued_ms: now,
                dead_letter: Some(DeadLetter {
                    reason,
                    from_stage: self.id(),
                    at_ms: now,
                }),
                ..envelope
            };
            let lane = lane_of(envelope.priority, target.max_priority);
            tx.set_versionstamped_key(&target.keys.new_ready(lane, user_version), moved.encode());
            if let Some(why) = why {
                tx.set_versionstamped_key(&target.keys.new_why(user_version), encode_why(why));
            }
            tx.atomic_add(&target.keys.counter(Counter::Push), 1);
            self.count(tx, Counter::DeadLettered, 1);
        }
        self.clear_body(tx, id, &envelope);
        self.count(tx, Counter::Pop, 1);
        Ok(())
    }

    /// Removes a message's body (its chunk count follows from its length) and drops its
    /// reference to its spill.
    fn clear_body(&self, tx: &Transaction, id: &MessageId, envelope: &Envelope) {
        for chunk in 0..chunked::count(envelope.body_len as usize) {
            tx.clear(&self.keys.body_chunk(id, chunk));
        }
        // Only a dead letter can have a why; other messages cost no extra clear.
        if envelope.dead_letter.is_some() {
            tx.clear(&self.keys.why(id));
        }
        if let Some(spill) = envelope.spill {
            tx.clear(&self.keys.spill_ref(id.stamp));
            spill::drop_ref_in(tx, &self.root, spill.id);
        }
    }
}

/// Writes `body` in chunks under the versionstamped body key of `user_version` (each chunk
/// a slice of `body`, not a copy), and the message's reference to its spill, if any.
fn write_body(
    tx: &Transaction,
    root: &RootKeys,
    keys: &StageKeys,
    user_version: u16,
    body: &Bytes,
    spill: Option<Spill>,
) {
    for (i, chunk) in chunked::split(body) {
        tx.set_versionstamped_key(&keys.new_body_chunk(user_version, i), chunk);
    }
    if let Some(spill) = spill {
        tx.set_versionstamped_key(&keys.new_spill_ref(user_version), encode_u64(spill.id));
        spill::add_ref_in(tx, root, spill.id);
    }
}

/// Reads a message's body (snapshot reads: a body never changes while its message exists).
async fn read_body(
    tx: &Transaction,
    keys: &StageKeys,
    id: &MessageId,
    len: u32,
) -> Result<Bytes, StageError> {
    let body = chunked::read(tx, len as usize, |chunk| keys.body_chunk(id, chunk)).await?;
    if body.len() != len as usize {
        return Err(StageError::Corrupt(format!(
            "message body has {} of its {len} bytes",
            body.len()
        )));
    }
    Ok(body)
}
