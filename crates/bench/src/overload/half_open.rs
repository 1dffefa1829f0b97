//! `--scenario half-open`: connections that never finish the handshake.
//!
//! `--half-open` connections to the AMQP port, half of which send nothing at all and half
//! only the protocol header (the broker answers connection.start and waits for start-ok);
//! and, with Kafka, `--half-open` connections to the Kafka port that send nothing. All are
//! opened at once (at most 256 connecting at a time); each then reads whatever the broker
//! sends until the broker closes it, for at most `--half-open-seconds` from its connect.
//! Figures per kind: how many the broker closed, and after how long. The probes' new
//! connections in the table are the fresh clients that come meanwhile.

use super::many::open_many;
use super::raw::AmqpTarget;
use super::{Observer, OverloadBench, connections, seconds};
use crate::Percentiles;
use ferry_amqp::codec::PROTOCOL_HEADER;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connections being opened at once.
const CONCURRENCY: usize = 256;
/// Longest the opening of one kind's connections may take.
const RAMP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the phase after the last close lasts, for the broker to let go of them.
const RELEASE: Duration = Duration::from_secs(3);

/// The half-open connections' sizes.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "half-open")]
pub struct HalfOpenArgs {
    /// Connections to each port (AMQP: half silent, half sending only the protocol header).
    #[arg(long, default_value_t = 2000)]
    pub half_open: usize,
    /// Longest each waits for the broker to close it, in seconds from its connect.
    #[arg(long, default_value_t = 30)]
    pub half_open_seconds: u64,
}

impl HalfOpenArgs {
    /// The scenario's flags, as a command line gives them.
    pub fn flags(&self) -> String {
        format!(
            "--half-open {} --half-open-seconds {}",
            self.half_open, self.half_open_seconds
        )
    }

    /// Checks the sizes' bounds.
    ///
    /// # Errors
    /// The first flag out of bounds, named.
    pub fn validate(&self) -> anyhow::Result<()> {
        connections("--half-open", self.half_open)?;
        seconds("--half-open-seconds", self.half_open_seconds)
    }
}

/// One kind of half-open connection.
struct Kind {
    /// How it is described.
    name: &'static str,
    /// Where it connects.
    addr: String,
    /// What it sends after connecting.
    sends: &'static [u8],
    /// How many.
    count: usize,
}

/// How the connections of one kind ended.
struct Ended {
    /// The opening's description.
    opened: String,
    /// For each connection the broker closed, how long after its connect.
    closed_after: Vec<Duration>,
    /// Connections still open at their deadline.
    still_open: usize,
}

/// Opens the connections of `kind` and starts a waiter on each; the waiters' outcomes.
async fn open_kind(
    kind: &Kind,
    wait: Duration,
) -> (String, Vec<tokio::task::JoinHandle<Option<Duration>>>) {
    let opened = open_many(kind.count, CONCURRENCY, RAMP_TIMEOUT, || async {
        let mut stream = TcpStream::connect(&kind.addr).await?;
        let connected = Instant::now();
        stream.write_all(kind.sends).await?;
        Ok((stream, connected))
    })
    .await;
    let line = opened.describe(kind.count);
    let waiters = opened
        .connections
        .into_iter()
        .map(|(stream, connected)| tokio::spawn(wait_for_close(stream, connected, wait)))
        .collect();
    (line, waiters)
}

/// Reads `stream` until the broker closes it (how long after `connected`), or `None` at
/// `connected + wait`.
async fn wait_for_close(
    mut stream: TcpStream,
    connected: Instant,
    wait: Duration,
) -> Option<Duration> {
    let deadline = tokio::time::Instant::from_std(connected + wait);
    let mut scratch = [0u8; 512];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut scratch)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(connected.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// Collects the waiters of one kind.
async fn ended(opened: String, waiters: Vec<tokio::task::JoinHandle<Option<Duration>>>) -> Ended {
    let mut closed_after = Vec::new();
    let mut still_open = 0;
    for waiter in waiters {
        match waiter.await.ok().flatten() {
            Some(after) => closed_after.push(after),
            None => still_open += 1,
        }
    }
    Ended {
        opened,
        closed_after,
        still_open,
    }
}

/// Runs the scenario and prints its figures.
///
/// # Errors
/// This process cannot have as many descriptors as the connections need.
pub(super) async fn run(bench: &OverloadBench, target: &AmqpTarget) -> anyhow::Result<()> {
    let args = &bench.half_open;
    let silent = args.half_open / 2;
    let mut kinds = vec![
        Kind {
            name: "AMQP, silent",
            addr: target.addr.clone(),
            sends: b"",
            count: silent,
        },
        Kind {
            name: "AMQP, protocol header only",
            addr: target.addr.clone(),
            sends: &PROTOCOL_HEADER,
            count: args.half_open - silent,
        },
    ];
    if let Some(addr) = bench.kafka() {
        kinds.push(Kind {
            name: "Kafka, silent",
            addr: addr.to_owned(),
            sends: b"",
            count: args.half_open,
        });
    }
    let total: usize = kinds.iter().map(|k| k.count).sum();
    super::raise_fd_limit(total, bench.broker_pid)?;
    let wait = Duration::from_secs(args.half_open_seconds);

    let mut observer = Observer::start(bench, target, "half-open").await;
    observer.phase("half-open");
    let mut opened = Vec::new();
    for kind in &kinds {
        opened.push(open_kind(kind, wait).await);
    }
    let mut outcomes = Vec::new();
    for (line, waiters) in opened {
        outcomes.push(ended(line, waiters).await);
    }
    observer.phase("after");
    tokio::time::sleep(RELEASE).await;
    let observed = observer.finish().await;

    for (kind, mut ended) in kinds.iter().zip(outcomes) {
        let closed = ended.closed_after.len();
        println!(
            "half-open {}: {}; closed by the broker: {closed}{}; still open {} s after connecting: {}",
            kind.name,
            ended.opened,
            if closed == 0 {
                String::new()
            } else {
                format!(
                    ", after (from connect) {}",
                    Percentiles::of(&mut ended.closed_after)
                )
            },
            args.half_open_seconds,
            ended.still_open
        );
    }
    if bench.kafka().is_none() {
        println!("Kafka: not measured (no --kafka-bootstrap)");
    }
    observed.print();
    Ok(())
}
