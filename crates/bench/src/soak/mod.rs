//! `ferry bench soak`: a long run of every kind of client at once against a running
//! `ferry run` (issue 17, point 6: "30 minutes at half of the measured maximum rate with
//! AMQP, Kafka and a route: resident memory grows < 5%, p99 latency does not drift").
//!
//! Three workloads, each at `--rate` messages of `--size` bytes per second ([`clients`]):
//! - **AMQP**: a publisher with confirms to the durable queue [`QUEUE`] (declared afresh)
//!   and a consumer of it with one basic.ack per delivery;
//! - **Kafka**: an idempotent producer (acks=all) to the topic [`TOPIC`] and a consumer
//!   group member reading it;
//! - **route**: a publisher with confirms to the exchange [`ROUTE_EXCHANGE`] on the AMQP
//!   front, the daemon's route [`ROUTE`] (config/soak.toml) moving it to the topic
//!   [`ROUTE_TOPIC`] on the Kafka front, and a group member reading that topic.
//!
//! Every body starts with a stamp (the run, a sequence number, the send time), so each
//! delivery gives an end-to-end latency and what was lost or duplicated is known
//! ([`ledger`]). Each row (every `--every` seconds, a minute by default) prints each
//! workload's sent and received rate and latency, and the broker's mean resident memory,
//! descriptors and CPU time (from `/proc`, as `ferry bench overload` reads them). After
//! `--duration`, confirmed messages still on their way get `--drain` seconds; then the
//! [`verdict`]: resident memory growth and p99 drift between the first and the last five
//! minutes after the `--warmup`, and the totals. The run fails (exit code 1) when a message
//! was lost, a workload stalled (received nothing for [`STALL`]) or a client failed.

mod clients;
mod ledger;
mod schedule;
mod verdict;

use super::kafka::{KafkaBench, create_topic, join_at_end, producer_config};
use crate::amqp::connect;
use crate::broker::watch::{self, Phase, Reading, mib};
use crate::broker::{delete_queue, delete_topic, describe_broker, fresh_queue, kafka_bench};
use anyhow::Context;
use clients::{AmqpConsumer, Publisher, Shared, consume_kafka, publish};
use ferry_config::AmqpTlsConfig;
use lapin::ExchangeKind;
use lapin::options::{ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use ledger::{Ledger, RowFigures, STAMP_LEN};
use parking_lot::Mutex;
use schedule::{Pace, Plan};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The daemon configuration the soak runs against, printed by `--print-config`.
const CONFIG: &str = include_str!("../../../../config/soak.toml");
/// The AMQP workload's queue.
const QUEUE: &str = "ferry-soak";
/// The Kafka workload's topic.
const TOPIC: &str = "ferry-soak";
/// The route of config/soak.toml.
const ROUTE: &str = "ferry-soak";
/// The exchange the route reads from (a topic exchange, declared by the soak).
const ROUTE_EXCHANGE: &str = "ferry-soak-route";
/// The routing key of the route's messages.
const ROUTE_KEY: &str = "soak";
/// The topic the route writes to.
const ROUTE_TOPIC: &str = "ferry-soak-route";
/// A workload that receives nothing for this long has stalled.
pub const STALL: Duration = Duration::from_secs(30);
/// How often the broker is read from `/proc`.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// How long the route's queue may take to appear after its exchange is declared: the
/// route retries a missing exchange with a backoff of up to `retry_max_ms` (30 s).
const ROUTE_WAIT: Duration = Duration::from_secs(60);
/// Longest pause between two looks for the route's queue.
const ROUTE_PAUSE_MAX: Duration = Duration::from_secs(8);
/// How long the clients may take to stop at the end.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Most messages per second of a workload.
const MAX_RATE: u32 = 100_000;
/// Largest body: within the Kafka front's default `max_message_bytes`.
const MAX_SIZE: usize = 1_000_000;

/// The commands of a soak, shown by `ferry bench soak --help`.
pub const HELP: &str = "\
Run from the repository's root, with a release build (the daemon's store in a fresh
temporary directory, its log beside it):

  cargo build --release --bin ferry
  FERRY=${CARGO_TARGET_DIR:-target}/release/ferry
  DIR=$(mktemp -d)
  FERRY__STORE__PATH=$DIR/data $FERRY run --config config/soak.toml 2>$DIR/ferry.log &
  FERRY_PID=$!
  $FERRY bench soak --broker-pid $FERRY_PID --rate 500 | tee soak.txt
  kill -TERM $FERRY_PID; wait $FERRY_PID; rm -r $DIR

