//! `--scenario flood`: publishers with no consumer, then one that drains what they left.
//!
//! Load phase (`--duration`): `--publishers` AMQP connections (lapin) publish persistent
//! messages of `--size` bytes to the durable queue `ferry-overload-flood`, which nobody
//! consumes, as fast as the broker confirms them (at most `--confirm-window` unconfirmed
//! each); and, with Kafka, `--kafka-producers` librdkafka producers (acks=all, linger 5 ms,
//! at most 10,000 records unacknowledged each) produce to the topic `ferry-overload-flood`,
//! which nobody reads. Counted as accepted: confirms (basic.ack) and acknowledged records,
//! per second, when they arrive.
//!
//! A broker at its memory high-water mark is expected to send `connection.blocked` to the
//! publishers (lapin reports it as a connection event, counted here; a blocked lapin
//! connection holds its next frame, so publishing stalls) and to throttle producers with
//! `throttle_time_ms` (read from librdkafka's statistics, every second per broker). Seconds
//! without a single confirm are counted too: a broker may also stall publishers without
//! saying so, by not reading their sockets.
//!
//! Drain phase (at most `--drain-timeout`): publishing stops; one consumer (prefetch 1000,
//! one ack per message) empties the queue, until nothing arrives for 5 s. Confirms of
//! publishes held up by a block may still come meanwhile and are counted. Kafka records are
//! not drained: a topic keeps them whether or not they are read; the topic is deleted at
//! the end, as is the queue.

mod blocks;
mod senders;

