//! `ferry bench overload`: how a broker holds up under overload (issue 17, point 4), for
//! any running broker whose PID is given — `ferry run`, or RabbitMQ for comparison.
//!
//! Scenarios (`--scenario`, or `all` in this order):
//! - [`flood`]: publishers with no consumer, then a consumer that drains what they left;
//! - [`idle`]: thousands of connections that finish the handshake and then do nothing;
//! - [`slow_reader`]: consumers that never read their socket;
//! - [`half_open`]: connections that never finish the handshake.
//!
//! Beside every load run the [`probe`]s — a round trip through a queue every 50 ms, and a
//! new AMQP and Kafka connection every second — and the broker's resident memory, open
//! file descriptors and CPU time are read from `/proc` every 200 ms ([`watch`]). Each
//! scenario is split into phases — first `settling` (until the broker's memory stops
//! falling from whatever ran before) and `baseline` (the probes without load) — and prints
//! its own figures plus one table row per phase, as lines to paste into
//! `docs/benchmarks.md`.
//!
//! Every loop is bounded in count and time by the flags; the raw clients ([`raw`]) speak
//! plaintext only, so `--amqp-uri` must be `amqp://`. An empty `--kafka-bootstrap` leaves
//! the Kafka parts out.

mod flood;
mod half_open;
mod idle;
mod many;
mod probe;
mod raw;
mod slow_reader;

use crate::broker::describe_broker;
use crate::broker::watch::{self, Phase, PhaseGauges, Reading, Watch, mib};
use probe::{Logs, Probes};
use raw::AmqpTarget;
use std::time::{Duration, Instant};

/// Descriptors this process needs beyond its scenario's connections (the probes, the
/// runtime, librdkafka's sockets).
const FD_MARGIN: u64 = 256;
/// Longest a scenario's phase may be set to last.
const MAX_SECONDS: u64 = 3600;
/// Most connections a scenario may open to one port: the loopback's ephemeral ports.
const MAX_CONNECTIONS: usize = 28_000;

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct OverloadBench {
    /// The AMQP broker (plaintext).
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    pub amqp_uri: String,
    /// `host:port` of the Kafka listener; empty to leave the Kafka parts out.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub kafka_bootstrap: String,
    /// PID of the broker process on this machine (`ferry run`, or RabbitMQ's `beam.smp`):
    /// its memory, descriptors and CPU time are read from `/proc`.
    #[arg(long)]
    pub broker_pid: u32,
    /// What to run.
    #[arg(long, value_enum, default_value_t = Scenario::All)]
    pub scenario: Scenario,
    /// Seconds of the baseline phase (the probes without load) of each scenario.
    #[arg(long, default_value_t = 3)]
    pub baseline_seconds: u64,
    /// The flood's sizes.
    #[command(flatten)]
    pub flood: flood::FloodArgs,
    /// The idle connections' sizes.
    #[command(flatten)]
    pub idle: idle::IdleArgs,
    /// The slow readers' sizes.
    #[command(flatten)]
    pub slow_reader: slow_reader::SlowReaderArgs,
    /// The half-open connections' sizes.
    #[command(flatten)]
    pub half_open: half_open::HalfOpenArgs,
}

/// A scenario of `ferry bench overload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Publishers and producers with no consumer, then a draining consumer.
    Flood,
    /// Connections that do nothing after the handshake.
    Idle,
    /// Consumers that never read their socket.
    SlowReader,
    /// Connections that never finish the handshake.
    HalfOpen,
    /// Each of the above in turn.
    All,
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = clap::ValueEnum::to_possible_value(self).expect("no scenario is skipped");
        f.write_str(value.get_name())
    }
}

impl OverloadBench {
    /// The Kafka listener the raw clients connect to (the first of the list), if any.
    fn kafka(&self) -> Option<&str> {
        self.kafka_bootstrap
            .split(',')
            .next()
            .map(str::trim)
            .filter(|addr| !addr.is_empty())
    }

