//! A topic on Ferry's own Kafka front as a route destination ([`InStoreSink`]).
//!
//! Each message becomes a Kafka record (`docs/mapping.md`, its key as the route's `key`
//! says); a keyed record goes to the partition Java clients pick (murmur2 of the key),
//! an unkeyed one round robin. The records of one partition delivered together are encoded
//! as one record batch (a large one alone, below) and appended to the partition's stage
//! exactly as the produce path stages a produced batch, in the transaction that
//! acknowledges them in the route's stage: exactly once. The partition's sequencer then
//! moves the batch into the log.
//!
//! A missing topic is created when the route starts if `kafka.auto_create_topics`
//! allows it; while it is missing, deliveries are retried.
//!
//! **Large records.** A record whose batch is too large for one transaction (above 4 MiB,
//! [`spill::spills`], the rule a Produce request follows too) goes alone in its batch
//! ([`port::encode_alone`]): the sink states that batch as the message's
//! [`InStoreSink::large_form`], the worker writes it to a spill held by the route's lease
//! holder, and the transaction that acknowledges the message stages the batch by reference
//! ([`KafkaPort::append_spilled_in`]: its header naming the spill) and lets go of the hold,
//! exactly as a Produce request stages a large batch ([`ferry_kafka::partition::large`]). Nothing of
//! it is visible before the sequencer moves the reference into the log; a transaction
//! retried after a conflict stages it once, and a spill written for a delivery that never
//! commits is let go of when the route's holder is released (the route stops, or Ferry
//! restarts) and collected.
//!
//! A message whose record batch is larger than the topic's `max.message.bytes` (its own or
//! `kafka.max_message_bytes`; 128 MiB at most), as a Produce request of it would be, is
//! refused ([`Outcome::Rejected`], with the sizes in the reason) and, after the route's
//! `max_attempts`, dead-lettered to the route's dead-letter stage; the route goes on.

use crate::sink::{InStoreSink, LargeForm, Outcome, Planned};
use crate::staged::Outgoing;
use ferry_config::KeySource;
use ferry_kafka::port::{self, BATCH_HEAD_LEN, KafkaPort, KafkaRecord, PartitionRef};
use ferry_stage::{StageError, spill};
use ferry_store::Transaction;
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use tracing::warn;

