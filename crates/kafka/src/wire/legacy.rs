//! Message sets of message formats v0 and v1 (magic 0 and 1), which Produce v0–v2 carry:
//! clients of Kafka before 0.11, and librdkafka or kafka-python told to speak to an old
//! broker (`api.version.request=false` with `broker.version.fallback` 0.8 to 0.10,
//! `api_version=(0, 10, 1)`). Ferry keeps message format v2 only, so a message set is
//! converted into one v2 record batch, as Kafka converts one for a topic of format v2:
//! offsets from 0, no producer id, no headers, each record's key and value as sent, its
//! timestamp the message's (format v1) or none, -1 (format v0: no timestamps), and the
//! records uncompressed (a compressed wrapper message is opened and its inner messages
//! taken). The batch is then validated and appended as any other.
//!
//! ```text
//! message set: (offset i64, size i32, message)…
//! message:     crc u32 (CRC-32 of what follows), magic i8, attributes i8 (codec in bits
//!              0-2), [timestamp i64: magic 1], key bytes (i32 length, -1 null), value bytes
//! ```

use crate::wire::compression::decompress_bounded;
use crate::wire::record::{KafkaRecord, encode_batch};
use bytes::Bytes;
use kafka_protocol::records::Compression;

/// Produce versions below this carry message sets (formats v0 and v1); v3 brought record
/// batches (format v2). `kafka-protocol` knows v3 and later only ([`crate::wire::codec`]).
pub const PRODUCE_WITH_MESSAGE_SETS_BELOW: i16 = 3;

/// Bytes of a message set entry before its message: offset and size.
const ENTRY_HEAD: usize = 12;
/// Bytes of a v0 message before its key: crc, magic, attributes.
const MESSAGE_HEAD_V0: usize = 6;

/// Why a message set is refused (`CORRUPT_MESSAGE` to the producer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("message set (message format v0/v1): {0}")]
pub struct LegacyError(String);

/// The message set `set` as one uncompressed v2 record batch, its compressed messages
/// opened (decompressing at most `max_decompressed` bytes in all).
///
/// # Errors
/// [`LegacyError`] naming what does not parse: a truncated entry, a CRC mismatch, a magic
/// other than 0 and 1, a compressed message inside a compressed one, an unknown codec,
/// or an empty set.
pub fn to_batch(set: &[u8], max_decompressed: usize) -> Result<Bytes, LegacyError> {
    let mut messages = Vec::new();
    let mut budget = max_decompressed;
    read_set(set, true, &mut budget, &mut messages)?;
    if messages.is_empty() {
        return Err(LegacyError("it holds no message".into()));
    }
    // As the bridge encodes records for a topic: one uncompressed batch, no producer.
    Ok(encode_batch(messages, 0).freeze())
}

/// Appends the messages of `set` to `out`; a compressed message (allowed only when
/// `outer`) has its inner set read in turn, its decompressed bytes taken from `budget`.
fn read_set(
    mut set: &[u8],
    outer: bool,
    budget: &mut usize,
    out: &mut Vec<KafkaRecord>,
) -> Result<(), LegacyError> {
    while !set.is_empty() {
        let index = out.len();
        let fail = |what: &str| LegacyError(format!("message {index}: {what}"));
        if set.len() < ENTRY_HEAD {
            return Err(fail("truncated"));
        }
        let size = usize::try_from(i32::from_be_bytes(set[8..12].try_into().expect("4 bytes")))
            .map_err(|_| fail("negative size"))?;
        let message = set
            .get(ENTRY_HEAD..ENTRY_HEAD + size)
            .ok_or_else(|| fail("truncated"))?;
        set = &set[ENTRY_HEAD + size..];
        read_message(message, outer, budget, out).map_err(|e| fail(&e))?;
    }
    Ok(())
}

/// Reads one message (after its set entry's offset and size) into `out`.
fn read_message(
    message: &[u8],
    outer: bool,
    budget: &mut usize,
    out: &mut Vec<KafkaRecord>,
) -> Result<(), String> {
    if message.len() < MESSAGE_HEAD_V0 {
        return Err("truncated".into());
    }
    let stored = u32::from_be_bytes(message[..4].try_into().expect("4 bytes"));
    let computed = crc32fast::hash(&message[4..]);
    if stored != computed {
        return Err(format!(
            "CRC-32 is {stored:#010x} but the contents give {computed:#010x}"
        ));
    }
    let (magic, attributes) = (message[4] as i8, message[5]);
    let mut rest = &message[MESSAGE_HEAD_V0..];
    let timestamp = match magic {
        0 => -1,
        1 => i64::from_be_bytes(take(&mut rest, 8)?.try_into().expect("8 bytes")),
        _ => return Err(format!("magic {magic} is not message format v0 or v1")),
    };
    let key = bytes_field(&mut rest)?;
    let value = bytes_field(&mut rest)?;
    let codec = attributes & 0b111;
    if codec == 0 {
        out.push(KafkaRecord {
            key,
            value,
            headers: Vec::new(),
            timestamp_ms: Some(timestamp),
        });
        return Ok(());
    }
    if !outer {
        return Err("a compressed message inside a compressed message".into());
    }
    let compression = match codec {
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        _ => return Err(format!("codec {codec} is not gzip, snappy or lz4")),
    };
    let mut compressed = value.unwrap_or_default();
    let inner = decompress_bounded(&mut compressed, compression, *budget).map_err(|e| {
        format!(
            "its {} records do not decompress: {e}",
            compression_name(codec)
        )
    })?;
    *budget -= inner.len();
    read_set(&inner, false, budget, out).map_err(|e| e.0)
}