    /// The flags every scenario shares, as a command line would give them.
    fn common_flags(&self) -> String {
        format!(
            "--broker-pid {} --amqp-uri {} --kafka-bootstrap '{}' --baseline-seconds {}",
            self.broker_pid,
            ferry_config::secret::redacted_uri(&self.amqp_uri),
            self.kafka_bootstrap,
            self.baseline_seconds
        )
    }

    /// Checks that every size is within its bounds, without I/O.
    ///
    /// # Errors
    /// The first flag out of bounds, named.
    fn validate(&self) -> anyhow::Result<()> {
        seconds("--baseline-seconds", self.baseline_seconds)?;
        self.flood.validate()?;
        self.idle.validate()?;
        self.slow_reader.validate()?;
        self.half_open.validate()
    }
}

/// Checks that flag `name`'s `value` is a length of time from 1 s to [`MAX_SECONDS`].
fn seconds(name: &str, value: u64) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_SECONDS).contains(&value),
        "{name} {value}: from 1 to {MAX_SECONDS} seconds"
    );
    Ok(())
}

/// Checks that flag `name`'s `value` is a number of connections to one port, at most
/// [`MAX_CONNECTIONS`].
fn connections(name: &str, value: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        value <= MAX_CONNECTIONS,
        "{name} {value}: at most {MAX_CONNECTIONS} connections to one port (the loopback's ephemeral ports)"
    );
    Ok(())
}

/// Runs the chosen scenarios against the broker and prints their figures.
///
/// # Errors
/// A flag out of bounds or an unusable URI, or a scenario that failed (with `all`, the
/// others still run first).
pub async fn run(bench: &OverloadBench) -> anyhow::Result<()> {
    bench.validate()?;
    let target = AmqpTarget::parse(&bench.amqp_uri)?;
    let scenarios = match bench.scenario {
        Scenario::All => vec![
            Scenario::Flood,
            Scenario::Idle,
            Scenario::SlowReader,
            Scenario::HalfOpen,
        ],
        one => vec![one],
    };
    let mut failed = Vec::new();
    for scenario in scenarios {
        let specific = match scenario {
            Scenario::Flood => bench.flood.flags(),
            Scenario::Idle => bench.idle.flags(),
            Scenario::SlowReader => bench.slow_reader.flags(),
            Scenario::HalfOpen => bench.half_open.flags(),
            Scenario::All => unreachable!("`all` is expanded above"),
        };
        println!("\noverload {scenario}");
        println!(
            "command: ferry bench overload --scenario {scenario} {} {specific}",
            bench.common_flags()
        );
        println!("broker: {}", describe_broker(bench.broker_pid));
        let outcome = match scenario {
            Scenario::Flood => flood::run(bench, &target).await,
            Scenario::Idle => idle::run(bench, &target).await,
            Scenario::SlowReader => slow_reader::run(bench, &target).await,
            Scenario::HalfOpen => half_open::run(bench, &target).await,
            Scenario::All => unreachable!("`all` is expanded above"),
        };
        if let Err(e) = outcome {
            println!("{scenario}: failed: {e:#}");
            failed.push(scenario.to_string());
        }
    }
    anyhow::ensure!(
        failed.is_empty(),
        "scenario(s) {} failed",
        failed.join(", ")
    );
    Ok(())
}

/// Raises this process's soft open-files limit to its hard limit, and checks that
/// `connections` (plus [`FD_MARGIN`]) fit; says so when the broker's own limit is lower.
///
/// # Errors
/// The hard limit is below what the scenario needs: it could not run as asked.
fn raise_fd_limit(connections: usize, broker_pid: u32) -> anyhow::Result<()> {
    let needed = connections as u64 + FD_MARGIN;
    let limit = ferry_telemetry::process::raise_fd_limit()
        .ok_or_else(|| anyhow::anyhow!("cannot read this process's open-files limit"))?;
    anyhow::ensure!(
        limit >= needed,
        "this process may open at most {limit} files (its hard RLIMIT_NOFILE) and the scenario needs {needed}: raise the hard limit (`ulimit -Hn`, as root) or ask for fewer connections"
    );
    let broker = std::fs::read_to_string(format!("/proc/{broker_pid}/limits"))
        .ok()
        .and_then(|l| watch::max_open_files(&l));
    if let Some(broker) = broker.filter(|b| *b < connections as u64) {
        println!(
            "note: the broker may open only {broker} files, fewer than the {connections} connections of this scenario"
        );
    }
    Ok(())
}

