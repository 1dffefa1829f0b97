//! The flood's senders: AMQP publishers and Kafka producers that send until a deadline
//! with a bounded number of sends unsettled, the in-order settling of their outcomes that
//! counts each accepted send in the second its acknowledgement arrives, and the throttle
//! times librdkafka's statistics report.

use super::TARGET;
use futures::future::BoxFuture;
use lapin::options::BasicPublishOptions;
use lapin::{BasicProperties, Channel};
use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::statistics::{Statistics, Window};
use rdkafka::types::RDKafkaErrorCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Records a Kafka producer may have unacknowledged.
pub(super) const KAFKA_IN_FLIGHT: usize = 10_000;
/// How long a send waits when librdkafka's own queue is full.
const QUEUE_FULL_PAUSE: Duration = Duration::from_millis(10);

/// Events counted per second from a start (later ones count in the last second).
pub(super) struct PerSecond {
    from: Instant,
    counts: Vec<AtomicU64>,
}

impl PerSecond {
    pub(super) fn new(from: Instant, seconds: usize) -> Self {
        Self {
            from,
            counts: (0..seconds.max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(super) fn add(&self, at: Instant) {
        let second = at.saturating_duration_since(self.from).as_secs() as usize;
        self.counts[second.min(self.counts.len() - 1)].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn counts(&self) -> Vec<u64> {
        self.counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

/// Per-second counts summed over stretches of `stretch` seconds, as rates per second.
pub(super) fn stretch_rates(counts: &[u64], stretch: usize) -> Vec<f64> {
    counts
        .chunks(stretch.max(1))
        .map(|c| c.iter().sum::<u64>() as f64 / c.len() as f64)
        .collect()
}

/// A rate as `12.3k` or `850`.
pub(super) fn compact(rate: f64) -> String {
    if rate >= 1000.0 {
        format!("{:.1}k", rate / 1000.0)
    } else {
        format!("{rate:.0}")
    }
}

/// What the in-order settling of one sender's outcomes counted.
#[derive(Debug, Default)]
pub(super) struct Settled {
    /// Refused (nacked, failed) sends.
    refused: u64,
    /// The first refusal's reason.
    first_refusal: Option<String>,
    /// Outcomes still awaited when settling stopped.
    unsettled: u64,
}

/// The outcome of one send: accepted, or refused with a reason.
pub(super) type Outcome = BoxFuture<'static, Result<(), String>>;

/// Awaits `outcomes` in order until the sender is done and all are in, or `stop`, counting
/// each accepted one in `accepted` when it arrives.
pub(super) async fn settle(
    mut outcomes: mpsc::Receiver<Outcome>,
    accepted: Arc<PerSecond>,
    stop: CancellationToken,
) -> Settled {
    let mut settled = Settled::default();
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => break,
            next = outcomes.recv() => next,
        };
        let Some(outcome) = next else {
            return settled;
        };
        let result = tokio::select! {
            () = stop.cancelled() => {
                settled.unsettled += 1;
                break;
            }
            result = outcome => result,
        };
        match result {
            Ok(()) => accepted.add(Instant::now()),
            Err(reason) => {
                settled.refused += 1;
                settled.first_refusal.get_or_insert(reason);
            }
        }
    }
    settled.unsettled += outcomes.len() as u64;
    settled
}

/// The largest and mean `throttle_time_ms` librdkafka's statistics reported (librdkafka
/// counts only responses with a throttle time above 0).
#[derive(Debug, Default)]
pub(super) struct Throttle {
    /// Statistics reports received, all brokers' windows in each.
    reports: AtomicU64,
    max_ms: AtomicI64,
    sum_ms: AtomicI64,
    responses: AtomicI64,
    /// Statistics reports with any throttling.
    throttled_reports: AtomicU64,
}

impl Throttle {
    /// Adds one statistics report: every broker's throttle window in it.
    pub(super) fn record<'a>(&self, windows: impl Iterator<Item = &'a Window>) {
        let mut throttled = false;
        for window in windows {
            self.max_ms.fetch_max(window.max, Ordering::Relaxed);
            self.sum_ms.fetch_add(window.sum, Ordering::Relaxed);
            self.responses.fetch_add(window.cnt, Ordering::Relaxed);
            throttled |= window.max > 0;
        }
        self.reports.fetch_add(1, Ordering::Relaxed);
        if throttled {
            self.throttled_reports.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Display for Throttle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let responses = self.responses.load(Ordering::Relaxed);
        let mean = self.sum_ms.load(Ordering::Relaxed) as f64 / responses.max(1) as f64;
        write!(
            f,
            "throttle_time_ms max {} ms, mean {mean:.0} ms over {responses} throttled responses; throttled in {} of {} one-second statistics reports",
            self.max_ms.load(Ordering::Relaxed),
            self.throttled_reports.load(Ordering::Relaxed),
            self.reports.load(Ordering::Relaxed)
        )
    }
}

/// A producer context that records the brokers' throttle windows.
pub(super) struct ThrottleContext(pub(super) Arc<Throttle>);

impl ClientContext for ThrottleContext {
    fn stats(&self, statistics: Statistics) {
        self.0.record(
            statistics
                .brokers
                .values()
                .filter_map(|b| b.throttle.as_ref()),
        );
    }
}

/// Sends with `send` until `until`, passing each send's outcome to `outcomes`, whose
/// capacity bounds the sends not yet settled; the number sent. `send` gives `None` when it
/// sent nothing this time (and has waited before trying again).
pub(super) async fn send_until<F, Fut>(
    until: tokio::time::Instant,
    outcomes: mpsc::Sender<Outcome>,
    mut send: F,
) -> anyhow::Result<u64>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<Outcome>>>,
{
    let mut sent = 0;
    loop {
        let permit = tokio::select! {
            () = tokio::time::sleep_until(until) => break,
            permit = outcomes.reserve() => permit?,
        };
        // A blocked AMQP connection holds its publish here until it is unblocked.
        let outcome = tokio::select! {
            () = tokio::time::sleep_until(until) => break,
            outcome = send() => outcome?,
        };
        if let Some(outcome) = outcome {
            permit.send(outcome);
            sent += 1;
        }
    }
    Ok(sent)
}

/// Publishes to the flood queue on `channel` until `until`; the number sent.
pub(super) async fn publish(
    channel: Channel,
    body: Arc<Vec<u8>>,
    until: tokio::time::Instant,
    outcomes: mpsc::Sender<Outcome>,
) -> anyhow::Result<u64> {
    let (channel, body) = (&channel, body.as_slice());
    send_until(until, outcomes, || async move {
        let confirm = channel
            .basic_publish(
                "".into(),
                TARGET.into(),
                BasicPublishOptions::default(),
                body,
                BasicProperties::default().with_delivery_mode(2),
            )
            .await?;
        let outcome: Outcome = Box::pin(async move {
            match confirm.await {
                Ok(c) if c.is_ack() => Ok(()),
                Ok(_) => Err("nacked".to_owned()),
                Err(e) => Err(e.to_string()),
            }
        });
        Ok(Some(outcome))
    })
    .await
}

/// Produces to the flood topic with `producer` until `until`; the number sent.
pub(super) async fn produce(
    producer: Arc<FutureProducer<ThrottleContext>>,
    body: Arc<Vec<u8>>,
    until: tokio::time::Instant,
    outcomes: mpsc::Sender<Outcome>,
) -> anyhow::Result<u64> {
    let (producer, body) = (producer.as_ref(), body.as_slice());
    send_until(until, outcomes, || async move {
        let record = FutureRecord::<(), _>::to(TARGET).payload(body);
        match producer.send_result(record) {
            Ok(delivery) => {
                let outcome: Outcome = Box::pin(async move {
                    match delivery.await {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err((e, _))) => Err(e.to_string()),
                        Err(_) => Err("the producer went away".to_owned()),
                    }
                });
                Ok(Some(outcome))
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                tokio::time::sleep(QUEUE_FULL_PAUSE).await;
                Ok(None)
            }
            Err((e, _)) => Err(e.into()),
        }
    })
    .await
}

/// A sender's task and its settling task.
pub(super) struct Sender {
    /// The sender, which says how many it sent.
    pub(super) sent: tokio::task::JoinHandle<anyhow::Result<u64>>,
    /// The settling of its outcomes.
    pub(super) settled: tokio::task::JoinHandle<Settled>,
}

impl Sender {
    /// Waits for both tasks: messages sent, settled counts, and why the sender stopped
    /// early, if it did.
    pub(super) async fn join(self) -> (u64, Settled, Option<String>) {
        let (sent, error) = match self.sent.await {
            Ok(Ok(sent)) => (sent, None),
            Ok(Err(e)) => (0, Some(format!("{e:#}"))),
            Err(e) => (0, Some(e.to_string())),
        };
        (sent, self.settled.await.unwrap_or_default(), error)
    }
}

/// What a group of senders (the publishers, or the producers) did.
#[derive(Default)]
pub(super) struct Totals {
    /// Sends made.
    pub(super) sent: u64,
    /// Sends refused (nacked, failed).
    pub(super) refused: u64,
    /// The first refusal's reason.
    pub(super) first_refusal: Option<String>,
    /// Outcomes still awaited at the end.
    pub(super) unsettled: u64,
    /// Why senders stopped early.
    pub(super) errors: Vec<String>,
}

pub(super) async fn totals(senders: Vec<Sender>) -> Totals {
    let mut t = Totals::default();
    for sender in senders {
        let (sent, settled, error) = sender.join().await;
        t.sent += sent;
        t.refused += settled.refused;
        t.unsettled += settled.unsettled;
        if t.first_refusal.is_none() {
            t.first_refusal = settled.first_refusal;
        }
        t.errors.extend(error);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fall_in_their_second_and_late_ones_in_the_last() {
        let t = Instant::now();
        let per = PerSecond::new(t, 3);
        per.add(t);
        per.add(t + Duration::from_millis(1500));
        per.add(t + Duration::from_secs(60));
        assert_eq!(per.counts(), vec![1, 1, 1]);
    }

    #[test]
    fn stretch_rates_are_per_second_means_and_a_short_last_stretch_counts_its_own_length() {
        assert_eq!(
            stretch_rates(&[10, 20, 30, 40, 50], 2),
            vec![15.0, 35.0, 50.0]
        );
        assert_eq!(compact(12_345.0), "12.3k");
        assert_eq!(compact(850.0), "850");
    }

    #[test]
    fn throttle_keeps_the_largest_the_mean_over_throttled_responses_and_the_throttled_reports() {
        let throttle = Throttle::default();
        let window = |max, sum, cnt| Window {
            max,
            sum,
            cnt,
            ..Window::default()
        };
        throttle.record([window(0, 0, 0), window(0, 0, 0)].iter());
        throttle.record([window(900, 1000, 2), window(300, 500, 3)].iter());
        throttle.record([].iter());
        assert_eq!(
            throttle.to_string(),
            "throttle_time_ms max 900 ms, mean 300 ms over 5 throttled responses; throttled in 1 of 3 one-second statistics reports"
        );
    }
}
