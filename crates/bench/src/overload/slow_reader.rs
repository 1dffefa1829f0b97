//! `--scenario slow-reader`: consumers that never read their socket.
//!
//! Before the baseline, the durable queue `ferry-overload-slow` is filled with
//! `--prefill` persistent messages of `--prefill-size` bytes (with confirms, by
//! `ferry bench amqp`'s publisher) and, with Kafka, the topic `ferry-overload-slow` with
//! `--kafka-fill` records of that size (acks=all, by `ferry bench kafka`'s producer).
//!
//! Phase `slow readers` (`--slow-seconds`): `--slow-readers` AMQP connections on bare
//! sockets run the handshake, open a channel, set basic.qos to `--slow-prefetch` (0: no
//! limit), consume the queue with acknowledgements, and from basic.consume-ok on read
//! nothing. With Kafka, one connection exchanges ApiVersions, then sends `--kafka-fetches`
//! Fetch requests (v4, the topic from its start, up to 10 MiB each) back to back, and
//! reads nothing either. Every 200 ms the kernel says whether each socket is still
//! established (`TCP_INFO`), which dates the broker's closing of a connection without
//! reading a byte of it.
//!
//! Phase `reading back`: each socket is read for up to 5 s to learn how it ended: a
//! connection.close and its reply, the socket's end, a reset, or still open. The queue and
//! the topic are deleted at the end.

use super::many::open_many;
use super::raw::{
    AmqpTarget, Leftover, RawAmqp, TCP_ESTABLISHED, fetch_from_start, kafka_connect, kafka_request,
    read_leftover_bytes, tcp_state, unread_bytes,
};
use super::{Observer, OverloadBench, connections, seconds};
use crate::Percentiles;
use crate::amqp::{AmqpBench, publish_phase};
use crate::broker::watch::{EVERY, mib};
use crate::broker::{delete_queue, delete_topic, fresh_queue, kafka_bench};
use crate::kafka::{create_topic, produce_all, producer_config};
use ferry_config::AmqpTlsConfig;
use kafka_protocol::messages::ApiKey;
use rdkafka::producer::FutureProducer;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The queue and the topic the slow readers read.
const SOURCE: &str = "ferry-overload-slow";
/// How long each socket is read at the end.
const READ_BACK: Duration = Duration::from_secs(5);
/// How long sending the Fetch requests may take in all (a broker that stops reading the
/// connection stops them).
const FETCH_SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// The most records one Fetch request asks for, in bytes.
const FETCH_MAX_BYTES: i32 = 10 << 20;
/// The Fetch version sent: the first Ferry answers, with topics by name.
const FETCH_VERSION: i16 = 4;

/// The slow readers' sizes.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "slow-reader")]
pub struct SlowReaderArgs {
    /// Consumer connections that never read.
    #[arg(long, default_value_t = 10)]
    pub slow_readers: usize,
    /// Messages in the queue before they come.
    #[arg(long, default_value_t = 20_000)]
    pub prefill: u64,
    /// Their size in bytes (and the Kafka records').
    #[arg(long, default_value_t = 4096)]
    pub prefill_size: usize,
    /// basic.qos prefetch of the slow readers (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub slow_prefetch: u16,
    /// Seconds the slow readers are left unread.
    #[arg(long, default_value_t = 45)]
    pub slow_seconds: u64,
    /// Records in the topic before the slow Kafka fetcher comes (with `--kafka-bootstrap`).
    #[arg(long, default_value_t = 20_000)]
    pub kafka_fill: usize,
    /// Fetch requests the slow Kafka fetcher sends without reading an answer; 0 leaves it
    /// out.
    #[arg(long, default_value_t = 50)]
    pub kafka_fetches: usize,
}

impl SlowReaderArgs {
    /// The scenario's flags, as a command line gives them.
    pub fn flags(&self) -> String {
        format!(
            "--slow-readers {} --prefill {} --prefill-size {} --slow-prefetch {} --slow-seconds {} --kafka-fill {} --kafka-fetches {}",
            self.slow_readers,
            self.prefill,
            self.prefill_size,
            self.slow_prefetch,
            self.slow_seconds,
            self.kafka_fill,
            self.kafka_fetches
        )
    }

    /// Checks the sizes' bounds.
    ///
    /// # Errors
    /// The first flag out of bounds, named.
    pub fn validate(&self) -> anyhow::Result<()> {
        connections("--slow-readers", self.slow_readers)?;
        seconds("--slow-seconds", self.slow_seconds)?;
        anyhow::ensure!(
            self.prefill <= 10_000_000 && self.kafka_fill <= 10_000_000,
            "--prefill and --kafka-fill: at most 10,000,000"
        );
        anyhow::ensure!(
            self.prefill_size <= 4 << 20,
            "--prefill-size {}: at most 4 MiB",
            self.prefill_size
        );
        anyhow::ensure!(
            self.kafka_fetches <= 10_000,
            "--kafka-fetches {}: at most 10000",
            self.kafka_fetches
        );
        Ok(())
    }
}

