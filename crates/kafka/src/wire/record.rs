//! A Kafka record as it crosses the port (the bridge's records, old producers' message
//! sets turned into one batch) and its encoding as one uncompressed record batch of
//! message format v2.

use crate::wire::batch::HEADER_LEN;
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

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

/// `record` alone as the uncompressed record batch (format v2, no producer, its timestamp
/// defaulting to `now`) that `KafkaPort::append_in` would stage for it: what a caller
/// writes to a spill for `KafkaPort::append_spilled_in`. [`batch_len`] bytes long.
pub fn encode_alone(record: KafkaRecord, now: u64) -> Bytes {
    encode_batch(vec![record], now).freeze()
}

/// The length of the batch [`encode_alone`] encodes for `record`, without encoding it: the
/// batch header, then the record's fields, each length a zigzag varint.
pub fn batch_len(record: &KafkaRecord) -> usize {
    let bytes =
        |b: Option<&[u8]>| b.map_or(varint_len(-1), |b| varint_len(b.len() as i64) + b.len());
    let headers: usize = record
        .headers
        .iter()
        .map(|(k, v)| bytes(Some(k.as_bytes())) + bytes(v.as_deref()))
        .sum();
    // Attributes, timestamp delta 0 and offset delta 0 (one byte each), key, value, headers.
    let body = 3
        + bytes(record.key.as_deref())
        + bytes(record.value.as_deref())
        + varint_len(record.headers.len() as i64)
        + headers;
    HEADER_LEN + varint_len(body as i64) + body
}

/// The length of `n` as a zigzag varint.
fn varint_len(n: i64) -> usize {
    let mut zigzag = ((n << 1) ^ (n >> 63)) as u64;
    let mut len = 1;
    while zigzag >= 0x80 {
        zigzag >>= 7;
        len += 1;
    }
    len
}

/// `records` as one uncompressed record batch (format v2) without a producer, their
/// timestamps defaulting to `now`.
pub(crate) fn encode_batch(records: Vec<KafkaRecord>, now: u64) -> BytesMut {
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
