//! `ferry bench bridge`: moving persistent messages through Ferry's bridge, run in this
//! process on an embedded store in a directory under the system's temporary directory
//! (removed afterwards), along one of three paths (`--path`):
//! - `rabbitmq-rabbitmq` (default): from one RabbitMQ queue to another, and the same move
//!   through RabbitMQ's own Shovel plugin (a dynamic shovel with `ack-mode: on-confirm`),
//!   in the same run on the same broker;
//! - `kafka-rabbitmq`: from a topic on librdkafka's in-process mock cluster (or on the
//!   Kafka-protocol broker at `--kafka-bootstrap`) to a RabbitMQ queue;
//! - `rabbitmq-kafka`: from a RabbitMQ queue to a topic on the mock cluster or the
//!   `--kafka-bootstrap` broker (idempotent producer, or transactional with
//!   `--kafka-transactional`).
//!
//! Each phase fills the source ([`ends`]) with `messages` messages of `size` bytes
//! (publisher confirms; acks=all from an idempotent producer for a topic), empties the
//! destination, starts the mover ([`movers`]) and times until the destination holds every
//! message. The Shovel phase needs the plugin (`rabbitmq-plugins enable rabbitmq_shovel`)
//! and runs `rabbitmqctl`, so it is measured on the machine running the broker; Shovel does
//! not move to or from Kafka, so the Kafka paths have no Shovel phase. The mock cluster is
//! no throughput peer of a real Kafka cluster (an in-memory log in this process): on it the
//! Kafka paths measure Ferry's Kafka source and sink, not Kafka. `--kafka-bootstrap` puts a
//! durable broker in its place (here: a second Ferry's Kafka front).

mod ends;
mod movers;

use super::amqp::connect;
use super::cpu::CpuMeter;
use ends::{BenchKafka, End};
use ferry_config::AmqpTlsConfig;
use movers::{Stop, ferry_mover, shovel_mover};
use std::time::{Duration, Instant};

/// What `ferry bench bridge` moves messages between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BridgePath {
    /// RabbitMQ queue → Ferry → RabbitMQ queue, compared with Shovel.
    RabbitmqRabbitmq,
    /// Kafka topic (mock cluster) → Ferry → RabbitMQ queue.
    KafkaRabbitmq,
    /// RabbitMQ queue → Ferry → Kafka topic (mock cluster).
    RabbitmqKafka,
}

impl std::fmt::Display for BridgePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = clap::ValueEnum::to_possible_value(self).expect("no path is skipped");
        f.write_str(value.get_name())
    }
}

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct BridgeBench {
    /// What to move between: RabbitMQ queue to queue (compared with Shovel), or a topic on
    /// librdkafka's in-process mock cluster to or from a RabbitMQ queue.
    #[arg(long, value_enum, default_value_t = BridgePath::RabbitmqRabbitmq)]
    pub path: BridgePath,
    /// The RabbitMQ the queues live on.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    pub uri: String,
    /// Messages to move.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u64,
    /// Body size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// The bridge's RabbitMQ source's prefetch (the shovel's `src-prefetch-count` is the
    /// same).
    #[arg(long, default_value_t = 1000)]
    pub prefetch: u16,
    /// The route's batch.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// `x-queue-type` of the queues: classic or quorum.
    #[arg(long, default_value = "classic")]
    pub queue_type: String,
    /// Skip the Shovel phase (e.g. on a machine without the plugin).
    #[arg(long)]
    pub no_shovel: bool,
    /// The command that runs `rabbitmqctl` against the broker of `--uri`, for the Shovel
    /// phase; for a private node started by `scripts/rabbitmq-node.sh start DIR`:
    /// `--rabbitmqctl "scripts/rabbitmq-node.sh ctl DIR"`.
    #[arg(long, default_value = "rabbitmqctl")]
    pub rabbitmqctl: String,
    /// With `--path rabbitmq-kafka`: the Kafka sink produces in Kafka transactions
    /// (`transactional = true`) instead of only idempotently.
    #[arg(long)]
    pub kafka_transactional: bool,
    /// With a Kafka path: the `bootstrap.servers` of a Kafka-protocol broker (such as Ferry's
    /// own Kafka front, `ferry run`) to move through instead of librdkafka's mock cluster; a
    /// topic of 4 partitions is created for the run and deleted after it.
    #[arg(long)]
    pub kafka_bootstrap: Option<String>,
    /// PID of the RabbitMQ broker (`beam.smp`) on this machine: each phase then also
    /// reports the broker's CPU time per moved message, beside this process's (which runs
    /// Ferry's bridge).
    #[arg(long)]
    pub broker_pid: Option<u32>,
}

const SOURCE: &str = "ferry-bench-bridge-src";
const DESTINATION: &str = "ferry-bench-bridge-dst";

