//! What a topic's `message.timestamp.type` and `compression.type` do to a batch appended
//! to it, as Kafka's log validator does them, whoever appends it (a producer, a route):
//!
//! - `LogAppendTime`: the batch is stamped with the broker's time ([`batch::stamp_log_append_time`]:
//!   the timestamp-type attribute and `maxTimestamp`), which readers take as every record's
//!   timestamp and the Produce answer carries as `log_append_time_ms`; `CreateTime` (the
//!   default) keeps the producer's timestamps.
//! - `compression.type`: `producer` (the default) keeps the producer's codec; any other
//!   value (`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`) has the records compressed
//!   again with it when the batch came with another codec.
//!
//! The time is taken when the front accepts the batch, just before it is staged; the
//! sequencer appends staged batches in a few milliseconds, in order.

use super::batch::{self, BatchHeader};
use super::compaction::records::Records;
use super::topics::TopicConfig;
use bytes::Bytes;

/// Kafka's `message.timestamp.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// `CreateTime`: each record's timestamp is the producer's.
    CreateTime,
    /// `LogAppendTime`: every record's timestamp is the time the broker appended it.
    LogAppendTime,
}

impl TimestampType {
    /// Parses Kafka's spelling.
    pub fn parse(value: &str) -> Option<Self> {
        [Self::CreateTime, Self::LogAppendTime]
            .into_iter()
            .find(|t| t.as_str() == value.trim())
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreateTime => "CreateTime",
            Self::LogAppendTime => "LogAppendTime",
        }
    }

    /// The stored code.
    pub fn code(self) -> i64 {
        match self {
            Self::CreateTime => 0,
            Self::LogAppendTime => 1,
        }
    }

    /// The type of stored code `code`.
    pub fn from_code(code: i64) -> Option<Self> {
        [Self::CreateTime, Self::LogAppendTime]
            .into_iter()
            .find(|t| t.code() == code)
    }
}

/// Kafka's topic `compression.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionType {
    /// `producer`: batches keep the codec their producer chose.
    Producer,
    /// `uncompressed`.
    Uncompressed,
    /// `gzip`.
    Gzip,
    /// `snappy`.
    Snappy,
    /// `lz4`.
    Lz4,
    /// `zstd`.
    Zstd,
}

impl CompressionType {
    const ALL: [Self; 6] = [
        Self::Producer,
        Self::Uncompressed,
        Self::Gzip,
        Self::Snappy,
        Self::Lz4,
        Self::Zstd,
    ];

    /// Parses Kafka's spelling.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == value.trim())
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Producer => "producer",
            Self::Uncompressed => "uncompressed",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }

    /// The batch attribute codec this type imposes (0 none … 4 zstd); `None` for
    /// `producer`.
    pub fn codec(self) -> Option<i16> {
        match self {
            Self::Producer => None,
            Self::Uncompressed => Some(0),
            Self::Gzip => Some(1),
            Self::Snappy => Some(2),
            Self::Lz4 => Some(3),
            Self::Zstd => Some(4),
        }
    }

    /// The stored code.
    pub fn code(self) -> i64 {
        Self::ALL
            .iter()
            .position(|t| *t == self)
            .map_or(0, |i| i as i64)
    }

    /// The type of stored code `code`.
    pub fn from_code(code: i64) -> Option<Self> {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }
}

/// Why a batch cannot take the topic's format: its records do not decompress within the
/// bound, or do not compress again (`CORRUPT_MESSAGE` to the producer).
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot compress the batch's records with the topic's compression.type: {0}")]
pub struct FormatError(String);

