//! `[sources.NAME] kind = "rabbitmq"`: consumes a queue on an external RabbitMQ with
//! lapin (manual acks, `basic.qos` prefetch) and stages what arrives.
//!
//! Each batch (up to the route's `batch` or [`BATCH_BYTES`], or what arrived within
//! [`GATHER`]) is staged in one store transaction that also remembers every message-id it
//! staged, and only after that commit is the batch acknowledged upstream (`basic.ack`,
//! `multiple`). A large message's body (above 4 MiB, or too large to be copied into
//! every destination's stage in one transaction) is first written to a spill held by the
//! route's lease holder, and the staging commit stores it by reference and lets go of the
//! hold ([`crate::route`]), so the body lapin handed over is never copied; a
//! batch is staged in as many transactions as its copied bytes need
//! ([`spill::runs`]), in order, before the one ack. Only a body larger than Ferry
//! accepts anywhere ([`MAX_MESSAGE_SIZE_LIMIT`], 128 MiB) is rejected upstream
//! (`requeue=false`, so the queue's own dead-letter exchange gets it, if it has one).
//! A crash or a lost connection between the commit and the ack makes RabbitMQ redeliver
//! the batch; its message-ids are found among the remembered ones and the messages are
//! dropped (counted in `ferry_bridge_source_duplicates_total`) instead of staged twice
//! (the spill written for a duplicate is let go of and freed). The next batch gathers
//! while the previous one commits; batches are staged one after another, in upstream
//! order. Messages without a message-id are always staged (at least once).
//!
//! Keys, under the route's subspace `(P, "bridge", ROUTE)`:
//! ```text
//! ("seen", message_id)        = staging time, ms since the epoch (u64 big-endian)
//! ("seen-at", ms, message_id) = ""   the same entries by age, so expiry is a range read
//! ```
//! Entries older than `dedup_window_ms` are removed every [`CLEANUP_EVERY`] (at most a
//! tenth of the window) in bounded transactions.
//!
//! A broker failure (refused connection, a queue that does not exist, a lost connection)
//! never ends the source: it is logged, shown in `/readyz` as `source:NAME: down: why`,
//! and retried with the route's backoff. Only a store failure ends it.

use crate::rabbitmq_link::connect;
use crate::route::Prepared;
use crate::sink::Backoff;
use crate::{BridgeError, RouteContext};
use ferry_amqp::port::AmqpMessage;
use ferry_config::limits::MAX_MESSAGE_SIZE_LIMIT;
use ferry_config::{AmqpTlsConfig, AmqpUri};
use ferry_stage::GroupCommit;
use ferry_stage::{Spill, StageError, now_ms, spill};
use ferry_store::RangeOption;
use ferry_telemetry::bridge as metric;
use futures::StreamExt;
use futures::future::BoxFuture;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, BasicRejectOptions};
use lapin::types::FieldTable;
use lapin::{Connection, Consumer};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How long a batch waits for more deliveries after its first one.
pub(crate) const GATHER: Duration = Duration::from_millis(5);
/// Longest time between two expiries of old message-ids.
pub(crate) const CLEANUP_EVERY: Duration = Duration::from_secs(60);
/// Body bytes after which a batch stops gathering, well inside a store transaction.
pub(crate) const BATCH_BYTES: usize = 4 * 1024 * 1024;
/// Expired message-ids removed per cleanup transaction.
const CLEANUP_BATCH: usize = 1_000;

/// A `[sources.NAME] kind = "rabbitmq"` as configured.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The source's name (its endpoint label is `source:NAME`).
    pub name: String,
    /// AMQP URI of the upstream broker.
    pub uri: AmqpUri,
    /// TLS toward it, with an `amqps://` URI.
    pub tls: AmqpTlsConfig,
    /// The queue to consume.
    pub queue: String,
    /// `basic.qos` prefetch count.
    pub prefetch: u16,
    /// How long a message-id is remembered, in ms.
    pub dedup_window_ms: u64,
}