config/soak.toml puts the fronts on 127.0.0.1:5682 (AMQP) and 127.0.0.1:9192 (Kafka), the
defaults of --amqp-uri and --kafka-bootstrap, and holds the route 'ferry-soak'; another
daemon needs that [[routes]] table (--print-config prints the file). A short try:
--duration 120 --warmup 20 --every 10 --rate 200.";

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakBench {
    /// Ferry's AMQP front.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5682/%2f")]
    pub amqp_uri: String,
    /// Ferry's Kafka front (`bootstrap.servers`).
    #[arg(long, default_value = "127.0.0.1:9192")]
    pub kafka_bootstrap: String,
    /// PID of the daemon (`ferry run`) on this machine: its resident memory, descriptors
    /// and CPU time are read from `/proc`.
    #[arg(long, required_unless_present = "print_config")]
    pub broker_pid: Option<u32>,
    /// Messages per second of each workload (AMQP, Kafka, route).
    #[arg(long, default_value_t = 500)]
    pub rate: u32,
    /// Body size in bytes (at least 24, the stamp).
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Seconds of the run, the warmup included (a multiple of --every).
    #[arg(long, default_value_t = 1800)]
    pub duration: u64,
    /// Seconds at the start left out of the verdict (a multiple of --every).
    #[arg(long, default_value_t = 60)]
    pub warmup: u64,
    /// Seconds per printed row.
    #[arg(long, default_value_t = 60)]
    pub every: u64,
    /// Seconds after the run for confirmed messages still on their way; what has not
    /// arrived by then is lost.
    #[arg(long, default_value_t = 60)]
    pub drain: u64,
    /// Print the daemon configuration the soak needs (config/soak.toml) and exit.
    #[arg(long)]
    pub print_config: bool,
}

impl SoakBench {
    /// The run's plan, once every flag is within its bounds (no I/O).
    ///
    /// # Errors
    /// The first flag out of bounds, named.
    fn plan(&self) -> anyhow::Result<Plan> {
        anyhow::ensure!(
            (1..=MAX_RATE).contains(&self.rate),
            "--rate {}: from 1 to {MAX_RATE} messages per second",
            self.rate
        );
        anyhow::ensure!(
            (STAMP_LEN..=MAX_SIZE).contains(&self.size),
            "--size {}: from {STAMP_LEN} (the stamp) to {MAX_SIZE} bytes",
            self.size
        );
        anyhow::ensure!(
            (1..=3600).contains(&self.drain),
            "--drain {}: from 1 to 3600 seconds",
            self.drain
        );
        Plan::new(self.duration, self.warmup, self.every)
    }

    /// The flags of the run, as a command line would give them.
    fn flags(&self, pid: u32) -> String {
        format!(
            "--broker-pid {pid} --amqp-uri {} --kafka-bootstrap {} --rate {} --size {} --duration {} --warmup {} --every {} --drain {}",
            ferry_config::secret::redacted_uri(&self.amqp_uri),
            self.kafka_bootstrap,
            self.rate,
            self.size,
            self.duration,
            self.warmup,
            self.every,
            self.drain
        )
    }
}

/// One workload under way.
struct Workload {
    /// `AMQP`, `Kafka` or `route`, in the rows and the verdict.
    name: &'static str,
    /// What its clients saw.
    ledger: Shared,
    /// Ends after the last confirm, or at the run's stop.
    publisher: JoinHandle<anyhow::Result<()>>,
    /// Ends at the run's stop, or when its connection fails.
    consumer: JoinHandle<anyhow::Result<()>>,
}

