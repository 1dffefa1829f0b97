//! Which instance sequences which partition: claiming leases, handing partitions over
//! beyond this instance's share, and each partition's leader as Metadata names it.
//!
//! Balance: every third of the lease term each instance counts the live brokers and takes
//! its share, `ceil(partitions / live brokers)`: it claims unheld partitions while it holds
//! fewer, and hands over the partitions it holds beyond its share. A partition being handed
//! over refuses new produce requests (`NOT_LEADER_OR_FOLLOWER`), its sequencer moves what is
//! already staged (answering those producers), then releases the lease so an instance with
//! room claims it on its next round.

use super::append::Sequencer;
use super::{Running, SequencerError, Sequencers};
use crate::metadata::topics::Partition;
use crate::partition::leader_epochs;
use crate::partition::lease::Lease;
use crate::partition::log::Log;
use ferry_stage::now_ms;
use ferry_telemetry::kafka as m;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// A partition's leader as Metadata names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    /// The node holding its sequencer lease.
    pub node: i32,
    /// Its leader epoch ([`leader_epochs`]).
    pub epoch: i32,
}

impl Sequencers {
    /// Takes this instance's share of the partitions: claims unheld ones while it holds
    /// fewer than `ceil(partitions / live brokers)`, and hands over those it holds beyond
    /// that (the last ones in topic and index order). When the live brokers cannot be read,
    /// it claims every unheld partition and hands nothing over.
    pub async fn balance(&self) {
        let partitions: Vec<Partition> = self
            .shared
            .topics
            .all()
            .iter()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect();
        let share = match self.shared.brokers.live().await {
            Ok(live) => partitions.len().div_ceil(live.len().max(1)),
            Err(e) => {
                warn!(error = %e, "cannot read the live brokers; claiming every unheld partition");
                usize::MAX
            }
        };
        let mut local: Vec<&Partition> = partitions
            .iter()
            .filter(|p| self.is_local(p.topic_id, p.index))
            .collect();
        for partition in &partitions {
            if local.len() >= share {
                break;
            }
            if !self.is_local(partition.topic_id, partition.index) && self.claim(partition).await {
                local.push(partition);
            }
        }
        if local.len() > share {
            local.sort_by_key(|p| (p.topic_id, p.index));
            for partition in &local[share..] {
                self.hand_over(partition);
            }
        }
    }

    /// Starts handing `partition` over: new produce requests for it are refused from now
    /// on, and its sequencer releases the lease once it has moved what is staged.
    fn hand_over(&self, partition: &Partition) {
        if let Some(handoff) = self
            .shared
            .running
            .lock()
            .get(&(partition.topic_id, partition.index))
        {
            info!(topic = %partition.topic, partition = partition.index, "handing the partition over: this instance holds more than its share");
            handoff.handoff.cancel();
        }
    }

    /// Takes `partition`'s lease if no other live instance holds it, and starts its
    /// sequencer; returns whether it did (false when this instance sequences it already).
    pub async fn claim(&self, partition: &Partition) -> bool {
        let id = (partition.topic_id, partition.index);
        if self.shared.shutdown.is_cancelled() || self.shared.running.lock().contains_key(&id) {
            return false;
        }
        let shared = &self.shared;
        let keys = &partition.keys;
        let claimed = shared
            .db
            .run(|tx| async move {
                let claimed =
                    Lease::claim(&tx, &keys.lease(), shared.node, shared.liveness, now_ms())
                        .await?;
                let Ok(lease) = claimed else {
                    return Ok::<_, SequencerError>(None);
                };
                // The new leader epoch begins where the log ends now.
                let bounds = Log::new(keys).bounds(&tx, false).await?;
                leader_epochs::begin_in(&tx, keys, lease.epoch, bounds.high_watermark).await?;
                Ok(Some(lease.epoch))
            })
            .await;
        match claimed {
            Ok(Some(epoch)) => {
                let handoff = CancellationToken::new();
                let running = Running {
                    handoff: handoff.clone(),
                    epoch,
                };
                if shared.running.lock().insert(id, running).is_some() {
                    return false;
                }
                metrics::gauge!(m::SEQUENCERS).increment(1.0);
                info!(topic = %partition.topic, partition = partition.index, epoch, "sequencing partition");
                let task = Sequencer::new(shared.clone(), partition.clone(), epoch, handoff);
                shared.tasks.lock().spawn(task.run());
                true
            }
            Ok(None) => false,
            Err(e) => {
                warn!(topic = %partition.topic, partition = partition.index, error = %e, "cannot claim the sequencer lease");
                false
            }
        }
    }

    /// Balances (claiming partitions of new topics from other instances and leases that
    /// lapsed, handing over what is beyond this instance's share) every third of the lease
    /// until shutdown; then waits for the sequencers to stop and release their leases so
    /// another instance can take over at once.
    pub async fn run(self) {
        self.shared
            .liveness
            .renew_until(&self.shared.shutdown, || self.balance())
            .await;
        let mut tasks = std::mem::take(&mut *self.shared.tasks.lock());
        while tasks.join_next().await.is_some() {}
    }

    /// The leader of every partition of `partitions`, for Metadata answers (`None` where
    /// no live sequencer holds the lease): a snapshot read of their leases.
    ///
    /// # Errors
    /// The store's error.
    pub async fn leaders(
        &self,
        partitions: &[Partition],
    ) -> Result<Vec<Option<Leader>>, SequencerError> {
        let tx = self.shared.db.begin()?;
        let now = now_ms();
        let reads = partitions.iter().map(|p| {
            let tx = tx.clone();
            async move {
                let lease = Lease::read(&tx, &p.keys.lease(), true).await?;
                Ok(lease.and_then(|l| {
                    Lease::holder(Some(l), now).map(|node| Leader {
                        node,
                        epoch: leader_epochs::leader_epoch(l.epoch),
                    })
                }))
            }
        });
        futures::future::try_join_all(reads).await
    }
}