/// What every scenario measures beside its load: the probes and the broker's gauges, and
/// the phases they are split into.
struct Observer {
    started: Instant,
    watch: Watch,
    probes: Probes,
    phases: Vec<Phase>,
    /// The phase under way and its start.
    current: (&'static str, Instant),
}

impl Observer {
    /// Starts the gauges and the probes, lets the broker's memory settle (phase
    /// `settling`, [`watch::settle`], whose outcome is printed), then waits out the
    /// baseline phase.
    async fn start(bench: &OverloadBench, target: &AmqpTarget, scenario: &str) -> Self {
        let queue = format!("ferry-overload-probe-{}", std::process::id());
        let watch = Watch::start(bench.broker_pid);
        let probes = Probes::start(&bench.amqp_uri, target, bench.kafka(), &queue);
        let started = Instant::now();
        eprintln!("overload {scenario}: settling");
        let mut observer = Self {
            started,
            watch,
            probes,
            phases: Vec::new(),
            current: ("settling", started),
        };
        let (rss, settled) = watch::settle(bench.broker_pid).await;
        println!(
            "broker RSS before the baseline: {} MiB, {} after {:.0} s",
            rss.map_or("—".to_owned(), mib),
            if settled {
                "settled (within 1 MiB over 4 s)"
            } else {
                "still changing"
            },
            started.elapsed().as_secs_f64()
        );
        observer.phase("baseline");
        tokio::time::sleep(Duration::from_secs(bench.baseline_seconds)).await;
        observer
    }

    /// Ends the phase under way and starts phase `name`.
    fn phase(&mut self, name: &'static str) {
        let now = Instant::now();
        let (previous, from) = self.current;
        self.phases.push(Phase {
            name: previous,
            from,
            to: now,
        });
        self.current = (name, now);
        eprintln!("  +{:.1} s: {name}", self.offset(now));
    }

    /// Seconds from the start of the scenario's observation to `at`.
    fn offset(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64()
    }

    /// Ends the last phase and stops the probes and the gauges.
    async fn finish(mut self) -> Observed {
        self.phase("end");
        let logs = self.probes.stop().await;
        let readings = self.watch.stop().await;
        Observed {
            started: self.started,
            phases: self.phases,
            readings,
            logs,
        }
    }
}

/// What an [`Observer`] saw.
struct Observed {
    started: Instant,
    phases: Vec<Phase>,
    readings: Vec<Reading>,
    logs: Logs,
}

impl Observed {
    /// The gauges of phase `name` (empty for a phase that did not run).
    fn gauges(&self, name: &str) -> PhaseGauges {
        self.phases
            .iter()
            .find(|p| p.name == name)
            .map(|p| watch::summarize(&self.readings, p))
            .unwrap_or_default()
    }

    /// Seconds from the start of the scenario's observation (its settling) to `at`.
    fn offset(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64()
    }

    /// The resident memory the load added per connection, in bytes: the peak of phases
    /// `load` over the last reading of phase `before`, divided by `connections`; `None`
    /// when the peak is not above it.
    fn rss_per_connection(&self, before: &str, load: &[&str], connections: usize) -> Option<f64> {
        let baseline = self.gauges(before).rss_kib?.last;
        let peak = load
            .iter()
            .filter_map(|name| self.gauges(name).rss_kib)
            .map(|span| span.peak)
            .max()?;
        (connections > 0 && peak > baseline)
            .then(|| (peak - baseline) as f64 * 1024.0 / connections as f64)
    }