/// A workload's clients, connected and subscribed, before the run starts: the run's clock
/// starts once every consumer is in place, so nothing sent is skipped.
struct Ready {
    /// As [`Workload::name`].
    name: &'static str,
    /// Connected, not sending yet.
    publisher: Publisher,
    /// Subscribed (a Kafka member has joined its group at the topic's end).
    consumer: Consumer,
}

/// The consuming side of a [`Ready`] workload.
enum Consumer {
    /// Of the AMQP workload's queue.
    Amqp(Box<AmqpConsumer>),
    /// A group member of the Kafka workload's topic or the route's.
    Kafka(rdkafka::consumer::StreamConsumer),
}

/// Runs the soak and prints its rows and verdict, or prints the daemon's configuration.
///
/// # Errors
/// A flag out of bounds, a daemon without the route or out of reach, or a run that lost a
/// message, stalled or had a client fail (after printing everything).
pub async fn run(bench: &SoakBench) -> anyhow::Result<()> {
    if bench.print_config {
        print!("{CONFIG}");
        return Ok(());
    }
    let plan = bench.plan()?;
    let pid = bench.broker_pid.context("--broker-pid is required")?;
    println!("soak: ferry bench soak {}", bench.flags(pid));
    println!("broker: {}", describe_broker(pid));
    println!(
        "workloads, each {} msg/s of {} B: AMQP (queue '{QUEUE}', confirms, acks), Kafka (topic '{TOPIC}', idempotent, acks=all, a group member), route '{ROUTE}' (exchange '{ROUTE_EXCHANGE}' → topic '{ROUTE_TOPIC}', a group member)",
        bench.rate, bench.size
    );
    check_route(&bench.amqp_uri).await?;
    let mut kafka = kafka_bench(&bench.kafka_bootstrap, TOPIC, bench.size, pid);
    kafka.idempotence = true;
    let route_kafka = kafka_bench(&bench.kafka_bootstrap, ROUTE_TOPIC, bench.size, pid);
    let outcome = soak(bench, plan, pid, &kafka, &route_kafka).await;
    delete_queue(&bench.amqp_uri, QUEUE).await;
    delete_topic(&kafka).await;
    let failed = outcome?;
    anyhow::ensure!(failed.is_empty(), "the soak failed: {}", failed.join("; "));
    Ok(())
}

/// Declares the route's exchange and waits until the route's queue is there: the daemon
/// binds it to the exchange once both exist.
///
/// # Errors
/// The AMQP front cannot be reached, or the route's queue does not appear within
/// [`ROUTE_WAIT`]: the daemon has no such route.
async fn check_route(uri: &str) -> anyhow::Result<()> {
    let reach = || {
        format!(
            "cannot reach Ferry's AMQP front at {}",
            ferry_config::secret::redacted_uri(uri)
        )
    };
    let connection = connect(uri, &AmqpTlsConfig::default())
        .await
        .with_context(reach)?;
    let channel = connection.create_channel().await?;
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    channel
        .exchange_declare(
            ROUTE_EXCHANGE.into(),
            ExchangeKind::Topic,
            durable,
            FieldTable::default(),
        )
        .await?;
    let _ = connection.close(200, "declared".into()).await;
    let queue = ferry_bridge::amqp_front_queue(ROUTE);
    let deadline = Instant::now() + ROUTE_WAIT;
    let mut pause = Duration::from_secs(1);
    // Bounded by `deadline`; each miss is logged by lapin as an error, so the tries
    // thin out.
    while !queue_exists(uri, &queue).await.with_context(reach)? {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the daemon has no route '{ROUTE}': its queue '{queue}' did not appear within {ROUTE_WAIT:?} of declaring the exchange '{ROUTE_EXCHANGE}'. Run the daemon with --config config/soak.toml, or add the [[routes]] table that `ferry bench soak --print-config` shows to its configuration"
        );
        if pause == Duration::from_secs(1) {
            eprintln!(
                "waiting up to {ROUTE_WAIT:?} for the daemon to bind the route's queue '{queue}' (it retries a missing exchange with a backoff)"
            );
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(ROUTE_PAUSE_MAX);
    }
    println!("route '{ROUTE}': its queue '{queue}' is bound");
    Ok(())
}

