//! A stage consumer: leases batches, sleeps on watches when the stage is empty, and uses
//! the high-contention dequeue technique of FoundationDB's queue recipe when consumers
//! compete for the head.
//!
//! The fast path is one optimistic lease transaction. When it conflicts (another consumer
//! took the head first), the consumer registers a *dequeue request* — a versionstamped key,
//! so registering never conflicts — and from then on runs *fulfill* transactions: read the
//! oldest pending requests and as many head messages as they want, and lease the messages
//! to the requesters in request order. Whichever consumer's fulfill commits serves every
//! waiting consumer at once, so contention costs one winner per round instead of one retry
//! per consumer. Each consumer then *collects* the leases it has not seen from its holder
//! index — the same step recovers leases whose commit was reported `commit_unknown_result`.

use super::error::StageError;
use super::holders::Holders;
use super::record::DequeueRequest;
use super::{Delivery, MessageId, Release, Stage, now_ms};
use ferry_store::error::code;
use ferry_store::{RangeOption, RunOptions, StoreError, Transaction, TransactionError, Watch};
use ferry_telemetry::names;
use futures::future::select_all;
use std::collections::HashSet;
use std::time::Duration;

/// Most pending requests one fulfill transaction serves.
const REQUESTS_PER_FULFILL: usize = 64;

/// A set of watches; resolves when any of them fires.
pub struct Wakeup {
    watches: Vec<Watch>,
}

impl Wakeup {
    pub(super) fn new(watches: Vec<Watch>) -> Self {
        Self { watches }
    }

    fn add(&mut self, watch: Watch) {
        self.watches.push(watch);
    }

    /// Waits until a watched key changes.
    ///
    /// # Errors
    /// The watch's error (for example, its transaction's commit outcome was unknown).
    pub async fn wait(self) -> Result<(), StoreError> {
        if self.watches.is_empty() {
            return Ok(());
        }
        select_all(self.watches).await.0
    }
}

/// The outcome of one consumer step.
pub enum Step {
    /// Messages leased to this consumer.
    Delivered(Vec<Delivery>),
    /// Nothing to deliver now; wait on this, then step again.
    Idle(Wakeup),
}

/// What one fulfill transaction did.
enum Fulfilled {
    /// Served requests (possibly not ours), or found none pending.
    Served,
    /// Nothing was ready; wait on this.
    Empty(Wakeup),
    /// Another consumer's fulfill won; it serves us.
    Lost,
}

/// A consumer of one stage, owning one lease holder.
pub struct Consumer {
    stage: Stage,
    holders: Holders,
    holder: u64,
    batch: usize,
    /// Leases delivered to the caller and not yet acknowledged or released.
    outstanding: HashSet<MessageId>,
    /// Our pending dequeue request's versionstamp, while one is registered.
    request: Option<[u8; 12]>,
    /// Dequeue requests this consumer registered because its lease conflicted.
    requests_registered: u64,
}

impl Consumer {
    /// A consumer of `stage` leasing up to `batch` messages at a time to `holder` (a holder
    /// registered with `holders`, kept alive by the caller).
    pub fn new(stage: Stage, holders: Holders, holder: u64, batch: usize) -> Self {
        // At 0 from the first consumer on, so a rate over it has a first sample.
        metrics::counter!(names::STAGE_DEQUEUE_REQUESTS_TOTAL, names::LABEL_STAGE => stage.name().to_owned())
            .increment(0);
        Self {
            stage,
            holders,
            holder,
            batch: batch.max(1),
            outstanding: HashSet::new(),
            request: None,
            requests_registered: 0,
        }
    }

    /// The holder this consumer leases to.
    pub fn holder(&self) -> u64 {
        self.holder
    }

    /// Messages delivered and not yet acknowledged or released.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Changes how many messages the next lease takes at most (an AMQP consumer's
    /// prefetch room changes as its deliveries are acknowledged).
    pub fn set_batch(&mut self, batch: usize) {
        self.batch = batch.max(1);
    }

    /// Forgets delivered messages that were acknowledged or released outside this consumer
    /// (in a transaction the caller ran with [`Stage::ack_in`] or [`Stage::release_in`]).
    /// Call it only after that transaction committed: until then the leases are still held,
    /// and a forgotten lease would look unseen and be delivered again.
    pub fn forget(&mut self, ids: &[MessageId]) {
        for id in ids {
            self.outstanding.remove(id);
        }
    }

