//! The Kafka front's port: the few operations Ferry's bridge needs from the front, and
//! nothing else of the front's internals.
//!
//! - [`KafkaPort::open_topic`] and [`KafkaPort::partitions`]: a topic's partitions
//!   (created when missing and `kafka.auto_create_topics` allows it), and
//!   [`KafkaPort::topic_changes`] to hear of partitions added later.
//! - [`KafkaPort::append_in`]: appends records to a partition inside the caller's store
//!   transaction, as one uncompressed batch staged exactly as a Produce request stages one
//!   (the partition's sequencer then moves it into the log).
//! - [`KafkaPort::append_spilled_in`]: appends a batch too large for one transaction
//!   ([`encode_alone`], one record), which the caller wrote to a spill beforehand, by
//!   reference: staged as its header naming the spill, exactly as a Produce request stages
//!   a large batch ([`crate::partition::large`]). [`KafkaPort::max_message_bytes`] is the topic's
//!   limit for it.
//! - [`KafkaPort::read_committed_in`]: reads records from an offset as a `read_committed`
//!   consumer would — up to the last stable offset, without control batches or the
//!   batches of aborted transactions — inside the caller's transaction.
//! - [`KafkaPort::watch_in`]: the last stable offset and a watch that fires when the
//!   partition's high watermark moves, so an idle reader sleeps instead of polling.
//!
//! Records cross the port as [`KafkaRecord`]s, the front's model of a record.

use super::Context;
use crate::metadata::topics::{Partition, TopicError};
use crate::partition::append_format;
use crate::partition::log::{Aborted, Log, LogError, is_aborted};
use crate::partition::staged;
use crate::wire::batch::BatchHeader;
use crate::wire::compression::decompress_bounded;
use crate::wire::record::encode_batch;
use bytes::Bytes;
use ferry_config::kafka::MAX_MESSAGE_BYTES_LIMIT;
use ferry_stage::MAX_BODY_SIZE;
use ferry_stage::{NewMessage, Spill, StageError};
use ferry_store::{StoreError, Transaction, TransactionError, Watch};
use kafka_protocol::records::RecordBatchDecoder;
use std::sync::Arc;
use tokio::sync::watch;

/// The largest batch [`KafkaPort::append_in`] stages: one stage body, less the staged
/// record's header.
pub const MAX_APPEND_BYTES: usize = MAX_BODY_SIZE - staged::HEADER_LEN;

/// The bytes of a batch's head, which the staged record of a batch appended by reference
/// to its spill keeps ([`KafkaPort::append_spilled_in`]): its header.
pub const BATCH_HEAD_LEN: usize = crate::wire::batch::HEADER_LEN;

