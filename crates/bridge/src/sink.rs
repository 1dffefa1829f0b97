//! Delivery to a destination: one worker per route destination leases batches from the
//! destination's stage and hands them over, removing each message only after the
//! destination confirmed it.
//!
//! Two kinds of destination:
//! - [`ExternalSink`] (external RabbitMQ, external Kafka): the batch is sent after the
//!   lease commits and acknowledged in the stage after the broker's confirm. A crash
//!   between the two sends the batch again on restart with `redelivered` set; it carries
//!   the same message-id and is counted in `ferry_bridge_redeliveries_total`. So is a
//!   message resent after a failed attempt (its confirm may have been lost with the
//!   connection), once.
//! - [`InStoreSink`] (Ferry's own AMQP and Kafka fronts): the message is written to its
//!   destination in the *same* store transaction that acknowledges it, and only if this
//!   holder still held it, so it lands exactly once.
//!
//! **Large messages.** A message whose body is in a spill reaches an external sink, and an
//! in-store sink that needs the body (the Kafka front), with its body read whole
//! ([`ferry_stage::Spills::read_all`]). A sink that keeps spills (the AMQP front) stores
//! it by reference to the same spill instead, one reference per queue, and its body is
//! never read. An in-store delivery is written in transactions that stay within the
//! store's budget: several messages up to [`spill::RUN_BYTES`] of copied bodies, a message
//! alone up to [`spill::COMMIT_BUDGET`]. What a transaction would store too much of is
//! first written to a spill held by the route's holder, and the transaction that stores
//! the message by reference to it lets go of the hold ([`spill::spills`], the rule a
//! publish follows too): a body whose copies would exceed the budget (a fanout to many
//! queues, for a sink that keeps spills), or the form a sink stores a message in when it
//! says that form is too large ([`InStoreSink::large_form`]: the Kafka front's record
//! batch). A delivery refused or retried keeps what was spilled for it until it is stored
//! or refused; a worker that stops (or dies) leaves its holds to the release of its
//! holder, and the spill collector frees what nothing references.
//!
//! An external sink that pipelines may have [`IN_FLIGHT_BATCHES`] batches sent and
//! unconfirmed at once ([`ExternalSink::send`], [`ExternalSink::in_flight_batches`]); they are settled in order, and after a failure the rest of
//! the window settles before the failed messages are retried, in order.
//!
//! Outcomes: a transient failure ([`Outcome::Retry`], e.g. the broker is down) keeps the
//! batch leased and tries again after an exponential backoff with jitter, never counting
//! an attempt, so an outage only grows the stage. A permanent refusal
//! ([`Outcome::Rejected`], e.g. too large, unroutable) returns the message to its place;
//! the stage dead-letters it once it has been refused `max_attempts` times.

use super::staged::{Outgoing, SpilledForm};
use bytes::Bytes;
use ferry_amqp::port::Routed;
use ferry_stage::{
    Consumer, Delivery, Holders, MessageId, Release, Stage, StageError, Step, spill,
};
use ferry_store::Transaction;
use ferry_telemetry::bridge as metric;
use futures::future::BoxFuture;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Marks messages about to be sent again after a failed attempt and counts each once in
/// `ferry_bridge_redeliveries_total`: the attempt may have reached the destination (a
/// confirm lost with its connection), so the resend is a possible duplicate.
fn count_resends(resends: &mut [Outgoing], labels: &[(&'static str, String); 2]) {
    let first_resends = resends
        .iter_mut()
        .filter(|o| !o.redelivered)
        .fold(0, |n, o| {
            o.redelivered = true;
            n + 1
        });
    metrics::counter!(metric::REDELIVERIES_TOTAL, labels).increment(first_resends);
}

/// What a destination said about one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It has the message.
    Delivered,
    /// It could not take it now (connection down, broker busy); try again later.
    Retry(String),
    /// It refuses it (too large, unroutable); counts as an attempt.
    Rejected(String),
}

/// The outcomes of a sent batch, one per message in order, once the broker confirmed.
pub(crate) type Confirms = BoxFuture<'static, Vec<Outcome>>;

/// A destination outside the store: it confirms asynchronously.
pub(crate) trait ExternalSink: Send {
    /// Hands over `batch`; one outcome per message, in order. Waits for the confirms.
    fn deliver<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, Vec<Outcome>>;

    /// Sends `batch` and returns, once it is on its way, the future of its confirms, so
    /// the worker can send the next batch meanwhile (up to [`IN_FLIGHT_BATCHES`]). A sink
    /// whose confirms cannot overlap keeps this default, which delivers the whole batch
    /// first.
    #[expect(
        clippy::async_yields_async,
        reason = "sending and confirming are two steps: the outer future sends"
    )]
    fn send<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, Confirms> {
        Box::pin(async move {
            let outcomes = self.deliver(batch).await;
            Box::pin(std::future::ready(outcomes)) as Confirms
        })
    }

    /// How many sent batches may wait for their confirms at once: 1 unless the sink
    /// overrides [`ExternalSink::send`] (a batch handed over whole must be acknowledged
    /// in the stage before the next goes, or a crash would send several again).
    fn in_flight_batches(&self) -> usize {
        1
    }
}

