//! The Kafka front's port: the few operations Ferry's bridge needs from the front, and
//! nothing else of the front's internals.
//!
//! - [`KafkaPort::open_topic`] and [`KafkaPort::partitions`]: a topic's partitions
//!   (created when missing and `kafka.auto_create_topics` allows it), and
//!   [`KafkaPort::topic_changes`] to hear of partitions added later.
//! - [`KafkaPort::append_in`]: appends records to a partition inside the caller's store
//!   transaction, as one uncompressed batch staged exactly as a Produce request stages one
//!   (the partition's sequencer then moves it into the log).
//! - [`KafkaPort::read_committed_in`]: reads records from an offset as a `read_committed`
//!   consumer would — up to the last stable offset, without control batches or the
//!   batches of aborted transactions — inside the caller's transaction.
//! - [`KafkaPort::watch_in`]: the last stable offset and a watch that fires when the
//!   partition's high watermark moves, so an idle reader sleeps instead of polling.
//!
//! Records cross the port as [`KafkaRecord`]s, the front's model of a record.

use super::Context;
use super::batch::BatchHeader;
use super::log::{Aborted, Log, LogError};
use super::staged;
use super::topics::{Partition, TopicError};
use crate::stage::{NewMessage, StageError};
use crate::store::{StoreError, Transaction, TransactionError, Watch};
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use std::sync::Arc;
use tokio::sync::watch;

/// A Kafka record as it crosses the port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaRecord {
    /// The key; `None` is Kafka's null key.
    pub key: Option<Bytes>,
    /// The value; `None` is a tombstone (shared, never copied on its way through the
    /// bridge).
    pub value: Option<Bytes>,
    /// The headers, in order; names may repeat and values may be null.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The timestamp in milliseconds since the epoch, if it has one.
    pub timestamp_ms: Option<i64>,
}

/// Why an operation of the port failed.
#[derive(Debug, thiserror::Error)]
pub enum KafkaPortError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The topic is missing (and may not be created), or cannot be created.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// The partition's log cannot be read.
    #[error("the Kafka front's log: {0}")]
    Log(#[from] LogError),
}

impl TransactionError for KafkaPortError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            Self::Topic(e) => e.store_error(),
            Self::Log(e) => e.store_error(),
        }
    }
}

/// One partition of a topic on the Kafka front.
#[derive(Debug, Clone)]
pub struct PartitionRef(Partition);

impl PartitionRef {
    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.0.topic
    }

    /// The partition's index.
    pub fn index(&self) -> i32 {
        self.0.index
    }
}

/// Records read from a partition by [`KafkaPort::read_committed_in`].
#[derive(Debug, Default)]
pub struct CommittedRead {
    /// The records, in offset order.
    pub records: Vec<KafkaRecord>,
    /// The offset to read from next.
    pub next: i64,
    /// Batches that do not decode: their first and last offsets and why. They are passed
    /// over (they stay in the log), so one malformed batch cannot stop a reader.
    pub undecodable: Vec<(i64, i64, String)>,
}

/// The Kafka front, as the bridge sees it; cheap to clone.
#[derive(Clone)]
pub struct KafkaPort {
    /// The front's shared state.
    ctx: Arc<Context>,
}

impl KafkaPort {
    /// The port of the front whose connections share `ctx`.
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// The partitions of topic `name`, creating the topic (with the default partition
    /// count) when it is missing and `kafka.auto_create_topics` allows it.
    ///
    /// # Errors
    /// [`KafkaPortError::Topic`] for a missing topic that may not be created, or one that
    /// cannot be.
    pub async fn open_topic(&self, name: &str) -> Result<Vec<PartitionRef>, KafkaPortError> {
        let topic = self
            .ctx
            .topic_or_create(name, self.ctx.config.auto_create_topics)
            .await?;
        Ok(topic.partitions.iter().cloned().map(PartitionRef).collect())
    }

