//! Acquisition locks: which member holds which acquired record of a share-partition,
//! under which holder (the stage's lease), until when. Acquiring takes a run of records
//! for one new holder; acknowledging settles them in the stage (or, for RENEW, starts
//! their locks again); a lock that ends returns its record — the whole acquisition at
//! once when all of it is due, record by record when some of it was renewed.

use super::config::ShareConfig;
use super::partition::{Acquired, Settle, Settling, ShareError, SharePartition};
use super::{AckError, Place, ShareGroups};
use ferry_stage::MessageId;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Who holds an acquired record.
#[derive(Debug, Clone)]
pub(super) struct Lock {
    /// The member it was acquired for.
    pub(super) member: String,
    /// The holder its lease belongs to.
    pub(super) holder: u64,
    /// Its message in the share-partition's stage.
    pub(super) id: MessageId,
    /// When its lock ends ([`ShareGroups::expire_locks`] then returns it).
    pub(super) until: Instant,
    /// How many times it has been delivered, this time included.
    pub(super) delivery_count: u32,
}

impl ShareGroups {
    /// Feeds and acquires up to `k` records of `sp` for `member`.
    ///
    /// # Errors
    /// The share-partition's error.
    pub(crate) async fn acquire(
        &self,
        group: &str,
        member: &str,
        sp: &SharePartition,
        k: usize,
        config: &ShareConfig,
    ) -> Result<Vec<Acquired>, ShareError> {
        sp.feed(&self.inner.db, k as i64, config.read_committed)
            .await?;
        let (holder, acquired) = sp.acquire(&self.inner.holders, k, config.lock).await?;
        if acquired.is_empty() {
            return Ok(acquired);
        }
        let now = Instant::now();
        let until = now + config.lock;
        let place = (sp.log.topic_id, sp.log.index);
        let mut groups = self.inner.groups.lock();
        let Some(g) = groups.get_mut(group) else {
            return Ok(acquired);
        };
        let locks = g.locks.entry(place).or_default();
        for a in &acquired {
            locks.insert(
                a.offset,
                Lock {
                    member: member.to_owned(),
                    holder,
                    id: a.id,
                    until,
                    delivery_count: a.delivery_count,
                },
            );
        }
        drop(groups);
        self.inner.locked.notify_one();
        Ok(acquired)
    }

