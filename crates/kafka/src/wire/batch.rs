//! Record batches (Kafka's message format v2) as bytes: header parsing, validation of what
//! a producer sent, and the base-offset rewrite the sequencer applies. Sans-io and
//! allocation-free: a batch is kept as sent (its compression included), so Ferry never
//! decompresses on the produce or fetch path.
//!
//! ```text
//! offset  field                  note
//!  0      baseOffset      i64    rewritten by the sequencer (not covered by the CRC)
//!  8      batchLength     i32    bytes after this field
//! 12      leaderEpoch     i32
//! 16      magic           i8     2
//! 17      crc             u32    CRC-32C of bytes 21..end
//! 21      attributes      i16    compression (bits 0-2), timestamp type, transactional, control
//! 23      lastOffsetDelta i32
//! 27      baseTimestamp   i64
//! 35      maxTimestamp    i64
//! 43      producerId      i64
//! 51      producerEpoch   i16
//! 53      baseSequence    i32
//! 57      recordCount     i32
//! 61      records…
//! ```

/// Bytes of a v2 batch header.
pub const HEADER_LEN: usize = 61;
/// Where the CRC-covered part of a batch begins.
const CRC_START: usize = 21;
/// Bytes before `batchLength`'s count starts (baseOffset and batchLength itself).
const LENGTH_PREFIX: usize = 12;
/// Attribute bit: the broker's append time is every record's timestamp (the batch's
/// `maxTimestamp`), the topic's `message.timestamp.type=LogAppendTime`.
const LOG_APPEND_TIME: i16 = 1 << 3;
/// Attribute bit: the batch belongs to a transaction.
const TRANSACTIONAL: i16 = 1 << 4;
/// Attribute bit: the batch holds control records (transaction markers).
const CONTROL: i16 = 1 << 5;
/// Attribute bits: the compression codec.
const COMPRESSION_MASK: i16 = 0b111;

/// Why a produced record batch is refused; each maps to the Kafka error code a producer
/// expects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The bytes end before the batch does.
    #[error("the record batch is truncated: {have} bytes of {need}")]
    Truncated {
        /// Bytes present.
        have: usize,
        /// Bytes the header promises.
        need: usize,
    },
    /// Not message format v2.
    #[error("record batch magic {0} is not supported; only message format v2 is")]
    Magic(i8),
    /// The checksum does not match the contents.
    #[error("record batch CRC-32C is {stored:#010x} but the contents give {computed:#010x}")]
    Crc {
        /// The CRC the producer wrote.
        stored: u32,
        /// The CRC of the bytes received.
        computed: u32,
    },
    /// The request carried no batch or more than one for a partition.
    #[error("a produce request must carry exactly one record batch per partition, not {0}")]
    BatchCount(usize),
    /// The batch is larger than the topic accepts.
    #[error("the record batch has {size} bytes; the topic accepts at most {max}")]
    TooLarge {
        /// The batch's size.
        size: usize,
        /// The topic's `max.message.bytes`.
        max: usize,
    },
    /// Its header describes no records or an impossible offset span.
    #[error("the record batch declares {records} records over {span} offsets")]
    BadCount {
        /// Declared record count.
        records: i32,
        /// `lastOffsetDelta + 1`.
        span: i64,
    },
    /// Producers may not write control records.
    #[error("control record batches cannot be produced")]
    Control,
    /// The compression codec is not one Kafka defines.
    #[error("compression codec {0} is not one of none, gzip, snappy, lz4, zstd")]
    Codec(i16),
}

impl BatchError {
    /// The Kafka error code for a Produce answer.
    pub fn code(&self) -> i16 {
        use kafka_protocol::ResponseError as E;
        match self {
            Self::Crc { .. } | Self::Truncated { .. } => E::CorruptMessage.code(),
            Self::TooLarge { .. } => E::MessageTooLarge.code(),
            Self::Magic(_) => E::UnsupportedForMessageFormat.code(),
            Self::BatchCount(_) | Self::BadCount { .. } | Self::Control | Self::Codec(_) => {
                E::InvalidRecord.code()
            }
        }
    }
}

/// The fields of a v2 batch header Ferry uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// The batch's first offset (as sent: the producer's 0; in the log: its real offset).
    pub base_offset: i64,
    /// The whole batch's size in bytes.
    pub size: usize,
    /// The attribute bits.
    pub attributes: i16,
    /// Offset of the last record relative to the first.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest record timestamp.
    pub max_timestamp: i64,
    /// The idempotent producer's id; -1 without idempotence.
    pub producer_id: i64,
    /// The idempotent producer's epoch.
    pub producer_epoch: i16,
    /// Sequence number of the first record; -1 without idempotence.
    pub base_sequence: i32,
    /// Records in the batch.
    pub record_count: i32,
}