/// Why one session with the broker ended.
enum SessionEnd {
    /// Shutdown was requested.
    Shutdown,
    /// The broker failed; retry after a backoff.
    Broker(String),
    /// The store failed; the source stops.
    Store(StageError),
}

/// The task that consumes `settings.queue` for `ctx`'s route until `shutdown`.
pub(crate) fn run(
    ctx: Arc<RouteContext>,
    settings: Settings,
    shutdown: CancellationToken,
) -> BoxFuture<'static, Result<(), BridgeError>> {
    Box::pin(async move {
        let label = format!("source:{}", settings.name);
        let mut backoff = Backoff::new(
            Duration::from_millis(ctx.config.retry_initial_ms),
            Duration::from_millis(ctx.config.retry_max_ms),
        );
        loop {
            match session(&ctx, &settings, &label, &mut backoff, &shutdown).await {
                SessionEnd::Shutdown => return Ok(()),
                SessionEnd::Store(e) => {
                    return Err(BridgeError::Stage {
                        route: ctx.config.name.clone(),
                        error: e,
                    });
                }
                SessionEnd::Broker(why) => {
                    let delay = backoff.next_delay();
                    warn!(route = %ctx.config.name, source = %label, error = %why, ?delay, "RabbitMQ source is down; retrying");
                    ctx.status.down(&label, why);
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    })
}

/// One connection: consumes and stages until the broker fails or shutdown.
async fn session(
    ctx: &Arc<RouteContext>,
    settings: &Settings,
    label: &str,
    backoff: &mut Backoff,
    shutdown: &CancellationToken,
) -> SessionEnd {
    let connection_name = format!("ferry bridge {label}");
    let connection = tokio::select! {
        _ = shutdown.cancelled() => return SessionEnd::Shutdown,
        c = connect(&settings.uri, &settings.tls, &connection_name) => match c {
            Ok(c) => c,
            Err(why) => return SessionEnd::Broker(why),
        },
    };
    let end = match subscribe(&connection, settings).await {
        Ok(consumer) => {
            ctx.status.up(label);
            backoff.reset();
            info!(route = %ctx.config.name, source = label, queue = %settings.queue, "consuming from RabbitMQ");
            consume(ctx, settings, label, consumer, shutdown).await
        }
        Err(why) => SessionEnd::Broker(why),
    };
    // Unacknowledged deliveries go back to the queue when the connection closes.
    let _ = connection.close(200, "ferry source stopping".into()).await;
    end
}

/// Opens a channel with the prefetch and starts consuming with manual acks.
async fn subscribe(connection: &Connection, settings: &Settings) -> Result<Consumer, String> {
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| format!("cannot open a channel: {e}"))?;
    channel
        .basic_qos(settings.prefetch, BasicQosOptions::default())
        .await
        .map_err(|e| format!("basic.qos refused: {e}"))?;
    channel
        .basic_consume(
            settings.queue.as_str().into(),
            format!("ferry-{}", settings.name).into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| {
            let missing = matches!(e.kind(), lapin::ErrorKind::ProtocolError(p)
                if *p.kind() == lapin::protocol::AMQPErrorKind::Soft(lapin::protocol::AMQPSoftError::NOTFOUND));
            if missing {
                format!(
                    "queue '{}' not found at {} (it must exist upstream): {e}",
                    settings.queue,
                    settings.uri.redacted()
                )
            } else {
                format!("cannot consume queue '{}': {e}", settings.queue)
            }
        })
}

/// Stages batches of deliveries and acknowledges them after each commit.
async fn consume(
    ctx: &Arc<RouteContext>,
    settings: &Settings,
    label: &str,
    mut consumer: Consumer,
    shutdown: &CancellationToken,
) -> SessionEnd {
    let labels = [
        (metric::LABEL_ROUTE, ctx.config.name.clone()),
        (metric::LABEL_ENDPOINT, label.to_owned()),
    ];
    let window = settings.dedup_window_ms;
    let cleanup_every = CLEANUP_EVERY.min(Duration::from_millis(window / 10).max(GATHER));
    let mut last_cleanup = Instant::now();
    // The previous batch's commit and ack run while the next batch gathers; a batch is
    // staged only after the one before it was, so staging keeps the upstream order.
    let mut commits: GroupCommit<lapin::message::Delivery, Result<(), SessionEnd>> =
        GroupCommit::default();
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => return SessionEnd::Shutdown,
            d = tokio::time::timeout(cleanup_every, consumer.next()) => d,
        };
        let mut batch = Vec::new();
        match first {
            Err(_) => {}
            Ok(None) => return SessionEnd::Broker("the broker cancelled the consumer".into()),
            Ok(Some(Err(e))) => return SessionEnd::Broker(format!("connection lost: {e}")),
            Ok(Some(Ok(d))) => batch.push(d),
        }
        if !batch.is_empty() {
            let deadline = tokio::time::Instant::now() + GATHER;
            let mut bytes: usize = batch.iter().map(|d| d.data.len()).sum();
            while batch.len() < ctx.config.batch && bytes < BATCH_BYTES {
                match tokio::time::timeout_at(deadline, consumer.next()).await {
                    Ok(Some(Ok(d))) => {
                        bytes += d.data.len();
                        batch.push(d);
                    }
                    // A failure is seen again by the next `next()`; stage what arrived.
                    Ok(Some(Err(_)) | None) | Err(_) => break,
                }
            }
        }
        if let Err(end) = finished(&mut commits).await {
            return end;
        }
        commits.extend(batch);
        let (route, endpoint, counted) = (ctx.clone(), label.to_owned(), labels.clone());
        commits.start(usize::MAX, |batch| async move {
            stage_and_ack(&route, &endpoint, &counted, batch).await
        });
        if last_cleanup.elapsed() >= cleanup_every {
            if let Err(end) = finished(&mut commits).await {
                return end;
            }
            if let Err(e) = expire(ctx, now_ms().saturating_sub(window)).await {
                return SessionEnd::Store(e);
            }
            last_cleanup = Instant::now();
        }
    }
}

