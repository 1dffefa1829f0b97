//! DeleteRecords: a client moves a partition's log start offset forward, and its leader
//! deletes the batches below it as retention does, in transactions fenced by the
//! sequencer's lease.

use super::retention::RETENTION_BATCH;
use super::{SequencerError, Sequencers, publish_bounds};
use crate::metadata::topics::Partition;
use crate::partition::log::Log;
use ferry_stage::now_ms;
use kafka_protocol::ResponseError;

/// Why DeleteRecords did not move a partition's log start offset.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DeleteRecordsError {
    /// This instance does not sequence the partition (or is handing it over).
    #[error("this instance is not the partition's leader")]
    NotLeader,
    /// The offset is beyond the high watermark, or negative and not -1.
    #[error("offset {offset} is outside the log (its high watermark is {high_watermark})")]
    OutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The partition's high watermark.
        high_watermark: i64,
    },
    /// The store failed.
    #[error(transparent)]
    Failed(#[from] SequencerError),
}

impl DeleteRecordsError {
    /// The Kafka error code answering it.
    pub fn code(&self) -> i16 {
        match self {
            Self::NotLeader => ResponseError::NotLeaderOrFollower.code(),
            Self::OutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
            Self::Failed(_) => ResponseError::KafkaStorageError.code(),
        }
    }
}

/// What one DeleteRecords transaction did.
enum Trimmed {
    /// Deleted a full round of batches; more are below the offset.
    More,
    /// Done: the log start offset now.
    Done(i64),
    /// The offset is outside the log, whose high watermark is this.
    OutOfRange(i64),
    /// The lease belongs to someone else now.
    Lost,
}

impl Sequencers {
    /// watermark), deleting the batches that end before it, as its sequencer applies
    /// retention: in transactions that check the sequencer's lease (a conflicting read, so
    /// a takeover makes them fail) and read the bounds with conflicts (so an append
    /// committed meanwhile makes them retry). Only the partition's leader does it, as in
    /// Kafka. Returns the log start offset after it (the low watermark).
    ///
    /// # Errors
    /// [`DeleteRecordsError`].
    pub async fn delete_records(
        &self,
        partition: &Partition,
        offset: i64,
    ) -> Result<i64, DeleteRecordsError> {
        let epoch = self
            .shared
            .running
            .lock()
            .get(&(partition.topic_id, partition.index))
            .filter(|r| !r.handoff.is_cancelled())
            .map(|r| r.epoch)
            .ok_or(DeleteRecordsError::NotLeader)?;
        let shared = &self.shared;
        let keys = &partition.keys;
        loop {
            let round = shared
                .db
                .run(|tx| async move {
                    let now = now_ms();
                    if !shared.hold_lease(&tx, keys, epoch, now).await? {
                        return Ok(Trimmed::Lost);
                    }
                    let log = Log::new(keys);
                    let bounds = log.bounds(&tx, false).await?;
                    let to = if offset == -1 {
                        bounds.high_watermark
                    } else {
                        offset
                    };
                    if !(0..=bounds.high_watermark).contains(&to) {
                        return Ok(Trimmed::OutOfRange(bounds.high_watermark));
                    }
                    let spills = partition.stage.spills();
                    let deleted = log
                        .trim(&tx, &spills, RETENTION_BATCH, to, |entry, _| {
                            entry.last < to
                        })
                        .await?;
                    Ok::<_, SequencerError>(if deleted == RETENTION_BATCH {
                        Trimmed::More
                    } else {
                        Trimmed::Done(to.max(bounds.start))
                    })
                })
                .await?;
            match round {
                Trimmed::More => {}
                Trimmed::Done(start) => {
                    publish_bounds(&shared.db, partition).await;
                    return Ok(start);
                }
                Trimmed::OutOfRange(high_watermark) => {
                    return Err(DeleteRecordsError::OutOfRange {
                        offset,
                        high_watermark,
                    });
                }
                Trimmed::Lost => return Err(DeleteRecordsError::NotLeader),
            }
        }
    }
}