/// Whether `queue` exists, by a passive declare on a connection of its own (a missing
/// queue closes the channel, and lapin may then fail the connection too).
///
/// # Errors
/// The broker cannot be reached.
async fn queue_exists(uri: &str, queue: &str) -> anyhow::Result<bool> {
    let connection = connect(uri, &AmqpTlsConfig::default()).await?;
    let channel = connection.create_channel().await?;
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let found = channel
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await
        .is_ok();
    let _ = tokio::time::timeout(STOP_TIMEOUT, connection.close(200, "checked".into())).await;
    Ok(found)
}

/// Connects every client, runs the workloads for the plan's duration and the drain, and
/// prints the rows and the verdict; what makes the run fail.
async fn soak(
    bench: &SoakBench,
    plan: Plan,
    pid: u32,
    kafka: &KafkaBench,
    route_kafka: &KafkaBench,
) -> anyhow::Result<Vec<String>> {
    fresh_queue(&bench.amqp_uri, QUEUE).await?;
    create_topic(kafka).await?;
    create_topic(route_kafka).await?;
    let uri = &bench.amqp_uri;
    let ready = [
        Ready {
            name: "AMQP",
            publisher: Publisher::amqp(uri, "", QUEUE).await?,
            consumer: Consumer::Amqp(Box::new(AmqpConsumer::subscribe(uri, QUEUE).await?)),
        },
        Ready {
            name: "Kafka",
            publisher: Publisher::Kafka {
                producer: producer_config(kafka).create()?,
                topic: TOPIC.to_owned(),
            },
            consumer: Consumer::Kafka(join_at_end(kafka).await?),
        },
        Ready {
            name: "route",
            publisher: Publisher::amqp(uri, ROUTE_EXCHANGE, ROUTE_KEY).await?,
            consumer: Consumer::Kafka(join_at_end(route_kafka).await?),
        },
    ];
    let run = fastrand::u64(..);
    let stop = CancellationToken::new();
    let start = Instant::now();
    let pace = Pace::new(start, bench.rate, plan.duration());
    let workloads: Vec<Workload> = ready
        .into_iter()
        .map(|r| {
            let ledger = Arc::new(Mutex::new(Ledger::new(plan, start, run)));
            let publisher = tokio::spawn(publish(
                r.publisher,
                pace,
                bench.size,
                ledger.clone(),
                stop.clone(),
            ));
            let consumer = match r.consumer {
                Consumer::Amqp(c) => tokio::spawn(c.run(ledger.clone(), stop.clone())),
                Consumer::Kafka(c) => {
                    let (ledger, stop) = (ledger.clone(), stop.clone());
                    tokio::spawn(async move {
                        consume_kafka(c, ledger, stop).await;
                        Ok(())
                    })
                }
            };
            Workload {
                name: r.name,
                ledger,
                publisher,
                consumer,
            }
        })
        .collect();
    println!(
        "run {run:016x}: {} s ({} of warmup), a row every {} s, then up to {} s of drain",
        plan.duration().as_secs(),
        bench.warmup,
        bench.every,
        bench.drain
    );
    let readings = watch_rows(&plan, start, pid, &workloads, bench.drain).await;
    stop.cancel();
    let mut failed = Vec::new();
    let mut totals = Vec::new();
    let mut drifts = Vec::new();
    for w in workloads {
        for (side, task) in [("publisher", w.publisher), ("consumer", w.consumer)] {
            let why = match tokio::time::timeout(STOP_TIMEOUT, task).await {
                Ok(Ok(Ok(()))) => continue,
                Ok(Ok(Err(e))) => format!("{e:#}"),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("did not stop within {STOP_TIMEOUT:?}"),
            };
            failed.push(format!("{} {side} failed: {why}", w.name));
        }
        let ledger = w.ledger.lock();
        let (first, last) = (plan.first_window(), plan.last_window());
        drifts.push(verdict::drift_line(
            &plan,
            w.name,
            ledger.window(first),
            ledger.window(last),
        ));
        drifts.push(verdict::trend_line(
            &plan,
            w.name,
            &ledger.p99s(plan.measured()),
        ));
        totals.push((w.name, ledger.totals()));
    }
    let rss = |rows: std::ops::Range<usize>| {
        let (from, _) = plan.span(start, rows.start);
        let (to, _) = plan.span(start, rows.end);
        verdict::mean_rss_kib(&readings, from, to)
    };
    println!("\nverdict");
    println!(
        "{}",
        verdict::rss_line(&plan, rss(plan.first_window()), rss(plan.last_window()))
    );
    for line in drifts.iter().chain(&verdict::totals_table(&totals)) {
        println!("{line}");
    }
    for line in &failed {
        println!("{line}");
    }
    failed.extend(verdict::failures(&totals));
    Ok(failed)
}

