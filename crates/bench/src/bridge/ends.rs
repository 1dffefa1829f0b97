//! The ends of a bench move: a durable queue on the RabbitMQ under test, or a Kafka topic
//! ([`BenchKafka`]): on librdkafka's in-process mock cluster (one broker, started afresh
//! per run, so a Kafka path's one phase finds the topic empty) or, with
//! `--kafka-bootstrap`, on a Kafka-protocol broker (such as Ferry's own Kafka front), where
//! the topic is created for the run and deleted after it. An end is prepared (a queue
//! deleted and declared afresh), filled, named as the bridge's source or sink, counted while
//! the mover runs ([`Gauge`]) and removed.
//!
//! The mock broker keeps only the newest [`MOCK_PARTITION_BYTES`] of each partition and
//! silently drops older record batches, so its topic gets enough partitions
//! ([`partitions`], at least [`MIN_PARTITIONS`]) to keep every record of a run, and a
//! filled topic is checked for dropped records. A real broker writes a marker that takes an
//! offset at the end of every transaction, so a topic filled by the transactional sink is
//! counted by reading its committed records, not by its watermarks.

use super::BridgeBench;
use crate::amqp::{AmqpBench, publish_phase};
use crate::kafka::{KafkaBench, client, consumer, create_topic, produce_all, producer_config};
use anyhow::Context;
use ferry_config::bridge::{DEFAULT_DEDUP_WINDOW_MS, DEFAULT_PARTITIONER};
use ferry_config::{AmqpTlsConfig, SinkConfig, SourceConfig};
use lapin::Channel;
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer};
use rdkafka::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The Kafka paths' topic (on a `--kafka-bootstrap` broker, with a suffix of the run's
/// own); its name is also the bridge's Kafka source's consumer group.
const TOPIC: &str = "ferry-bench-bridge";
/// Fewest partitions of the topic; a `--kafka-bootstrap` broker's topic gets this many.
const MIN_PARTITIONS: i32 = 4;
/// What librdkafka's mock broker keeps of a partition: the newest 5 MiB of record batches
/// (`max_size` in `rdkafka_mock.c`, not configurable).
const MOCK_PARTITION_BYTES: u64 = 5 << 20;
/// A record's share of its record batch beyond its value, generously (a v2 record header
/// of a dozen bytes and a 61-byte batch header shared by the batch's records).
const RECORD_OVERHEAD: u64 = 64;
/// Longest one watermark request may take.
const WATERMARK_PATIENCE: Duration = Duration::from_secs(10);
/// Records the topic's filling producer may have unacknowledged.
const IN_FLIGHT: usize = 20_000;
/// How long a count of a topic's committed records waits for the next one.
const COUNT_WAIT: Duration = Duration::from_millis(5);

/// Partitions of the mock cluster's topic for `--messages` records of `--size` bytes: at
/// least [`MIN_PARTITIONS`], and enough that each, filled to three quarters of what the mock
/// broker keeps, holds its share (records are spread at random, so shares differ a little).
fn partitions(bench: &BridgeBench) -> i32 {
    let record = bench.size.max(8) as u64 + RECORD_OVERHEAD;
    let needed = (bench.messages * record).div_ceil(MOCK_PARTITION_BYTES * 3 / 4);
    i32::try_from(needed)
        .unwrap_or(i32::MAX)
        .max(MIN_PARTITIONS)
}

/// The Kafka side of a Kafka path; dropping it stops a mock cluster.
pub(super) struct BenchKafka {
    /// The mock cluster, kept only to keep it up; `None` on a `--kafka-bootstrap` broker.
    _mock: Option<MockCluster<'static, DefaultProducerContext>>,
    /// The run's topic.
    topic: KafkaTopic,
}

