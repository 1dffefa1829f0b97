//! One share-partition (a share group's view of one topic partition) built on the stage:
//! each record offset the group is to deliver is a message of the share-partition's own
//! stage (`kafka-share/<group>/<topic_id>/<partition>`, its body the offset), appended in
//! offset order, so the stage's order is the log's.
//!
//! - **Feeding**: `(P,"k","g",group,"sp",topic_id,partition)` holds the next offset to
//!   feed (the share-partition end offset). A fetch appends the offsets from there to the
//!   high watermark (the last stable offset under `read_committed`) in the transaction
//!   that moves it, a bounded run at a time, only while few are waiting.
//! - **Acquiring** is leasing: the records of one acquisition are leased to a holder of
//!   their own registered for `share.record.lock.duration.ms`, so the lease reaper returns
//!   them when the lock expires, and a restarted instance returns at once what its earlier
//!   run had acquired (as Kafka releases acquired records on a broker failover).
//! - **Delivery counts** are the stage's; releasing a record that reached
//!   `share.delivery.count.limit`, and rejecting one, archive it: the stage dead-letters it
//!   into `kafka-share-dead/<group>/<topic_id>/<partition>`, from where
//!   [`super::dead_letters`] copies it to the group's dead-letter topic.
//! - The share-partition start offset is the lowest offset still in the stage (ready or
//!   acquired), the end offset the next to feed.

use super::config::{Reset, ShareConfig};
use crate::keys::KafkaKeys;
use crate::metadata::topics::Partition;
use crate::partition::log::{Log, LogError};
use ferry_stage::{
    Delivery, Holders, MessageId, NewMessage, Release, Stage, StageError, StageOptions, Stages,
    Wakeup, now_ms,
};
use ferry_store::{Database, StoreError};
use std::time::Duration;

/// The most offsets one fetch feeds into a share-partition's stage.
const FEED_RUN: i64 = 1_000;

/// The name of the stage of a share group's view of a partition.
fn stage_name(group: &str, topic_id: u64, partition: i32) -> String {
    format!("kafka-share/{group}/{topic_id}/{partition}")
}

/// The name of the stage its archived records go to ([`super::dead_letters`]).
fn dead_stage_name(group: &str, topic_id: u64, partition: i32) -> String {
    format!("kafka-share-dead/{group}/{topic_id}/{partition}")
}

/// Whether stage `name` is one of `group`'s share-partitions' stages or dead-letter
/// stages (a group id may hold `/`: what follows it must be `<topic_id>/<partition>`).
pub(super) fn is_stage_of(name: &str, group: &str) -> bool {
    ["kafka-share/", "kafka-share-dead/"].iter().any(|kind| {
        name.strip_prefix(kind)
            .and_then(|rest| rest.strip_prefix(group))
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(topic, partition)| {
                topic.parse::<u64>().is_ok() && partition.parse::<i32>().is_ok()
            })
    })
}

/// A record to settle: its message, how, and its delivery count.
pub(crate) type Settling = (MessageId, Settle, u32);

/// A record acquired by a fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Acquired {
    /// Its offset.
    pub offset: i64,
    /// How many times it has been acquired, this time included.
    pub delivery_count: u32,
    /// Its message in the share-partition's stage.
    pub id: MessageId,
}

/// How an acknowledged record is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    /// Done with (ACCEPT, or a GAP the client found no record at).
    Accept,
    /// Back to the group for another delivery (RELEASE).
    Release,
    /// Archived, never delivered again (REJECT).
    Reject,
    /// Kept acquired by the member, its lock starting again (RENEW, KIP-1222).
    Renew,
}

/// Errors of a share-partition.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ShareError {
    /// The stage's error.
    #[error(transparent)]
    Stage(#[from] StageError),
    /// The store's error.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The log's error.
    #[error(transparent)]
    Log(#[from] LogError),
}

impl ferry_store::TransactionError for ShareError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) | Self::Stage(StageError::Store(e)) | Self::Log(LogError::Store(e)) => {
                Some(e)
            }
            _ => None,
        }
    }
}