    /// The partitions topic `name` has now; `None` when it does not exist.
    pub fn partitions(&self, name: &str) -> Option<Vec<PartitionRef>> {
        let topic = self.ctx.topics.get(name)?;
        Some(topic.partitions.iter().cloned().map(PartitionRef).collect())
    }

    /// Changes whenever topics are created, deleted or given partitions, on any instance.
    pub fn topic_changes(&self) -> watch::Receiver<u64> {
        self.ctx.topics.changes()
    }

    /// Appends `records` to `partition` within `tx`, as one uncompressed batch without a
    /// producer, staged exactly as a Produce request stages a batch. Nobody waits for it:
    /// the partition's sequencer moves it into the log after `tx` commits.
    ///
    /// # Errors
    /// The stage's error.
    pub async fn append_in(
        &self,
        tx: &Transaction,
        partition: &PartitionRef,
        records: Vec<KafkaRecord>,
        now: u64,
    ) -> Result<(), StageError> {
        if records.is_empty() {
            return Ok(());
        }
        let batch = encode_batch(records, now);
        let body = staged::encode(self.ctx.waiters.unwaited(), &batch);
        partition
            .0
            .stage
            .append_in(tx, &[NewMessage::new(body)], now)
            .await
            .map(|_| ())
    }

    /// Reads records of `partition` from offset `from` within `tx`, as a `read_committed`
    /// consumer would: up to the last stable offset, at most about `max_bytes` of batches
    /// (always at least one batch), passing over control batches and those of aborted
    /// transactions. An offset before the log start (retention removed it) or past the high
    /// watermark (the topic was deleted and created again, so its log started over) reads
    /// from the log start. `None` when nothing is there to read.
    ///
    /// Only the log's bounds and batches are read, as snapshots: a caller that keeps its
    /// position in the store reads that without snapshot in the same transaction, so two
    /// readers of one position conflict.
    ///
    /// # Errors
    /// [`KafkaPortError::Log`] when the store fails or the log's framing is broken.
    pub async fn read_committed_in(
        &self,
        tx: &Transaction,
        partition: &PartitionRef,
        from: i64,
        max_bytes: usize,
    ) -> Result<Option<CommittedRead>, KafkaPortError> {
        let log = Log::new(&partition.0.keys);
        let readable = log.readable(tx).await?;
        let bounds = readable.bounds;
        let from = if from > bounds.high_watermark {
            bounds.start
        } else {
            from.max(bounds.start)
        };
        if from >= readable.stable {
            return Ok(None);
        }
        let (read, aborted) = log
            .read_committed(tx, from, readable.stable, max_bytes)
            .await?;
        Ok(Some(decode_committed(&read.bytes, from, &aborted)?))
    }

    /// The last stable offset of `partition` and a watch on its high watermark, which the
    /// partition's sequencer moves when it appends: an idle reader compares the offset with
    /// its position, commits `tx`, and waits on the watch.
    ///
    /// # Errors
    /// [`KafkaPortError::Log`] when the store fails.
    pub async fn watch_in(
        &self,
        tx: &Transaction,
        partition: &PartitionRef,
    ) -> Result<(i64, Watch), KafkaPortError> {
        let keys = &partition.0.keys;
        let stable = Log::new(keys).readable(tx).await?.stable;
        Ok((stable, tx.watch(&keys.high_watermark())))
    }
}