impl BenchKafka {
    /// Starts a one-broker mock cluster and creates [`TOPIC`] on it with [`partitions`],
    /// or creates a topic of the run's own on the `--kafka-bootstrap` broker.
    ///
    /// # Errors
    /// librdkafka cannot start the cluster, or the broker cannot create the topic.
    pub(super) async fn start(bench: &BridgeBench) -> anyhow::Result<Self> {
        if let Some(bootstrap) = &bench.kafka_bootstrap {
            let topic = KafkaTopic {
                bootstrap: bootstrap.clone(),
                name: format!("{TOPIC}-{:08x}", fastrand::u32(..)),
                partitions: MIN_PARTITIONS,
                mock: false,
            };
            create_topic(&kafka_bench(&topic, bench)).await?;
            return Ok(Self { _mock: None, topic });
        }
        let partitions = partitions(bench);
        let cluster = MockCluster::new(1).context("cannot start librdkafka's mock cluster")?;
        cluster
            .create_topic(TOPIC, partitions, 1)
            .with_context(|| format!("cannot create topic '{TOPIC}' on the mock cluster"))?;
        let topic = KafkaTopic {
            bootstrap: cluster.bootstrap_servers(),
            name: TOPIC.into(),
            partitions,
            mock: true,
        };
        Ok(Self {
            _mock: Some(cluster),
            topic,
        })
    }

    /// The run's topic as an end.
    pub(super) fn topic(&self) -> End {
        End::Topic(self.topic.clone())
    }
}

/// The topic of a Kafka path.
#[derive(Debug, Clone)]
pub(super) struct KafkaTopic {
    /// Its broker's `bootstrap.servers`.
    bootstrap: String,
    /// Its name, also the consumer group of the bridge's Kafka source.
    name: String,
    /// Its partitions.
    partitions: i32,
    /// Whether it is on the mock cluster.
    mock: bool,
}

/// One end of a move.
pub(super) enum End {
    /// A durable queue of `--queue-type` on the RabbitMQ at `--uri`.
    Queue(&'static str),
    /// The topic of a [`BenchKafka`].
    Topic(KafkaTopic),
}

impl End {
    /// What the end is, for the run's header.
    pub(super) fn describe(&self, bench: &BridgeBench) -> String {
        match self {
            Self::Queue(queue) => format!("{} queue '{queue}'", bench.queue_type),
            Self::Topic(t) if t.mock => format!(
                "topic '{}' ({} partitions) of librdkafka's mock cluster at {}",
                t.name, t.partitions, t.bootstrap
            ),
            Self::Topic(t) => format!(
                "topic '{}' ({} partitions) at {}",
                t.name, t.partitions, t.bootstrap
            ),
        }
    }

    /// Makes the end empty: a queue is deleted and declared afresh (a queue of another type
    /// from an earlier run cannot be redeclared); the topic is new, so empty already.
    ///
    /// # Errors
    /// The broker refuses.
    pub(super) async fn prepare(&self, bench: &BridgeBench, ch: &Channel) -> anyhow::Result<()> {
        let Self::Queue(queue) = self else {
            return Ok(());
        };
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString(bench.queue_type.as_str().into()),
        );
        ch.queue_delete((*queue).into(), QueueDeleteOptions::default())
            .await?;
        ch.queue_declare(
            (*queue).into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            args,
        )
        .await?;
        Ok(())
    }

    /// Puts `--messages` messages of `--size` bytes in: persistent publishes with
    /// confirms, or records produced with acks=all by an idempotent producer, each to a
    /// random partition.
    ///
    /// # Errors
    /// A publish or produce fails, a record is not acknowledged in time, or the mock broker
    /// dropped records it acknowledged.
    pub(super) async fn fill(&self, bench: &BridgeBench) -> anyhow::Result<()> {
        match self {
            Self::Queue(queue) => {
                let fill = AmqpBench {
                    uri: bench.uri.clone(),
                    ca_file: None,
                    cert_file: None,
                    key_file: None,
                    messages: bench.messages,
                    size: bench.size,
                    confirm_window: 1000,
                    prefetch: bench.prefetch,
                    producers: 1,
                    consumers: 1,
                    queue_type: bench.queue_type.clone(),
                    queue: (*queue).into(),
                    latency_messages: 0,
                    broker_pid: None,
                };
                publish_phase(&fill, &AmqpTlsConfig::default()).await?;
            }
            Self::Topic(topic) => {
                let fill = kafka_bench(topic, bench);
                // Unkeyed records to a random partition each, not to one partition per
                // batch: every partition gets its share, none more than the broker keeps.
                let producer: FutureProducer = producer_config(&fill)
                    .set("sticky.partitioning.linger.ms", "0")
                    .create()?;
                produce_all(&producer, &fill, fill.records).await?;
                if !topic.mock {
                    return Ok(());
                }
                let reader = Arc::new(consumer(&fill, "earliest")?);
                let marks = watermarks(reader, topic).await?;
                if let Some((partition, (low, _))) =
                    marks.iter().enumerate().find(|(_, (low, _))| *low > 0)
                {
                    anyhow::bail!(
                        "the mock broker dropped the first {low} records of partition {partition} (it keeps the newest {MOCK_PARTITION_BYTES} B of each); fewer --messages or a smaller --size"
                    );
                }
            }
        }
        Ok(())
    }