pub use crate::wire::record::{KafkaRecord, batch_len, encode_alone};

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

    /// The effective `max.message.bytes` of topic `name` (its own, or `kafka.max_message_bytes`),
    /// never more than Ferry's largest (128 MiB): the largest batch a producer may append
    /// to it. `None` when the topic does not exist.
    pub fn max_message_bytes(&self, name: &str) -> Option<usize> {
        let topic = self.ctx.topics.get(name)?;
        let max = self.ctx.defaults().max_message_bytes(&topic.meta.config);
        Some(max.min(MAX_MESSAGE_BYTES_LIMIT))
    }

    /// Changes whenever topics are created, deleted or given partitions, on any instance.
    pub fn topic_changes(&self) -> watch::Receiver<u64> {
        self.ctx.topics.changes()
    }

    /// Appends `records` to `partition` within `tx`, as one uncompressed batch without a
    /// producer, staged exactly as a Produce request stages a batch, in one stage body: at
    /// most [`MAX_APPEND_BYTES`] (a larger batch is written to a spill first and appended
    /// with [`KafkaPort::append_spilled_in`]). Nobody waits for it: the partition's
    /// sequencer moves it into the log after `tx` commits.
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
        let batch = self.conformed(&partition.0.topic, encode_batch(records, now).freeze(), now)?;
        let body = staged::encode(self.ctx.waiters.unwaited(), &batch);
        partition
            .0
            .stage
            .append_in(tx, &[NewMessage::new(body)], now)
            .await
            .map(|_| ())
    }

    /// `batch` (one of [`encode_alone`]'s, or `append_in`'s) as topic `topic`'s
    /// `compression.type` and `message.timestamp.type` have it appended at `now`
    /// ([`append_format::conform`]); as it is when the topic is gone.
    ///
    /// # Errors
    /// [`StageError::Corrupt`] when its records cannot be compressed with the topic's codec.
    pub fn conformed(&self, topic: &str, batch: Bytes, now: u64) -> Result<Bytes, StageError> {
        let Some(topic) = self.ctx.topics.get(topic) else {
            return Ok(batch);
        };
        let config = self.ctx.defaults().resolve(&topic.meta.config);
        append_format::conform(batch, &config, now as i64, MAX_BODY_SIZE)
            .map(|(batch, _)| batch)
            .map_err(|e| StageError::Corrupt(e.to_string()))
    }

    /// Appends to `partition` within `tx` the batch kept in `spill`, whose first
    /// [`BATCH_HEAD_LEN`] bytes are `head` (a batch of [`encode_alone`], written to the
    /// spill by the caller, who holds it): staged as its head naming the spill, exactly as
    /// a Produce request stages a large batch, so the stage entry takes a reference to the
    /// spill. The caller lets go of its hold in the same transaction. Nobody waits for it:
    /// the partition's sequencer moves the reference into the log after `tx` commits, and
    /// no reader sees any of the batch before that.
    ///
    /// # Errors
    /// [`StageError::Corrupt`] when `head` is not the header of a batch as long as the
    /// spill; the stage's error.
    pub async fn append_spilled_in(
        &self,
        tx: &Transaction,
        partition: &PartitionRef,
        head: &[u8],
        spill: Spill,
        now: u64,
    ) -> Result<(), StageError> {
        match BatchHeader::parse(head) {
            Ok(h) if head.len() == BATCH_HEAD_LEN && h.size as u64 == spill.len => {}
            _ => {
                return Err(StageError::Corrupt(format!(
                    "the head of the batch in spill {} ({} bytes) is not the header of a batch of {} bytes",
                    spill.id,
                    head.len(),
                    spill.len
                )));
            }
        }
        let body = staged::encode(self.ctx.waiters.unwaited(), head);
        partition
            .0
            .stage
            .append_in(tx, &[NewMessage::new(body).spill(Some(spill))], now)
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
    /// readers of one position conflict. A batch kept in a spill (a large one) is read
    /// alone, in pieces, in transactions of its own.
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
            .read_committed(tx, from, readable.stable, max_bytes, true)
            .await?;
        let read = read.fill(self.ctx.large.spills()).await?;
        let max_decompressed = self.ctx.config.max_request_size;
        Ok(Some(decode_committed(
            &read.bytes,
            from,
            &aborted,
            max_decompressed,
        )?))
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

/// Decodes the batches of `bytes` (a read of the log) from offset `from`, batch by batch,
/// passing over control batches and the batches of `aborted` transactions, and a batch
/// whose records decompress to more than `max_decompressed` bytes (`kafka.max_request_size`:
/// what the producer could have sent uncompressed).
///
/// # Errors
/// [`LogError::Corrupt`] when the log's own framing (a batch header) is broken.
pub(crate) fn decode_committed(
    bytes: &[u8],
    from: i64,
    aborted: &[Aborted],
    max_decompressed: usize,
) -> Result<CommittedRead, LogError> {
    let mut records = Vec::new();
    let mut out = decode_committed_with(bytes, from, aborted, max_decompressed, |_, r| {
        records.push(r);
    })?;
    out.records = records;
    Ok(out)
}

/// [`decode_committed`], handing each record to `each` with its offset instead of
/// collecting them (the management API's record browser shows the offsets); the answer's
/// `records` is empty.
///
/// # Errors
/// As [`decode_committed`].
pub(crate) fn decode_committed_with(
    bytes: &[u8],
    from: i64,
    aborted: &[Aborted],
    max_decompressed: usize,
    mut each: impl FnMut(i64, KafkaRecord),
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
        let (last, next) = header
            .base_offset
            .checked_add(i64::from(header.last_offset_delta))
            .and_then(|last| Some((last, last.checked_add(1)?)))
            .ok_or_else(|| {
                LogError::Corrupt(format!(
                    "a batch header in the log: offset {} plus {} is beyond the largest offset",
                    header.base_offset, header.last_offset_delta
                ))
            })?;
        out.next = out.next.max(next);
        if header.is_control() || is_aborted(aborted, &header) {
            continue;
        }
        let decompress = |records: &mut Bytes, compression| {
            decompress_bounded(records, compression, max_decompressed)
        };
        let records = match RecordBatchDecoder::decode_with_custom_compression(
            &mut Bytes::copy_from_slice(batch),
            Some(decompress),
        ) {
            Ok(set) => set.records,
            Err(e) => {
                out.undecodable
                    .push((header.base_offset, last, e.to_string()));
                continue;
            }
        };
        for r in records
            .into_iter()
            .filter(|r| r.offset >= from && !r.control)
        {
            let offset = r.offset;
            each(
                offset,
                KafkaRecord {
                    key: r.key,
                    value: r.value,
                    headers: r
                        .headers
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v.map(|v| v.to_vec())))
                        .collect(),
                    // A LogAppendTime batch's records all carry its append time.
                    timestamp_ms: Some(if header.is_log_append_time() {
                        header.max_timestamp
                    } else {
                        r.timestamp
                    }),
                },
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::HEADER_LEN;
    use crate::wire::batch::tests::batch;
    use kafka_protocol::records::Compression;

    /// Sets the batch length and the CRC-32C of batch `b` to match its bytes, as a producer
    /// would, so that only what a test broke on purpose is wrong.
    fn seal(b: &mut [u8]) {
        let length = i32::try_from(b.len() - 12).unwrap();
        b[8..12].copy_from_slice(&length.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    /// Rewrites the only record of `b` (no headers) to declare `i32::MAX` headers, with the
    /// lengths and the CRC fixed up so that only the count is wrong.
    fn with_huge_header_count(mut b: Vec<u8>) -> Vec<u8> {
        assert_eq!(b.pop(), Some(0), "the record ends with its header count, 0");
        b.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]); // zigzag varint of i32::MAX
        b[61] += 8; // the record's length (zigzag: +4 bytes)
        seal(&mut b);
        b
    }

    #[test]
    fn a_batch_declaring_more_headers_than_its_bytes_is_skipped_not_allocated() {
        let good = batch(1, Compression::None, None);
        let mut bad = with_huge_header_count(batch(1, Compression::None, None));
        bad[0..8].copy_from_slice(&1i64.to_be_bytes()); // the log's offset for it
        let mut log = good.clone();
        log.extend_from_slice(&bad);
        let decoded = decode_committed(&log, 0, &[], 1 << 20).unwrap();
        assert_eq!(decoded.records.len(), 1, "the good batch is read");
        assert_eq!(decoded.next, 2, "the bad one is passed over");
        assert_eq!(decoded.undecodable.len(), 1);
        assert_eq!(decoded.undecodable[0].0..=decoded.undecodable[0].1, 1..=1);
    }

    /// Found by fuzzing (`stored_records`): a snappy batch whose four compressed bytes
    /// declare 219,768,715 uncompressed ones was zeroed in memory whole before decoding
    /// failed; it is refused before anything is allocated.
    #[test]
    fn a_snappy_batch_declaring_more_than_it_can_hold_is_skipped_not_allocated() {
        let mut b = batch(1, Compression::None, None)[..HEADER_LEN].to_vec();
        b[22] = 2; // attributes: snappy
        b.extend_from_slice(&[0x8b, 0xcf, 0xe5, 0x68]); // raw snappy: "219768715 bytes follow"
        seal(&mut b);
        let decoded = decode_committed(&b, 0, &[], 1 << 20).unwrap();
        assert!(decoded.records.is_empty());
        assert_eq!(decoded.undecodable.len(), 1);
        let reason = &decoded.undecodable[0].2;
        assert!(
            reason.contains("declares 219768715 uncompressed bytes"),
            "{reason}"
        );
    }

    /// Found by fuzzing (`stored_records`, from a seed with the largest base offset): a
    /// batch header whose offsets pass i64::MAX is a broken log, not a panic.
    #[test]
    fn a_batch_beyond_the_largest_offset_is_corrupt() {
        #[rustfmt::skip]
        let header: &[u8] = &[
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // baseOffset i64::MAX
            0, 0, 0, 49, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, // length, epoch, magic, CRC
            0, 0, 0, 0, 0, 0, // attributes, lastOffsetDelta 0
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // timestamps
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producer, epoch
            0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, // baseSequence, one record
        ];
        let Err(LogError::Corrupt(reason)) = decode_committed(header, 0, &[], 1 << 20) else {
            panic!("a corrupt log");
        };
        assert_eq!(
            reason,
            "a batch header in the log: offset 9223372036854775807 plus 0 is beyond the largest offset"
        );
    }

    /// Found with the `stored_records` target: a few bytes of zstd standing for a record of
    /// 2 MiB were decompressed whole (a few kilobytes stand for gigabytes); past the bound
    /// the batch is passed over as undecodable.
    #[test]
    fn a_batch_decompressing_beyond_the_bound_is_skipped() {
        let mut b = batch(1, Compression::None, None)[..HEADER_LEN].to_vec();
        b[22] = 4; // attributes: zstd
        // A record of 2 MiB of zeros, compressed with `zstd -19 --zstd=wlog=17` (a window
        // within the bound: the output, not the window, is what exceeds it).
        #[rustfmt::skip]
        let zstd: &[u8] = &[
            0x28, 0xb5, 0x2f, 0xfd, 0x80, 0x38, 0x0d, 0x00, 0x20, 0x00, 0x9c, 0x00,
            0x00, 0x48, 0x92, 0x80, 0x80, 0x02, 0x00, 0x00, 0x00, 0x01, 0x80, 0x02,
            0x00, 0xf0, 0xff, 0x20, 0x41, 0xf6, 0x1e, 0x01, 0x02, 0x00, 0x10, 0x00,
            0x02, 0x00, 0x10, 0x00, 0x02, 0x00, 0x10, 0x00, 0x02, 0x00, 0x10, 0x00,
            0x02, 0x00, 0x10, 0x00, 0x02, 0x00, 0x10, 0x00, 0x02, 0x00, 0x10, 0x00,
            0x44, 0x00, 0x00, 0x00, 0x01, 0x00, 0xfd, 0xff, 0xcc, 0x0b, 0x10, 0x02,
            0x00, 0x10, 0x00, 0x02, 0x00, 0x10, 0x00, 0x02, 0x00, 0x10, 0x00, 0x02,
            0x00, 0x10, 0x00, 0x02, 0x00, 0x10, 0x00, 0x02, 0x00, 0x10, 0x00, 0x02,
            0x00, 0x10, 0x00, 0x1d, 0x00, 0x00, 0x69, 0x00, 0x00,
        ];
        b.extend_from_slice(zstd);
        seal(&mut b);
        let read = decode_committed(&b, 0, &[], 1 << 20).unwrap();
        assert!(read.records.is_empty());
        assert_eq!(
            read.undecodable[0].2,
            "the records decompress to more than the 1048576 bytes allowed"
        );
        let read = decode_committed(&b, 0, &[], 3 << 20).unwrap();
        assert_eq!(
            read.records[0].value.as_ref().map(Bytes::len),
            Some(2 << 20)
        );
    }

    /// Found with the `stored_records` target: ten bytes of zstd whose frame asks for a
    /// 128 MiB window made the decoder allocate it; no window larger than the bound is
    /// accepted.
    #[test]
    fn a_zstd_window_beyond_the_bound_is_refused() {
        let mut b = batch(1, Compression::None, None)[..HEADER_LEN].to_vec();
        b[22] = 4; // attributes: zstd
        // Magic, a 2^27-byte window, one RLE block of 1000 zeros.
        b.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x88, 0x43, 0x1f, 0x00, 0x00]);
        seal(&mut b);
        let read = decode_committed(&b, 0, &[], 1 << 20).unwrap();
        assert!(read.records.is_empty());
        let reason = &read.undecodable[0].2;
        assert!(reason.contains("memory"), "{reason}");
    }

    /// Found by fuzzing (`stored_records`): a record whose timestamp delta carries it past
    /// `i64::MAX` panicked in kafka-protocol's decoder (a debug build); its timestamp wraps,
    /// as Kafka's own decoder's does.
    #[test]
    fn a_record_timestamp_beyond_i64_max_wraps() {
        #[rustfmt::skip]
        let mut b = vec![
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 56, 0xff, 0xff, 0xff, 0xff, 2, // base, length
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // CRC (set below), attributes, lastOffsetDelta
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // baseTimestamp i64::MAX
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // maxTimestamp
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producer, epoch
            0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, // baseSequence, one record
            12, 0, 2, 0, 1, 1, 0, // length 6, timestamp delta 1, no key, no value, no headers
        ];
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let read = decode_committed(&b, 0, &[], 1 << 20).unwrap();
        assert!(read.undecodable.is_empty(), "{:?}", read.undecodable);
        assert_eq!(read.records.len(), 1);
        assert_eq!(read.records[0].timestamp_ms, Some(i64::MIN));
    }

    #[test]
    fn batch_len_is_the_length_of_the_batch_encoded_alone() {
        let large = Bytes::from(vec![7u8; 300_000]);
        let cases = [
            KafkaRecord::default(),
            KafkaRecord {
                key: Some(Bytes::from_static(b"key")),
                value: Some(large.clone()),
                headers: vec![
                    ("amqp.message-id".into(), Some(b"m16".to_vec())),
                    ("null".into(), None),
                    ("h".repeat(200), Some(vec![1; 70])),
                ],
                timestamp_ms: Some(1_700_000_000_000),
            },
            KafkaRecord {
                value: Some(large.slice(..127)),
                ..KafkaRecord::default()
            },
        ];
        for record in cases {
            let batch = encode_alone(record.clone(), 5);
            assert_eq!(batch_len(&record), batch.len(), "{:?}", record.headers);
            let header = BatchHeader::parse(&batch).unwrap();
            assert_eq!(header.size, batch.len());
            let read = decode_committed(&batch, 0, &[], 1 << 20).unwrap();
            assert_eq!(read.records.len(), 1);
            assert_eq!(read.records[0].value, record.value);
        }
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
        let read = decode_committed(&batch, 0, &[], 1 << 20).unwrap();
        let mut expected = records;
        expected[1].timestamp_ms = Some(7);
        assert_eq!(read.records, expected);
        assert_eq!(read.next, 2);
    }

    #[test]
    fn records_of_a_log_append_time_batch_carry_its_append_time() {
        let records = vec![
            KafkaRecord {
                timestamp_ms: Some(42),
                ..KafkaRecord::default()
            },
            KafkaRecord {
                timestamp_ms: Some(43),
                ..KafkaRecord::default()
            },
        ];
        let mut batch = encode_batch(records, 7);
        crate::wire::batch::stamp_log_append_time(&mut batch, 9_000);
        let read = decode_committed(&batch, 0, &[], 1 << 20).unwrap();
        let stamps: Vec<Option<i64>> = read.records.iter().map(|r| r.timestamp_ms).collect();
        assert_eq!(stamps, vec![Some(9_000), Some(9_000)]);
    }
}
