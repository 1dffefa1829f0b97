//! `ferry bench kafka`: a Kafka load tool on librdkafka (rdkafka), for any broker — Ferry
//! or another Kafka-compatible one — so both are measured with the same client.
//!
//! Phase 1 (produce): `records` records of `size` bytes, acks=all, as fast as the broker
//! takes them with at most `in_flight` unacknowledged; records/s, MB/s and the latency from
//! send to acknowledgement. Phase 2 (fetch): a consumer group reads them all back;
//! records/s and MB/s. Phase 3 (end to end): a group consumer waits at the end of the
//! topic (its group's offsets are committed there before it joins) while a producer sends at `load` × the phase-1 rate for `latency_seconds`; for
//! every record, the time from its acknowledgement to the consumer receiving it.
//!
//! `--property KEY=VALUE` passes librdkafka properties to every client, e.g.
//! `security.protocol=SSL` and `ssl.ca.location=ca.pem` for a TLS listener.

use super::Percentiles;
use super::cpu::CpuMeter;
use futures::stream::{FuturesUnordered, StreamExt};
use rdkafka::ClientConfig;
use rdkafka::TopicPartitionList;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::Timeout;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a single client operation may take before the run is abandoned.
const PATIENCE: Duration = Duration::from_secs(60);
/// How long the end-to-end consumer waits for a record before it stops.
const IDLE: Duration = Duration::from_secs(5);

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct KafkaBench {
    /// `bootstrap.servers` of the broker to measure.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic to use (created with `partitions` partitions when missing).
    #[arg(long, default_value = "ferry-bench")]
    pub topic: String,
    /// Partitions of the topic when it is created.
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// Records to produce and then consume.
    #[arg(long, default_value_t = 200_000)]
    pub records: usize,
    /// Record value size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Most records sent and not yet acknowledged.
    #[arg(long, default_value_t = 20_000)]
    pub in_flight: usize,
    /// Whether the producer is idempotent (`enable.idempotence`).
    #[arg(long, default_value_t = false)]
    pub idempotence: bool,
    /// Producer `linger.ms`.
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u64,
    /// Fraction of the phase-1 produce rate at which the end-to-end phase sends.
    #[arg(long, default_value_t = 0.5)]
    pub load: f64,
    /// Length of the end-to-end phase.
    #[arg(long, default_value_t = 10)]
    pub latency_seconds: u64,
    /// PID of the broker process (`ferry run`, say) on this machine: the produce and fetch
    /// phases then also report the broker's CPU time per record.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// A librdkafka property for every client (admin, producer, consumer), repeatable:
    /// `--property security.protocol=SSL --property ssl.ca.location=ca.pem`. The bench's
    /// own producer and consumer settings (acks, linger.ms, group.id, …) take precedence.
    #[arg(long = "property", value_name = "KEY=VALUE", value_parser = property)]
    pub properties: Vec<(String, String)>,
}