/// A destination inside the store (one of Ferry's fronts). It keeps no state between
/// planning and writing, so the route's source and its destination worker share one.
pub(crate) trait InStoreSink: Send + Sync {
    /// What would happen to each message of `batch` (no side effects): messages planned
    /// [`Outcome::Delivered`] are then written with [`InStoreSink::write_in`].
    fn plan(&self, batch: &[Outgoing]) -> Vec<Planned>;

    /// Whether it stores a large message by reference to its spill ([`Outgoing::spill`])
    /// rather than needing its whole body in memory (the default).
    fn keeps_spills(&self) -> bool {
        false
    }

    /// For a message [`InStoreSink::plan`] planned delivered and [`Planned::large`]: the
    /// form [`InStoreSink::write_in`] would store it in, too large for one transaction
    /// ([`spill::spills`]). The worker writes it to a spill held by the route's holder
    /// first and hands it to `write_in` as [`Outgoing::stored`], which the sink then stores
    /// by reference; the transaction that stores it lets go of the hold. `None` (the
    /// default): the sink stores the message as it is.
    fn large_form(&self, _message: &Outgoing) -> Option<LargeForm> {
        None
    }

    /// Writes `batch` (each message with its plan) to the destination within `tx`, all of
    /// each message or none of it; returns the positions in `batch` of the messages the
    /// destination cannot take now (a queue at its limit that rejects publishes), with
    /// why. Those are neither written nor acknowledged, and are retried after a backoff.
    fn write_in<'a>(
        &'a self,
        tx: &'a Transaction,
        batch: &'a [(&'a Outgoing, &'a Planned)],
        now: u64,
    ) -> BoxFuture<'a, Result<Vec<(usize, String)>, StageError>>;
}

/// What an in-store sink plans for one message ([`InStoreSink::plan`]).
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    /// What would happen to it.
    pub outcome: Outcome,
    /// How many copies of its body [`InStoreSink::write_in`] stores (one per queue it
    /// reaches); 0 unless it is delivered.
    pub copies: usize,
    /// Whether the form the sink stores it in is too large for one transaction
    /// ([`InStoreSink::large_form`]).
    pub large: bool,
    /// Where the AMQP front routed it (the Kafka front picks a partition as it writes).
    pub routed: Option<Routed>,
}

impl Planned {
    /// Delivered as `copies` copies.
    pub(crate) fn delivered(copies: usize) -> Self {
        Self {
            outcome: Outcome::Delivered,
            copies,
            large: false,
            routed: None,
        }
    }

    /// Not delivered, for `outcome`.
    pub(crate) fn not(outcome: Outcome) -> Self {
        Self {
            outcome,
            copies: 0,
            large: false,
            routed: None,
        }
    }

    /// Whether it is to be written.
    pub(crate) fn delivers(&self) -> bool {
        self.outcome == Outcome::Delivered
    }
}

/// The form an in-store sink stores a message in, too large for one transaction
/// ([`InStoreSink::large_form`]).
#[derive(Debug, Clone)]
pub(crate) struct LargeForm {
    /// The whole form, written to a spill.
    pub bytes: Bytes,
    /// How many of its first bytes the sink keeps besides the reference to the spill
    /// ([`SpilledForm::head`]).
    pub head: usize,
}

