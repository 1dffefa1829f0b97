//! Delivery to a destination: one worker per route destination leases batches from the
//! destination's stage and hands them over, removing each message only after the
//! destination confirmed it.
//!
//! Two kinds of destination:
//! - [`ExternalSink`] (external RabbitMQ, external Kafka): the batch is sent after the
//!   lease commits and acknowledged in the stage after the broker's confirm. A crash
//!   between the two sends the batch again on restart with `redelivered` set; it carries
//!   the same message-id and is counted in `ferry_bridge_redeliveries_total`.
//! - [`InStoreSink`] (Ferry's own AMQP and Kafka fronts): the message is written to its
//!   destination in the *same* store transaction that acknowledges it, and only if this
//!   holder still held it, so it lands exactly once.
//!
//! Outcomes: a transient failure ([`Outcome::Retry`], e.g. the broker is down) keeps the
//! batch leased and tries again after an exponential backoff with jitter, never counting
//! an attempt, so an outage only grows the stage. A permanent refusal
//! ([`Outcome::Rejected`], e.g. too large, unroutable) returns the message to its place;
//! the stage dead-letters it once it has been refused `max_attempts` times.

use super::route::Destination;
use super::staged::Outgoing;
use crate::stage::{Consumer, Delivery, Holders, MessageId, Release, Stage, StageError, Step};
use crate::store::Transaction;
use crate::telemetry::bridge as metric;
use futures::future::BoxFuture;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// What a destination said about one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It has the message.
    Delivered,
    /// It could not take it now (connection down, broker busy); try again later.
    Retry(String),
    /// It refuses it (too large, unroutable); counts as an attempt.
    Rejected(String),
}

/// A destination outside the store: it confirms asynchronously.
pub trait ExternalSink: Send {
    /// Hands over `batch`; one outcome per message, in order. Waits for the confirms.
    fn deliver<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, Vec<Outcome>>;
}

/// A destination inside the store (one of Ferry's fronts).
pub trait InStoreSink: Send + Sync {
    /// What would happen to each message of `batch` (no side effects): messages planned
    /// [`Outcome::Delivered`] are then written with [`InStoreSink::write_in`].
    fn plan(&self, batch: &[Outgoing]) -> Vec<Outcome>;

    /// Writes `batch` to the destination within `tx`.
    fn write_in<'a>(
        &'a self,
        tx: &'a Transaction,
        batch: &'a [&'a Outgoing],
        now: u64,
    ) -> BoxFuture<'a, Result<(), StageError>>;
}

/// A route destination's way out.
pub enum Sink {
    /// An external broker.
    External(Box<dyn ExternalSink>),
    /// One of Ferry's fronts.
    InStore(Box<dyn InStoreSink>),
}

/// Retry delays: exponential from `initial` to `max`, each with up to 50 % jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays starting at `initial`, doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            next: initial,
        }
    }

    /// The next delay (and doubles the one after).
    pub fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        base.mul_f64(0.5 + fastrand::f64() * 0.5)
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// Everything a destination worker needs.
pub struct Worker {
    /// The route's name (a metric label).
    pub route: String,
    /// The destination.
    pub destination: Destination,
    /// How it delivers.
    pub sink: Sink,
    /// The lease holders of the store.
    pub holders: Holders,
    /// This worker's holder (kept alive by the bridge).
    pub holder: u64,
    /// Messages per lease.
    pub batch: usize,
    /// Retry delays.
    pub backoff: Backoff,
}