/// Parses a `--property` argument, `KEY=VALUE` (the value may hold `=`).
fn property(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE, a librdkafka property".to_owned()),
    }
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A client could not be created or failed.
    #[error("the Kafka client failed: {0}")]
    Client(#[from] KafkaError),
    /// The broker refused to create the topic.
    #[error("cannot create topic '{topic}': {code}")]
    Topic {
        /// The topic.
        topic: String,
        /// The broker's error.
        code: RDKafkaErrorCode,
    },
    /// A topic to read does not exist.
    #[error("topic '{0}' does not exist (or has no partitions)")]
    NoTopic(String),
    /// A phase did not finish in time.
    #[error("{0} did not finish within {PATIENCE:?}")]
    Stalled(&'static str),
}

/// Runs the benchmark against `bench.bootstrap` and prints its figures.
///
/// # Errors
/// [`BenchError`] when a client fails or a phase stalls.
pub async fn run(bench: &KafkaBench) -> Result<(), BenchError> {
    println!(
        "kafka bench: {} records of {} B to {} ({} partitions), acks=all, idempotence {}, linger {} ms, {} in flight",
        bench.records,
        bench.size,
        bench.bootstrap,
        bench.partitions,
        bench.idempotence,
        bench.linger_ms,
        bench.in_flight
    );
    create_topic(bench).await?;
    let producer = producer(bench)?;

    let meter = CpuMeter::start(bench.broker_pid);
    let started = Instant::now();
    let mut latencies = produce_all(&producer, bench, bench.records).await?;
    let elapsed = started.elapsed();
    let produce_cpu = meter.per_message(bench.records as u64);
    let produce_rate = bench.records as f64 / elapsed.as_secs_f64();
    let produce_latency = Percentiles::of(&mut latencies);
    println!(
        "produce: {:.0} records/s, {:.1} MB/s; latency {produce_latency} ({produce_cpu})",
        produce_rate,
        produce_rate * bench.size as f64 / 1e6
    );

    let meter = CpuMeter::start(bench.broker_pid);
    let fetch_rate = fetch_all(bench).await?;
    let fetch_cpu = meter.per_message(bench.records as u64);
    println!(
        "fetch:   {:.0} records/s, {:.1} MB/s (one consumer group member) ({fetch_cpu})",
        fetch_rate,
        fetch_rate * bench.size as f64 / 1e6
    );

    let latency_rate = produce_rate * bench.load;
    let (mut end_to_end, mut send_to_receive) = end_to_end(&producer, bench, latency_rate).await?;
    let end_to_end = Percentiles::of(&mut end_to_end);
    let send_to_receive = Percentiles::of(&mut send_to_receive);
    println!(
        "end to end at {:.0} records/s ({:.0}% of the produce rate): acknowledged → consumed {end_to_end}; sent → consumed {send_to_receive}",
        latency_rate,
        bench.load * 100.0
    );
    Ok(())
}

/// A client of `bench.bootstrap` (also `ferry bench bridge`'s, for its topic).
pub(super) fn client(bench: &KafkaBench) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &bench.bootstrap)
        .set("broker.address.family", "v4");
    for (key, value) in &bench.properties {
        c.set(key, value);
    }
    c
}

/// Creates `bench.topic` with `bench.partitions` partitions unless it exists (also for
/// `ferry bench bridge`'s topic on a real broker).
pub(super) async fn create_topic(bench: &KafkaBench) -> Result<(), BenchError> {
    let admin: AdminClient<DefaultClientContext> = client(bench).create()?;
    let topic = NewTopic::new(&bench.topic, bench.partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(Timeout::After(PATIENCE)));
    match admin.create_topics(&[topic], &options).await?.pop() {
        Some(Err((_, code))) if code != RDKafkaErrorCode::TopicAlreadyExists => {
            Err(BenchError::Topic {
                topic: bench.topic.clone(),
                code,
            })
        }
        _ => Ok(()),
    }
}

fn producer(bench: &KafkaBench) -> Result<FutureProducer, BenchError> {
    Ok(producer_config(bench).create()?)
}

/// The settings of every phase's producer (also of `ferry bench bridge`'s, filling its
/// topic).
pub(super) fn producer_config(bench: &KafkaBench) -> ClientConfig {
    let mut c = client(bench);
    c.set("acks", "all")
        .set("enable.idempotence", bench.idempotence.to_string())
        .set("linger.ms", bench.linger_ms.to_string())
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "2097151")
        .set("message.timeout.ms", "120000");
    c
}

/// A record value of `size` bytes starting with `index`.
fn value(index: u64, size: usize) -> Vec<u8> {
    let mut v = vec![b'x'; size.max(8)];
    v[..8].copy_from_slice(&index.to_be_bytes());
    v
}

