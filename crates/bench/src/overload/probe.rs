//! The probes every scenario runs beside its load, standing for the broker's other
//! clients: what the load costs them is the point of the measurement.
//!
//! - Round trip: one AMQP connection (lapin) publishes a small persistent message with
//!   confirms to its own durable queue and consumes it, one at a time, every
//!   [`ROUND_TRIP_EVERY`]; a sample is the time from publishing to both the delivery and the
//!   confirm. A round trip has no timeout of its own: one the broker holds up (a blocked
//!   connection, say) is one long sample, or is left unfinished when the scenario ends.
//!   A failed connection is counted and opened again.
//! - New connections: every [`CONNECT_EVERY`], a fresh AMQP connection runs the handshake
//!   up to connection.open-ok (and closes), and a fresh Kafka connection exchanges
//!   ApiVersions; each within [`CONNECT_TIMEOUT`], else a failure.

use super::raw::{AmqpTarget, RawAmqp, kafka_connect};
use crate::Percentiles;
use crate::amqp::connect;
use crate::broker::watch::Phase;
use ferry_config::AmqpTlsConfig;
use futures::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, Consumer};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often the round-trip probe publishes.
pub(super) const ROUND_TRIP_EVERY: Duration = Duration::from_millis(50);
/// How often a new connection is tried.
pub(super) const CONNECT_EVERY: Duration = Duration::from_secs(1);
/// How long a new connection may take before it counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the round-trip probe's connection setup may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the round-trip probe's connection may take to close at the end.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an attempt under way when the probes stop may still take to count; after that
/// it is reported unfinished.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// What one probe saw.
#[derive(Debug, Clone, Default)]
pub(super) struct Log {
    /// Each sample's start and latency.
    pub samples: Vec<(Instant, Duration)>,
    /// Each failure's time and error.
    pub failures: Vec<(Instant, String)>,
    /// The start of the attempt still under way when the probe stopped.
    pub unfinished: Option<Instant>,
}

impl Log {
    fn fail(&mut self, error: impl std::fmt::Display) {
        self.failures.push((Instant::now(), format!("{error:#}")));
    }

    /// What the probe saw of the attempts started in `phase`.
    pub(super) fn during(&self, phase: &Phase) -> LogSummary {
        let mut latencies: Vec<Duration> = self
            .samples
            .iter()
            .filter(|(at, _)| phase.holds(*at))
            .map(|(_, latency)| *latency)
            .collect();
        let failures: Vec<&String> = self
            .failures
            .iter()
            .filter(|(at, _)| phase.holds(*at))
            .map(|(_, error)| error)
            .collect();
        LogSummary {
            count: latencies.len(),
            latency: (!latencies.is_empty()).then(|| Percentiles::of(&mut latencies)),
            failures: failures.len(),
            first_failure: failures.first().map(|e| (*e).clone()),
            unfinished: self
                .unfinished
                .filter(|at| phase.holds(*at))
                .map(|at| phase.to.saturating_duration_since(at)),
        }
    }
}

/// A probe's figures over one phase.
#[derive(Debug, Clone)]
pub(super) struct LogSummary {
    /// Attempts that completed.
    pub count: usize,
    /// Their latency.
    pub latency: Option<Percentiles>,
    /// Attempts that failed.
    pub failures: usize,
    /// The first failure's error.
    pub first_failure: Option<String>,
    /// How long the attempt left unfinished at the end had been waiting.
    pub unfinished: Option<Duration>,
}

impl std::fmt::Display for LogSummary {
    /// `p50/p99/max ms (n)`, then failures and an unfinished attempt if any.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.latency {
            Some(p) => write!(f, "{} ({})", p.cell(), self.count)?,
            None => f.write_str("— (0)")?,
        }
        if self.failures > 0 {
            write!(f, ", {} failed", self.failures)?;
        }
        if let Some(waiting) = self.unfinished {
            write!(f, ", 1 unanswered for {:.1} s", waiting.as_secs_f64())?;
        }
        Ok(())
    }
}

