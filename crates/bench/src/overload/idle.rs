//! `--scenario idle`: many connections that finish the handshake and then do nothing.
//!
//! First `--connections` AMQP connections run the whole handshake on bare sockets (PLAIN,
//! heartbeats off, so neither side has anything to send afterwards) up to
//! connection.open-ok, at most `--connect-concurrency` under way; they are held for
//! `--hold` seconds and closed. Then, with Kafka, `--kafka-connections` Kafka connections
//! each exchange one ApiVersions request and answer, are held, and closed. One protocol at
//! a time, so each has its own memory per connection, and this process needs descriptors
//! for one set only.
//!
//! Figures: the opening rate, failures, how many the broker closed during the hold (an
//! idle timeout), and the broker's resident memory per connection: the peak of the opening
//! and holding phases over the last baseline reading, divided by the connections open.

use super::many::open_many;
use super::raw::{AmqpTarget, RawAmqp, TCP_ESTABLISHED, kafka_connect, tcp_state};
use super::{Observed, Observer, OverloadBench, connections, seconds};
use crate::broker::watch::{self, mib};
use std::time::Duration;
use tokio::net::TcpStream;

/// How far above the baseline the broker's memory may stay after the AMQP connections
/// closed before the Kafka figure is flagged, in KiB.
const KEPT_KIB: u64 = 4096;

/// The idle connections' sizes.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "idle")]
pub struct IdleArgs {
    /// AMQP connections to open and hold.
    #[arg(long, default_value_t = 10_000)]
    pub connections: usize,
    /// Kafka connections to open and hold (with `--kafka-bootstrap`).
    #[arg(long, default_value_t = 10_000)]
    pub kafka_connections: usize,
    /// Seconds to hold them open.
    #[arg(long, default_value_t = 20)]
    pub hold: u64,
    /// Connections being opened at once.
    #[arg(long, default_value_t = 256)]
    pub connect_concurrency: usize,
    /// Longest the opening of one protocol's connections may take, in seconds.
    #[arg(long, default_value_t = 120)]
    pub ramp_timeout: u64,
}

impl IdleArgs {
    /// The scenario's flags, as a command line gives them.
    pub fn flags(&self) -> String {
        format!(
            "--connections {} --kafka-connections {} --hold {} --connect-concurrency {} --ramp-timeout {}",
            self.connections,
            self.kafka_connections,
            self.hold,
            self.connect_concurrency,
            self.ramp_timeout
        )
    }

    /// Checks the sizes' bounds.
    ///
    /// # Errors
    /// The first flag out of bounds, named.
    pub fn validate(&self) -> anyhow::Result<()> {
        connections("--connections", self.connections)?;
        connections("--kafka-connections", self.kafka_connections)?;
        seconds("--hold", self.hold)?;
        seconds("--ramp-timeout", self.ramp_timeout)?;
        anyhow::ensure!(
            (1..=4096).contains(&self.connect_concurrency),
            "--connect-concurrency {}: from 1 to 4096",
            self.connect_concurrency
        );
        Ok(())
    }
}