/// Waits for the batch being staged ([`stage_and_ack`]), if one is; its outcome.
async fn finished(
    commits: &mut GroupCommit<lapin::message::Delivery, Result<(), SessionEnd>>,
) -> Result<(), SessionEnd> {
    if !commits.is_committing() {
        return Ok(());
    }
    commits
        .committed()
        .await
        .unwrap_or_else(|e| Err(SessionEnd::Broker(format!("the staging task failed: {e}"))))
}

/// Stages `batch` (rejecting upstream what Ferry accepts nowhere), then acknowledges it.
async fn stage_and_ack(
    ctx: &RouteContext,
    label: &str,
    labels: &[(&'static str, String)],
    batch: Vec<lapin::message::Delivery>,
) -> Result<(), SessionEnd> {
    let limit = MAX_MESSAGE_SIZE_LIMIT as usize;
    let mut messages = Vec::with_capacity(batch.len());
    let mut ackable = None;
    for d in batch {
        if d.data.len() > limit {
            // Settled before the batch's multiple ack, which then skips it; the broker
            // dead-letters it if the queue has a dead-letter exchange.
            warn!(route = %ctx.config.name, source = label, size = d.data.len(), max = limit, "rejecting a message larger than Ferry accepts");
            d.acker
                .reject(BasicRejectOptions { requeue: false })
                .await
                .map_err(|e| SessionEnd::Broker(format!("basic.reject failed: {e}")))?;
            continue;
        }
        let message = AmqpMessage {
            exchange: d.exchange.as_str().to_owned(),
            routing_key: d.routing_key.as_str().to_owned(),
            properties: d.properties,
            // Vec into Bytes: the body lapin read is kept, not copied.
            body: d.data.into(),
        };
        let prepared = ctx
            .stages
            .prepare(ctx.holder, message)
            .await
            .map_err(SessionEnd::Store)?;
        messages.push(prepared);
        ackable = Some(d.acker);
    }
    let sizes: Vec<u64> = messages
        .iter()
        .map(|p| ctx.stages.copied_bytes(&p.message))
        .collect();
    let (mut staged, mut duplicates, mut bytes) = (0, 0, 0);
    for run in spill::runs(&sizes) {
        let (s, d, b) = stage(ctx, &messages[run])
            .await
            .map_err(SessionEnd::Store)?;
        (staged, duplicates, bytes) = (staged + s, duplicates + d, bytes + b);
    }
    // Every delivery up to the last one kept is staged (or was already).
    if let Some(acker) = ackable {
        acker
            .ack(BasicAckOptions { multiple: true })
            .await
            .map_err(|e| SessionEnd::Broker(format!("basic.ack failed: {e}")))?;
    }
    metrics::counter!(metric::MESSAGES_IN_TOTAL, labels).increment(staged);
    metrics::counter!(metric::BYTES_IN_TOTAL, labels).increment(bytes);
    metrics::counter!(metric::SOURCE_DUPLICATES_TOTAL, labels).increment(duplicates);
    Ok(())
}

/// Stages `messages` except those whose message-id was seen, in one transaction that lets
/// go of their spills; returns how many were staged, how many were duplicates, and the
/// staged body bytes.
async fn stage(ctx: &RouteContext, messages: &[Prepared]) -> Result<(u64, u64, u64), StageError> {
    let now = now_ms();
    let space = ctx.keys.space();
    let held: Vec<Spill> = messages.iter().filter_map(|p| p.held).collect();
    let held = &held;
    ctx.db
        .run(|tx| async move {
            let mut fresh = Vec::with_capacity(messages.len());
            let mut in_batch = HashSet::new();
            let (mut duplicates, mut bytes) = (0u64, 0u64);
            for prepared in messages {
                let m = &prepared.message.message;
                if let Some(id) = m.properties.message_id() {
                    let id = id.as_str();
                    let seen = space.pack(&("seen", id));
                    if !in_batch.insert(id) || tx.get(&seen, false).await?.is_some() {
                        duplicates += 1;
                        continue;
                    }
                    tx.set(&seen, &now.to_be_bytes());
                    tx.set(&space.pack(&("seen-at", now, id)), b"");
                }
                bytes += prepared.message.len();
                fresh.push(&prepared.message);
            }
            let direct = ctx.stages.stage_in(&tx, &fresh, now).await?;
            // A duplicate's spill is let go of too: nothing references it, and it is freed.
            ctx.stages.let_go_in(&tx, ctx.holder, held).await?;
            Ok((fresh.len() as u64, duplicates, bytes, direct))
        })
        .await
        .map(|(staged, duplicates, bytes, direct)| {
            ctx.stages.count_direct(&direct);
            (staged, duplicates, bytes)
        })
}

/// Forgets the message-ids staged before `cutoff` (ms since the epoch).
async fn expire(ctx: &RouteContext, cutoff: u64) -> Result<(), StageError> {
    let space = ctx.keys.space();
    let begin = space.pack(&("seen-at",));
    let end = space.pack(&("seen-at", cutoff));
    loop {
        let removed = ctx
            .db
            .run(|tx| {
                let (begin, end) = (&begin, &end);
                async move {
                    let expired = tx
                        .get_range(
                            &RangeOption::new(begin.clone(), end.clone()).limit(CLEANUP_BATCH),
                            false,
                        )
                        .await?;
                    for kv in &expired {
                        let (_, _, id): (String, u64, String) =
                            space.unpack(&kv.key).map_err(|e| {
                                StageError::Corrupt(format!("a bridge seen-at key: {e}"))
                            })?;
                        tx.clear(&space.pack(&("seen", id.as_str())));
                    }
                    if let Some(last) = expired.last() {
                        let mut after = last.key.clone();
                        after.push(0);
                        tx.clear_range(begin, &after);
                    }
                    Ok::<_, StageError>(expired.len())
                }
            })
            .await?;
        if removed < CLEANUP_BATCH {
            return Ok(());
        }
    }
}
