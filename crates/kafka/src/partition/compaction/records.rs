//! One stored record batch as compaction sees it: the offset, key and tombstone flag of
//! each record, and the batch rebuilt with only some of its records. Sans-io.
//!
//! A rebuilt batch keeps its header as stored — base offset, `lastOffsetDelta`,
//! timestamps, producer id, epoch and base sequence — as Kafka's cleaner keeps them, so
//! the log's offsets and index stay right; each kept record keeps its own bytes (its offset
//! and timestamp deltas included), so the kept records' offsets leave gaps where others
//! went. Only the record count, the length, the CRC and the records (compressed again
//! with the batch's own codec) change.

use crate::wire::batch::{self, BatchHeader, HEADER_LEN, read_varint};
use crate::wire::compression::{compress, compression, decompress_bounded};
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::ops::Range;

/// A record key as compaction compares it: the first 16 bytes of its SHA-256 (as Kafka's
/// cleaner keeps a hash per key, so its map's memory does not grow with key sizes).
pub(crate) type KeyHash = [u8; 16];

/// Why a stored batch cannot be compacted (it is then kept whole).
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot compact the batch at offset {base}: {reason}")]
pub(crate) struct RecordsError {
    /// The batch's base offset.
    pub base: i64,
    /// What is wrong.
    pub reason: String,
}

/// One record of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    /// Its offset.
    pub offset: i64,
    /// Its key's hash; `None` for a keyless record (kept by compaction).
    pub key: Option<KeyHash>,
    /// Whether its value is null: a tombstone, deleting its key.
    pub tombstone: bool,
}

/// A batch's records, decoded.
#[derive(Debug)]
pub(crate) struct Records {
    /// The batch's header.
    pub header: BatchHeader,
    /// Its records, in order.
    pub records: Vec<Record>,
    /// The records' bytes, uncompressed.
    raw: Bytes,
    /// Where each record is in `raw`.
    spans: Vec<Range<usize>>,
}

/// What is left of a batch after compaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Retained {
    /// Every record: the batch stays as it is.
    All,
    /// No record: the batch goes.
    Nothing,
    /// Some: the batch rebuilt with them, and how many.
    Some(Bytes, i32),
}

/// Hashes a record key.
pub(crate) fn key_hash(key: &[u8]) -> KeyHash {
    let digest = Sha256::digest(key);
    let mut hash = [0; 16];
    hash.copy_from_slice(&digest[..16]);
    hash
}

impl Records {
    /// Decodes the records of `batch` (a stored batch, its base offset the log's),
    /// decompressing at most `max_decompressed` bytes.
    ///
    /// # Errors
    /// [`RecordsError`] when the batch or a record does not parse, or decompresses to more.
    pub(crate) fn decode(batch: &[u8], max_decompressed: usize) -> Result<Self, RecordsError> {
        let header = BatchHeader::parse(batch).map_err(|e| RecordsError {
            base: -1,
            reason: e.to_string(),
        })?;
        let fail = |reason: String| RecordsError {
            base: header.base_offset,
            reason,
        };
        let body = batch
            .get(HEADER_LEN..header.size)
            .ok_or_else(|| fail(format!("{} of its {} bytes", batch.len(), header.size)))?;
        let raw = decompress_bounded(
            &mut Bytes::copy_from_slice(body),
            compression(header.codec()).ok_or_else(|| fail("unknown codec".into()))?,
            max_decompressed,
        )
        .map_err(|e| fail(e.to_string()))?;
        let mut records = Vec::with_capacity(usize::try_from(header.record_count).unwrap_or(0));
        let mut spans = Vec::with_capacity(records.capacity());
        let mut rest: &[u8] = &raw;
        for n in 0..header.record_count {
            let start = raw.len() - rest.len();
            let record = parse_record(&mut rest, header.base_offset)
                .ok_or_else(|| fail(format!("record {n} does not parse")))?;
            records.push(record);
            spans.push(start..raw.len() - rest.len());
        }
        Ok(Self {
            header,
            records,
            raw,
            spans,
        })
    }

    /// The batch `batch` (the one decoded) with only the records `keep` says (one flag per
    /// record, in order).
    ///
    /// # Errors
    /// [`RecordsError`] when the records do not compress.
    pub(crate) fn retain(&self, batch: &[u8], keep: &[bool]) -> Result<Retained, RecordsError> {
        let kept = keep.iter().filter(|k| **k).count();
        if kept == self.records.len() {
            return Ok(Retained::All);
        }
        if kept == 0 {
            return Ok(Retained::Nothing);
        }
        let mut raw = Vec::with_capacity(self.raw.len());
        for (span, _) in self.spans.iter().zip(keep).filter(|(_, k)| **k) {
            raw.extend_from_slice(&self.raw[span.clone()]);
        }
        let compressed = compress(self.header.codec(), &raw).map_err(|e| RecordsError {
            base: self.header.base_offset,
            reason: format!("cannot compress its records again: {e}"),
        })?;
        let count = i32::try_from(kept).unwrap_or(i32::MAX);
        Ok(Retained::Some(
            Bytes::from(batch::with_records(batch, count, &compressed)),
            count,
        ))
    }
}