/// Reads the broker every [`SAMPLE_EVERY`] and prints a row at the end of each row of the
/// plan, then waits (at most `drain_s` seconds) until the publishers have their last
/// confirms and every confirmed message arrived, and prints the drain's row. Notes a
/// workload that stalls on standard error as it happens. Every reading taken.
async fn watch_rows(
    plan: &Plan,
    start: Instant,
    pid: u32,
    workloads: &[Workload],
    drain_s: u64,
) -> Vec<Reading> {
    let mut readings = Vec::new();
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let end = start + plan.duration();
    let drain_end = end + Duration::from_secs(drain_s);
    println!("{}", header(workloads));
    println!(
        "|---|---|{}---|---|---|---|---|",
        "---|---|".repeat(workloads.len())
    );
    let mut row = 0;
    // Bounded by `drain_end`.
    loop {
        ticks.tick().await;
        let now = Instant::now();
        if let Ok(reading) = tokio::task::spawn_blocking(move || watch::read(pid)).await {
            readings.push(reading);
        }
        for w in workloads {
            if let Some(silence) = w.ledger.lock().stall(now, STALL) {
                eprintln!(
                    "{}: nothing received for {:.0} s (at +{:.0} s)",
                    w.name,
                    silence.as_secs_f64(),
                    now.saturating_duration_since(start).as_secs_f64()
                );
            }
        }
        while row < plan.rows && now >= plan.span(start, row).1 {
            let (from, to) = plan.span(start, row);
            println!("{}", row_line(plan, row, (from, to), workloads, &readings));
            row += 1;
        }
        if now >= end {
            let settled = workloads
                .iter()
                .all(|w| w.publisher.is_finished() && w.ledger.lock().awaiting() == 0);
            if settled || now >= drain_end {
                break;
            }
        }
    }
    let drain = (end, Instant::now());
    println!("{}", row_line(plan, plan.rows, drain, workloads, &readings));
    readings
}

/// The rows' table header.
fn header(workloads: &[Workload]) -> String {
    let cells: String = workloads
        .iter()
        .map(|w| format!(" {0} msg/s sent/recv | {0} ms p50/p99/max |", w.name))
        .collect();
    format!(
        "| t s | window |{cells} broker RSS MiB mean | broker fds | broker CPU s | broker CPU µs/msg | bench CPU s |"
    )
}