/// Sends `count` records with at most `in_flight` outstanding; the latency of each.
pub(super) async fn produce_all(
    producer: &FutureProducer,
    bench: &KafkaBench,
    count: usize,
) -> Result<Vec<Duration>, BenchError> {
    let mut pending = FuturesUnordered::new();
    let mut latencies = Vec::with_capacity(count);
    for i in 0..count as u64 {
        if pending.len() >= bench.in_flight {
            latencies.push(next_ack(&mut pending).await?);
        }
        let payload = value(i, bench.size);
        let topic = bench.topic.clone();
        pending.push(async move {
            let sent = Instant::now();
            producer
                .send(
                    FutureRecord::<(), _>::to(&topic).payload(&payload),
                    Timeout::After(PATIENCE),
                )
                .await
                .map(|_| sent.elapsed())
                .map_err(|(e, _)| e)
        });
    }
    while !pending.is_empty() {
        latencies.push(next_ack(&mut pending).await?);
    }
    Ok(latencies)
}

async fn next_ack<F>(pending: &mut FuturesUnordered<F>) -> Result<Duration, BenchError>
where
    F: Future<Output = Result<Duration, KafkaError>>,
{
    match pending.next().await {
        Some(r) => Ok(r?),
        None => Err(BenchError::Stalled("the produce phase")),
    }
}

/// A consumer in a new group, starting where the group committed or else at `reset`.
pub(super) fn consumer(bench: &KafkaBench, reset: &str) -> Result<StreamConsumer, BenchError> {
    let consumer: StreamConsumer = client(bench)
        .set("group.id", format!("ferry-bench-{:08x}", fastrand::u32(..)))
        .set("auto.offset.reset", reset)
        .set("enable.auto.commit", "true")
        .set("fetch.wait.max.ms", "100")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "10485760")
        .create()?;
    Ok(consumer)
}

/// Reads every record of phase 1 with a new group; records per second.
async fn fetch_all(bench: &KafkaBench) -> Result<f64, BenchError> {
    let consumer = consumer(bench, "earliest")?;
    consumer.subscribe(&[bench.topic.as_str()])?;
    let mut read = 0usize;
    let mut started = None;
    while read < bench.records {
        let m = tokio::time::timeout(PATIENCE, consumer.recv())
            .await
            .map_err(|_| BenchError::Stalled("the fetch phase"))??;
        started.get_or_insert_with(Instant::now);
        if m.payload().is_some() {
            read += 1;
        }
    }
    let elapsed = started.map_or(Duration::ZERO, |s| s.elapsed());
    Ok(read as f64 / elapsed.as_secs_f64().max(1e-9))
}

/// A consumer in a new group that starts at the current end of every partition of
/// `bench.topic` (also `ferry bench soak`'s), once it holds them all: the group's offsets
/// are committed there before it subscribes (an offset reset to "latest" may resolve after
/// the first records are sent). Records that arrive while it joins are skipped, so nothing
/// should be sent to the topic before it returns.
///
/// # Errors
/// The topic does not exist, the broker refuses, or the group is not joined within
/// [`PATIENCE`].
pub(super) async fn join_at_end(bench: &KafkaBench) -> Result<StreamConsumer, BenchError> {
    let consumer = consumer(bench, "earliest")?;
    let metadata = consumer.fetch_metadata(Some(&bench.topic), Timeout::After(PATIENCE))?;
    let partitions = metadata
        .topics()
        .iter()
        .find(|t| t.name() == bench.topic)
        .map(|t| t.partitions().len())
        .filter(|n| *n > 0)
        .ok_or_else(|| BenchError::NoTopic(bench.topic.clone()))?;
    let mut ends = TopicPartitionList::new();
    for partition in 0..partitions as i32 {
        let (_, end) =
            consumer.fetch_watermarks(&bench.topic, partition, Timeout::After(PATIENCE))?;
        ends.add_partition_offset(&bench.topic, partition, rdkafka::Offset::Offset(end))?;
    }
    consumer.commit(&ends, CommitMode::Sync)?;
    consumer.subscribe(&[bench.topic.as_str()])?;
    tokio::time::timeout(PATIENCE, async {
        while consumer.assignment().map_or(0, |a| a.count()) < partitions {
            let _ = tokio::time::timeout(Duration::from_millis(100), consumer.recv()).await;
        }
    })
    .await
    .map_err(|_| BenchError::Stalled("joining the consumer group"))?;
    Ok(consumer)
}