/// What the probes saw.
pub(super) struct Logs {
    /// The round-trip probe.
    pub round_trip: Log,
    /// New AMQP connections.
    pub amqp_connect: Log,
    /// New Kafka connections, when Kafka is measured.
    pub kafka_connect: Option<Log>,
}

/// The probes, running until [`Probes::stop`].
pub(super) struct Probes {
    stop: CancellationToken,
    round_trip: JoinHandle<Log>,
    amqp_connect: JoinHandle<Log>,
    kafka_connect: Option<JoinHandle<Log>>,
}

impl Probes {
    /// Starts the probes against `uri` (`target` for the raw connections) and, when given,
    /// the Kafka broker at `kafka`; the round-trip probe's queue is `queue`.
    pub(super) fn start(uri: &str, target: &AmqpTarget, kafka: Option<&str>, queue: &str) -> Self {
        let stop = CancellationToken::new();
        let round_trip = tokio::spawn(round_trips(uri.to_owned(), queue.to_owned(), stop.clone()));
        let amqp_connect = tokio::spawn({
            let target = target.clone();
            new_connections(stop.clone(), move || {
                let target = target.clone();
                async move { RawAmqp::handshake(&target).await?.close().await }
            })
        });
        let kafka_connect = kafka.map(|addr| {
            let addr = addr.to_owned();
            tokio::spawn(new_connections(stop.clone(), move || {
                let addr = addr.clone();
                async move { kafka_connect(&addr).await.map(drop) }
            }))
        });
        Self {
            stop,
            round_trip,
            amqp_connect,
            kafka_connect,
        }
    }

    /// Stops the probes; what they saw.
    pub(super) async fn stop(self) -> Logs {
        self.stop.cancel();
        let joined = |r: Result<Log, _>| r.unwrap_or_default();
        let kafka_connect = match self.kafka_connect {
            Some(task) => Some(joined(task.await)),
            None => None,
        };
        Logs {
            round_trip: joined(self.round_trip.await),
            amqp_connect: joined(self.amqp_connect.await),
            kafka_connect,
        }
    }
}

/// A tick every period until a token is cancelled; a late tick delays the next ones rather
/// than bunching them, so a probe held up does not fire a burst afterwards.
struct Ticks<'a> {
    interval: tokio::time::Interval,
    stop: &'a CancellationToken,
}

impl<'a> Ticks<'a> {
    fn new(every: Duration, stop: &'a CancellationToken) -> Self {
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { interval, stop }
    }

    /// Waits for the next tick; `false` once the token is cancelled.
    async fn next(&mut self) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            _ = self.interval.tick() => true,
        }
    }
}

/// Tries `connect` every [`CONNECT_EVERY`] until `stop`.
async fn new_connections<F, Fut>(stop: CancellationToken, connect: F) -> Log
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let mut log = Log::default();
    let mut ticks = Ticks::new(CONNECT_EVERY, &stop);
    while ticks.next().await {
        let started = Instant::now();
        let Some(outcome) = finish(&stop, tokio::time::timeout(CONNECT_TIMEOUT, connect())).await
        else {
            log.unfinished = Some(started);
            break;
        };
        match outcome {
            Ok(Ok(())) => log.samples.push((started, started.elapsed())),
            Ok(Err(e)) => log.fail(e),
            Err(_) => log.fail(format!("no connection within {CONNECT_TIMEOUT:?}")),
        }
    }
    log
}

/// `attempt`'s outcome; once `stop` is cancelled, only if it comes within [`STOP_GRACE`].
async fn finish<T>(stop: &CancellationToken, attempt: impl Future<Output = T>) -> Option<T> {
    tokio::pin!(attempt);
    tokio::select! {
        outcome = &mut attempt => Some(outcome),
        () = stop.cancelled() => tokio::time::timeout(STOP_GRACE, attempt).await.ok(),
    }
}

/// The round-trip probe's connection.
struct Link {
    connection: Connection,
    channel: Channel,
    consumer: Consumer,
    queue: String,
}