/// Row `row` of the table, over `span`: each workload's rates and latency, then the broker.
fn row_line(
    plan: &Plan,
    row: usize,
    (from, to): (Instant, Instant),
    workloads: &[Workload],
    readings: &[Reading],
) -> String {
    let figures: Vec<RowFigures> = workloads.iter().map(|w| w.ledger.lock().row(row)).collect();
    let seconds = to.saturating_duration_since(from).as_secs_f64().max(1e-9);
    let cells: String = figures
        .iter()
        .map(|f| {
            let latency = f.latency.map_or_else(|| "—".to_owned(), |p| p.cell());
            format!(
                " {:.0}/{:.0} | {latency} |",
                f.sent as f64 / seconds,
                f.received as f64 / seconds
            )
        })
        .collect();
    let gauges = watch::summarize(
        readings,
        &Phase {
            name: "row",
            from,
            to,
        },
    );
    let sent: u64 = figures.iter().map(|f| f.sent).sum();
    let seconds_of = |d: Option<Duration>| {
        d.map_or_else(|| "—".to_owned(), |d| format!("{:.2}", d.as_secs_f64()))
    };
    let per_message = gauges.broker_cpu.filter(|_| sent > 0).map_or_else(
        || "—".to_owned(),
        |d| format!("{:.1}", d.as_secs_f64() * 1e6 / sent as f64),
    );
    let (at, window) = if row == plan.rows {
        ("drain".to_owned(), "")
    } else {
        let window = if row < plan.warmup_rows {
            "warmup"
        } else if plan.first_window().contains(&row) {
            "first"
        } else if plan.last_window().contains(&row) {
            "last"
        } else {
            ""
        };
        (
            format!("+{}", plan.every.as_secs() * (row as u64 + 1)),
            window,
        )
    };
    format!(
        "| {at} | {window} |{cells} {} | {} | {} | {per_message} | {} |",
        verdict::mean_rss_kib(readings, from, to)
            .map_or_else(|| "—".to_owned(), |k| mib(k.round() as u64)),
        gauges
            .fds
            .map_or_else(|| "—".to_owned(), |s| s.last.to_string()),
        seconds_of(gauges.broker_cpu),
        seconds_of(gauges.bench_cpu),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use ferry_config::Config;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: SoakBench,
    }

    fn parse(args: &[&str]) -> Result<SoakBench, clap::Error> {
        Cli::try_parse_from(std::iter::once("soak").chain(args.iter().copied())).map(|c| c.bench)
    }

    #[test]
    fn the_defaults_are_half_an_hour_of_minute_rows_after_a_minute_of_warmup() {
        let bench = parse(&["--broker-pid", "1"]).unwrap();
        assert_eq!((bench.rate, bench.size), (500, 1024));
        let plan = bench.plan().unwrap();
        assert_eq!(plan, Plan::new(1800, 60, 60).unwrap());
    }

    #[test]
    fn the_broker_pid_is_required_unless_the_config_is_printed() {
        let err = parse(&[]).err().unwrap().to_string();
        assert!(err.contains("--broker-pid"), "{err}");
        assert!(parse(&["--print-config"]).unwrap().print_config);
    }

    #[test]
    fn a_rate_size_or_drain_out_of_bounds_is_refused_by_name() {
        for (flag, value) in [
            ("--rate", "0"),
            ("--size", "23"),
            ("--drain", "0"),
            ("--every", "7"),
        ] {
            let bench = parse(&["--broker-pid", "1", flag, value]).unwrap();
            let err = bench.plan().unwrap_err().to_string();
            assert!(err.contains(flag), "{err}");
        }
    }

    #[test]
    fn the_printed_command_hides_the_password() {
        let bench = parse(&[
            "--broker-pid",
            "7",
            "--amqp-uri",
            "amqp://soak:s3cret@127.0.0.1:5682/%2f",
        ])
        .unwrap();
        let flags = bench.flags(7);
        assert!(!flags.contains("s3cret"), "{flags}");
        assert!(flags.contains("--broker-pid 7 "), "{flags}");
    }

    #[test]
    fn the_shipped_soak_config_validates_and_matches_the_tool() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/soak.toml");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), CONFIG);
        let config = Config::load(&path).unwrap();
        config.validate().unwrap();
        let route = config.routes.iter().find(|r| r.name == ROUTE).unwrap();
        assert_eq!(route.from.amqp_exchange.as_deref(), Some(ROUTE_EXCHANGE));
        assert_eq!(route.to.len(), 1);
        assert_eq!(route.to[0].kafka_topic.as_deref(), Some(ROUTE_TOPIC));
        let bench = parse(&["--broker-pid", "1"]).unwrap();
        assert!(
            bench.amqp_uri.contains(&config.amqp.listen),
            "{}",
            bench.amqp_uri
        );
        assert_eq!(bench.kafka_bootstrap, config.kafka.listen);
    }
}