fn compression_name(codec: u8) -> &'static str {
    match codec {
        1 => "gzip",
        2 => "snappy",
        _ => "lz4",
    }
}

/// The next `n` bytes of `rest`.
fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if rest.len() < n {
        return Err("truncated".into());
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

/// A length-prefixed byte field (-1: null).
fn bytes_field(rest: &mut &[u8]) -> Result<Option<Bytes>, String> {
    let length = i32::from_be_bytes(take(rest, 4)?.try_into().expect("4 bytes"));
    if length < 0 {
        return Ok(None);
    }
    let length = usize::try_from(length).expect("not negative");
    Ok(Some(Bytes::copy_from_slice(take(rest, length)?)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::batch::validate;
    use kafka_protocol::records::RecordBatchDecoder;
    use std::io::Write;

    const MAX: usize = 1 << 20;

    /// One message of format `magic` (timestamp `ts` for v1), as old clients encode it.
    pub(crate) fn message(
        magic: i8,
        codec: u8,
        ts: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut body = vec![magic as u8, codec];
        if magic == 1 {
            body.extend_from_slice(&ts.to_be_bytes());
        }
        for field in [key, value] {
            match field {
                Some(b) => {
                    body.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    body.extend_from_slice(b);
                }
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        let mut m = crc32fast::hash(&body).to_be_bytes().to_vec();
        m.extend_from_slice(&body);
        m
    }

    /// A message set of `messages` at offsets from 0.
    pub(crate) fn set(messages: &[Vec<u8>]) -> Vec<u8> {
        let mut s = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            s.extend_from_slice(&(i as i64).to_be_bytes());
            s.extend_from_slice(&(m.len() as i32).to_be_bytes());
            s.extend_from_slice(m);
        }
        s
    }

    fn records(batch: &Bytes) -> Vec<(i64, i64, Option<Bytes>, Option<Bytes>)> {
        validate(batch, MAX).unwrap();
        RecordBatchDecoder::decode(&mut batch.clone())
            .unwrap()
            .records
            .into_iter()
            .map(|r| (r.offset, r.timestamp, r.key, r.value))
            .collect()
    }

    #[test]
    fn v0_messages_become_records_without_timestamps() {
        let s = set(&[
            message(0, 0, 0, Some(b"k1"), Some(b"v1")),
            message(0, 0, 0, None, None),
        ]);
        let b = to_batch(&s, MAX).unwrap();
        assert_eq!(
            records(&b),
            vec![
                (0, -1, Some(Bytes::from("k1")), Some(Bytes::from("v1"))),
                (1, -1, None, None)
            ]
        );
    }

    #[test]
    fn a_gzip_wrapper_of_v1_messages_is_opened_and_keeps_their_timestamps() {
        let inner = set(&[
            message(1, 0, 1_700, Some(b"a"), Some(b"1")),
            message(1, 0, 1_900, Some(b"b"), Some(b"2")),
        ]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&inner).unwrap();
        let wrapper = message(1, 1, 1_900, None, Some(&gz.finish().unwrap()));
        let b = to_batch(&set(&[wrapper]), MAX).unwrap();
        assert_eq!(
            records(&b),
            vec![
                (0, 1_700, Some(Bytes::from("a")), Some(Bytes::from("1"))),
                (1, 1_900, Some(Bytes::from("b")), Some(Bytes::from("2")))
            ]
        );
    }

    #[test]
    fn bad_sets_are_refused_with_what_is_wrong() {
        let good = message(0, 0, 0, None, Some(b"v"));
        let mut corrupt = good.clone();
        *corrupt.last_mut().unwrap() ^= 1;
        let mut truncated = set(std::slice::from_ref(&good));
        truncated.pop();
        let nested = message(
            1,
            1,
            0,
            None,
            Some(&{
                let mut gz =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                gz.write_all(&set(&[message(1, 1, 0, None, Some(b"x"))]))
                    .unwrap();
                gz.finish().unwrap()
            }),
        );
        let huge = {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            gz.write_all(&vec![0u8; 2 * MAX]).unwrap();
            message(1, 1, 0, None, Some(&gz.finish().unwrap()))
        };
        for (s, why) in [
            (set(&[corrupt]), "CRC-32"),
            (truncated, "truncated"),
            (set(&[message(2, 0, 0, None, None)]), "magic 2"),
            (set(&[message(0, 4, 0, None, Some(b"z"))]), "codec 4"),
            (set(&[nested]), "inside a compressed message"),
            (set(&[huge]), "more than"),
            (Vec::new(), "no message"),
        ] {
            let e = to_batch(&s, MAX).unwrap_err().to_string();
            assert!(e.contains(why), "{e} should say {why}");
        }
    }
}
