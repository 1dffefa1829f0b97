//! The records of one partition for the management API's record browser: from an offset or
//! from the first record at or after a time, at most a bounded number, read as a
//! `read_committed` Fetch reads them — one snapshot of the log ([`Reads::snapshot`]), the
//! batches up to the last stable offset without control batches and aborted transactions,
//! a spilled batch filled in, decoded by the same code the Kafka port decodes with — and
//! the time looked up as ListOffsets looks it up. Nothing is written: the snapshot is never
//! committed, so a look neither conflicts with the sequencer nor moves anyone's position.

use super::KafkaAdmin;
use crate::metadata::topics::Partition;
use crate::partition::log::LogError;
use crate::partition::reads::{OffsetQuery, Reads};
use crate::port::{KafkaRecord, decode_committed_with};

/// The most records one look returns.
pub const MAX_RECORDS: usize = 500;
/// The most bytes of batches one look reads (a larger first batch is still read whole, as
/// Fetch reads it, so a look always makes progress).
const MAX_READ_BYTES: usize = 1 << 20;

/// Where a look starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowseFrom {
    /// At this offset (brought within the log: the log start when older, nothing when past
    /// the end).
    Offset(i64),
    /// At the first record whose timestamp (ms since the epoch) is at least this.
    Timestamp(i64),
}

/// A record and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowsedRecord {
    /// Its offset.
    pub offset: i64,
    /// Its key, value, headers and timestamp.
    pub record: KafkaRecord,
}

/// What a look found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsPage {
    /// The partition's log start offset.
    pub log_start_offset: i64,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The partition's last stable offset: records at or past it (an open transaction's)
    /// are not shown yet.
    pub last_stable_offset: i64,
    /// The offset the look started at, once brought within the log.
    pub from: i64,
    /// The offset to look from for the records after these.
    pub next_offset: i64,
    /// The records, in offset order; at most the limit asked.
    pub records: Vec<BrowsedRecord>,
}

/// Why a look failed.
#[derive(Debug, thiserror::Error)]
pub enum BrowseError {
    /// No such topic.
    #[error("topic '{0}' does not exist")]
    UnknownTopic(String),
    /// The topic has no such partition.
    #[error("topic '{topic}' has no partition {partition}")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
    },
    /// The store failed or holds a log this ferry cannot read.
    #[error(transparent)]
    Log(#[from] LogError),
}

impl KafkaAdmin {
    /// At most `limit` (1 to [`MAX_RECORDS`]) records of partition `partition` of `topic`
    /// from `from`, as a `read_committed` consumer would read them.
    ///
    /// # Errors
    /// [`BrowseError::UnknownTopic`] and [`BrowseError::UnknownPartition`] for what does not
    /// exist; [`BrowseError::Log`] when the store fails.
    pub async fn records(
        &self,
        topic: &str,
        partition: i32,
        from: BrowseFrom,
        limit: usize,
    ) -> Result<RecordsPage, BrowseError> {
        let found = self
            .ctx
            .topics
            .get(topic)
            .ok_or_else(|| BrowseError::UnknownTopic(topic.to_owned()))?;
        let p: &Partition = found
            .partitions
            .iter()
            .find(|p| p.index == partition)
            .ok_or_else(|| BrowseError::UnknownPartition {
                topic: topic.to_owned(),
                partition,
            })?;
        let limit = limit.clamp(1, MAX_RECORDS);
        let reads: &Reads = &self.ctx.reads;
        let wanted = match from {
            BrowseFrom::Offset(offset) => Some(offset),
            // No leader epoch to fence with (-1); no record that new: nothing to show.
            BrowseFrom::Timestamp(at) => reads
                .offset(p, OffsetQuery::AtTime(at), -1)
                .await?
                .ok()
                .flatten()
                .map(|f| f.offset),
        };
        let snapshot = reads.snapshot()?;
        let readable = snapshot.readable(p).await?;
        let bounds = readable.bounds;
        let from = wanted.map_or(readable.stable, |o| o.clamp(bounds.start, readable.stable));
        let mut page = RecordsPage {
            log_start_offset: bounds.start,
            high_watermark: bounds.high_watermark,
            last_stable_offset: readable.stable,
            from,
            next_offset: from,
            records: Vec::new(),
        };
        let mut at = from;
        // A read may end inside the limit (it filled its bytes, or only control batches
        // were there): read on from where it stopped until the limit or the stable end.
        while page.records.len() < limit && at < readable.stable {
            let (read, aborted) = snapshot
                .read(p, at, readable.stable, MAX_READ_BYTES, true, true)
                .await?;
            let read = read.fill(self.ctx.large.spills()).await?;
            let mut records = Vec::new();
            let decoded = decode_committed_with(
                &read.bytes,
                at,
                aborted.as_deref().unwrap_or_default(),
                self.ctx.config.max_request_size,
                |offset, record| records.push(BrowsedRecord { offset, record }),
            )?;
            if decoded.next <= at {
                break;
            }
            at = decoded.next;
            page.records.extend(records);
        }
        page.records.truncate(limit);
        page.next_offset = page.records.last().map_or(at, |r| r.offset + 1);
        Ok(page)
    }
}
