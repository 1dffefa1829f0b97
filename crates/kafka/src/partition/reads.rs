//! What is read of partitions outside their sequencers, for the API handlers, which open no
//! store transaction themselves: a Fetch pass over many partitions in one transaction and
//! the watch that ends its long poll ([`Snapshot`]), an offset by position or time
//! (ListOffsets), the end of a leader epoch (OffsetForLeaderEpoch) and the producers a
//! partition knows (DescribeProducers).
//!
//! Every read is a snapshot read (but for the high watermark a Fetch pass watches), so no
//! reader conflicts with the sequencer that appends.

use crate::metadata::topics::Partition;
use crate::partition::leader_epochs;
use crate::partition::log::{Aborted, Log, LogError, Read, Readable};
use crate::partition::producers::{self, ActiveProducer};
use ferry_store::{Database, StoreError, Transaction, Watch};
use futures::FutureExt;
use futures::future::BoxFuture;
use kafka_protocol::ResponseError;

/// The partitions' reads; cheap to clone.
#[derive(Clone)]
pub struct Reads {
    /// The store.
    db: Database,
}

/// Which offset ListOffsets asks of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetQuery {
    /// The log start offset.
    Earliest,
    /// The high watermark.
    Latest,
    /// The last stable offset (the latest a `read_committed` consumer sees).
    LastStable,
    /// The first offset whose record timestamp is at least this (exact within
    /// uncompressed batches; the batch's first offset within a compressed one).
    AtTime(i64),
}

/// The offset answering an [`OffsetQuery`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundOffset {
    /// The offset.
    pub offset: i64,
    /// The record's timestamp (-1 for the earliest, latest and last stable offsets).
    pub timestamp: i64,
    /// The leader epoch that wrote the offset (KIP-320).
    pub leader_epoch: i32,
}

impl Reads {
    /// The reads of the partitions in `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// A snapshot of the partitions' logs, for one Fetch pass.
    ///
    /// # Errors
    /// [`LogError::Store`] when no transaction can begin.
    pub fn snapshot(&self) -> Result<Snapshot, LogError> {
        Ok(Snapshot {
            tx: self.db.begin()?,
        })
    }

    /// The offset of `partition` that `query` asks for (`None` when no record is that
    /// new), or why `current_leader_epoch` is refused ([`leader_epochs::check`]).
    ///
    /// # Errors
    /// [`LogError`] when the store fails or holds what does not decode.
    pub async fn offset(
        &self,
        partition: &Partition,
        query: OffsetQuery,
        current_leader_epoch: i32,
    ) -> Result<Result<Option<FoundOffset>, ResponseError>, LogError> {
        let tx = self.db.begin()?;
        let log = Log::new(&partition.keys);
        let current = leader_epochs::current(&tx, log.keys).await?;
        if let Err(e) = leader_epochs::check(current_leader_epoch, current) {
            return Ok(Err(e));
        }
        let bounds = log.bounds(&tx, true).await?;
        let found = match query {
            OffsetQuery::LastStable => {
                Some((log.last_stable(&tx, bounds.high_watermark).await?, -1))
            }
            OffsetQuery::Latest => Some((bounds.high_watermark, -1)),
            OffsetQuery::Earliest => Some((bounds.start, -1)),
            OffsetQuery::AtTime(at) => log.offset_for_timestamp(&tx, at, bounds.start).await?,
        };
        let Some((offset, timestamp)) = found else {
            return Ok(Ok(None));
        };
        Ok(Ok(Some(FoundOffset {
            offset,
            timestamp,
            leader_epoch: leader_epochs::epoch_at(&tx, log.keys, offset).await?,
        })))
    }

