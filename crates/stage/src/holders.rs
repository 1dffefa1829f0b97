//! Lease holders: who may own leased messages, and for how long.
//!
//! A holder (a consumer, a channel, a sink task) registers with a deadline and renews it
//! while alive. Its leases live under `(P, "s", stage, "f", holder, …)` and the stages it
//! leased from are listed under `(P, "held", holder, stage)`, so releasing a
//! holder — when it closes, or when its deadline passes because its process died — returns
//! every message it held to its original position in its stage, in bounded batches.
//!
//! A holder registered through [`Stages::owned_by`] records its owner, the instance
//! incarnation that registered it, under `(P, "owners", holder)`. A starting instance
//! releases at once the holders its earlier incarnations left behind
//! ([`Holders::release_outlived`]) through the same release as the lease reaper's
//! ([`Holders::reap_expired`]), instead of waiting for their deadlines.
//!
//! Releasing a holder also drops the references it holds to spills ([`super::spill`]): the
//! payload a publisher was writing when it died is then collected.

use super::error::StageError;
use super::record::{decode_u64, encode_u64};
use super::registry::Stages;
use super::spill;
use super::{Release, Stage, now_ms};
use crate::incarnation::{Incarnation, Owner};
use ferry_store::{RangeOption, Transaction};
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
    /// The holders of the leases of `stages`.
    pub fn new(stages: &Stages) -> Self {
        Self {
            stages: stages.clone(),
        }
    }

    /// Registers a new holder alive for `ttl`, owned by the stages' incarnation; returns
    /// its id.
    ///
    /// # Errors
    /// The store's error.
    pub async fn register(&self, ttl: Duration) -> Result<u64, StageError> {
        let holder = Self::new_id();
        self.stages
            .db()
            .run(|tx| async move {
                self.register_in(&tx, holder, ttl);
                Ok::<_, StageError>(())
            })
            .await?;
        Ok(holder)
    }

    /// A new holder id.
    pub fn new_id() -> u64 {
        fastrand::u64(1..)
    }

    /// Within `tx`: registers `holder` ([`Holders::new_id`]) alive for `ttl`, owned by the
    /// stages' incarnation.
    pub fn register_in(&self, tx: &Transaction, holder: u64, ttl: Duration) {
        let root = self.stages.root();
        tx.set(
            &root.holder(holder),
            encode_u64(now_ms() + ttl.as_millis() as u64),
        );
        if let Some(owner) = self.stages.owner() {
            tx.set(&root.holder_owner(holder), owner.encode());
        }
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
                    tx.set(&key, encode_u64(deadline));
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
                        // Not snapshot reads: a lease made concurrently for this holder (a
                        // dequeue request fulfilled for it) conflicts, so none is left behind.
                        let (b, e) = root.holder_stages(holder);
                        let first = tx
                            .get_range(&RangeOption::new(b, e).limit(1), false)
                            .await?;
                        let Some(entry) = first.first() else {
                            spill::let_go_all_in(&tx, root, holder).await?;
                            tx.clear(&root.holder(holder));
                            tx.clear(&root.holder_owner(holder));
                            return Ok::<_, StageError>((0, true));
                        };
                        let Some(id) = root.holder_stage_of(&entry.key) else {
                            return Err(StageError::Corrupt("undecodable holder stage key".into()));
                        };
                        let cached = opened.lock().get(&id).cloned();
                        let stage = match cached {
                            Some(s) => s,
                            None => {
                                let s = self.stages.open_id(id).await?;
                                opened.lock().insert(id, s.clone());
                                s
                            }
                        };
                        // A deleted stage took its leases with it.
                        let Some(stage) = stage else {
                            tx.clear(&entry.key);
                            return Ok((0, false));
                        };
                        let leases = stage.leases_in(&tx, holder, RELEASE_BATCH).await?;
                        // Messages at their delivery limit are dead-lettered, their bodies
                        // copied: one transaction takes one run of them.
                        let copies: Vec<u64> = leases
                            .iter()
                            .map(|(_, envelope)| stage.release_copies(envelope, Release::Requeue))
                            .collect();
                        let run = spill::runs(&copies).into_iter().next().unwrap_or_default();
                        if run.end == leases.len() && leases.len() < RELEASE_BATCH {
                            tx.clear(&entry.key);
                        }
                        let ids: Vec<_> = leases[run].iter().map(|(id, _)| *id).collect();
                        let n = stage
                            .release_in(&tx, holder, &ids, Release::Requeue, now_ms())
                            .await?;
                        Ok((n, false))
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
        tx: &ferry_store::Transaction,
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
        let holders = self.list().await?;
        self.release_all(
            holders
                .into_iter()
                .filter(|&(_, d)| d <= now)
                .map(|(h, _)| h),
        )
        .await
    }

    /// Releases every holder that `incarnation` outlived (registered by an earlier
    /// incarnation of this instance; in a store of one instance, every holder but its own),
    /// whatever its deadline, and every holder the lease index names that is no longer
    /// registered (leases taken after their holder was released, which an AMQP channel
    /// closing mid-delivery could leave before that race was closed: nothing else would
    /// ever return them). Returns how many messages went back to their stages.
    ///
    /// # Errors
    /// The store's error.
    pub async fn release_outlived(&self, incarnation: &Incarnation) -> Result<usize, StageError> {
        // The lease index before the holders: a holder registers before it leases, so one
        // that leased in between is listed below and never taken for unregistered.
        let indexed = self.indexed().await?;
        // Holders before owners: a holder and its owner are written in one transaction, so
        // every holder listed has its owner read, and one registered in between is not
        // listed (never taken for ownerless).
        let holders = self.list().await?;
        let owners = self.owners().await?;
        let registered: std::collections::HashSet<u64> = holders.iter().map(|&(h, _)| h).collect();
        let unregistered: Vec<u64> = indexed
            .into_iter()
            .filter(|h| !registered.contains(h))
            .collect();
        if !unregistered.is_empty() {
            tracing::warn!(
                holders = unregistered.len(),
                "returning messages leased to holders that were no longer registered"
            );
        }
        self.release_all(
            holders
                .into_iter()
                .map(|(h, _)| h)
                .filter(|h| incarnation.outlived(owners.get(h).copied()))
                .chain(unregistered),
        )
        .await
    }

    /// Every holder the lease index names, once each.
    async fn indexed(&self) -> Result<std::collections::BTreeSet<u64>, StageError> {
        let root = self.stages.root();
        let (b, e) = root.all_held();
        let tx = self.stages.db().begin()?;
        let kvs = tx.get_range(&RangeOption::new(b, e), true).await?;
        Ok(kvs
            .iter()
            .filter_map(|kv| root.holder_of_held(&kv.key))
            .collect())
    }

    /// Releases `holders`; returns how many messages went back to their stages.
    async fn release_all(&self, holders: impl Iterator<Item = u64>) -> Result<usize, StageError> {
        let mut returned = 0;
        for holder in holders {
            returned += self.release(holder).await?;
        }
        Ok(returned)
    }

    /// Every holder's recorded owner.
    async fn owners(&self) -> Result<HashMap<u64, Owner>, StageError> {
        let root = self.stages.root();
        let (b, e) = root.holder_owners();
        let tx = self.stages.db().begin()?;
        let kvs = tx.get_range(&RangeOption::new(b, e), true).await?;
        Ok(kvs
            .into_iter()
            .filter_map(|kv| Some((root.holder_of(&kv.key)?, Owner::decode(&kv.value)?)))
            .collect())
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