/// A socket left unread, and what became of it.
struct Unread<T> {
    /// The connection.
    client: T,
    /// When it stopped reading.
    since: Instant,
    /// When the kernel first saw it no longer established.
    closed: Option<Instant>,
}

impl<T> Unread<T> {
    /// Notes the broker's closing of `stream`, the first time it shows.
    fn check(&mut self, stream: impl Fn(&T) -> &TcpStream) {
        if self.closed.is_none() && tcp_state(stream(&self.client)) != Some(TCP_ESTABLISHED) {
            self.closed = Some(Instant::now());
        }
    }
}

/// How long after they stopped reading the broker closed `unread` (those it closed).
fn closed_after<T>(unread: &[Unread<T>]) -> Vec<Duration> {
    unread
        .iter()
        .filter_map(|u| u.closed.map(|c| c.saturating_duration_since(u.since)))
        .collect()
}

/// The slow Kafka fetcher: its connection and how many Fetch requests it got out.
struct SlowFetcher {
    stream: TcpStream,
    written: usize,
}

/// Connects and sends `fetches` Fetch requests for the source topic without reading.
async fn slow_fetcher(addr: &str, fetches: usize) -> anyhow::Result<SlowFetcher> {
    let mut stream = kafka_connect(addr).await?;
    let fetch = fetch_from_start(SOURCE, FETCH_MAX_BYTES);
    let mut written = 0;
    let _ = tokio::time::timeout(FETCH_SEND_TIMEOUT, async {
        for correlation_id in 0..fetches {
            let frame = kafka_request(
                ApiKey::Fetch,
                FETCH_VERSION,
                correlation_id as i32 + 2,
                &fetch,
            )?;
            stream.write_all(&frame).await?;
            written += 1;
        }
        Ok::<_, anyhow::Error>(())
    })
    .await;
    Ok(SlowFetcher { stream, written })
}

/// `Leftover`s summed up: how many ended each way, and the bytes read back.
fn describe_leftovers(leftovers: &[Leftover]) -> String {
    let mut ends = super::many::Tally::default();
    let mut read = 0;
    for leftover in leftovers {
        match leftover {
            Leftover::Closed { read: n, how } => {
                read += n;
                ends.add(format!("closed: {how}"));
            }
            Leftover::Open { read: n } => {
                read += n;
                ends.add(format!("still open after reading for {READ_BACK:?}"));
            }
        }
    }
    format!("{ends}; {} MiB read back in all", mib(read / 1024))
}

/// The slow fetcher's line: requests written, whether and when the broker closed it, what
/// its socket held, and what reading it back found.
fn describe_fetcher(
    fetcher: &Unread<SlowFetcher>,
    asked: usize,
    unread: Option<u64>,
    leftover: Option<Leftover>,
) -> String {
    let written = fetcher.client.written;
    format!(
        "{written} of {asked} Fetch requests (v{FETCH_VERSION}, up to {} MiB each) written{}; {}; {} MiB unread in its socket at the end; read back: {}",
        FETCH_MAX_BYTES >> 20,
        if written < asked {
            format!(" (the broker stopped reading within {FETCH_SEND_TIMEOUT:?})")
        } else {
            String::new()
        },
        match closed_after(std::slice::from_ref(fetcher)).as_slice() {
            [after] => format!(
                "closed by the broker {:.1} s after its last request",
                after.as_secs_f64()
            ),
            _ => "not closed by the broker while unread".to_owned(),
        },
        unread.map_or("—".to_owned(), |n| mib(n / 1024)),
        leftover.map_or("—".to_owned(), |l| describe_leftovers(&[l])),
    )
}