    /// How many times a lease conflicted and this consumer fell back to a dequeue request.
    pub fn requests_registered(&self) -> u64 {
        self.requests_registered
    }

    /// Waits for and returns the next batch of leased messages (at least one). Not
    /// cancel-safe, as [`Consumer::step`].
    ///
    /// # Errors
    /// The store's error.
    pub async fn next(&mut self) -> Result<Vec<Delivery>, StageError> {
        loop {
            match self.step().await? {
                Step::Delivered(d) => return Ok(d),
                // A failed watch (its transaction's outcome was unknown) just means: look again.
                Step::Idle(wakeup) => {
                    let _ = wakeup.wait().await;
                }
            }
        }
    }

    /// Leases messages if any are ready; otherwise says what to wait on. Never waits.
    ///
    /// Not cancel-safe: a step dropped midway may have committed a lease (or a dequeue
    /// request that another consumer then serves) that this consumer does not know of; those
    /// messages are delivered by a later step, after newer ones, or return when the holder
    /// is released. Let a step finish, or release the holder after dropping one. Waiting on
    /// the [`Wakeup`] of [`Step::Idle`] may be cut short freely.
    ///
    /// # Errors
    /// The store's error.
    pub async fn step(&mut self) -> Result<Step, StageError> {
        loop {
            if self.request.is_none() {
                match self.lease_fast().await {
                    Ok(step) => return Ok(step),
                    Err(e) => match e.store_error() {
                        Some(s) if s.code() == Some(code::NOT_COMMITTED) => {
                            self.register_request().await?
                        }
                        Some(s) if s.is_maybe_committed() => {
                            let got = self.collect().await?;
                            if !got.is_empty() {
                                return Ok(Step::Delivered(got));
                            }
                            continue;
                        }
                        Some(s) if s.is_retryable() => continue,
                        _ => return Err(e),
                    },
                }
            }
            let fulfilled = self.fulfill().await?;
            let got = self.collect().await?;
            if !got.is_empty() {
                return Ok(Step::Delivered(got));
            }
            match fulfilled {
                Fulfilled::Empty(mut wakeup) => {
                    if let Some(stamp) = self.request {
                        // Also wake when another consumer fulfills our request.
                        let tx = self.stage.db.begin()?;
                        wakeup.add(tx.watch(&self.stage.keys.request(stamp)));
                        tx.commit().await?;
                    }
                    return Ok(Step::Idle(wakeup));
                }
                Fulfilled::Lost => {
                    // The winner is serving the requests; give it a moment.
                    tokio::time::sleep(Duration::from_micros(200 + fastrand::u64(..800))).await;
                }
                Fulfilled::Served => {}
            }
        }
    }

    /// Acknowledges delivered messages; returns how many were still leased to us.
    ///
    /// # Errors
    /// The store's error.
    pub async fn ack(&mut self, ids: &[MessageId]) -> Result<usize, StageError> {
        let n = self.stage.ack(self.holder, ids).await?;
        for id in ids {
            self.outstanding.remove(id);
        }
        Ok(n)
    }

    /// Returns delivered messages to the stage (or dead-letters them).
    ///
    /// # Errors
    /// The store's error.
    pub async fn release(&mut self, ids: &[MessageId], how: Release) -> Result<usize, StageError> {
        let n = self.stage.release(self.holder, ids, how).await?;
        for id in ids {
            self.outstanding.remove(id);
        }
        Ok(n)
    }

    /// Withdraws a pending request and returns every message still leased to this
    /// consumer's holder; returns how many were returned.
    ///
    /// # Errors
    /// The store's error.
    pub async fn close(mut self) -> Result<usize, StageError> {
        if let Some(stamp) = self.request.take() {
            let key = self.stage.keys.request(stamp);
            self.stage
                .db
                .run(|tx| {
                    let key = key.clone();
                    async move {
                        tx.clear(&key);
                        Ok::<_, StageError>(())
                    }
                })
                .await?;
        }
        self.holders.release(self.holder).await
    }