/// Runs the benchmark and prints its figures.
///
/// # Errors
/// A broker, mock cluster, store or `rabbitmqctl` error, or `--kafka-transactional`
/// on a path without a Kafka sink.
pub async fn run(bench: &BridgeBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        !bench.kafka_transactional || bench.path == BridgePath::RabbitmqKafka,
        "--kafka-transactional is for --path rabbitmq-kafka, the one path with a Kafka sink"
    );
    anyhow::ensure!(
        bench.kafka_bootstrap.is_none() || bench.path != BridgePath::RabbitmqRabbitmq,
        "--kafka-bootstrap is for --path kafka-rabbitmq and rabbitmq-kafka"
    );
    // `_kafka` keeps a mock cluster up until the run ends.
    let (from, to, _kafka) = match bench.path {
        BridgePath::RabbitmqRabbitmq => (End::Queue(SOURCE), End::Queue(DESTINATION), None),
        BridgePath::KafkaRabbitmq => {
            let kafka = BenchKafka::start(bench).await?;
            (kafka.topic(), End::Queue(DESTINATION), Some(kafka))
        }
        BridgePath::RabbitmqKafka => {
            let kafka = BenchKafka::start(bench).await?;
            (End::Queue(SOURCE), kafka.topic(), Some(kafka))
        }
    };
    let no_shovel = "no Shovel phase (Shovel does not move to or from Kafka)";
    let notes = match bench.path {
        BridgePath::RabbitmqRabbitmq => format!(" on {}", bench.uri),
        BridgePath::KafkaRabbitmq => format!(
            " (RabbitMQ at {}); the topic filled by an idempotent producer (acks=all); {no_shovel}",
            bench.uri
        ),
        BridgePath::RabbitmqKafka => format!(
            " (RabbitMQ at {}); unkeyed records, {} Kafka sink; {no_shovel}",
            bench.uri,
            if bench.kafka_transactional {
                "transactional"
            } else {
                "idempotent"
            }
        ),
    };
    println!(
        "bridge bench: {} persistent messages of {} B from {} to {}{notes}",
        bench.messages,
        bench.size,
        from.describe(bench),
        to.describe(bench),
    );
    let phases = phases(bench, &from, &to).await;
    // Removed whatever happened, so a run that fails midway leaves no queues behind.
    let removed = async {
        let admin = connect(&bench.uri, &AmqpTlsConfig::default()).await?;
        let ch = admin.create_channel().await?;
        for end in [&from, &to] {
            end.remove(bench, &ch).await?;
        }
        anyhow::Ok(())
    }
    .await;
    phases?;
    removed?;
    Ok(())
}

/// The Shovel phase (when there is one), then Ferry's.
async fn phases(bench: &BridgeBench, from: &End, to: &End) -> anyhow::Result<()> {
    let shovel = if bench.no_shovel || bench.path != BridgePath::RabbitmqRabbitmq {
        None
    } else {
        let mover = || shovel_mover(bench);
        let rate = phase(bench, "shovel (ack-mode on-confirm)", from, to, mover).await?;
        Some(rate)
    };
    let name = match bench.path {
        BridgePath::RabbitmqRabbitmq => "ferry bridge".to_owned(),
        path => format!("{path} ferry bridge"),
    };
    let mover = || ferry_mover(bench, from.source(bench), to.sink(bench));
    let ferry = phase(bench, &name, from, to, mover).await?;
    if let Some(shovel) = shovel {
        println!("ferry / shovel: {:.2}x", ferry / shovel);
    }
    Ok(())
}

/// Fills `from`, empties `to`, runs the mover `start` starts until `to` holds every
/// message, stops it and prints its rate.
async fn phase<F, Fut>(
    bench: &BridgeBench,
    name: &str,
    from: &End,
    to: &End,
    start: F,
) -> anyhow::Result<f64>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = anyhow::Result<Stop>>,
{
    let admin = connect(&bench.uri, &AmqpTlsConfig::default()).await?;
    let ch = admin.create_channel().await?;
    for end in [from, to] {
        end.prepare(bench, &ch).await?;
    }
    from.fill(bench).await?;
    let destination = to.gauge(bench, &ch)?;
    let meter = CpuMeter::start(bench.broker_pid);
    let started = Instant::now();
    let stop = start().await?;
    let deadline = started + Duration::from_secs(600);
    let mut first = None;
    let moved = async {
        loop {
            let moved = destination.count().await?;
            if moved > 0 {
                first.get_or_insert_with(|| started.elapsed());
            }
            if moved >= bench.messages {
                return Ok(started.elapsed());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{name}: only {moved} of {} messages moved in 10 minutes",
                bench.messages
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    .await;
    // Stopped either way, so a stalled run still removes its store.
    stop().await?;
    let cpu = meter.per_message(bench.messages);
    let rate = bench.messages as f64 / moved?.as_secs_f64();
    match (from, first) {
        // The source's consumer group join is inside the timed interval.
        (End::Topic { .. }, Some(first)) => println!(
            "{name:<30} {rate:>9.0} msg/s ({cpu}; first message after {:.1} s, the group join included)",
            first.as_secs_f64()
        ),
        _ => println!("{name:<30} {rate:>9.0} msg/s ({cpu})"),
    }
    Ok(rate)
}