/// A route destination's way out.
pub(crate) enum Sink {
    /// An external broker.
    External(Box<dyn ExternalSink>),
    /// One of Ferry's fronts (shared with the route's source, which writes to it directly
    /// while the destination's stage is empty: [`super::route::RouteStages::stage_in`]).
    InStore(Arc<dyn InStoreSink>),
}

/// Retry delays: exponential from `initial` to `max`, each with up to 50 % jitter.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays starting at `initial`, doubling up to `max`.
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            next: initial,
        }
    }

    /// The next delay (and doubles the one after).
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        base.mul_f64(0.5 + fastrand::f64() * 0.5)
    }

    /// Starts over after a success.
    pub(crate) fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// Batches a pipelining external sink may have sent and not yet had confirmed: the next
/// batch goes out while the broker confirms the previous ones, in order on one
/// connection.
pub const IN_FLIGHT_BATCHES: usize = 4;

/// A sent batch waiting for its confirms.
struct InFlight {
    batch: Vec<Outgoing>,
    confirms: Confirms,
}

/// Everything a destination worker needs.
pub(crate) struct Worker {
    /// The route's name (a metric label).
    pub route: String,
    /// Where the destination delivers.
    pub endpoint: ferry_config::Endpoint,
    /// Its stage (messages waiting for it).
    pub stage: Stage,
    /// Its dead-letter stage.
    pub dead: Stage,
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
    /// When refusals were last logged.
    pub refusals: RefusalLog,
}

/// How often a destination's refusals are logged at most.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A destination's refusals, logged at most once per [`REFUSAL_LOG_INTERVAL`] with how many
/// there were since the last line: a destination that refuses everything would otherwise
/// log a line per message per attempt (hundreds of thousands a minute).
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    /// When the last line was logged.
    last: Option<std::time::Instant>,
    /// Refusals since then.
    unlogged: u64,
}