use super::probe::ROUND_TRIP_EVERY;
use super::raw::AmqpTarget;
use super::{Observer, OverloadBench, seconds};
use crate::amqp::connect;
use crate::broker::watch::{mib, rss_peaks};
use crate::broker::{CLEANUP_TIMEOUT, delete_queue, delete_topic, fresh_queue, kafka_bench};
use crate::kafka::{create_topic, producer_config};
use blocks::{summarize_blocks, watch_blocks};
use ferry_config::AmqpTlsConfig;
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use lapin::types::FieldTable;
use rdkafka::producer::FutureProducer;
use senders::{
    KAFKA_IN_FLIGHT, PerSecond, Sender, Throttle, ThrottleContext, compact, produce, publish,
    settle, stretch_rates, totals,
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The queue and the topic the flood fills.
const TARGET: &str = "ferry-overload-flood";
/// The drain ends when nothing arrived for this long.
const DRAIN_QUIET: Duration = Duration::from_secs(5);
/// The stretch over which accepted rates and memory are printed.
const STRETCH: Duration = Duration::from_secs(5);

/// The flood's sizes.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "flood")]
pub struct FloodArgs {
    /// AMQP publishing connections.
    #[arg(long, default_value_t = 4)]
    pub publishers: usize,
    /// Kafka producers (with `--kafka-bootstrap`).
    #[arg(long, default_value_t = 2)]
    pub kafka_producers: usize,
    /// Message and record size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Unconfirmed publishes an AMQP publisher may have.
    #[arg(long, default_value_t = 1000)]
    pub confirm_window: usize,
    /// Seconds of publishing.
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Longest the drain may take, in seconds.
    #[arg(long, default_value_t = 120)]
    pub drain_timeout: u64,
}

impl FloodArgs {
    /// The flood's flags, as a command line gives them.
    pub fn flags(&self) -> String {
        format!(
            "--publishers {} --kafka-producers {} --size {} --confirm-window {} --duration {} --drain-timeout {}",
            self.publishers,
            self.kafka_producers,
            self.size,
            self.confirm_window,
            self.duration,
            self.drain_timeout
        )
    }

    /// Checks the sizes' bounds.
    ///
    /// # Errors
    /// The first flag out of bounds, named.
    pub fn validate(&self) -> anyhow::Result<()> {
        seconds("--duration", self.duration)?;
        seconds("--drain-timeout", self.drain_timeout)?;
        anyhow::ensure!(
            (1..=1000).contains(&self.publishers),
            "--publishers {}: from 1 to 1000",
            self.publishers
        );
        anyhow::ensure!(
            self.kafka_producers <= 100,
            "--kafka-producers {}: at most 100",
            self.kafka_producers
        );
        anyhow::ensure!(
            (1..=100_000).contains(&self.confirm_window),
            "--confirm-window {}: from 1 to 100000",
            self.confirm_window
        );
        anyhow::ensure!(self.size <= 4 << 20, "--size {}: at most 4 MiB", self.size);
        Ok(())
    }
}

/// What the drain found.
struct Drained {
    /// The queue's depth when the consumer came.
    depth: u32,
    /// Messages consumed.
    received: u64,
    /// From the consumer's start to its last delivery.
    took: Duration,
    /// The queue's depth at the end.
    left: Option<u32>,
    /// Whether `--drain-timeout` ended it.
    timed_out: bool,
}

/// Consumes the flood queue until nothing arrives for [`DRAIN_QUIET`], or `limit`.
async fn drain(uri: &str, limit: Duration) -> anyhow::Result<Drained> {
    let connection = connect(uri, &AmqpTlsConfig::default()).await?;
    let channel = connection.create_channel().await?;
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let depth = channel
        .queue_declare(TARGET.into(), passive, FieldTable::default())
        .await?
        .message_count();
    channel.basic_qos(1000, BasicQosOptions::default()).await?;
    let mut consumer = channel
        .basic_consume(
            TARGET.into(),
            "overload-drain".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let started = Instant::now();
    let deadline = tokio::time::Instant::from_std(started + limit);
    let mut received = 0u64;
    let mut last = started;
    let mut timed_out = false;
    loop {
        let next = tokio::select! {
            () = tokio::time::sleep_until(deadline) => {
                timed_out = true;
                break;
            }
            next = tokio::time::timeout(DRAIN_QUIET, consumer.next()) => next,
        };
        let Ok(Some(delivery)) = next else {
            break;
        };
        delivery?.acker.ack(BasicAckOptions::default()).await?;
        received += 1;
        last = Instant::now();
    }
    channel
        .basic_cancel("overload-drain".into(), Default::default())
        .await?;
    let left = channel
        .queue_declare(TARGET.into(), passive, FieldTable::default())
        .await
        .ok()
        .map(|q| q.message_count());
    let _ = tokio::time::timeout(CLEANUP_TIMEOUT, connection.close(200, "drained".into())).await;
    Ok(Drained {
        depth,
        received,
        took: last.saturating_duration_since(started),
        left,
        timed_out,
    })
}

/// Runs the flood and its drain, and prints the figures.
///
/// # Errors
/// The queue or topic cannot be set up, or a publisher cannot connect.
pub(super) async fn run(bench: &OverloadBench, target: &AmqpTarget) -> anyhow::Result<()> {
    let args = &bench.flood;
    super::raise_fd_limit(args.publishers + args.kafka_producers, bench.broker_pid)?;
    let tls = AmqpTlsConfig::default();
    fresh_queue(&bench.amqp_uri, TARGET).await?;
    let kafka = bench
        .kafka()
        .filter(|_| args.kafka_producers > 0)
        .map(|addr| kafka_bench(addr, TARGET, args.size, bench.broker_pid));
    if let Some(kafka) = &kafka {
        create_topic(kafka).await?;
    }

    // Connections first, so that the load phase holds nothing but publishing.
    let stop_watching = CancellationToken::new();
    let mut publishers = Vec::new();
    for _ in 0..args.publishers {
        let connection = connect(&bench.amqp_uri, &tls).await?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let blocks = watch_blocks(&connection, stop_watching.clone());
        publishers.push((connection, channel, blocks));
    }
    let throttle = Arc::new(Throttle::default());
    let mut producers = Vec::new();
    if let Some(kafka) = &kafka {
        for _ in 0..args.kafka_producers {
            let producer: FutureProducer<ThrottleContext> = producer_config(kafka)
                .set("statistics.interval.ms", "1000")
                .create_with_context(ThrottleContext(throttle.clone()))?;
            producers.push(Arc::new(producer));
        }
    }

    let mut observer = Observer::start(bench, target, "flood").await;
    observer.phase("load");
    let load_start = Instant::now();
    let until = tokio::time::Instant::now() + Duration::from_secs(args.duration);
    let seconds = (args.duration + args.drain_timeout) as usize + 30;
    let amqp_accepted = Arc::new(PerSecond::new(load_start, seconds));
    let kafka_accepted = Arc::new(PerSecond::new(load_start, seconds));
    let stop_settling = CancellationToken::new();
    let body = Arc::new(vec![b'x'; args.size]);
    let spawn = |accepted: &Arc<PerSecond>, window: usize| {
        let (tx, rx) = mpsc::channel(window);
        let settled = tokio::spawn(settle(rx, accepted.clone(), stop_settling.clone()));
        (tx, settled)
    };
    let mut amqp_senders = Vec::new();
    for (_, channel, _) in &publishers {
        let (tx, settled) = spawn(&amqp_accepted, args.confirm_window);
        let sent = tokio::spawn(publish(channel.clone(), body.clone(), until, tx));
        amqp_senders.push(Sender { sent, settled });
    }
    let mut kafka_senders = Vec::new();
    for producer in &producers {
        let (tx, settled) = spawn(&kafka_accepted, KAFKA_IN_FLIGHT);
        let sent = tokio::spawn(produce(producer.clone(), body.clone(), until, tx));
        kafka_senders.push(Sender { sent, settled });
    }
    tokio::time::sleep_until(until).await;

    observer.phase("drain");
    let drain_start = Instant::now();
    let drained = drain(&bench.amqp_uri, Duration::from_secs(args.drain_timeout)).await;
    let drain_end = Instant::now();
    stop_settling.cancel();
    let amqp = totals(amqp_senders).await;
    let kafka_totals = totals(kafka_senders).await;
    let observed = observer.finish().await;
    stop_watching.cancel();

    let block_spans: Vec<_> = publishers
        .iter()
        .map(|(_, _, blocks)| blocks.lock().spans.clone())
        .collect();
    let reason = publishers
        .iter()
        .find_map(|(_, _, blocks)| blocks.lock().reason.clone());
    let blocks = summarize_blocks(&block_spans, drain_end);

    // Figures.
    let amqp_counts = amqp_accepted.counts();
    let load_seconds = args.duration as usize;
    let confirmed_in_load: u64 = amqp_counts[..load_seconds.min(amqp_counts.len())]
        .iter()
        .sum();
    let confirmed: u64 = amqp_counts.iter().sum();
    let silent = amqp_counts[..load_seconds.min(amqp_counts.len())]
        .iter()
        .filter(|c| **c == 0)
        .count();
    let stretches = (drain_end
        .saturating_duration_since(load_start)
        .as_secs_f64()
        / STRETCH.as_secs_f64())
    .ceil() as usize;
    let stretch_seconds = STRETCH.as_secs() as usize;
    let rates = |counts: &[u64]| {
        stretch_rates(
            &counts[..(stretches * stretch_seconds).min(counts.len())],
            stretch_seconds,
        )
        .into_iter()
        .map(compact)
        .collect::<Vec<_>>()
        .join(" ")
    };
    println!(
        "AMQP: {} publisher(s) sent {}; {confirmed_in_load} messages confirmed in the {} s of publishing ({:.0} msg/s), {} more during the drain; {} nacked{}, {} unconfirmed at the end; seconds without a confirm while publishing: {silent} of {}",
        args.publishers,
        amqp.sent,
        args.duration,
        confirmed_in_load as f64 / args.duration as f64,
        confirmed - confirmed_in_load,
        amqp.refused,
        amqp.first_refusal
            .map(|r| format!(" (first: {r})"))
            .unwrap_or_default(),
        amqp.unsettled,
        args.duration
    );
    for error in &amqp.errors {
        println!("AMQP publisher stopped early: {error}");
    }
    println!(
        "AMQP confirms/s per {} s from the start of publishing: {}",
        STRETCH.as_secs(),
        rates(&amqp_counts)
    );
    println!(
        "broker RSS MiB (peak) per {} s from the start of publishing: {}",
        STRETCH.as_secs(),
        rss_peaks(&observed.readings, load_start, STRETCH, stretches)
            .into_iter()
            .map(mib)
            .collect::<Vec<_>>()
            .join(" ")
    );
    // Seconds from `from` to `at`, negative when `at` came first.
    let since = |from: Instant, at: Instant| observed.offset(at) - observed.offset(from);
    if blocks.notices == 0 {
        println!(
            "connection.blocked: none received by the {} publisher connections",
            args.publishers
        );
    } else {
        println!(
            "connection.blocked: {} notice(s) on {} of {} publisher connections (reason '{}'), the first {:.1} s after publishing began; blocked {:.1} connection-seconds in all, longest {:.1} s; {}",
            blocks.notices,
            blocks.connections,
            args.publishers,
            reason.unwrap_or_default(),
            blocks.first.map_or(0.0, |at| since(load_start, at)),
            blocks.total.as_secs_f64(),
            blocks.longest.as_secs_f64(),
            match blocks.all_lifted {
                Some(at) => format!(
                    "all unblocked {:.1} s after the draining consumer came",
                    since(drain_start, at)
                ),
                None => "still blocked at the end".to_owned(),
            }
        );
    }
    if kafka.is_some() {
        let counts = kafka_accepted.counts();
        let acked_in_load: u64 = counts[..load_seconds.min(counts.len())].iter().sum();
        println!(
            "Kafka: {} producer(s) sent {}; {acked_in_load} records acknowledged in the {} s of producing ({:.0} records/s), {} more during the drain; {} failed{}, {} unacknowledged at the end",
            producers.len(),
            kafka_totals.sent,
            args.duration,
            acked_in_load as f64 / args.duration as f64,
            counts.iter().sum::<u64>() - acked_in_load,
            kafka_totals.refused,
            kafka_totals
                .first_refusal
                .map(|r| format!(" (first: {r})"))
                .unwrap_or_default(),
            kafka_totals.unsettled
        );
        for error in &kafka_totals.errors {
            println!("Kafka producer stopped early: {error}");
        }
        println!(
            "Kafka acknowledgements/s per {} s from the start of producing: {}",
            STRETCH.as_secs(),
            rates(&counts)
        );
        println!("Kafka {throttle}");
    } else {
        println!("Kafka: not measured (no --kafka-bootstrap, or --kafka-producers 0)");
    }
    match &drained {
        Ok(d) => println!(
            "drain: {} messages in the queue when the consumer came, {} consumed in {:.1} s ({:.0} msg/s){}; {} left; broker RSS at the end {} MiB",
            d.depth,
            d.received,
            d.took.as_secs_f64(),
            d.received as f64 / d.took.as_secs_f64().max(1e-3),
            if d.timed_out {
                format!(", stopped by --drain-timeout {}", args.drain_timeout)
            } else {
                String::new()
            },
            d.left.map_or("unknown".to_owned(), |n| n.to_string()),
            observed
                .gauges("drain")
                .rss_kib
                .map_or("—".to_owned(), |s| mib(s.last))
        ),
        Err(e) => println!("drain: failed: {e:#}"),
    }
    println!(
        "round-trip probe: every {} ms, one at a time (its connection publishes too, so a broker that blocks publishers blocks it as well)",
        ROUND_TRIP_EVERY.as_millis()
    );
    observed.print();

    // Cleanup: publishers still blocked cannot send connection.close, hence the timeout.
    for (connection, _, _) in &publishers {
        let _ =
            tokio::time::timeout(CLEANUP_TIMEOUT, connection.close(200, "flood done".into())).await;
    }
    drop(producers);
    delete_queue(&bench.amqp_uri, TARGET).await;
    if let Some(kafka) = &kafka {
        delete_topic(kafka).await;
    }
    drained.map(drop)
}