impl Worker {
    /// Delivers until `shutdown`; leases left at shutdown return when the holder is
    /// released.
    ///
    /// # Errors
    /// The store's error when the store itself fails.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), StageError> {
        let stage = self.destination.stage.clone();
        let mut consumer =
            Consumer::new(stage.clone(), self.holders.clone(), self.holder, self.batch);
        let label = endpoint_label(&self.destination.endpoint);
        loop {
            let step = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                step = consumer.step() => step?,
            };
            let deliveries = match step {
                Step::Delivered(d) => d,
                Step::Idle(wakeup) => {
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = wakeup.wait() => continue,
                    }
                }
            };
            let done = self
                .hand_over(&stage, &deliveries, &label, &shutdown)
                .await?;
            consumer.forget(&done);
        }
    }

    /// Delivers one leased batch until every message is acknowledged, returned or
    /// dead-lettered (or shutdown); returns the ids settled.
    async fn hand_over(
        &mut self,
        stage: &Stage,
        deliveries: &[Delivery],
        label: &str,
        shutdown: &CancellationToken,
    ) -> Result<Vec<MessageId>, StageError> {
        let labels = [
            (metric::LABEL_ROUTE, self.route.clone()),
            (metric::LABEL_ENDPOINT, label.to_owned()),
        ];
        let mut settled = Vec::with_capacity(deliveries.len());
        let mut pending = Vec::with_capacity(deliveries.len());
        let mut undecodable = Vec::new();
        for d in deliveries {
            match Outgoing::decode(d) {
                Ok(o) => pending.push(o),
                Err(e) => {
                    warn!(route = %self.route, destination = label, error = %e, "dead-lettering a message that cannot be decoded");
                    undecodable.push(d.id);
                }
            }
        }
        if !undecodable.is_empty() {
            stage
                .release(self.holder, &undecodable, Release::Reject)
                .await?;
            metrics::counter!(metric::DEAD_LETTERS_TOTAL, &labels)
                .increment(undecodable.len() as u64);
            settled.extend(undecodable);
        }
        let redelivered = pending.iter().filter(|o| o.redelivered).count();
        metrics::counter!(metric::REDELIVERIES_TOTAL, &labels).increment(redelivered as u64);
        while !pending.is_empty() {
            if shutdown.is_cancelled() {
                return Ok(settled);
            }
            let outcomes = match &mut self.sink {
                Sink::External(sink) => sink.deliver(&pending).await,
                Sink::InStore(sink) => {
                    deliver_in_store(stage, self.holder, sink.as_ref(), &pending).await?
                }
            };
            let mut delivered = Vec::new();
            let mut rejected = Vec::new();
            let mut retry = Vec::new();
            let mut last_error = None;
            for (o, outcome) in pending.drain(..).zip(outcomes) {
                match outcome {
                    Outcome::Delivered => delivered.push(o),
                    Outcome::Rejected(why) => {
                        last_error = Some(why);
                        rejected.push(o);
                    }
                    Outcome::Retry(why) => {
                        last_error = Some(why);
                        retry.push(o);
                    }
                }
            }
            if !delivered.is_empty() {
                let ids: Vec<MessageId> = delivered.iter().map(|o| o.id).collect();
                if matches!(self.sink, Sink::External(_)) {
                    stage.ack(self.holder, &ids).await?;
                }
                let now = crate::stage::now_ms();
                let bytes: usize = delivered.iter().map(Outgoing::len).sum();
                metrics::counter!(metric::MESSAGES_OUT_TOTAL, &labels).increment(ids.len() as u64);
                metrics::counter!(metric::BYTES_OUT_TOTAL, &labels).increment(bytes as u64);
                let latency = metrics::histogram!(metric::DELIVERY_SECONDS, &labels);
                for o in &delivered {
                    latency.record(now.saturating_sub(o.staged_ms) as f64 / 1000.0);
                }
                settled.extend(ids);
                self.backoff.reset();
            }
            if !rejected.is_empty() {
                let ids: Vec<MessageId> = rejected.iter().map(|o| o.id).collect();
                let before = self
                    .destination
                    .dead
                    .depth()
                    .await
                    .map(|d| d.pushed)
                    .unwrap_or(0);
                stage.release(self.holder, &ids, Release::Requeue).await?;
                let after = self
                    .destination
                    .dead
                    .depth()
                    .await
                    .map(|d| d.pushed)
                    .unwrap_or(before);
                metrics::counter!(metric::DEAD_LETTERS_TOTAL, &labels)
                    .increment(after.saturating_sub(before) as u64);
                metrics::counter!(metric::RETRIES_TOTAL, &labels).increment(ids.len() as u64);
                settled.extend(ids);
            }
            if let Some(why) = last_error {
                metrics::counter!(metric::RETRIES_TOTAL, &labels).increment(retry.len() as u64);
                let delay = self.backoff.next_delay();
                debug!(route = %self.route, destination = label, error = %why, ?delay, "delivery failed; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(settled),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            pending = retry;
        }
        Ok(settled)
    }
}

/// One store transaction: each message planned deliverable and still leased to `holder`
/// is acknowledged and written to the destination together.
async fn deliver_in_store(
    stage: &Stage,
    holder: u64,
    sink: &dyn InStoreSink,
    batch: &[Outgoing],
) -> Result<Vec<Outcome>, StageError> {
    let outcomes = sink.plan(batch);
    let now = crate::stage::now_ms();
    stage
        .db()
        .run(|tx| {
            let outcomes = &outcomes;
            async move {
                let mut writes = Vec::with_capacity(batch.len());
                for (o, outcome) in batch.iter().zip(outcomes) {
                    // A message no longer leased to us was acknowledged by an earlier
                    // attempt of this transaction whose outcome was unknown.
                    if *outcome == Outcome::Delivered
                        && stage.ack_in(&tx, holder, &[o.id]).await? == 1
                    {
                        writes.push(o);
                    }
                }
                sink.write_in(&tx, &writes, now).await
            }
        })
        .await?;
    Ok(outcomes)
}

/// The metric label of an endpoint.
pub fn endpoint_label(e: &crate::config::Endpoint) -> String {
    use crate::config::Endpoint;
    match e {
        Endpoint::Source(n) => format!("source:{n}"),
        Endpoint::Sink(n) => format!("sink:{n}"),
        Endpoint::AmqpExchange {
            vhost, exchange, ..
        } => format!(
            "amqp_exchange:{vhost}{}{exchange}",
            if vhost.ends_with('/') { "" } else { "/" }
        ),
        Endpoint::KafkaTopic(t) => format!("kafka_topic:{t}"),
    }
}