impl RefusalLog {
    /// Counts `n` refusals at `now`; the count to log with, when a line is due.
    fn refused(&mut self, n: u64, now: std::time::Instant) -> Option<u64> {
        self.unlogged += n;
        if self
            .last
            .is_some_and(|at| now.duration_since(at) < REFUSAL_LOG_INTERVAL)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

impl Worker {
    /// Delivers until `shutdown`; leases left at shutdown return when the holder is
    /// released.
    ///
    /// # Errors
    /// The store's error when the store itself fails.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) -> Result<(), StageError> {
        let stage = self.stage.clone();
        let mut consumer =
            Consumer::new(stage.clone(), self.holders.clone(), self.holder, self.batch);
        let labels = [
            (metric::LABEL_ROUTE, self.route.clone()),
            (metric::LABEL_ENDPOINT, endpoint_label(&self.endpoint)),
        ];
        // At 0 from the start, so an alert on their increase sees the first event.
        for name in [
            metric::MESSAGES_OUT_TOTAL,
            metric::BYTES_OUT_TOTAL,
            metric::RETRIES_TOTAL,
            metric::REDELIVERIES_TOTAL,
            metric::DEAD_LETTERS_TOTAL,
        ] {
            metrics::counter!(name, &labels).increment(0);
        }
        let window_size = match &self.sink {
            Sink::External(sink) => sink.in_flight_batches().max(1),
            Sink::InStore(_) => 1,
        };
        let mut window: VecDeque<InFlight> = VecDeque::new();
        loop {
            if window.len() < window_size {
                // Never waits for messages while confirms are due.
                let step = if window.is_empty() {
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        step = consumer.step() => step?,
                    }
                } else {
                    consumer.step().await?
                };
                match step {
                    Step::Delivered(deliveries) => {
                        let (batch, dropped) = self.prepare(&stage, &deliveries, &labels).await?;
                        consumer.forget(&dropped);
                        if batch.is_empty() {
                            continue;
                        }
                        match &mut self.sink {
                            Sink::External(sink) => {
                                let confirms = sink.send(&batch).await;
                                window.push_back(InFlight { batch, confirms });
                            }
                            Sink::InStore(_) => {
                                let done = self
                                    .until_settled(&stage, batch, &labels, &shutdown)
                                    .await?;
                                consumer.forget(&done);
                            }
                        }
                        continue;
                    }
                    Step::Idle(wakeup) if window.is_empty() => {
                        tokio::select! {
                            _ = shutdown.cancelled() => return Ok(()),
                            _ = wakeup.wait() => continue,
                        }
                    }
                    Step::Idle(_) => {}
                }
            }
            let Some(InFlight { batch, confirms }) = window.pop_front() else {
                continue;
            };
            let outcomes = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                outcomes = confirms => outcomes,
            };
            let (done, retry) = self.settle(&stage, batch, outcomes, &labels).await?;
            consumer.forget(&done);
            if !retry.is_empty() {
                // The broker failed: let what is on its way settle, then retry in order.
                let mut failed = retry;
                while let Some(InFlight { batch, confirms }) = window.pop_front() {
                    let outcomes = confirms.await;
                    let (done, retry) = self.settle(&stage, batch, outcomes, &labels).await?;
                    consumer.forget(&done);
                    failed.extend(retry);
                }
                count_resends(&mut failed, &labels);
                self.pause(&labels, &shutdown).await;
                let done = self
                    .until_settled(&stage, failed, &labels, &shutdown)
                    .await?;
                consumer.forget(&done);
            }
        }
    }

    /// Decodes a leased batch, reading a large message's body whole for a sink that needs
    /// it; a message that cannot be decoded is dead-lettered at once. Returns the batch
    /// and the ids dead-lettered.
    async fn prepare(
        &mut self,
        stage: &Stage,
        deliveries: &[Delivery],
        labels: &[(&'static str, String); 2],
    ) -> Result<(Vec<Outgoing>, Vec<MessageId>), StageError> {
        let whole = match &self.sink {
            Sink::External(_) => true,
            Sink::InStore(sink) => !sink.keeps_spills(),
        };
        let mut batch = Vec::with_capacity(deliveries.len());
        let mut undecodable = Vec::new();
        for d in deliveries {
            match Outgoing::decode(d) {
                Ok(mut o) => {
                    if whole && let Some(spill) = o.spill.take() {
                        o.message.body = stage.spills().read_all(spill).await?;
                    }
                    batch.push(o);
                }
                Err(e) => {
                    warn!(route = %self.route, destination = %labels[1].1, error = %e, "dead-lettering a message that cannot be decoded");
                    undecodable.push(d.id);
                }
            }
        }
        if !undecodable.is_empty() {
            stage
                .release(self.holder, &undecodable, Release::Reject)
                .await?;
            metrics::counter!(metric::DEAD_LETTERS_TOTAL, labels)
                .increment(undecodable.len() as u64);
        }
        let redelivered = batch.iter().filter(|o| o.redelivered).count();
        metrics::counter!(metric::REDELIVERIES_TOTAL, labels).increment(redelivered as u64);
        Ok((batch, undecodable))
    }

    /// Hands `pending` over, retrying after a backoff, until every message is
    /// acknowledged, returned or dead-lettered (or shutdown); returns the ids settled.
    async fn until_settled(
        &mut self,
        stage: &Stage,
        mut pending: Vec<Outgoing>,
        labels: &[(&'static str, String); 2],
        shutdown: &CancellationToken,
    ) -> Result<Vec<MessageId>, StageError> {
        let mut settled = Vec::with_capacity(pending.len());
        while !pending.is_empty() && !shutdown.is_cancelled() {
            let outcomes = match &mut self.sink {
                Sink::External(sink) => sink.send(&pending).await.await,
                Sink::InStore(sink) => {
                    deliver_in_store(stage, self.holder, sink.as_ref(), &mut pending).await?
                }
            };
            let (done, mut retry) = self.settle(stage, pending, outcomes, labels).await?;
            settled.extend(done);
            if !retry.is_empty() {
                count_resends(&mut retry, labels);
                self.pause(labels, shutdown).await;
            }
            pending = retry;
        }
        Ok(settled)
    }

    /// Acts on a batch's outcomes: acknowledges what was delivered (external sinks; an
    /// in-store sink acknowledged it in its own transaction) and returns what was refused.
    /// Returns the ids settled and the messages to retry.
    async fn settle(
        &mut self,
        stage: &Stage,
        batch: Vec<Outgoing>,
        outcomes: Vec<Outcome>,
        labels: &[(&'static str, String); 2],
    ) -> Result<(Vec<MessageId>, Vec<Outgoing>), StageError> {
        let mut delivered = Vec::new();
        let mut rejected = Vec::new();
        let mut retry = Vec::new();
        for (o, outcome) in batch.into_iter().zip(outcomes) {
            match outcome {
                Outcome::Delivered => delivered.push(o),
                Outcome::Rejected(why) => rejected.push((o, why)),
                Outcome::Retry(why) => {
                    debug!(route = %self.route, destination = %labels[1].1, error = %why, "delivery failed; will retry");
                    retry.push(o);
                }
            }
        }
        let mut settled = Vec::with_capacity(delivered.len() + rejected.len());
        if !delivered.is_empty() {
            let ids: Vec<MessageId> = delivered.iter().map(|o| o.id).collect();
            if matches!(self.sink, Sink::External(_)) {
                stage.ack(self.holder, &ids).await?;
            }
            let now = ferry_stage::now_ms();
            let bytes: usize = delivered.iter().map(Outgoing::len).sum();
            metrics::counter!(metric::MESSAGES_OUT_TOTAL, labels).increment(ids.len() as u64);
            metrics::counter!(metric::BYTES_OUT_TOTAL, labels).increment(bytes as u64);
            let latency = metrics::histogram!(metric::DELIVERY_SECONDS, labels);
            for o in &delivered {
                latency.record(now.saturating_sub(o.staged_ms) as f64 / 1000.0);
            }
            settled.extend(ids);
            self.backoff.reset();
        }
        if let Some((_, why)) = rejected.last()
            && let Some(count) = self
                .refusals
                .refused(rejected.len() as u64, std::time::Instant::now())
        {
            warn!(route = %self.route, destination = %labels[1].1, refused = count, last_error = %why, "destination refused {count} message(s) since the last report; each is dead-lettered once refused max_attempts times");
        }
        if !rejected.is_empty() {
            // A spill written for a delivery that did not happen is not needed any more.
            for spill in rejected.iter().flat_map(|(o, _)| o.held_spills()) {
                stage.spills().let_go(self.holder, spill.id).await?;
            }
            let refused: Vec<(MessageId, String)> =
                rejected.into_iter().map(|(o, why)| (o.id, why)).collect();
            let ids: Vec<MessageId> = refused.iter().map(|(id, _)| *id).collect();
            let dead = &self.dead;
            let before = dead.depth().await.map(|d| d.pushed).unwrap_or(0);
            stage.release_refused(self.holder, &refused).await?;
            let after = dead.depth().await.map(|d| d.pushed).unwrap_or(before);
            metrics::counter!(metric::DEAD_LETTERS_TOTAL, labels)
                .increment(after.saturating_sub(before) as u64);
            metrics::counter!(metric::RETRIES_TOTAL, labels).increment(ids.len() as u64);
            settled.extend(ids);
        }
        metrics::counter!(metric::RETRIES_TOTAL, labels).increment(retry.len() as u64);
        Ok((settled, retry))
    }

    /// Waits out the next backoff delay (or shutdown).
    async fn pause(&mut self, labels: &[(&'static str, String); 2], shutdown: &CancellationToken) {
        let delay = self.backoff.next_delay();
        debug!(route = %self.route, destination = %labels[1].1, ?delay, "backing off");
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Plans `batch` with `sink` and writes what it planned delivered in transactions within
/// the store's budget ([`spill::runs`]), first spilling a body whose copies would exceed
/// it (for a sink that keeps spills) and the form a sink stores that it says is too large
/// ([`InStoreSink::large_form`]), each held by `holder`.
pub(crate) async fn deliver_in_store(
    stage: &Stage,
    holder: u64,
    sink: &dyn InStoreSink,
    batch: &mut [Outgoing],
) -> Result<Vec<Outcome>, StageError> {
    let plans = sink.plan(batch);
    let mut bytes = Vec::with_capacity(batch.len());
    for (o, plan) in batch.iter_mut().zip(&plans) {
        let len = o.message.body.len() as u64;
        if sink.keeps_spills() && o.spill.is_none() && spill::spills(len, plan.copies) {
            o.spill = Some(stage.spills().write_all(holder, &o.message.body).await?);
            o.holds_spill = true;
            o.message.body = Bytes::new();
        }
        // Spilled once, for every attempt: a retry stores the same form.
        if plan.delivers()
            && plan.large
            && o.stored.is_none()
            && let Some(form) = sink.large_form(o)
        {
            let spill = stage.spills().write_all(holder, &form.bytes).await?;
            let head = Bytes::copy_from_slice(&form.bytes[..form.head.min(form.bytes.len())]);
            o.stored = Some(SpilledForm { spill, head });
        }
        let copied = match &o.stored {
            Some(form) => form.head.len() as u64,
            None => o.message.body.len() as u64 * plan.copies as u64,
        };
        bytes.push(copied);
    }
    let mut outcomes: Vec<Outcome> = plans.iter().map(|p| p.outcome.clone()).collect();
    for run in spill::runs(&bytes) {
        let refused = write_in_store(stage, holder, sink, &batch[run.clone()], &plans[run]).await?;
        for (id, why) in refused {
            if let Some(at) = batch.iter().position(|o| o.id == id) {
                outcomes[at] = Outcome::Retry(why);
            }
        }
    }
    Ok(outcomes)
}

/// One store transaction: each message of `batch` planned deliverable and still leased to
/// `holder` is written to the destination and acknowledged together, and the route's
/// holder lets go of the spills written for them; returns what the destination cannot
/// take now (it stays leased and is retried), with why.
async fn write_in_store(
    stage: &Stage,
    holder: u64,
    sink: &dyn InStoreSink,
    batch: &[Outgoing],
    plans: &[Planned],
) -> Result<Vec<(MessageId, String)>, StageError> {
    let now = ferry_stage::now_ms();
    let planned: Vec<MessageId> = batch
        .iter()
        .zip(plans)
        .filter(|(_, plan)| plan.delivers())
        .map(|(o, _)| o.id)
        .collect();
    if planned.is_empty() {
        return Ok(Vec::new());
    }
    let spills = stage.spills();
    stage
        .db()
        .run(|tx| {
            let (planned, spills) = (&planned, &spills);
            async move {
                // A message no longer leased to us was acknowledged by an earlier attempt
                // of this transaction whose outcome was unknown.
                let held: HashSet<MessageId> = stage
                    .held_in(&tx, holder, planned)
                    .await?
                    .into_iter()
                    .collect();
                let writes: Vec<(&Outgoing, &Planned)> = batch
                    .iter()
                    .zip(plans)
                    .filter(|(o, plan)| plan.delivers() && held.contains(&o.id))
                    .collect();
                let refused = sink.write_in(&tx, &writes, now).await?;
                let taken: Vec<&Outgoing> = writes
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !refused.iter().any(|(r, _)| r == i))
                    .map(|(_, (o, _))| *o)
                    .collect();
                let ids: Vec<MessageId> = taken.iter().map(|o| o.id).collect();
                stage.ack_in(&tx, holder, &ids).await?;
                for spill in taken.iter().flat_map(|o| o.held_spills()) {
                    if !spills.let_go_in(&tx, holder, spill.id).await? && !tx.maybe_committed() {
                        return Err(StageError::SpillGone(spill.id));
                    }
                }
                Ok::<_, StageError>(
                    refused
                        .into_iter()
                        .map(|(i, why)| (writes[i].0.id, why))
                        .collect::<Vec<_>>(),
                )
            }
        })
        .await
}

/// The metric label of an endpoint.
pub(crate) fn endpoint_label(e: &ferry_config::Endpoint) -> String {
    use ferry_config::Endpoint;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn refusals_are_logged_once_per_interval_with_the_count_since_the_last_line() {
        let mut log = RefusalLog::default();
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        assert_eq!(log.refused(3, at(0)), Some(3));
        assert_eq!(log.refused(5, at(1)), None);
        assert_eq!(log.refused(1, at(9)), None);
        assert_eq!(log.refused(2, at(10)), Some(8));
        assert_eq!(log.refused(1, at(19)), None);
    }
}