    /// The (epoch, end offset) of `partition` answering a question about `leader_epoch`
    /// ([`leader_epochs::end_offset`]), or why it is refused: `NOT_LEADER_OR_FOLLOWER`
    /// for a partition no sequencer ever claimed, else as [`leader_epochs::check`] refuses
    /// `current_leader_epoch`.
    ///
    /// # Errors
    /// [`LogError`] when the store fails or holds what does not decode.
    pub async fn epoch_end(
        &self,
        partition: &Partition,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> Result<Result<(i32, i64), ResponseError>, LogError> {
        let tx = self.db.begin()?;
        let keys = &partition.keys;
        let Some(current) = leader_epochs::current(&tx, keys).await? else {
            return Ok(Err(ResponseError::NotLeaderOrFollower));
        };
        if let Err(e) = leader_epochs::check(current_leader_epoch, Some(current)) {
            return Ok(Err(e));
        }
        let bounds = Log::new(keys).bounds(&tx, true).await?;
        let answer =
            leader_epochs::end_offset(&tx, keys, leader_epoch, current, bounds.high_watermark)
                .await?;
        Ok(Ok(answer))
    }

    /// Every producer with a state in `partition` ([`producers::active`]).
    ///
    /// # Errors
    /// The store's error.
    pub async fn active_producers(
        &self,
        partition: &Partition,
    ) -> Result<Vec<ActiveProducer>, StoreError> {
        let keys = &partition.keys;
        self.db
            .run(|tx| async move { producers::active(&tx, keys).await })
            .await
    }
}

/// One transaction over the logs of many partitions: one pass of a Fetch.
pub struct Snapshot {
    /// The transaction every read of the pass shares.
    tx: Transaction,
}

impl Snapshot {
    /// `partition`'s current leader epoch; `None` when no sequencer ever claimed it.
    ///
    /// # Errors
    /// The store's error.
    pub async fn leader_epoch(&self, partition: &Partition) -> Result<Option<i32>, StoreError> {
        leader_epochs::current(&self.tx, &partition.keys).await
    }

    /// The bytes `partition`'s log holds ([`Log::size`]).
    ///
    /// # Errors
    /// The store's error.
    pub async fn size(&self, partition: &Partition) -> Result<i64, LogError> {
        Log::new(&partition.keys).size(&self.tx).await
    }

    /// `partition`'s bounds and last stable offset ([`Log::readable`]).
    ///
    /// # Errors
    /// As [`Log::readable`].
    pub async fn readable(&self, partition: &Partition) -> Result<Readable, LogError> {
        Log::new(&partition.keys).readable(&self.tx).await
    }

    /// Batches of `partition` from `offset` up to `until` within `room` bytes (the first
    /// batch however large when `first`, see [`Log::read`]) and, for `read_committed`, the
    /// aborted transactions among them.
    ///
    /// # Errors
    /// As [`Log::read`] and [`Log::read_committed`].
    pub async fn read(
        &self,
        partition: &Partition,
        offset: i64,
        until: i64,
        room: usize,
        first: bool,
        read_committed: bool,
    ) -> Result<(Read, Option<Vec<Aborted>>), LogError> {
        let log = Log::new(&partition.keys);
        if read_committed {
            let (read, aborted) = log
                .read_committed(&self.tx, offset, until, room, first)
                .await?;
            Ok((read, Some(aborted)))
        } else {
            Ok((log.read(&self.tx, offset, until, room, first).await?, None))
        }
    }

    /// Ends the snapshot with a watch of each of `partitions`' high watermarks: the future
    /// returned completes when one of them moves (the sequencer appended). `None` when
    /// there is nothing to watch or the watches cannot be committed; the caller then answers
    /// with what it read.
    pub async fn watch_high_watermarks<'a>(
        self,
        partitions: impl IntoIterator<Item = &'a Partition>,
    ) -> Option<BoxFuture<'static, ()>> {
        let watches: Vec<Watch> = partitions
            .into_iter()
            .map(|p| self.tx.watch(&p.keys.high_watermark()))
            .collect();
        if watches.is_empty() || self.tx.commit().await.is_err() {
            return None;
        }
        Some(futures::future::select_all(watches).map(|_| ()).boxed())
    }
}