    /// One table row per phase (probes and gauges), then the probes' failures.
    fn print(&self) {
        println!(
            "| phase | s | round trip ms p50/p99/max (n) | new AMQP connection ms | new Kafka connection ms | broker RSS MiB first/peak/last | broker fds first/peak/last | broker CPU s | bench CPU s |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for phase in &self.phases {
            let g = watch::summarize(&self.readings, phase);
            let kafka = self
                .logs
                .kafka_connect
                .as_ref()
                .map_or_else(|| "—".to_owned(), |log| log.during(phase).to_string());
            let span = |s: Option<watch::Span>, show: fn(u64) -> String| {
                s.map_or_else(
                    || "—".to_owned(),
                    |s| format!("{}/{}/{}", show(s.first), show(s.peak), show(s.last)),
                )
            };
            let cpu = |d: Option<Duration>| {
                d.map_or_else(|| "—".to_owned(), |d| format!("{:.2}", d.as_secs_f64()))
            };
            println!(
                "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
                phase.name,
                phase.length().as_secs_f64(),
                self.logs.round_trip.during(phase),
                self.logs.amqp_connect.during(phase),
                kafka,
                span(g.rss_kib, mib),
                span(g.fds, |n| n.to_string()),
                cpu(g.broker_cpu),
                cpu(g.bench_cpu),
            );
        }
        let probes = [
            ("round trip", Some(&self.logs.round_trip)),
            ("new AMQP connection", Some(&self.logs.amqp_connect)),
            ("new Kafka connection", self.logs.kafka_connect.as_ref()),
        ];
        for (name, log) in probes {
            for phase in &self.phases {
                let summary = log.map(|l| l.during(phase));
                if let Some(first) = summary.and_then(|s| s.first_failure) {
                    println!("{name} failures in {}: first: {first}", phase.name);
                }
            }
        }
        for phase in &self.phases {
            let gaps = watch::summarize(&self.readings, phase).gaps;
            if gaps > 0 {
                println!(
                    "the broker's /proc entry could not be read {gaps} time(s) in {} (did it exit?)",
                    phase.name
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: OverloadBench,
    }

    fn parse(args: &[&str]) -> Result<OverloadBench, clap::Error> {
        Cli::try_parse_from(std::iter::once("overload").chain(args.iter().copied()))
            .map(|c| c.bench)
    }

    #[test]
    fn the_defaults_are_the_issue_sizes_and_pass_validation() {
        let bench = parse(&["--broker-pid", "1"]).unwrap();
        assert_eq!(bench.scenario, Scenario::All);
        assert_eq!(bench.flood.publishers, 4);
        assert_eq!(bench.flood.kafka_producers, 2);
        assert_eq!(bench.idle.connections, 10_000);
        assert_eq!(bench.idle.kafka_connections, 10_000);
        assert_eq!(bench.slow_reader.slow_readers, 10);
        assert_eq!(bench.half_open.half_open, 2000);
        bench.validate().unwrap();
    }

    #[test]
    fn the_broker_pid_is_required() {
        let err = parse(&[]).err().unwrap().to_string();
        assert!(err.contains("--broker-pid"), "{err}");
    }

    #[test]
    fn an_unbounded_duration_or_connection_count_is_refused_by_name() {
        for (flag, value) in [("--duration", "0"), ("--connections", "100000")] {
            let bench = parse(&["--broker-pid", "1", flag, value]).unwrap();
            let err = bench.validate().unwrap_err().to_string();
            assert!(err.contains(flag), "{err}");
        }
    }

    #[test]
    fn an_empty_bootstrap_leaves_kafka_out_and_a_list_gives_its_first_listener() {
        let bench = parse(&["--broker-pid", "1", "--kafka-bootstrap", ""]).unwrap();
        assert_eq!(bench.kafka(), None);
        let bench = parse(&["--broker-pid", "1", "--kafka-bootstrap", "h1:9092, h2:9092"]).unwrap();
        assert_eq!(bench.kafka(), Some("h1:9092"));
    }

    #[test]
    fn the_printed_command_hides_the_password() {
        let bench = parse(&[
            "--broker-pid",
            "7",
            "--amqp-uri",
            "amqp://bench:s3cret@127.0.0.1:25672/%2f",
        ])
        .unwrap();
        let flags = bench.common_flags();
        assert!(!flags.contains("s3cret"), "{flags}");
        assert!(flags.contains("--broker-pid 7"), "{flags}");
    }
}