    /// The end as the bridge's source.
    pub(super) fn source(&self, bench: &BridgeBench) -> SourceConfig {
        match self {
            Self::Queue(queue) => SourceConfig::Rabbitmq {
                uri: bench.uri.clone().into(),
                queue: (*queue).into(),
                prefetch: bench.prefetch,
                dedup_window_ms: DEFAULT_DEDUP_WINDOW_MS,
                tls: Default::default(),
            },
            Self::Topic(topic) => SourceConfig::Kafka {
                bootstrap_servers: topic.bootstrap.clone(),
                topics: vec![topic.name.clone()],
                group_id: topic.name.clone(),
                properties: Default::default(),
                security: Default::default(),
            },
        }
    }

    /// The end as the bridge's sink: a queue through the default exchange.
    pub(super) fn sink(&self, bench: &BridgeBench) -> SinkConfig {
        match self {
            Self::Queue(queue) => SinkConfig::Rabbitmq {
                uri: bench.uri.clone().into(),
                exchange: String::new(),
                routing_key: Some((*queue).into()),
                tls: Default::default(),
            },
            Self::Topic(topic) => SinkConfig::Kafka {
                bootstrap_servers: topic.bootstrap.clone(),
                topic: topic.name.clone(),
                partitioner: DEFAULT_PARTITIONER.into(),
                transactional: bench.kafka_transactional,
                properties: Default::default(),
                security: Default::default(),
            },
        }
    }

    /// Counts what the end holds: a queue's messages on `ch`; the topic's records, by its
    /// watermarks or, for a transactional sink's topic on a real broker (whose markers
    /// take offsets), by reading its committed records.
    ///
    /// # Errors
    /// The Kafka client cannot be created or cannot be assigned the topic.
    pub(super) fn gauge<'a>(
        &self,
        bench: &BridgeBench,
        ch: &'a Channel,
    ) -> anyhow::Result<Gauge<'a>> {
        Ok(match self {
            Self::Queue(queue) => Gauge::Queue(ch, queue),
            Self::Topic(topic) if bench.kafka_transactional && !topic.mock => {
                let reader: StreamConsumer = client(&kafka_bench(topic, bench))
                    .set("group.id", format!("{}-count", topic.name))
                    .set("isolation.level", "read_committed")
                    .set("enable.auto.commit", "false")
                    .set("fetch.wait.max.ms", "100")
                    .create()?;
                let mut all = TopicPartitionList::new();
                for partition in 0..topic.partitions {
                    all.add_partition_offset(&topic.name, partition, Offset::Beginning)?;
                }
                reader.assign(&all)?;
                Gauge::Records(reader, AtomicU64::new(0))
            }
            Self::Topic(topic) => {
                let reader = consumer(&kafka_bench(topic, bench), "earliest")?;
                Gauge::Watermarks(Arc::new(reader), topic.clone())
            }
        })
    }

    /// Deletes a queue the run declared, or a topic it created on a real broker.
    ///
    /// # Errors
    /// The broker refuses.
    pub(super) async fn remove(&self, bench: &BridgeBench, ch: &Channel) -> anyhow::Result<()> {
        match self {
            Self::Queue(queue) => {
                ch.queue_delete((*queue).into(), QueueDeleteOptions::default())
                    .await?;
            }
            Self::Topic(topic) if !topic.mock => {
                let admin: AdminClient<DefaultClientContext> =
                    client(&kafka_bench(topic, bench)).create()?;
                let deleted = admin
                    .delete_topics(&[&topic.name], &AdminOptions::new())
                    .await?;
                for result in deleted {
                    result.map_err(|(name, code)| {
                        anyhow::anyhow!("cannot delete topic '{name}': {code}")
                    })?;
                }
            }
            Self::Topic(_) => {}
        }
        Ok(())
    }
}