/// Runs the scenario and prints its figures.
///
/// # Errors
/// The queue or topic cannot be filled.
pub(super) async fn run(bench: &OverloadBench, target: &AmqpTarget) -> anyhow::Result<()> {
    let args = &bench.slow_reader;
    super::raise_fd_limit(args.slow_readers + 1, bench.broker_pid)?;
    fresh_queue(&bench.amqp_uri, SOURCE).await?;
    let fill = AmqpBench {
        uri: bench.amqp_uri.clone(),
        ca_file: None,
        cert_file: None,
        key_file: None,
        messages: args.prefill,
        size: args.prefill_size,
        confirm_window: 1000,
        prefetch: 0,
        producers: 1,
        consumers: 0,
        queue_type: "classic".into(),
        queue: SOURCE.into(),
        latency_messages: 0,
        broker_pid: Some(bench.broker_pid),
    };
    let rate = publish_phase(&fill, &AmqpTlsConfig::default()).await?;
    println!(
        "prefill: {} messages of {} B, confirmed at {rate:.0} msg/s",
        args.prefill, args.prefill_size
    );
    let kafka = bench
        .kafka()
        .filter(|_| args.kafka_fetches > 0)
        .map(|addr| {
            (
                addr,
                kafka_bench(addr, SOURCE, args.prefill_size, bench.broker_pid),
            )
        });
    if let Some((_, kb)) = &kafka {
        create_topic(kb).await?;
        let producer: FutureProducer = producer_config(kb).create()?;
        let started = Instant::now();
        produce_all(&producer, kb, args.kafka_fill).await?;
        println!(
            "Kafka fill: {} records of {} B, acknowledged at {:.0} records/s",
            args.kafka_fill,
            args.prefill_size,
            args.kafka_fill as f64 / started.elapsed().as_secs_f64()
        );
    }

    let mut observer = Observer::start(bench, target, "slow-reader").await;
    observer.phase("slow readers");
    let end = Instant::now() + Duration::from_secs(args.slow_seconds);
    let opened = open_many(
        args.slow_readers,
        args.slow_readers,
        Duration::from_secs(30),
        || async {
            let mut raw = RawAmqp::handshake(target).await?;
            raw.consume(SOURCE, args.slow_prefetch).await?;
            Ok(Unread {
                client: raw,
                since: Instant::now(),
                closed: None,
            })
        },
    )
    .await;
    let opened_line = opened.describe(args.slow_readers);
    let mut readers = opened.connections;
    let mut fetcher = match &kafka {
        Some((addr, _)) => Some(
            slow_fetcher(addr, args.kafka_fetches)
                .await
                .map(|f| Unread {
                    since: Instant::now(),
                    client: f,
                    closed: None,
                }),
        ),
        None => None,
    };
    while Instant::now() < end {
        tokio::time::sleep(EVERY).await;
        for reader in &mut readers {
            reader.check(RawAmqp::stream);
        }
        if let Some(Ok(fetcher)) = &mut fetcher {
            fetcher.check(|f| &f.stream);
        }
    }
    let unread: Vec<u64> = readers
        .iter()
        .filter_map(|r| unread_bytes(r.client.stream()))
        .collect();
    let fetcher_unread = match &fetcher {
        Some(Ok(f)) => unread_bytes(&f.client.stream),
        _ => None,
    };

    observer.phase("reading back");
    // Both at once: the phase lasts one READ_BACK.
    let fetcher_stream = match &mut fetcher {
        Some(Ok(f)) => Some(&mut f.client.stream),
        _ => None,
    };
    let (leftovers, fetcher_leftover) = tokio::join!(
        futures::future::join_all(
            readers
                .iter_mut()
                .map(|r| r.client.read_leftover(READ_BACK))
        ),
        async {
            match fetcher_stream {
                Some(stream) => Some(read_leftover_bytes(stream, READ_BACK).await),
                None => None,
            }
        }
    );
    let closed = closed_after(&readers);
    let count = readers.len();
    let fetcher_line = match (&fetcher, fetcher_leftover) {
        (None, _) => "not measured (no --kafka-bootstrap, or --kafka-fetches 0)".to_owned(),
        (Some(Err(e)), _) => format!("failed: {e:#}"),
        (Some(Ok(f)), leftover) => {
            describe_fetcher(f, args.kafka_fetches, fetcher_unread, leftover)
        }
    };
    drop(readers);
    drop(fetcher);
    let observed = observer.finish().await;

    let prefetch = match args.slow_prefetch {
        0 => "no prefetch limit".to_owned(),
        n => format!("prefetch {n}"),
    };
    println!("slow readers ({prefetch}, acknowledgements on): {opened_line}");
    let mut closed_sorted = closed.clone();
    println!(
        "slow readers closed by the broker while unread: {} of {count}{}",
        closed.len(),
        if closed.is_empty() {
            String::new()
        } else {
            format!(
                ", after (from basic.consume-ok) {}",
                Percentiles::of(&mut closed_sorted)
            )
        }
    );
    println!(
        "bytes waiting unread in the slow readers' sockets at the end: {} MiB in all, {} MiB the most in one",
        mib(unread.iter().sum::<u64>() / 1024),
        mib(unread.iter().max().copied().unwrap_or(0) / 1024)
    );
    println!(
        "slow readers, read back: {}",
        describe_leftovers(&leftovers)
    );
    println!("Kafka slow fetcher: {fetcher_line}");
    observed.print();

    delete_queue(&bench.amqp_uri, SOURCE).await;
    if let Some((_, kb)) = &kafka {
        delete_topic(kb).await;
    }
    Ok(())
}