impl BatchHeader {
    /// Parses the header at the start of `bytes` (whether all of the batch is present is
    /// for [`validate`] to check).
    ///
    /// # Errors
    /// [`BatchError::Truncated`] or [`BatchError::Magic`].
    pub fn parse(bytes: &[u8]) -> Result<Self, BatchError> {
        if bytes.len() < HEADER_LEN {
            return Err(BatchError::Truncated {
                have: bytes.len(),
                need: HEADER_LEN,
            });
        }
        let magic = bytes[16] as i8;
        if magic != 2 {
            return Err(BatchError::Magic(magic));
        }
        let length = i32_at(bytes, 8);
        let size = usize::try_from(length)
            .ok()
            .map(|l| l + LENGTH_PREFIX)
            .filter(|s| *s >= HEADER_LEN)
            .ok_or(BatchError::Truncated {
                have: bytes.len(),
                need: HEADER_LEN,
            })?;
        Ok(Self {
            base_offset: i64_at(bytes, 0),
            size,
            attributes: i16_at(bytes, 21),
            last_offset_delta: i32_at(bytes, 23),
            base_timestamp: i64_at(bytes, 27),
            max_timestamp: i64_at(bytes, 35),
            producer_id: i64_at(bytes, 43),
            producer_epoch: i16_at(bytes, 51),
            base_sequence: i32_at(bytes, 53),
            record_count: i32_at(bytes, 57),
        })
    }

    /// How many offsets the batch spans (`lastOffsetDelta + 1`).
    pub fn offset_span(&self) -> i64 {
        i64::from(self.last_offset_delta) + 1
    }

    /// Whether an idempotent producer wrote it.
    pub fn is_idempotent(&self) -> bool {
        self.producer_id >= 0
    }

    /// Whether it belongs to a transaction (a transactional producer's data, or a marker).
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL != 0
    }

    /// Whether it holds control records (a transaction's commit or abort marker).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL != 0
    }

    /// Sequence number of the last record (sequences wrap at `i32::MAX`, as Kafka's do).
    pub fn last_sequence(&self) -> i32 {
        let last = i64::from(self.base_sequence) + i64::from(self.last_offset_delta);
        (last % (i64::from(i32::MAX) + 1)) as i32
    }

    /// The compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn codec(&self) -> i16 {
        self.attributes & COMPRESSION_MASK
    }

    /// Whether every record's timestamp is the broker's append time, `maxTimestamp`.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & LOG_APPEND_TIME != 0
    }

    /// The batch's newest timestamp: the append time of a [`stamp_log_append_time`]
    /// batch, else its largest record timestamp (its first record's when the producer gave
    /// no maximum).
    pub fn newest_timestamp(&self) -> i64 {
        if self.is_log_append_time() {
            return self.max_timestamp;
        }
        self.max_timestamp.max(self.base_timestamp)
    }
}

/// Checks the records of one partition of a produce request: exactly one v2 batch, its
/// CRC-32C, its size against `max_bytes`, a sane record count, and no control batch (a
/// transactional batch is checked against its transaction when it is staged).
///
/// # Errors
/// The first [`BatchError`] found.
pub fn validate(records: &[u8], max_bytes: usize) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(records)?;
    if header.size > records.len() {
        return Err(BatchError::Truncated {
            have: records.len(),
            need: header.size,
        });
    }
    if header.size < records.len() {
        return Err(BatchError::BatchCount(count_batches(records)));
    }
    if header.size > max_bytes {
        return Err(BatchError::TooLarge {
            size: header.size,
            max: max_bytes,
        });
    }
    let stored = u32::from_be_bytes(records[17..21].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&records[CRC_START..]);
    if stored != computed {
        return Err(BatchError::Crc { stored, computed });
    }
    if header.codec() > 4 {
        return Err(BatchError::Codec(header.codec()));
    }
    if header.is_control() {
        return Err(BatchError::Control);
    }
    let span = header.offset_span();
    if header.record_count < 1 || span < i64::from(header.record_count) {
        return Err(BatchError::BadCount {
            records: header.record_count,
            span,
        });
    }
    Ok(header)
}