/// One share group's view of one partition.
#[derive(Clone)]
pub(crate) struct SharePartition {
    /// The partition's log.
    pub log: Partition,
    /// The stage its offsets go through.
    pub stage: Stage,
    /// The stage its archived records go to, until they are copied to the group's
    /// dead-letter topic (or dropped without one).
    pub dead: Stage,
    /// Its group.
    pub group: String,
    /// Where the next offset to feed is kept.
    cursor: Vec<u8>,
}

impl SharePartition {
    /// Opens (creating it the first time) `group`'s view of `log`.
    ///
    /// # Errors
    /// The stage's error.
    pub(crate) async fn open(
        stages: &Stages,
        keys: &KafkaKeys,
        group: &str,
        log: Partition,
        config: &ShareConfig,
    ) -> Result<Self, ShareError> {
        let name = stage_name(group, log.topic_id, log.index);
        let dead_name = dead_stage_name(group, log.topic_id, log.index);
        let dead = stages.create(&dead_name, &StageOptions::default()).await?;
        let options = StageOptions {
            max_deliveries: config.delivery_limit,
            dead_letter: Some(dead_name),
            ..StageOptions::default()
        };
        let stage = match stages.create(&name, &options).await {
            // Made with another delivery limit: the group's setting changed since.
            Err(StageError::Inequivalent { .. }) => {
                stages
                    .set_max_deliveries(&name, config.delivery_limit)
                    .await?;
                stages.open(&name).await?
            }
            other => other?,
        };
        Ok(Self {
            cursor: keys.group(group).share_partition(log.topic_id, log.index),
            log,
            stage,
            dead,
            group: group.to_owned(),
        })
    }

    /// Sets the share-partition's start where `reset` says, unless it has one.
    ///
    /// # Errors
    /// The store's or the log's error.
    pub(crate) async fn initialize(&self, db: &Database, reset: Reset) -> Result<(), ShareError> {
        db.run(|tx| async move {
            if tx.get(&self.cursor, false).await?.is_some() {
                return Ok(());
            }
            let bounds = Log::new(&self.log.keys).bounds(&tx, true).await?;
            let start = match reset {
                Reset::Earliest => bounds.start,
                Reset::Latest => bounds.high_watermark,
            };
            tx.set(&self.cursor, start.to_le_bytes().to_vec());
            Ok::<_, ShareError>(())
        })
        .await
    }