impl Link {
    /// Connects, declares `queue` (durable, deleted with its last consumer) and consumes it
    /// without acknowledgements.
    async fn open(uri: &str, queue: &str) -> anyhow::Result<Self> {
        let connection = connect(uri, &AmqpTlsConfig::default()).await?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let options = QueueDeclareOptions {
            durable: true,
            auto_delete: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(queue.into(), options, FieldTable::default())
            .await?;
        let consumer = channel
            .basic_consume(
                queue.into(),
                "overload-probe".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await?;
        Ok(Self {
            connection,
            channel,
            consumer,
            queue: queue.to_owned(),
        })
    }

    /// Publishes message `seq` and waits for its confirm and its delivery.
    async fn round_trip(&mut self, seq: u64) -> anyhow::Result<()> {
        let body = seq.to_be_bytes();
        let confirm = self
            .channel
            .basic_publish(
                "".into(),
                self.queue.as_str().into(),
                BasicPublishOptions::default(),
                &body,
                BasicProperties::default().with_delivery_mode(2),
            )
            .await?;
        let consumer = &mut self.consumer;
        let delivered = async {
            loop {
                let delivery = consumer
                    .next()
                    .await
                    .ok_or_else(|| anyhow::anyhow!("the probe's consumer was cancelled"))??;
                if delivery.data == body {
                    return Ok::<_, anyhow::Error>(());
                }
            }
        };
        let (confirmed, delivered) = tokio::join!(confirm, delivered);
        anyhow::ensure!(confirmed?.is_ack(), "the probe's publish was nacked");
        delivered
    }

    async fn close(self) {
        let _ = tokio::time::timeout(
            CLOSE_TIMEOUT,
            self.connection.close(200, "probe done".into()),
        )
        .await;
    }
}

/// Round trips every [`ROUND_TRIP_EVERY`] until `stop`, reconnecting after a failure.
async fn round_trips(uri: String, queue: String, stop: CancellationToken) -> Log {
    let mut log = Log::default();
    let mut seq = 0u64;
    while !stop.is_cancelled() {
        let opened = tokio::select! {
            () = stop.cancelled() => break,
            opened = tokio::time::timeout(SETUP_TIMEOUT, Link::open(&uri, &queue)) => opened,
        };
        let mut link = match opened {
            Ok(Ok(link)) => link,
            Ok(Err(e)) => {
                log.fail(e.context("the probe cannot connect"));
                tokio::time::sleep(CONNECT_EVERY).await;
                continue;
            }
            Err(_) => {
                log.fail(format!("the probe cannot connect within {SETUP_TIMEOUT:?}"));
                continue;
            }
        };
        let mut ticks = Ticks::new(ROUND_TRIP_EVERY, &stop);
        while ticks.next().await {
            seq += 1;
            let started = Instant::now();
            let Some(outcome) = finish(&stop, link.round_trip(seq)).await else {
                log.unfinished = Some(started);
                break;
            };
            match outcome {
                Ok(()) => log.samples.push((started, started.elapsed())),
                Err(e) => {
                    log.fail(e);
                    break;
                }
            }
        }
        link.close().await;
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_summary_counts_only_what_started_in_the_phase() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let log = Log {
            samples: vec![(t, ms(1)), (t + ms(100), ms(3)), (t + ms(150), ms(5))],
            failures: vec![
                (t + ms(120), "refused".into()),
                (t + ms(900), "late".into()),
            ],
            unfinished: Some(t + ms(180)),
        };
        let phase = Phase {
            name: "load",
            from: t + ms(50),
            to: t + ms(200),
        };
        let s = log.during(&phase);
        assert_eq!(s.count, 2);
        assert_eq!(s.latency.map(|p| p.max), Some(ms(5)));
        assert_eq!(s.failures, 1);
        assert_eq!(s.first_failure.as_deref(), Some("refused"));
        assert_eq!(s.unfinished, Some(ms(20)));
        assert_eq!(
            s.to_string(),
            "5.0/5.0/5.0 (2), 1 failed, 1 unanswered for 0.0 s"
        );
    }

    #[test]
    fn a_phase_without_samples_says_so() {
        let t = Instant::now();
        let phase = Phase {
            name: "baseline",
            from: t,
            to: t + Duration::from_secs(1),
        };
        assert_eq!(Log::default().during(&phase).to_string(), "— (0)");
    }
}