/// How many batches `records` holds back to back (stopping at the first that does not
/// parse).
fn count_batches(mut records: &[u8]) -> usize {
    let mut n = 0;
    while let Ok(h) = BatchHeader::parse(records) {
        n += 1;
        if h.size >= records.len() {
            break;
        }
        records = &records[h.size..];
    }
    n
}

/// A transaction marker: a control batch of producer `producer_id` at `epoch` with one
/// record whose key is (version 0, type 1 commit or 0 abort) and whose value is (version
/// 0, coordinator epoch 0), as Kafka's coordinator writes it.
pub fn marker(producer_id: i64, epoch: i16, commit: bool, timestamp: i64) -> Vec<u8> {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&i16::from(commit).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&0i32.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(key.into()),
        value: Some(value.into()),
        headers: Vec::new(),
    };
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        std::slice::from_ref(&record),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("a marker record always encodes");
    buf.to_vec()
}

/// Whether the control batch `batch` (see [`marker`]) commits its transaction: `Some(true)`
/// for a commit marker, `Some(false)` for an abort marker, `None` when its first record
/// is no marker.
pub fn marker_commits(batch: &[u8]) -> Option<bool> {
    let header = BatchHeader::parse(batch).ok()?;
    if !header.is_control() || header.codec() != 0 {
        return None;
    }
    let mut record = batch.get(HEADER_LEN..header.size)?;
    read_varint(&mut record)?; // length
    record = record.get(1..)?; // attributes
    read_varint(&mut record)?; // timestamp delta
    read_varint(&mut record)?; // offset delta
    let key_length = usize::try_from(read_varint(&mut record)?).ok()?;
    let key = record.get(..key_length)?;
    match key.get(2..4)? {
        [0, 0] => Some(false),
        [0, 1] => Some(true),
        _ => None,
    }
}

/// Writes `base` as the batch's base offset. Record offsets are deltas from it and the
/// field is outside the CRC, so the batch stays valid and is never recompressed.
pub fn set_base_offset(batch: &mut [u8], base: i64) {
    batch[..8].copy_from_slice(&base.to_be_bytes());
}

/// A batch with `header`'s header (its first [`HEADER_LEN`] bytes: offsets, timestamps,
/// producer and attributes, compression included, kept as they are) holding `count`
/// records whose bytes, compressed as the attributes say, are `records`: the record count,
/// the batch length and the CRC-32C are written to match.
pub fn with_records(header: &[u8], count: i32, records: &[u8]) -> Vec<u8> {
    let mut batch = Vec::with_capacity(HEADER_LEN + records.len());
    batch.extend_from_slice(&header[..HEADER_LEN]);
    batch[57..61].copy_from_slice(&count.to_be_bytes());
    batch.extend_from_slice(records);
    let length = i32::try_from(batch.len() - LENGTH_PREFIX).unwrap_or(i32::MAX);
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Marks a whole, valid batch as stamped with the broker's append time `now`, as Kafka
/// does for a topic with `message.timestamp.type=LogAppendTime`: the timestamp-type
/// attribute set and `maxTimestamp` = `now`, which readers then take as every record's
/// timestamp. The records are untouched; the CRC-32C is updated from the header's change
/// alone (CRC-32C is linear), so a batch of any size costs the same.
pub fn stamp_log_append_time(batch: &mut [u8], now: i64) {
    const STAMPED: std::ops::Range<usize> = CRC_START..43;
    let before = crc32c::crc32c(&batch[STAMPED]);
    let attributes = i16_at(batch, 21) | LOG_APPEND_TIME;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&now.to_be_bytes());
    let after = crc32c::crc32c(&batch[STAMPED]);
    // crc(A' ‖ B) = crc(A ‖ B) ^ shift(crc(A) ^ crc(A'), |B|) for equal-length A and A'.
    let delta = crc32c::crc32c_combine(before ^ after, 0, batch.len() - STAMPED.end);
    let crc = u32::from_be_bytes(batch[17..21].try_into().expect("4 bytes")) ^ delta;
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Sets the compression codec (0 none … 4 zstd) in the attributes of a batch header; the
/// caller compresses the records to match and writes the CRC ([`with_records`]).
pub fn set_codec(header: &mut [u8], codec: i16) {
    let attributes = (i16_at(header, 21) & !COMPRESSION_MASK) | (codec & COMPRESSION_MASK);
    header[21..23].copy_from_slice(&attributes.to_be_bytes());
}

/// Sets the partition leader epoch of a batch (bytes 12..16 of the v2 header, outside the
/// CRC, which covers the attributes onwards): the epoch of the leader that appended it.
pub fn set_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
}