    /// One optimistic lease attempt; conflicts are returned, not retried.
    async fn lease_fast(&mut self) -> Result<Step, StageError> {
        let stage = &self.stage;
        let (holder, batch) = (self.holder, self.batch);
        let ((delivered, wakeup), _) = stage
            .db
            .run_with(RunOptions::once(), |tx| async move {
                let delivered = stage.lease_in(&tx, holder, batch, now_ms()).await?;
                let wakeup = delivered.is_empty().then(|| stage.watch_ready(&tx));
                Ok::<_, StageError>((delivered, wakeup))
            })
            .await?;
        match wakeup {
            Some(w) => Ok(Step::Idle(w)),
            None => {
                self.track(&delivered);
                Ok(Step::Delivered(delivered))
            }
        }
    }

    /// Registers a dequeue request (conflict-free: a versionstamped key).
    async fn register_request(&mut self) -> Result<(), StageError> {
        let stage = &self.stage;
        let request = DequeueRequest {
            holder: self.holder,
            want: self.batch as u32,
        };
        let (user_version, info) = stage
            .db
            .run_with(RunOptions::default(), |tx| async move {
                let user_version = tx.next_user_version();
                tx.set_versionstamped_key(&stage.keys.new_request(user_version), request.encode());
                Ok::<_, StageError>(user_version)
            })
            .await?;
        let mut stamp = [0u8; 12];
        stamp[..10].copy_from_slice(&info.versionstamp.unwrap_or_default());
        stamp[10..].copy_from_slice(&user_version.to_be_bytes());
        self.request = Some(stamp);
        self.requests_registered += 1;
        metrics::counter!(names::STAGE_DEQUEUE_REQUESTS_TOTAL, names::LABEL_STAGE => self.stage.name().to_owned())
            .increment(1);
        Ok(())
    }

    /// One fulfill attempt: serve the oldest pending requests from the head.
    async fn fulfill(&self) -> Result<Fulfilled, StageError> {
        let outcome = self
            .stage
            .db
            .run_with(RunOptions::once(), |tx| self.fulfill_in(tx))
            .await;
        match outcome {
            Ok((f, _)) => Ok(f),
            Err(e) if e.store_error().is_some_and(StoreError::is_retryable) => Ok(Fulfilled::Lost),
            Err(e) => Err(e),
        }
    }

    async fn fulfill_in(&self, tx: Transaction) -> Result<Fulfilled, StageError> {
        let stage = &self.stage;
        let now = now_ms();
        let (b, e) = stage.keys.requests();
        let requests = tx
            .get_range(&RangeOption::new(b, e).limit(REQUESTS_PER_FULFILL), false)
            .await?;
        if requests.is_empty() {
            return Ok(Fulfilled::Served);
        }
        let mut pending = Vec::with_capacity(requests.len());
        for kv in &requests {
            pending.push((kv.key.clone(), DequeueRequest::decode(&kv.value)?));
        }
        let want: usize = pending.iter().map(|(_, r)| r.want as usize).sum();
        let mut taken = stage.take_ready(&tx, want, now).await?.into_iter();
        if taken.len() == 0 {
            return Ok(Fulfilled::Empty(stage.watch_ready(&tx)));
        }
        for (key, request) in pending {
            if taken.len() == 0 {
                break;
            }
            tx.clear(&key);
            // A request of a holder that is gone is dropped, not served.
            if !self.holders.is_alive_in(&tx, request.holder, now).await? {
                continue;
            }
            let share: Vec<_> = taken.by_ref().take(request.want as usize).collect();
            stage.lease_entries_in(&tx, request.holder, share);
        }
        // Anything no live requester took goes back where it was.
        for (id, envelope) in taken {
            tx.set(&stage.keys.ready(&id), envelope.encode());
        }
        Ok(Fulfilled::Served)
    }

    /// Collects leases of our holder we have not delivered yet, and notes whether our
    /// request is still pending.
    async fn collect(&mut self) -> Result<Vec<Delivery>, StageError> {
        let tx = self.stage.db.begin()?;
        let got = self
            .stage
            .unseen_leases_in(&tx, self.holder, &self.outstanding)
            .await?;
        if let Some(stamp) = self.request
            && tx
                .get(&self.stage.keys.request(stamp), true)
                .await?
                .is_none()
        {
            self.request = None;
        }
        self.track(&got);
        Ok(got)
    }

    fn track(&mut self, delivered: &[Delivery]) {
        self.outstanding.extend(delivered.iter().map(|d| d.id));
    }
}