/// `batch` (a whole, valid v2 batch) as topic settings `config` have it appended at `now`:
/// compressed again with the topic's codec, then stamped with the append time. Returns the
/// batch and, for a `LogAppendTime` topic, the time it carries.
///
/// # Errors
/// [`FormatError`] when the records must be compressed again and cannot be, decompressing
/// at most `max_decompressed` bytes.
pub fn conform(
    batch: Bytes,
    config: &TopicConfig,
    now: i64,
    max_decompressed: usize,
) -> Result<(Bytes, Option<i64>), FormatError> {
    let target = config.compression_type().codec();
    let batch = match (target, BatchHeader::parse(&batch)) {
        (Some(codec), Ok(header)) if header.codec() != codec => {
            Records::decode(&batch, max_decompressed)
                .and_then(|records| records.with_codec(&batch, codec))
                .map_err(|e| FormatError(e.reason))?
        }
        _ => batch,
    };
    if config.message_timestamp_type() != TimestampType::LogAppendTime {
        return Ok((batch, None));
    }
    let mut stamped = Vec::from(batch);
    batch::stamp_log_append_time(&mut stamped, now);
    Ok((Bytes::from(stamped), Some(now)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::batch::tests::batch;
    use crate::kafka::batch::validate;
    use kafka_protocol::records::{Compression, RecordBatchDecoder};

    /// The bound the daemon decompresses with by default (`kafka.max_request_size`).
    const MAX: usize = crate::config::kafka::DEFAULT_MAX_REQUEST_SIZE;

    fn config(timestamps: TimestampType, compression: CompressionType) -> TopicConfig {
        TopicConfig {
            message_timestamp_type: Some(timestamps),
            compression_type: Some(compression),
            ..TopicConfig::default()
        }
    }

    #[test]
    fn the_defaults_keep_the_batch_as_sent() {
        let b = Bytes::from(batch(3, Compression::Lz4, Some((1, 0))));
        let (out, time) = conform(b.clone(), &TopicConfig::default(), 9, MAX).unwrap();
        assert_eq!((out, time), (b, None));
    }

    #[test]
    fn log_append_time_stamps_the_batch_with_the_time() {
        let b = Bytes::from(batch(3, Compression::None, None));
        let c = config(TimestampType::LogAppendTime, CompressionType::Producer);
        let (out, time) = conform(b, &c, 77_000, MAX).unwrap();
        assert_eq!(time, Some(77_000));
        let h = validate(&out, MAX).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 77_000);
    }

    #[test]
    fn a_topic_codec_compresses_the_records_again_and_keeps_them() {
        for (from, to) in [
            (Compression::None, CompressionType::Gzip),
            (Compression::Lz4, CompressionType::Zstd),
            (Compression::Zstd, CompressionType::Uncompressed),
            (Compression::Gzip, CompressionType::Snappy),
        ] {
            let sent = batch(5, from, Some((3, 10)));
            let c = config(TimestampType::LogAppendTime, to);
            let (out, _) = conform(Bytes::from(sent.clone()), &c, 5, MAX).unwrap();
            let h = validate(&out, MAX).unwrap();
            assert_eq!(Some(h.codec()), to.codec(), "{from:?} to {to:?}");
            assert_eq!((h.producer_id, h.base_sequence, h.record_count), (3, 10, 5));
            let records = |b: &[u8]| {
                RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(b))
                    .unwrap()
                    .records
                    .into_iter()
                    .map(|r| (r.offset, r.key, r.value))
                    .collect::<Vec<_>>()
            };
            assert_eq!(records(&out), records(&sent), "{from:?} to {to:?}");
        }
    }

    #[test]
    fn settings_round_trip_their_codes_and_spellings() {
        for t in CompressionType::ALL {
            assert_eq!(CompressionType::from_code(t.code()), Some(t));
            assert_eq!(CompressionType::parse(t.as_str()), Some(t));
        }
        for t in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
            assert_eq!(TimestampType::from_code(t.code()), Some(t));
            assert_eq!(TimestampType::parse(t.as_str()), Some(t));
        }
        assert_eq!(CompressionType::parse("brotli"), None);
        assert_eq!(TimestampType::parse("createtime"), None);
    }
}