/// The indexes in `batch` of its records without a key, which a compacted topic refuses
/// (as Kafka does: compaction keeps a record per key).
///
/// # Errors
/// As [`Records::decode`].
pub(crate) fn keyless(batch: &[u8], max_decompressed: usize) -> Result<Vec<i32>, RecordsError> {
    let records = Records::decode(batch, max_decompressed)?;
    Ok(records
        .records
        .iter()
        .zip(0..)
        .filter(|(r, _)| r.key.is_none())
        .map(|(_, i)| i)
        .collect())
}

/// Reads one record (`length`, attributes, timestamp delta, offset delta, key, value,
/// headers) off `rest`.
fn parse_record(rest: &mut &[u8], base: i64) -> Option<Record> {
    let length = usize::try_from(read_varint(rest)?).ok()?;
    let mut record = rest.get(..length)?;
    *rest = &rest[length..];
    record = record.get(1..)?; // attributes
    read_varint(&mut record)?; // timestamp delta
    let offset = base.checked_add(read_varint(&mut record)?)?;
    let key = match read_varint(&mut record)? {
        n if n < 0 => None,
        n => {
            let n = usize::try_from(n).ok()?;
            let key = record.get(..n)?;
            record = &record[n..];
            Some(key_hash(key))
        }
    };
    let tombstone = read_varint(&mut record)? < 0;
    Some(Record {
        offset,
        key,
        tombstone,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::batch::tests::encoded;
    use crate::wire::batch::{set_base_offset, validate};
    use kafka_protocol::records::Compression;
    use kafka_protocol::records::RecordBatchDecoder;

    /// The bound on decompressed bytes Ferry runs with by default (`kafka.max_request_size`).
    pub(crate) const MAX_DECOMPRESSED: usize = ferry_config::kafka::DEFAULT_MAX_REQUEST_SIZE;

    /// A batch at base offset `base` of records with these keys and values (`None` value:
    /// a tombstone), timestamps 1000, 1010, …, from producer 7.
    pub(crate) fn keyed(
        base: i64,
        records: &[(&str, Option<&str>)],
        compression: Compression,
    ) -> Vec<u8> {
        let records: Vec<_> = records.iter().map(|(k, v)| (Some(*k), *v)).collect();
        let mut batch = encoded(&records, compression, Some((7, 40)));
        set_base_offset(&mut batch, base);
        batch
    }

    #[test]
    fn records_decode_with_their_offsets_keys_and_tombstones() {
        let b = keyed(100, &[("a", Some("1")), ("b", None)], Compression::None);
        let r = Records::decode(&b, MAX_DECOMPRESSED).unwrap();
        assert_eq!(
            r.records,
            [
                Record {
                    offset: 100,
                    key: Some(key_hash(b"a")),
                    tombstone: false
                },
                Record {
                    offset: 101,
                    key: Some(key_hash(b"b")),
                    tombstone: true
                },
            ]
        );
    }

    #[test]
    fn a_rebuilt_batch_keeps_its_offsets_producer_and_codec_with_gaps() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let b = keyed(
                100,
                &[
                    ("a", Some("1")),
                    ("b", Some("2")),
                    ("a", Some("3")),
                    ("c", None),
                ],
                compression,
            );
            let r = Records::decode(&b, MAX_DECOMPRESSED).unwrap();
            let Retained::Some(rebuilt, 2) = r.retain(&b, &[false, true, true, false]).unwrap()
            else {
                panic!("two records kept");
            };
            let h = validate(&rebuilt, MAX_DECOMPRESSED).unwrap();
            assert_eq!(
                (h.base_offset, h.last_offset_delta, h.record_count),
                (100, 3, 2)
            );
            assert_eq!(
                (h.producer_id, h.base_sequence, h.codec()),
                (7, 40, compression as i16)
            );
            let decoded = RecordBatchDecoder::decode(&mut rebuilt.clone()).unwrap();
            let kept: Vec<(i64, i64, Option<Bytes>)> = decoded
                .records
                .into_iter()
                .map(|r| (r.offset, r.timestamp, r.value))
                .collect();
            assert_eq!(
                kept,
                [
                    (101, 1010, Some(Bytes::from("2"))),
                    (102, 1020, Some(Bytes::from("3")))
                ]
            );
        }
    }

    #[test]
    fn keyless_records_are_found_by_their_index() {
        let records = [
            (Some("a"), Some("v")),
            (None, Some("v")),
            (Some("b"), None),
            (None, Some("v")),
        ];
        let b = encoded(&records, Compression::Lz4, None);
        assert_eq!(keyless(&b, MAX_DECOMPRESSED).unwrap(), [1, 3]);
    }

    #[test]
    fn keeping_all_or_nothing_says_so() {
        let b = keyed(100, &[("a", Some("1"))], Compression::Zstd);
        let r = Records::decode(&b, MAX_DECOMPRESSED).unwrap();
        assert_eq!(r.retain(&b, &[true]).unwrap(), Retained::All);
        assert_eq!(r.retain(&b, &[false]).unwrap(), Retained::Nothing);
    }

    #[test]
    fn a_batch_decompressing_past_the_bound_is_refused() {
        let b = keyed(100, &[("a", Some(&"x".repeat(10_000)))], Compression::Zstd);
        let e = Records::decode(&b, 1000).unwrap_err();
        assert_eq!(e.base, 100);
    }
}
