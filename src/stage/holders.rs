//! Lease holders: who may own leased messages, and for how long.
//!
//! A holder (a consumer, a channel, a sink task) registers with a deadline and renews it
//! while alive. Its leases are indexed under `(P, "held", holder, …)`, so releasing a
//! holder — when it closes, or when its deadline passes because its process died — returns
//! every message it held to its original position in its stage, in bounded batches.

use super::error::StageError;
use super::record::{decode_u64, encode_u64};
use super::registry::Stages;
use super::{Release, Stage, now_ms};
use crate::store::RangeOption;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

/// Leases a release transaction returns at most.
const RELEASE_BATCH: usize = 500;

/// The lease holders of a set of stages.
#[derive(Clone)]
pub struct Holders {
    stages: Stages,
}

impl Holders {
    pub(super) fn new(stages: Stages) -> Self {
        Self { stages }
    }

    /// Registers a new holder alive for `ttl`; returns its id.
    ///
    /// # Errors
    /// The store's error.
    pub async fn register(&self, ttl: Duration) -> Result<u64, StageError> {
        let holder = fastrand::u64(1..);
        self.renew(holder, ttl).await?;
        Ok(holder)
    }

    /// Extends `holder`'s life to `ttl` from now.
    ///
    /// # Errors
    /// The store's error.
    pub async fn renew(&self, holder: u64, ttl: Duration) -> Result<(), StageError> {
        let key = self.stages.root().holder(holder);
        let deadline = now_ms() + ttl.as_millis() as u64;
        self.stages
            .db()
            .run(|tx| {
                let key = key.clone();
                async move {
                    tx.set(&key, &encode_u64(deadline));
                    Ok::<_, StageError>(())
                }
            })
            .await
    }

    /// Returns every message `holder` has leased to its stage (requeued, so each keeps
    /// its place) and forgets the holder. Returns how many messages were returned.
    ///
    /// # Errors
    /// The store's error.
    pub async fn release(&self, holder: u64) -> Result<usize, StageError> {
        let root = self.stages.root();
        let opened: Mutex<HashMap<u64, Option<Stage>>> = Mutex::default();
        let mut returned = 0;
        loop {
            let (n, done) = self
                .stages
                .db()
                .run(|tx| {
                    let opened = &opened;
                    async move {
                        // Not a snapshot read: a lease made concurrently (a dequeue request
                        // fulfilled for this holder) conflicts, so none is left behind.
                        let (b, e) = root.held_by(holder);
                        let held = tx
                            .get_range(&RangeOption::new(b, e).limit(RELEASE_BATCH), false)
                            .await?;
                        let mut by_stage: HashMap<u64, Vec<_>> = HashMap::new();
                        for kv in &held {
                            if let Some((stage, id)) = root.held_entry(&kv.key) {
                                by_stage.entry(stage).or_default().push(id);
                            }
                            // An entry of a deleted stage has nothing to return.
                            tx.clear(&kv.key);
                        }
                        let now = now_ms();
                        let mut n = 0;
                        for (id, ids) in by_stage {
                            let cached = opened.lock().get(&id).cloned();
                            let stage = match cached {
                                Some(s) => s,
                                None => {
                                    let s = self.stages.open_id(id).await?;
                                    opened.lock().insert(id, s.clone());
                                    s
                                }
                            };
                            if let Some(stage) = stage {
                                n += stage
                                    .release_in(&tx, holder, &ids, Release::Requeue, now)
                                    .await?;
                            }
                        }
                        let done = held.len() < RELEASE_BATCH;
                        if done {
                            tx.clear(&root.holder(holder));
                        }
                        Ok::<_, StageError>((n, done))
                    }
                })
                .await?;
            returned += n;
            if done {
                return Ok(returned);
            }
        }
    }

    /// Whether `holder` is registered and its deadline has not passed. A snapshot read:
    /// a renewal must not conflict with the reader, and a concurrent release conflicts on
    /// the holder's lease index instead, so nothing leased to a dying holder is lost.
    ///
    /// # Errors
    /// The store's error.
    pub async fn is_alive_in(
        &self,
        tx: &crate::store::Transaction,
        holder: u64,
        now: u64,
    ) -> Result<bool, StageError> {
        match tx.get(&self.stages.root().holder(holder), true).await? {
            Some(v) => Ok(decode_u64(&v)? > now),
            None => Ok(false),
        }
    }

    /// Releases every holder whose deadline has passed; returns how many messages went
    /// back to their stages.
    ///
    /// # Errors
    /// The store's error.
    pub async fn reap_expired(&self) -> Result<usize, StageError> {
        let now = now_ms();
        let mut returned = 0;
        for (holder, deadline) in self.list().await? {
            if deadline <= now {
                returned += self.release(holder).await?;
            }
        }
        Ok(returned)
    }

    /// The earliest holder deadline, ms since the epoch (when the reaper should next run).
    ///
    /// # Errors
    /// The store's error.
    pub async fn next_deadline(&self) -> Result<Option<u64>, StageError> {
        Ok(self.list().await?.into_iter().map(|(_, d)| d).min())
    }

    async fn list(&self) -> Result<Vec<(u64, u64)>, StageError> {
        let root = self.stages.root();
        let (b, e) = root.holders();
        let tx = self.stages.db().begin()?;
        let kvs = tx.get_range(&RangeOption::new(b, e), true).await?;
        let mut out = Vec::with_capacity(kvs.len());
        for kv in kvs {
            if let Some(holder) = root.holder_of(&kv.key) {
                out.push((holder, decode_u64(&kv.value)?));
            }
        }
        Ok(out)
    }
}