    /// The next offset to feed (the share-partition end offset); `None` before the group
    /// was first assigned the partition.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn end(&self, db: &Database) -> Result<Option<i64>, ShareError> {
        let stored = db
            .run(|tx| async move { tx.get(&self.cursor, true).await })
            .await?;
        Ok(stored.map(|v| i64::from_le_bytes(v.as_slice().try_into().unwrap_or([0; 8]))))
    }

    /// The lowest offset waiting in the stage (not acquired), if any.
    ///
    /// # Errors
    /// The stage's error.
    pub(crate) async fn first_waiting(&self) -> Result<Option<i64>, ShareError> {
        Ok(self
            .stage
            .peek(1)
            .await?
            .first()
            .and_then(|d| Some(i64::from_be_bytes(d.body.as_ref().try_into().ok()?))))
    }

    /// Starts the share-partition again at `start` (`None`: forgets it, so the next
    /// assignment starts it by `share.auto.offset.reset`): what waits in the stage goes.
    /// The caller returned the acquired records first.
    ///
    /// # Errors
    /// The stage's or the store's error.
    pub(crate) async fn restart_at(
        &self,
        db: &Database,
        start: Option<i64>,
    ) -> Result<(), ShareError> {
        self.stage.purge().await?;
        db.run(|tx| async move {
            match start {
                Some(offset) => tx.set(&self.cursor, offset.to_le_bytes().to_vec()),
                None => tx.clear(&self.cursor),
            }
            Ok::<_, StoreError>(())
        })
        .await?;
        Ok(())
    }

    /// Feeds the offsets produced since the last feed into the stage while fewer than
    /// `wanted` wait there; returns how many it fed.
    ///
    /// # Errors
    /// The store's or the log's error.
    pub(crate) async fn feed(
        &self,
        db: &Database,
        wanted: i64,
        read_committed: bool,
    ) -> Result<i64, ShareError> {
        db.run(|tx| async move {
            let Some(stored) = tx.get(&self.cursor, false).await? else {
                return Ok(0);
            };
            let next = i64::from_le_bytes(stored.as_slice().try_into().unwrap_or([0; 8]));
            if self.stage.depth_in(&tx).await?.ready >= wanted.max(1) {
                return Ok(0);
            }
            let readable = Log::new(&self.log.keys).readable(&tx).await?;
            let end = if read_committed {
                readable.stable
            } else {
                readable.bounds.high_watermark
            };
            let from = next.max(readable.bounds.start);
            let to = end.min(from + FEED_RUN);
            if to <= from {
                return Ok(0);
            }
            let messages: Vec<NewMessage> = (from..to)
                .map(|o| NewMessage::new(o.to_be_bytes().to_vec()))
                .collect();
            self.stage.append_in(&tx, &messages, now_ms()).await?;
            tx.set(&self.cursor, to.to_le_bytes().to_vec());
            Ok::<_, ShareError>(to - from)
        })
        .await
    }

    /// Acquires up to `k` records for a new holder locked for `lock`; returns the holder
    /// (registered only when something was acquired) and the records in offset order.
    ///
    /// # Errors
    /// The stage's error.
    pub(crate) async fn acquire(
        &self,
        holders: &Holders,
        k: usize,
        lock: Duration,
    ) -> Result<(u64, Vec<Acquired>), ShareError> {
        let holder = Holders::new_id();
        let leased: Vec<Delivery> = self
            .stage
            .db()
            .run(|tx| async move {
                let leased = self.stage.lease_in(&tx, holder, k, now_ms()).await?;
                if !leased.is_empty() {
                    holders.register_in(&tx, holder, lock);
                }
                Ok::<_, StageError>(leased)
            })
            .await?;
        let mut acquired: Vec<Acquired> = leased
            .into_iter()
            .filter_map(|d| {
                let offset = i64::from_be_bytes(d.body.as_ref().try_into().ok()?);
                Some(Acquired {
                    offset,
                    delivery_count: d.envelope.delivery_count,
                    id: d.id,
                })
            })
            .collect();
        acquired.sort_by_key(|a| a.offset);
        Ok((holder, acquired))
    }

    /// Settles records `holder` acquired, each as its [`Settle`] says, in one transaction;
    /// returns how many were still acquired by `holder` (a record whose lock expired went
    /// back to the group and is not settled). A rejected record's dead letter keeps its
    /// delivery count (`records`' third field) as its why, for [`super::dead_letters`].
    ///
    /// # Errors
    /// The stage's error.
    pub(crate) async fn settle(
        &self,
        holder: u64,
        records: &[Settling],
    ) -> Result<usize, ShareError> {
        let of = |want: Settle| -> Vec<MessageId> {
            records
                .iter()
                .filter(|(_, s, _)| *s == want)
                .map(|(id, _, _)| *id)
                .collect()
        };
        let (accepted, released, rejected) =
            (of(Settle::Accept), of(Settle::Release), of(Settle::Reject));
        let counts: Vec<(MessageId, String)> = records
            .iter()
            .map(|(id, _, count)| (*id, count.to_string()))
            .collect();
        let count_of = |id: &MessageId| {
            counts
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, c)| c.as_str())
        };
        let settled = self
            .stage
            .db()
            .run(|tx| {
                let (accepted, released, rejected) = (&accepted, &released, &rejected);
                let count_of = &count_of;
                async move {
                    let now = now_ms();
                    let mut n = self.stage.ack_in(&tx, holder, accepted).await?;
                    n += self
                        .stage
                        .release_in(&tx, holder, released, Release::Requeue, now)
                        .await?;
                    n += self
                        .stage
                        .release_why_in(&tx, holder, rejected, Release::Reject, count_of, now)
                        .await?;
                    Ok::<_, StageError>(n)
                }
            })
            .await?;
        Ok(settled)
    }

    /// Watches for records to acquire: offsets fed or records returned to the stage, or
    /// the partition's high watermark moving. Wait on it after `tx` commits.
    pub(crate) fn watch(&self, tx: &ferry_store::Transaction) -> (Wakeup, ferry_store::Watch) {
        (
            self.stage.watch_ready(tx),
            tx.watch(&self.log.keys.high_watermark()),
        )
    }
}