/// `records` as one uncompressed record batch (format v2) without a producer, their
/// timestamps defaulting to `now`.
fn encode_batch(records: Vec<KafkaRecord>, now: u64) -> BytesMut {
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(n, r)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: n as i64,
            // offset − sequence must be constant for one batch; no producer: -1 first.
            sequence: n as i32 - 1,
            timestamp: r.timestamp_ms.unwrap_or(now as i64),
            key: r.key,
            value: r.value,
            headers: r
                .headers
                .into_iter()
                .map(|(k, v)| (StrBytes::from_string(k), v.map(Bytes::from)))
                .collect(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("uncompressed records encode into memory");
    buf
}

/// Decodes the batches of `bytes` (a read of the log) from offset `from`, batch by batch,
/// passing over control batches and the batches of `aborted` transactions.
///
/// # Errors
/// [`LogError::Corrupt`] when the log's own framing (a batch header) is broken.
fn decode_committed(
    bytes: &[u8],
    from: i64,
    aborted: &[Aborted],
) -> Result<CommittedRead, LogError> {
    let mut out = CommittedRead {
        next: from,
        ..CommittedRead::default()
    };
    let mut rest = bytes;
    while !rest.is_empty() {
        let header = BatchHeader::parse(rest)
            .map_err(|e| LogError::Corrupt(format!("a batch header in the log: {e}")))?;
        let (batch, tail) = rest.split_at(header.size.min(rest.len()));
        rest = tail;
        let last = header.base_offset + header.offset_span() - 1;
        out.next = out.next.max(last + 1);
        let aborted_batch = header.is_transactional()
            && aborted
                .iter()
                .any(|a| a.covers(header.producer_id, header.base_offset));
        if header.is_control() || aborted_batch {
            continue;
        }
        let records = match RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(batch)) {
            Ok(set) => set.records,
            Err(e) => {
                out.undecodable
                    .push((header.base_offset, last, e.to_string()));
                continue;
            }
        };
        out.records.extend(
            records
                .into_iter()
                .filter(|r| r.offset >= from && !r.control)
                .map(|r| KafkaRecord {
                    key: r.key,
                    value: r.value,
                    headers: r
                        .headers
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v.map(|v| v.to_vec())))
                        .collect(),
                    timestamp_ms: Some(r.timestamp),
                }),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::batch::tests::batch;

    /// Rewrites the only record of `b` (no headers) to declare `i32::MAX` headers, with the
    /// lengths and the CRC fixed up so that only the count is wrong.
    fn with_huge_header_count(mut b: Vec<u8>) -> Vec<u8> {
        assert_eq!(b.pop(), Some(0), "the record ends with its header count, 0");
        b.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]); // zigzag varint of i32::MAX
        b[61] += 8; // the record's length (zigzag: +4 bytes)
        let length = i32::from_be_bytes(b[8..12].try_into().unwrap()) + 4;
        b[8..12].copy_from_slice(&length.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn a_batch_declaring_more_headers_than_its_bytes_is_skipped_not_allocated() {
        let good = batch(1, Compression::None, None);
        let mut bad = with_huge_header_count(batch(1, Compression::None, None));
        bad[0..8].copy_from_slice(&1i64.to_be_bytes()); // the log's offset for it
        let mut log = good.clone();
        log.extend_from_slice(&bad);
        let decoded = decode_committed(&log, 0, &[]).unwrap();
        assert_eq!(decoded.records.len(), 1, "the good batch is read");
        assert_eq!(decoded.next, 2, "the bad one is passed over");
        assert_eq!(decoded.undecodable.len(), 1);
        assert_eq!(decoded.undecodable[0].0..=decoded.undecodable[0].1, 1..=1);
    }

    #[test]
    fn records_round_trip_through_an_encoded_batch() {
        let records = vec![
            KafkaRecord {
                key: Some(Bytes::from_static(b"k")),
                value: None,
                headers: vec![("h".into(), None), ("h".into(), Some(b"v".to_vec()))],
                timestamp_ms: Some(42),
            },
            KafkaRecord {
                timestamp_ms: None,
                ..KafkaRecord::default()
            },
        ];
        let batch = encode_batch(records.clone(), 7);
        let read = decode_committed(&batch, 0, &[]).unwrap();
        let mut expected = records;
        expected[1].timestamp_ms = Some(7);
        assert_eq!(read.records, expected);
        assert_eq!(read.next, 2);
    }
}