/// Runs the scenario and prints its figures.
///
/// # Errors
/// This process cannot have as many descriptors as the connections need.
pub(super) async fn run(bench: &OverloadBench, target: &AmqpTarget) -> anyhow::Result<()> {
    let args = &bench.idle;
    let kafka = bench.kafka().filter(|_| args.kafka_connections > 0);
    let most = args
        .connections
        .max(kafka.map_or(0, |_| args.kafka_connections));
    super::raise_fd_limit(most, bench.broker_pid)?;
    let ramp = Duration::from_secs(args.ramp_timeout);
    let mut observer = Observer::start(bench, target, "idle").await;

    let mut amqp_held = None;
    if args.connections > 0 {
        observer.phase("AMQP opening");
        let opened = open_many(args.connections, args.connect_concurrency, ramp, || {
            RawAmqp::handshake(target)
        })
        .await;
        observer.phase("AMQP holding");
        tokio::time::sleep(Duration::from_secs(args.hold)).await;
        amqp_held = Some(Held {
            protocol: "AMQP",
            before: "baseline",
            opened: opened.describe(args.connections),
            count: opened.connections.len(),
            open: still_open(opened.connections.iter().map(RawAmqp::stream)),
        });
        observer.phase("AMQP closed");
        drop(opened);
        // Until the broker's memory settles (at most 30 s), so that the Kafka connections'
        // memory is counted from a figure that no longer falls.
        watch::settle(bench.broker_pid).await;
    }

    let mut kafka_held = None;
    if let Some(addr) = kafka {
        observer.phase("Kafka opening");
        let opened = open_many(
            args.kafka_connections,
            args.connect_concurrency,
            ramp,
            || kafka_connect(addr),
        )
        .await;
        observer.phase("Kafka holding");
        tokio::time::sleep(Duration::from_secs(args.hold)).await;
        kafka_held = Some(Held {
            protocol: "Kafka",
            before: if amqp_held.is_some() {
                "AMQP closed"
            } else {
                "baseline"
            },
            opened: opened.describe(args.kafka_connections),
            count: opened.connections.len(),
            open: still_open(opened.connections.iter()),
        });
        observer.phase("Kafka closed");
        drop(opened);
        watch::settle(bench.broker_pid).await;
    }
    let observed = observer.finish().await;

    match &amqp_held {
        Some(held) => held.print(&observed, args.hold),
        None => println!("AMQP: not measured (--connections 0)"),
    }
    match &kafka_held {
        Some(held) => held.print(&observed, args.hold),
        None => println!("Kafka: not measured (no --kafka-bootstrap, or --kafka-connections 0)"),
    }
    let rss = |phase: &str| observed.gauges(phase).rss_kib.map(|s| s.last);
    if kafka_held.is_some()
        && let (Some(base), Some(after)) = (rss("baseline"), rss("AMQP closed"))
        && after > base + KEPT_KIB
    {
        println!(
            "note: the broker kept {} MiB of the AMQP connections' memory after they closed, which the Kafka connections may have reused: for a Kafka figure alone, run with --connections 0",
            mib(after - base)
        );
    }
    println!(
        "handshakes: AMQP up to connection.open-ok with heartbeat 0; Kafka one ApiVersions v0 exchange"
    );
    observed.print();
    Ok(())
}

/// One protocol's held connections, once closed.
struct Held {
    /// "AMQP" or "Kafka", as its phases are named.
    protocol: &'static str,
    /// The phase whose last memory reading the connections' memory is counted from.
    before: &'static str,
    /// The opening's description.
    opened: String,
    /// Connections opened.
    count: usize,
    /// Of those, still open at the end of the hold.
    open: usize,
}

impl Held {
    /// Its lines: the opening, what the broker closed, memory per connection, descriptors.
    fn print(&self, observed: &Observed, hold: u64) {
        let Self {
            protocol,
            before,
            count,
            ..
        } = self;
        println!(
            "{protocol} connections: {}; {} of {count} still open after the {hold} s hold",
            self.opened, self.open
        );
        let holding = format!("{protocol} holding");
        let phases = [format!("{protocol} opening"), holding.clone()];
        let names: Vec<&str> = phases.iter().map(String::as_str).collect();
        let per = observed.rss_per_connection(before, &names, *count);
        println!(
            "{protocol}: broker RSS per connection {} (peak while opening and holding over the end of phase '{before}'); broker fds before {}, peak while holding {}",
            per.map_or("—".to_owned(), |b| format!("{:.1} KiB", b / 1024.0)),
            observed
                .gauges(before)
                .fds
                .map_or("—".to_owned(), |s| s.last.to_string()),
            observed
                .gauges(&holding)
                .fds
                .map_or("—".to_owned(), |s| s.peak.to_string()),
        );
    }
}

/// How many of `streams` the broker has not closed.
fn still_open<'a>(streams: impl Iterator<Item = &'a TcpStream>) -> usize {
    streams
        .filter(|s| tcp_state(s) == Some(TCP_ESTABLISHED))
        .count()
}
