//! A topic on Ferry's own Kafka front as a route destination ([`InStoreSink`]).
//!
//! Each message becomes a Kafka record (`docs/mapping.md`, its key as the route's `key`
//! says); a keyed record goes to the partition Java clients pick (murmur2 of the key),
//! an unkeyed one round robin. The records of one partition are encoded as one record
//! batch and appended to the partition's stage exactly as the produce path stages a
//! produced batch, in the transaction that acknowledges them in the route's stage:
//! exactly once. The partition's sequencer then moves the batch into the log.
//!
//! A missing topic is created when the route starts if `kafka.auto_create_topics`
//! allows it; while it is missing, deliveries are retried.
//!
//! A message whose record would make a batch larger than a route may append to the front
//! in one transaction ([`MAX_APPEND_BYTES`], a stage body: a larger batch only a Produce
//! request spills) is refused ([`Outcome::Rejected`], with the
//! sizes in the reason) and, after the route's `max_attempts`, dead-lettered to the
//! route's dead-letter stage; the route goes on. (A topic's own, lower
//! `max.message.bytes` is not known to the bridge: the Kafka port does not expose it.)

use crate::bridge::sink::{InStoreSink, Outcome};
use crate::bridge::staged::Outgoing;
use crate::config::KeySource;
use crate::kafka::port::{KafkaPort, KafkaRecord, MAX_APPEND_BYTES, PartitionRef};
use crate::stage::StageError;
use crate::store::Transaction;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use tracing::warn;

/// Where a route delivers on the Kafka front.
pub struct KafkaFrontSink {
    /// The front.
    kafka: KafkaPort,
    /// The topic.
    topic: String,
    /// What a record's key is made from.
    key: KeySource,
    /// The next partition for an unkeyed record.
    round_robin: AtomicUsize,
}

impl KafkaFrontSink {
    /// A sink producing to `topic` of `kafka`'s front, creating the topic now if it is
    /// missing and `kafka.auto_create_topics` allows it.
    pub async fn open(kafka: KafkaPort, topic: String, key: KeySource) -> Self {
        if let Err(e) = kafka.open_topic(&topic).await {
            warn!(topic = %topic, error = %e, "the route's Kafka topic is not there yet; deliveries wait for it");
        }
        Self {
            kafka,
            topic,
            key,
            round_robin: AtomicUsize::new(fastrand::usize(..)),
        }
    }

    fn partitions(&self) -> Option<Vec<PartitionRef>> {
        self.kafka.partitions(&self.topic)
    }
}

/// Bytes a record batch of one record adds to its key, value and headers at most: the
/// batch header (61) and the record's own framing (at most 36 bytes of varints).
const BATCH_FRAMING: usize = 61 + 36;
/// Bytes the framing of one header adds at most (its two lengths).
const HEADER_FRAMING: usize = 10;

/// The size, at most, of the record batch holding `r` alone.
fn batch_size(r: &KafkaRecord) -> usize {
    let len = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
    let headers: usize = r
        .headers
        .iter()
        .map(|(k, v)| HEADER_FRAMING + k.len() + v.as_ref().map_or(0, Vec::len))
        .sum();
    BATCH_FRAMING + len(&r.key) + len(&r.value) + headers
}

/// Java Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Java's default partitioner picks for `key` among `partitions`.
pub fn partition_for_key(key: &[u8], partitions: usize) -> usize {
    (murmur2(key) & 0x7fff_ffff) as usize % partitions.max(1)
}

impl InStoreSink for KafkaFrontSink {
    fn plan(&self, batch: &[Outgoing]) -> Vec<Outcome> {
        if self.partitions().is_none() {
            let why = format!("no topic '{}' on the Kafka front", self.topic);
            return vec![Outcome::Retry(why); batch.len()];
        }
        batch
            .iter()
            .map(|o| match batch_size(&o.to_kafka(self.key)) {
                size if size > MAX_APPEND_BYTES => Outcome::Rejected(format!(
                    "a record batch of {size} bytes is larger than a route appends to topic '{}' ({MAX_APPEND_BYTES} bytes at most)",
                    self.topic
                )),
                _ => Outcome::Delivered,
            })
            .collect()
    }

    fn write_in<'a>(
        &'a self,
        tx: &'a Transaction,
        batch: &'a [&'a Outgoing],
        now: u64,
    ) -> BoxFuture<'a, Result<Vec<(usize, String)>, StageError>> {
        Box::pin(async move {
            // Deleted since `plan` found it: nothing is written, everything is retried.
            let Some(partitions) = self.partitions() else {
                let why = format!("no topic '{}' on the Kafka front", self.topic);
                return Ok((0..batch.len()).map(|i| (i, why.clone())).collect());
            };
            let count = partitions.len();
            let mut by_partition: BTreeMap<usize, Vec<KafkaRecord>> = BTreeMap::new();
            for o in batch {
                let r = o.to_kafka(self.key);
                let p = match &r.key {
                    Some(k) => partition_for_key(k, count),
                    None => self.round_robin.fetch_add(1, Ordering::Relaxed) % count.max(1),
                };
                by_partition.entry(p).or_default().push(r);
            }
            for (p, records) in by_partition {
                if let Some(partition) = partitions.get(p) {
                    self.kafka.append_in(tx, partition, records, now).await?;
                }
            }
            Ok(Vec::new())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_java_kafka() {
        // The cases of Kafka's own UtilsTest.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        assert_eq!(murmur2(b"abc"), 479_470_107);
    }
}