    /// Returns the records whose acquisition lock ended to their share-partitions, when it
    /// ends, until `shutdown` (the daemon's lease reaper does the same for the records of
    /// an instance that died). An acquisition whose every record is due goes back whole
    /// (its holder released); the due records of one some of whose records were renewed go
    /// back one by one.
    pub(crate) async fn expire_locks(self, shutdown: CancellationToken) {
        loop {
            let now = Instant::now();
            let mut due: Vec<(String, Place, Lock)> = Vec::new();
            let mut live = HashSet::new();
            let mut next: Option<Instant> = None;
            for (group, g) in self.inner.groups.lock().iter_mut() {
                for (place, locks) in &mut g.locks {
                    locks.retain(|_, l| {
                        if l.until <= now {
                            due.push((group.clone(), *place, l.clone()));
                            return false;
                        }
                        live.insert(l.holder);
                        next = Some(next.map_or(l.until, |n| n.min(l.until)));
                        true
                    });
                }
            }
            let mut whole = Vec::new();
            let mut one_by_one: BTreeMap<(String, Place, u64), Vec<Settling>> = BTreeMap::new();
            for (group, place, l) in due {
                if live.contains(&l.holder) {
                    one_by_one
                        .entry((group, place, l.holder))
                        .or_default()
                        .push((l.id, Settle::Release, l.delivery_count));
                } else {
                    whole.push(l.holder);
                }
            }
            whole.sort_unstable();
            whole.dedup();
            self.release(whole).await;
            for ((group, place, holder), records) in one_by_one {
                let settled = match self.opened_at(&group, place).await {
                    Ok(sp) => sp.settle(holder, &records).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = settled {
                    warn!(group, holder, error = %e, "cannot return records whose lock ended");
                }
            }
            let sleep = next.map_or(Duration::from_secs(3600), |n| n - now);
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.inner.locked.notified() => {}
                () = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// `group`'s share-partition at `place`, opened again when this instance dropped it
    /// (its settings changed).
    async fn opened_at(&self, group: &str, place: Place) -> Result<SharePartition, ShareError> {
        if let Some(sp) = self.inner.partitions.lock().get(&(group.to_owned(), place)) {
            return Ok(sp.clone());
        }
        let topic = self
            .inner
            .topics
            .all()
            .into_iter()
            .find(|t| t.meta.id == place.0)
            .map(|t| t.meta.name.clone())
            .unwrap_or_default();
        let config = self.config(group).await?;
        self.partition(group, &topic, place.1, &config).await
    }

    /// Settles `member`'s records of `sp` as `acks` say ((offset, how) pairs); a renewed
    /// record stays acquired, its lock starting again for `lock` (its acquisition's holder
    /// is renewed in the store too, for the lease reaper).
    ///
    /// # Errors
    /// `INVALID_RECORD_STATE` when a record is not acquired by `member` (never was, was
    /// acknowledged already, or its lock expired), after settling the others; the store's
    /// error as `UNKNOWN_SERVER_ERROR`.
    pub(crate) async fn acknowledge(
        &self,
        group: &str,
        member: &str,
        sp: &SharePartition,
        acks: &[(i64, Settle)],
        lock: Duration,
    ) -> Result<(), AckError> {
        let place = (sp.log.topic_id, sp.log.index);
        let mut by_holder: BTreeMap<u64, Vec<Settling>> = BTreeMap::new();
        let mut renewed = BTreeSet::new();
        let mut strays = Vec::new();
        {
            let until = Instant::now() + lock;
            let mut groups = self.inner.groups.lock();
            let mut locks = groups.get_mut(group).and_then(|g| g.locks.get_mut(&place));
            for &(offset, how) in acks {
                let held = locks
                    .as_deref_mut()
                    .and_then(|l| l.get_mut(&offset))
                    .filter(|l| l.member == member);
                match (held, how) {
                    (Some(l), Settle::Renew) => {
                        l.until = until;
                        renewed.insert(l.holder);
                    }
                    (Some(l), _) => {
                        by_holder
                            .entry(l.holder)
                            .or_default()
                            .push((l.id, how, l.delivery_count))
                    }
                    (None, _) => strays.push(offset),
                }
            }
            if let Some(locks) = locks {
                for (offset, how) in acks {
                    if *how != Settle::Renew && !strays.contains(offset) {
                        locks.remove(offset);
                    }
                }
            }
        }
        for holder in renewed {
            self.inner.holders.renew(holder, lock).await.map_err(|e| {
                warn!(group, error = %e, "cannot renew share group records' locks");
                (ResponseError::UnknownServerError, e.to_string())
            })?;
        }
        let mut unsettled = 0;
        for (holder, records) in &by_holder {
            let settled = sp.settle(*holder, records).await.map_err(|e| {
                warn!(group, error = %e, "cannot settle share group records");
                (ResponseError::UnknownServerError, e.to_string())
            })?;
            unsettled += records.len() - settled;
        }
        tracing::debug!(
            group,
            member,
            partition = sp.log.index,
            acks = acks.len(),
            strays = strays.len(),
            unsettled,
            "share acknowledgements"
        );
        if strays.is_empty() && unsettled == 0 {
            return Ok(());
        }
        Err((
            ResponseError::InvalidRecordState,
            format!(
                "{} of {} acknowledged records were not acquired by member {member} (or their acquisition lock expired)",
                strays.len() + unsettled,
                acks.len()
            ),
        ))
    }

    /// Returns the records of `holders` to their share-partitions.
    pub(super) async fn release(&self, holders: Vec<u64>) {
        for holder in holders {
            if let Err(e) = self.inner.holders.release(holder).await {
                warn!(holder, error = %e, "cannot release a share group member's records");
            }
        }
    }
}