/// How many messages an end holds.
pub(super) enum Gauge<'a> {
    /// A queue's ready messages, read with a passive declare.
    Queue(&'a Channel, &'static str),
    /// The sum of the high watermarks of the topic's partitions.
    Watermarks(Arc<StreamConsumer>, KafkaTopic),
    /// The committed records a `read_committed` reader of every partition has read so far.
    Records(StreamConsumer, AtomicU64),
}

impl Gauge<'_> {
    /// The count now.
    ///
    /// # Errors
    /// The broker does not answer.
    pub(super) async fn count(&self) -> anyhow::Result<u64> {
        match self {
            Self::Queue(ch, queue) => {
                let q = ch
                    .queue_declare(
                        (*queue).into(),
                        QueueDeclareOptions {
                            passive: true,
                            ..QueueDeclareOptions::default()
                        },
                        FieldTable::default(),
                    )
                    .await?;
                Ok(u64::from(q.message_count()))
            }
            Self::Watermarks(reader, topic) => {
                let marks = watermarks(reader.clone(), topic).await?;
                let sum: i64 = marks.iter().map(|(_, high)| high).sum();
                Ok(u64::try_from(sum).unwrap_or_default())
            }
            Self::Records(reader, counted) => {
                while let Ok(record) = tokio::time::timeout(COUNT_WAIT, reader.recv()).await {
                    record?;
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                Ok(counted.load(Ordering::Relaxed))
            }
        }
    }
}

/// The (low, high) watermarks of `topic`'s partitions, in partition order.
async fn watermarks(
    reader: Arc<StreamConsumer>,
    topic: &KafkaTopic,
) -> anyhow::Result<Vec<(i64, i64)>> {
    let (name, partitions) = (topic.name.clone(), topic.partitions);
    // Each request blocks on a broker round trip.
    let marks = tokio::task::spawn_blocking(move || {
        (0..partitions)
            .map(|partition| reader.fetch_watermarks(&name, partition, WATERMARK_PATIENCE))
            .collect::<Result<Vec<_>, KafkaError>>()
    })
    .await?
    .with_context(|| format!("cannot read the watermarks of topic '{}'", topic.name))?;
    Ok(marks)
}

/// `ferry bench kafka`'s settings for filling and reading `topic`.
fn kafka_bench(topic: &KafkaTopic, bench: &BridgeBench) -> KafkaBench {
    KafkaBench {
        bootstrap: topic.bootstrap.clone(),
        topic: topic.name.clone(),
        partitions: topic.partitions,
        records: bench.messages as usize,
        size: bench.size,
        in_flight: IN_FLIGHT,
        idempotence: true,
        linger_ms: 5,
        load: 0.0,
        latency_seconds: 0,
        broker_pid: None,
        properties: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BridgeBench,
    }

    fn bench(messages: u64, size: usize) -> BridgeBench {
        let (messages, size) = (messages.to_string(), size.to_string());
        Cli::parse_from(["bench", "--messages", &messages, "--size", &size]).bench
    }

    #[test]
    fn the_topic_has_room_for_every_record_within_what_the_mock_keeps() {
        for (messages, size) in [(1, 1), (20_000, 1024), (100_000, 1024), (1_000_000, 16)] {
            let b = bench(messages, size);
            let partitions = partitions(&b);
            assert!(partitions >= MIN_PARTITIONS);
            let per_partition = messages * (size.max(8) as u64 + RECORD_OVERHEAD)
                / u64::try_from(partitions).unwrap();
            assert!(
                per_partition <= MOCK_PARTITION_BYTES * 3 / 4,
                "{messages} × {size} B over {partitions} partitions"
            );
        }
        assert_eq!(partitions(&bench(20_000, 1024)), 6);
    }
}