/// Where a route delivers on the Kafka front.
pub(crate) struct KafkaFrontSink {
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
    pub(crate) async fn open(kafka: KafkaPort, topic: String, key: KeySource) -> Self {
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

    /// The partition of `record` among `count`: its key's, or the next round robin.
    fn partition_of(&self, record: &KafkaRecord, count: usize) -> usize {
        match &record.key {
            Some(k) => partition_for_key(k, count),
            None => self.round_robin.fetch_add(1, Ordering::Relaxed) % count.max(1),
        }
    }
}

/// Java Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`).
pub(crate) fn murmur2(data: &[u8]) -> i32 {
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
pub(crate) fn partition_for_key(key: &[u8], partitions: usize) -> usize {
    (murmur2(key) & 0x7fff_ffff) as usize % partitions.max(1)
}

impl InStoreSink for KafkaFrontSink {
    fn plan(&self, batch: &[Outgoing]) -> Vec<Planned> {
        let Some(max) = self.kafka.max_message_bytes(&self.topic) else {
            let why = format!("no topic '{}' on the Kafka front", self.topic);
            return vec![Planned::not(Outcome::Retry(why)); batch.len()];
        };
        batch
            .iter()
            .map(|o| match port::batch_len(&o.to_kafka(self.key)) {
                size if size > max => Planned::not(Outcome::Rejected(format!(
                    "a record batch of {size} bytes is larger than topic '{}' takes (max.message.bytes {max})",
                    self.topic
                ))),
                size => Planned {
                    large: spill::spills(size as u64, 1),
                    ..Planned::delivered(1)
                },
            })
            .collect()
    }

    fn large_form(&self, message: &Outgoing) -> Option<LargeForm> {
        let record = message.to_kafka(self.key);
        if !spill::spills(port::batch_len(&record) as u64, 1) {
            return None;
        }
        let now = ferry_stage::now_ms();
        let bytes = port::encode_alone(record, now);
        // Ferry's own uncompressed batch: compressing it again fails only if the codec's
        // encoder does; it is then stored as it is, which readers take all the same.
        let bytes = match self.kafka.conformed(&self.topic, bytes.clone(), now) {
            Ok(conformed) => conformed,
            Err(e) => {
                warn!(topic = %self.topic, error = %e, "storing a large record uncompressed");
                bytes
            }
        };
        Some(LargeForm {
            bytes,
            head: BATCH_HEAD_LEN,
        })
    }

    fn write_in<'a>(
        &'a self,
        tx: &'a Transaction,
        batch: &'a [(&'a Outgoing, &'a Planned)],
        now: u64,
    ) -> BoxFuture<'a, Result<Vec<(usize, String)>, StageError>> {
        Box::pin(async move {
            // Deleted since `plan` found it: nothing is written, everything is retried.
            let Some(partitions) = self.partitions() else {
                let why = format!("no topic '{}' on the Kafka front", self.topic);
                return Ok((0..batch.len()).map(|i| (i, why.clone())).collect());
            };
            let count = partitions.len();
            // The records of each partition not appended yet, in order: a large record's
            // batch, already in its spill, is appended after them, alone.
            let mut pending: BTreeMap<usize, Vec<KafkaRecord>> = BTreeMap::new();
            for (o, _) in batch {
                let r = o.to_kafka(self.key);
                let p = self.partition_of(&r, count);
                let Some(partition) = partitions.get(p) else {
                    continue;
                };
                match &o.stored {
                    None => pending.entry(p).or_default().push(r),
                    Some(form) => {
                        let before = pending.remove(&p).unwrap_or_default();
                        self.kafka.append_in(tx, partition, before, now).await?;
                        self.kafka
                            .append_spilled_in(tx, partition, &form.head, form.spill, now)
                            .await?;
                    }
                }
            }
            for (p, records) in pending {
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
    use crate::sink::deliver_in_store;
    use amq_protocol::protocol::BasicProperties;
    use bytes::Bytes;
    use ferry_amqp::port::AmqpMessage;
    use ferry_kafka::test_fixture::{Front, PATIENCE};
    use ferry_stage::{Holders, Stage, StageOptions, Stages};
    use ferry_store::StoreConfig;
    use ferry_store::StoreError;
    use std::time::Duration;

    /// A body whose record batch is too large for one transaction (and for one stage body
    /// of the Kafka front), yet small enough for the route's stage to hold inline.
    const LARGE: usize = 6 * 1024 * 1024;

    /// The Kafka front's sink, whose transactions fail after it wrote in them: the first
    /// `failures` with what `error` makes.
    struct Failing {
        sink: KafkaFrontSink,
        failures: AtomicUsize,
        error: fn() -> StageError,
    }

    impl InStoreSink for Failing {
        fn plan(&self, batch: &[Outgoing]) -> Vec<Planned> {
            self.sink.plan(batch)
        }

        fn large_form(&self, message: &Outgoing) -> Option<LargeForm> {
            self.sink.large_form(message)
        }

        fn write_in<'a>(
            &'a self,
            tx: &'a Transaction,
            batch: &'a [(&'a Outgoing, &'a Planned)],
            now: u64,
        ) -> BoxFuture<'a, Result<Vec<(usize, String)>, StageError>> {
            Box::pin(async move {
                let refused = self.sink.write_in(tx, batch, now).await?;
                let failing = self
                    .failures
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok();
                if failing {
                    return Err((self.error)());
                }
                Ok(refused)
            })
        }
    }

    /// A Kafka front with topic `big` (one partition, `max.message.bytes` 32 MiB), a route
    /// stage holding one large message leased to a holder of the route, and the sink.
    struct Route {
        front: Front,
        stages: Stages,
        stage: Stage,
        holders: Holders,
        holder: u64,
        partition: PartitionRef,
        body: Bytes,
    }

    impl Route {
        async fn start() -> Self {
            let front = Front::start_with(|c| {
                c.default_partitions = 1;
                c.max_message_bytes = 32 << 20;
            })
            .await;
            let stages = Stages::new(front.ctx.db.clone(), &StoreConfig::default().prefix);
            let port = KafkaPort::new(front.ctx.clone());
            let partition = port.open_topic("big").await.unwrap().remove(0);
            let stage = stages
                .create("route", &StageOptions::default())
                .await
                .unwrap();
            let body = Bytes::from((0..LARGE).map(|i| (i % 251) as u8).collect::<Vec<_>>());
            let message = AmqpMessage {
                exchange: "in".into(),
                routing_key: "k".into(),
                properties: BasicProperties::default(),
                body: body.clone(),
            };
            stage
                .append(&[crate::staged::from_amqp(&message)])
                .await
                .unwrap();
            let holders = Holders::new(&stages);
            let holder = holders.register(Duration::from_secs(60)).await.unwrap();
            Self {
                front,
                stages,
                stage,
                holders,
                holder,
                partition,
                body,
            }
        }

        async fn sink(&self, failures: usize, error: fn() -> StageError) -> Failing {
            let port = KafkaPort::new(self.front.ctx.clone());
            Failing {
                sink: KafkaFrontSink::open(port, "big".into(), KeySource::None).await,
                failures: AtomicUsize::new(failures),
                error,
            }
        }

        /// The route's message, leased to its holder.
        async fn lease(&self) -> Vec<Outgoing> {
            let leased = self.stage.lease(self.holder, 10).await.unwrap();
            leased
                .iter()
                .map(|d| Outgoing::decode(d).unwrap())
                .collect()
        }

        /// The records of the topic's log, once `n` are there or `patience` ran out.
        async fn records(&self, n: usize, patience: Duration) -> Vec<KafkaRecord> {
            let port = KafkaPort::new(self.front.ctx.clone());
            let deadline = tokio::time::Instant::now() + patience;
            loop {
                let tx = self.front.ctx.db.begin().unwrap();
                let read = port
                    .read_committed_in(&tx, &self.partition, 0, 1 << 30)
                    .await
                    .unwrap();
                let records = read.map(|r| r.records).unwrap_or_default();
                if records.len() >= n || tokio::time::Instant::now() > deadline {
                    return records;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }

        /// Bytes held in spills once the collector ran.
        async fn spilled(&self) -> i64 {
            let spills = self.stages.spills();
            spills.collect().await.unwrap();
            spills.bytes().await.unwrap()
        }
    }

    fn injected() -> StageError {
        StageError::Corrupt("injected".into())
    }

    fn conflict() -> StageError {
        StageError::Store(StoreError::NotCommitted)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_a_route_appends_take_the_topic_timestamp_type_and_codec() {
        use ferry_kafka::test_fixture::topic_settings::{CompressionType, TimestampType};
        let route = Route::start().await;
        let formatted = |c| {
            Ok(ferry_kafka::test_fixture::topic_settings::TopicConfig {
                message_timestamp_type: Some(TimestampType::LogAppendTime),
                compression_type: Some(CompressionType::Zstd),
                ..c
            })
        };
        let topics = &route.front.ctx.topics;
        topics.set_config("big", formatted, false).await.unwrap();
        // Beside the large message, a small one stamped in 2001.
        let small = AmqpMessage {
            exchange: "in".into(),
            routing_key: "k".into(),
            properties: BasicProperties::default().with_timestamp(1_000_000_000),
            body: Bytes::from_static(b"small"),
        };
        route
            .stage
            .append(&[crate::staged::from_amqp(&small)])
            .await
            .unwrap();
        let before = ferry_stage::now_ms() as i64;
        let mut batch = route.lease().await;
        let sink = route.sink(0, injected).await;
        let outcomes = deliver_in_store(&route.stage, route.holder, &sink, &mut batch)
            .await
            .unwrap();
        assert_eq!(outcomes, [Outcome::Delivered, Outcome::Delivered]);
        let after = ferry_stage::now_ms() as i64;
        // The large batch is read alone: the small one from the offset after it.
        let mut records = route.records(1, PATIENCE).await;
        let port = KafkaPort::new(route.front.ctx.clone());
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while records.len() < 2 && tokio::time::Instant::now() < deadline {
            let tx = route.front.ctx.db.begin().unwrap();
            let read = port
                .read_committed_in(&tx, &route.partition, 1, 1 << 20)
                .await;
            records.extend(read.unwrap().map(|r| r.records).unwrap_or_default());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let whole: Vec<bool> = records
            .iter()
            .zip([&route.body, &small.body])
            .map(|(r, sent)| r.value.as_ref() == Some(sent))
            .collect();
        let sizes: Vec<usize> = records
            .iter()
            .map(|r| r.value.as_ref().map_or(0, Bytes::len))
            .collect();
        assert_eq!(whole, [true, true], "whole, in order: {sizes:?}");
        for r in &records {
            let t = r.timestamp_ms.unwrap();
            assert!((before..=after).contains(&t), "{t}: the append time");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_record_whose_transaction_fails_is_not_staged_and_its_spill_is_collected() {
        let route = Route::start().await;
        let mut batch = route.lease().await;
        let sink = route.sink(usize::MAX, injected).await;
        let failed = deliver_in_store(&route.stage, route.holder, &sink, &mut batch).await;
        assert!(matches!(failed, Err(StageError::Corrupt(_))), "{failed:?}");
        let form = batch[0]
            .stored
            .clone()
            .expect("the batch was spilled first");
        assert!(form.spill.len > LARGE as u64);
        assert_eq!(route.spilled().await, form.spill.len as i64, "held");
        assert_eq!(route.stage.depth().await.unwrap().in_flight, 1);

        // The route stops (or Ferry restarts): its holder is released.
        route.holders.release(route.holder).await.unwrap();
        assert_eq!(route.spilled().await, 0, "the spill is collected");
        let records = route.records(1, Duration::from_secs(1)).await;
        assert!(records.is_empty(), "nothing reached the log");
        assert_eq!(
            route.stage.depth().await.unwrap().ready,
            1,
            "and the message is back"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_record_is_staged_once_by_reference_after_failed_and_retried_transactions() {
        let route = Route::start().await;
        let mut batch = route.lease().await;
        let failing = route.sink(1, injected).await;
        let failed = deliver_in_store(&route.stage, route.holder, &failing, &mut batch).await;
        assert!(failed.is_err());
        let form = batch[0]
            .stored
            .clone()
            .expect("the batch was spilled first");

        // The next attempt conflicts once (the store runs it again), then commits; it
        // stores the form already spilled.
        let conflicting = route.sink(1, conflict).await;
        let outcomes = deliver_in_store(&route.stage, route.holder, &conflicting, &mut batch)
            .await
            .unwrap();
        assert_eq!(outcomes, [Outcome::Delivered]);
        assert_eq!(
            conflicting.failures.load(Ordering::Relaxed),
            0,
            "it conflicted"
        );
        assert_eq!(batch[0].stored.as_ref(), Some(&form));

        let records = route.records(1, PATIENCE).await;
        assert_eq!(records.len(), 1, "one record");
        assert_eq!(records[0].value.as_ref(), Some(&route.body), "whole");
        let again = route.records(2, Duration::from_secs(1)).await;
        assert_eq!(again.len(), 1, "once");
        let depth = route.stage.depth().await.unwrap();
        assert_eq!((depth.ready, depth.in_flight), (0, 0), "acknowledged");
        // The log's reference alone keeps the spill, not the route's holder.
        route.holders.release(route.holder).await.unwrap();
        assert_eq!(route.spilled().await, form.spill.len as i64);
    }

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