/// Sends at `rate` for `latency_seconds` while a consumer waits at the end of the topic;
/// per record, acknowledged → received and sent → received.
async fn end_to_end(
    producer: &FutureProducer,
    bench: &KafkaBench,
    rate: f64,
) -> Result<(Vec<Duration>, Vec<Duration>), BenchError> {
    let count = (rate * bench.latency_seconds as f64) as usize;
    let consumer = Arc::new(join_at_end(bench).await?);
    let base = 1u64 << 40;
    let reader = {
        let consumer = consumer.clone();
        tokio::spawn(async move {
            let mut received = vec![None; count];
            let mut seen = 0;
            while seen < count {
                let m = match tokio::time::timeout(IDLE, consumer.recv()).await {
                    Ok(Ok(m)) => m,
                    Ok(Err(_)) => continue,
                    Err(_) => break,
                };
                let now = Instant::now();
                let index = m
                    .payload()
                    .and_then(|p| p.get(..8))
                    .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
                if let Some(i) = index.and_then(|i| i.checked_sub(base))
                    && let Some(slot) = received.get_mut(i as usize)
                    && slot.is_none()
                {
                    *slot = Some(now);
                    seen += 1;
                }
            }
            received
        })
    };
    let interval = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let started = Instant::now();
    let mut pending = FuturesUnordered::new();
    let mut acks: Vec<Option<(Instant, Instant)>> = vec![None; count];
    for i in 0..count {
        // Paced: record i leaves at started + i × interval.
        tokio::time::sleep_until((started + interval * i as u32).into()).await;
        while let Some(Some(done)) = futures::FutureExt::now_or_never(pending.next()) {
            let (index, sent, acked): (usize, Instant, Result<Instant, KafkaError>) = done;
            acks[index] = Some((sent, acked?));
        }
        let payload = value(base + i as u64, bench.size);
        let topic = bench.topic.clone();
        pending.push(async move {
            let sent = Instant::now();
            let acked = producer
                .send(
                    FutureRecord::<(), _>::to(&topic).payload(&payload),
                    Timeout::After(PATIENCE),
                )
                .await
                .map(|_| Instant::now())
                .map_err(|(e, _)| e);
            (i, sent, acked)
        });
    }
    while let Some((index, sent, acked)) = pending.next().await {
        acks[index] = Some((sent, acked?));
    }
    let received = reader
        .await
        .map_err(|_| BenchError::Stalled("the end-to-end consumer"))?;
    let mut after_ack = Vec::with_capacity(count);
    let mut after_send = Vec::with_capacity(count);
    for (ack, got) in acks.iter().zip(&received) {
        if let (Some((sent, acked)), Some(got)) = (ack, got) {
            after_ack.push(got.saturating_duration_since(*acked));
            after_send.push(got.saturating_duration_since(*sent));
        }
    }
    if after_ack.len() < count {
        println!(
            "end to end: the consumer received {} of the {count} records acknowledged, then nothing for {IDLE:?}; figures are over those received",
            after_ack.len()
        );
    }
    Ok((after_ack, after_send))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: KafkaBench,
    }

    #[test]
    fn properties_reach_every_client_in_order() {
        let cli = Cli::try_parse_from([
            "bench",
            "--property",
            "security.protocol=SSL",
            "--property",
            "ssl.ca.location=/tmp/a=b.pem",
        ])
        .unwrap();
        let config = client(&cli.bench);
        assert_eq!(config.get("security.protocol"), Some("SSL"));
        assert_eq!(config.get("ssl.ca.location"), Some("/tmp/a=b.pem"));
    }

    #[test]
    fn a_property_without_a_key_and_value_is_refused() {
        for bad in ["security.protocol", "=SSL"] {
            let err = Cli::try_parse_from(["bench", "--property", bad])
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains("expected KEY=VALUE"), "{bad}: {err}");
        }
    }
}
