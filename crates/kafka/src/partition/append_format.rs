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

use crate::metadata::settings::{TimestampType, TopicConfig};
use crate::wire::batch::{self, BatchHeader, HEADER_LEN};
use crate::wire::compression::{compress, compression, decompress_bounded};
use bytes::Bytes;

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
            recompressed(&batch, &header, codec, max_decompressed)?
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

/// `batch` (with `header`) with its records compressed with codec `codec` (0 none … 4
/// zstd) instead of its own; the rest of the header kept, the length and CRC rewritten.
fn recompressed(
    batch: &[u8],
    header: &BatchHeader,
    codec: i16,
    max_decompressed: usize,
) -> Result<Bytes, FormatError> {
    let from = compression(header.codec())
        .ok_or_else(|| FormatError(format!("codec {} is unknown", header.codec())))?;
    let body = batch
        .get(HEADER_LEN..header.size)
        .ok_or_else(|| FormatError("the batch is truncated".into()))?;
    let raw = decompress_bounded(&mut Bytes::copy_from_slice(body), from, max_decompressed)
        .map_err(|e| FormatError(e.to_string()))?;
    let compressed = compress(codec, &raw).map_err(|e| FormatError(e.to_string()))?;
    let mut head = batch[..HEADER_LEN].to_vec();
    batch::set_codec(&mut head, codec);
    Ok(Bytes::from(batch::with_records(
        &head,
        header.record_count,
        &compressed,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::settings::CompressionType;
    use crate::wire::batch::tests::batch;
    use crate::wire::batch::validate;
    use kafka_protocol::records::{Compression, RecordBatchDecoder};

    /// The bound the daemon decompresses with by default (`kafka.max_request_size`).
    const MAX: usize = ferry_config::kafka::DEFAULT_MAX_REQUEST_SIZE;

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
}
