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

use crate::bridge::sink::{InStoreSink, Outcome};
use crate::bridge::staged::Outgoing;
use crate::config::KeySource;
use crate::kafka::port::{KafkaPort, KafkaRecord, PartitionRef};
use crate::stage::StageError;
use crate::store::Transaction;
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
        let outcome = match self.partitions() {
            Some(_) => Outcome::Delivered,
            None => Outcome::Retry(format!("no topic '{}' on the Kafka front", self.topic)),
        };
        vec![outcome; batch.len()]
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