/// For an uncompressed batch, the (offset, timestamp) of its first record whose timestamp
/// is at least `at` (`None` when no record is that new); `None` also for a compressed
/// batch, whose records Ferry does not decompress, and for a record that does not parse or
/// whose offset would lie beyond `i64::MAX`.
pub fn first_record_at_or_after(batch: &[u8], at: i64) -> Option<(i64, i64)> {
    let header = BatchHeader::parse(batch).ok()?;
    if header.codec() != 0 || batch.len() < header.size {
        return None;
    }
    let mut rest = &batch[HEADER_LEN..header.size];
    for _ in 0..header.record_count {
        let length = usize::try_from(read_varint(&mut rest)?).ok()?;
        let mut record = rest.get(..length)?;
        rest = &rest[length..];
        record = record.get(1..)?; // attributes
        let timestamp_delta = read_varint(&mut record)?;
        let offset_delta = read_varint(&mut record)?;
        let timestamp = if header.is_log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp.saturating_add(timestamp_delta)
        };
        if timestamp >= at {
            return Some((header.base_offset.checked_add(offset_delta)?, timestamp));
        }
    }
    None
}

/// Reads a zigzag-encoded variable-length integer (Kafka's varint and varlong).
pub(crate) fn read_varint(bytes: &mut &[u8]) -> Option<i64> {
    let mut value: u64 = 0;
    for shift in (0..70).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    None
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
        TimestampType,
    };

    /// A v2 batch of `n` records with timestamps `1000, 1010, …`, encoded as a client does.
    pub(crate) fn batch(n: i64, compression: Compression, producer: Option<(i64, i32)>) -> Vec<u8> {
        let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
        let values: Vec<String> = (0..n).map(|i| format!("value {i}")).collect();
        let records: Vec<(Option<&str>, Option<&str>)> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (Some(k.as_str()), Some(v.as_str())))
            .collect();
        encoded(&records, compression, producer)
    }

    /// A v2 batch of records with these keys and values (`None`: null), timestamps `1000,
    /// 1010, …`, from `producer` (id, first sequence), encoded as a client does.
    pub(crate) fn encoded(
        records: &[(Option<&str>, Option<&str>)],
        compression: Compression,
        producer: Option<(i64, i32)>,
    ) -> Vec<u8> {
        let (producer_id, sequence) = producer.unwrap_or((-1, -1));
        let records: Vec<Record> = (0..)
            .zip(records)
            .map(|(i, (key, value))| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch: if producer_id >= 0 { 0 } else { -1 },
                timestamp_type: TimestampType::Creation,
                offset: i,
                // The encoder batches records whose offset - sequence is constant; without
                // a producer the first record's -1 is the batch's base sequence.
                sequence: if sequence >= 0 { sequence } else { -1 } + i as i32,
                timestamp: 1000 + 10 * i,
                key: key.map(|k| Bytes::from(k.to_owned())),
                value: value.map(|v| Bytes::from(v.to_owned())),
                headers: Vec::new(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        buf.to_vec()
    }

    #[test]
    fn a_client_batch_validates_and_reports_its_header() {
        let b = batch(3, Compression::None, Some((42, 7)));
        let h = validate(&b, 1 << 20).unwrap();
        assert_eq!(h.size, b.len());
        assert_eq!(h.record_count, 3);
        assert_eq!(h.offset_span(), 3);
        assert_eq!(
            (h.producer_id, h.base_sequence, h.last_sequence()),
            (42, 7, 9)
        );
        assert_eq!(h.newest_timestamp(), 1020);
    }

    #[test]
    fn every_codec_validates_without_decompressing() {
        for c in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let b = batch(5, c, None);
            assert_eq!(validate(&b, 1 << 20).unwrap().codec(), c as i16);
        }
    }

    #[test]
    fn a_flipped_bit_fails_the_crc() {
        let mut b = batch(2, Compression::None, None);
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(matches!(validate(&b, 1 << 20), Err(BatchError::Crc { .. })));
        assert_eq!(
            validate(&b, 1 << 20).unwrap_err().code(),
            kafka_protocol::ResponseError::CorruptMessage.code()
        );
    }

    #[test]
    fn rewriting_the_base_offset_keeps_the_crc() {
        let mut b = batch(2, Compression::Zstd, None);
        set_base_offset(&mut b, 1234);
        assert_eq!(validate(&b, 1 << 20).unwrap().base_offset, 1234);
    }

    #[test]
    fn truncated_oversized_and_doubled_batches_are_refused() {
        let b = batch(2, Compression::None, None);
        assert!(matches!(
            validate(&b[..b.len() - 1], 1 << 20),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(
            validate(&b[..10], 1 << 20),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(validate(&b, 16), Err(BatchError::TooLarge { .. })));
        let doubled = [b.clone(), b].concat();
        assert_eq!(validate(&doubled, 1 << 20), Err(BatchError::BatchCount(2)));
    }

    #[test]
    fn old_message_formats_are_refused() {
        let mut b = batch(1, Compression::None, None);
        b[16] = 1;
        assert_eq!(validate(&b, 1 << 20), Err(BatchError::Magic(1)));
    }

    #[test]
    fn timestamp_search_finds_the_first_record_at_or_after() {
        let mut b = batch(4, Compression::None, None);
        set_base_offset(&mut b, 100);
        assert_eq!(first_record_at_or_after(&b, 0), Some((100, 1000)));
        assert_eq!(first_record_at_or_after(&b, 1011), Some((102, 1020)));
        assert_eq!(first_record_at_or_after(&b, 1030), Some((103, 1030)));
        assert_eq!(first_record_at_or_after(&b, 1031), None);
        let z = batch(4, Compression::Zstd, None);
        assert_eq!(first_record_at_or_after(&z, 0), None);
    }

    #[test]
    fn markers_are_control_batches_that_say_commit_or_abort() {
        for commit in [true, false] {
            let m = marker(7, 3, commit, 1000);
            let h = BatchHeader::parse(&m).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch, h.record_count), (7, 3, 1));
            assert_eq!(marker_commits(&m), Some(commit));
            // A producer may not send one.
            assert_eq!(validate(&m, 1 << 20), Err(BatchError::Control));
        }
        assert_eq!(marker_commits(&batch(1, Compression::None, None)), None);
    }

    #[test]
    fn varints_decode_zigzag() {
        for (bytes, v) in [
            (&[0x00][..], 0),
            (&[0x01][..], -1),
            (&[0x02][..], 1),
            (&[0xac, 0x02][..], 150),
        ] {
            let mut b = bytes;
            assert_eq!(read_varint(&mut b), Some(v));
        }
        let mut unterminated: &[u8] = &[0x80, 0x80];
        assert_eq!(read_varint(&mut unterminated), None);
    }

    /// Found by fuzzing (`stored_records`, minimized by hand): a stored batch whose record
    /// offset delta carries it past `i64::MAX` has no answer rather than a panic.
    #[test]
    fn a_record_offset_beyond_i64_max_gives_no_offset() {
        #[rustfmt::skip]
        let batch: &[u8] = &[
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // baseOffset i64::MAX
            0, 0, 0, 53, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, // length, epoch, magic, CRC
            0, 0, 0, 0, 0, 0, // attributes, lastOffsetDelta
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // timestamps
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producer, epoch
            0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, // baseSequence, one record
            6, 0, 0, 2, // length 3, attributes, timestamp delta 0, offset delta 1
        ];
        assert_eq!(first_record_at_or_after(batch, i64::MIN), None);
    }

    #[test]
    fn a_log_append_time_stamp_keeps_the_batch_valid_and_dates_every_record() {
        for c in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let mut b = batch(4, c, Some((7, 0)));
            stamp_log_append_time(&mut b, 5_000);
            let h = validate(&b, 1 << 20).unwrap();
            assert!(h.is_log_append_time());
            assert_eq!((h.base_timestamp, h.max_timestamp), (1000, 5_000));
            assert_eq!(h.newest_timestamp(), 5_000);
            assert_eq!(h.codec(), c as i16);
            let mut whole = BytesMut::from(&b[..]);
            let decoded = RecordBatchDecoder::decode(&mut whole).unwrap();
            assert_eq!(decoded.records.len(), 4);
        }
        // A producer timestamp newer than the append time does not count.
        let mut b = batch(3, Compression::None, None);
        stamp_log_append_time(&mut b, 500);
        assert_eq!(BatchHeader::parse(&b).unwrap().newest_timestamp(), 500);
        assert_eq!(first_record_at_or_after(&b, 500), Some((0, 500)));
        assert_eq!(first_record_at_or_after(&b, 501), None);
    }
}
