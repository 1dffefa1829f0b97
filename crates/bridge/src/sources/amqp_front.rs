//! An exchange on Ferry's own AMQP front as a route's source.
//!
//! The route owns a durable queue `ferry.bridge.ROUTE` in the vhost, bound to the
//! exchange with the route's binding key, so the front's own publish path stores every
//! matching message in it (and confirms to the publisher after that commit). The source
//! leases the queue's messages and moves each leased batch in ONE store transaction
//! (several, in order, when the bodies it copies into the route's stages would not fit
//! one, [`spill::runs`]): a message is acknowledged in the queue and handed to the
//! route's destinations (written straight to a destination on a front, or staged:
//! [`crate::route`]) only if the acknowledgement removed it (`ack_in == 1`), so a
//! transaction retried after an unknown commit result never hands a message over twice. The
//! move is exactly once. A large message keeps its spill: the route's entries reference
//! it.
//!
//! A missing exchange is declared by the route (durable, `topic`) before it binds, so no
//! message published to it is unroutable because the route started first
//! ([`AmqpPort::bind_queue`]); any other failure to bind is logged, shown as down in
//! `/readyz`, and retried with backoff.

use crate::route::{Bridged, Direct, Prepared};
use crate::sink::{Backoff, endpoint_label};
use crate::{BridgeError, RouteContext};
use ferry_amqp::port::{AmqpMessage, AmqpPort, BoundQueue};
use ferry_config::Endpoint;
use ferry_stage::{Consumer, Delivery, MessageId, Spill, StageError, Step, now_ms, spill};
use ferry_telemetry::bridge as metric;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The queue a route from the AMQP front reads: `ferry.bridge.ROUTE`.
pub fn queue_name(route: &str) -> String {
    format!("ferry.bridge.{route}")
}

/// Where the source reads from.
pub(crate) struct Exchange {
    /// The vhost.
    pub vhost: String,
    /// The exchange.
    pub exchange: String,
    /// The binding key (default `#`).
    pub binding_key: String,
}

/// Moves the exchange's messages into the route's stages until `shutdown`.
///
/// # Errors
/// [`BridgeError`] when the store fails.
pub(crate) async fn run(
    ctx: Arc<RouteContext>,
    amqp: AmqpPort,
    from: Exchange,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    let label = endpoint_label(&Endpoint::AmqpExchange {
        vhost: from.vhost.clone(),
        exchange: from.exchange.clone(),
        key: Some(from.binding_key.clone()),
    });
    let mut backoff = Backoff::new(
        Duration::from_millis(ctx.config.retry_initial_ms),
        Duration::from_millis(ctx.config.retry_max_ms),
    );
    loop {
        let queue = amqp
            .bind_queue(
                &from.vhost,
                &from.exchange,
                &from.binding_key,
                &queue_name(&ctx.config.name),
            )
            .await;
        let why = match queue {
            Ok(queue) => {
                ctx.status.up(&label);
                backoff.reset();
                info!(route = %ctx.config.name, queue = %queue.name, "reading from the AMQP front");
                match consume(&ctx, &queue, &label, &shutdown).await {
                    Ok(true) => return Ok(()),
                    Ok(false) => format!("queue '{}' was deleted", queue.name),
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => e.to_string(),
        };
        warn!(route = %ctx.config.name, source = %label, error = %why, "cannot read from the AMQP front; retrying");
        ctx.status.down(&label, why);
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
}

/// Moves leased batches until shutdown (`true`) or the queue's deletion (`false`).
async fn consume(
    ctx: &RouteContext,
    queue: &BoundQueue,
    label: &str,
    shutdown: &CancellationToken,
) -> Result<bool, StageError> {
    let mut consumer = Consumer::new(
        queue.stage.clone(),
        ctx.holders.clone(),
        ctx.holder,
        ctx.config.batch,
    );
    loop {
        let step = tokio::select! {
            () = shutdown.cancelled() => return Ok(true),
            () = queue.deleted.cancelled() => return Ok(false),
            step = consumer.step() => step?,
        };
        match step {
            Step::Delivered(deliveries) => {
                let ids: Vec<MessageId> = deliveries.iter().map(|d| d.id).collect();
                move_batch(ctx, queue, &deliveries, label).await?;
                consumer.forget(&ids);
            }
            Step::Idle(wakeup) => {
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(true),
                    () = queue.deleted.cancelled() => return Ok(false),
                    _ = wakeup.wait() => {}
                }
            }
        }
    }
}

/// The route's form of a queued message; `None` for a body the front did not write. A
/// large message's body stays in its spill, which the route's entries reference; an inline
/// body too large to be copied into every destination's stage in one transaction is
/// written to a spill first ([`crate::route::RouteStages::prepare`]).
async fn prepare(ctx: &RouteContext, d: &Delivery) -> Result<Option<Prepared>, StageError> {
    let Ok(message) = AmqpMessage::from_stage_body(d.body.clone()) else {
        return Ok(None);
    };
    Ok(Some(match d.envelope.spill {
        Some(spill) => Prepared {
            message: Bridged {
                message,
                spill: Some(spill),
            },
            held: None,
        },
        None => ctx.stages.prepare(ctx.holder, message).await?,
    }))
}

/// Acknowledges `deliveries` in the queue and stages them for the route, a run that fits
/// one transaction at a time ([`spill::runs`]); a message no longer leased to us (an
/// earlier attempt of the very transaction committed) is skipped.
async fn move_batch(
    ctx: &RouteContext,
    queue: &BoundQueue,
    deliveries: &[Delivery],
    label: &str,
) -> Result<(), StageError> {
    let mut prepared = Vec::with_capacity(deliveries.len());
    for d in deliveries {
        prepared.push((d.id, prepare(ctx, d).await?));
    }
    let sizes: Vec<u64> = prepared
        .iter()
        .map(|(_, p)| {
            p.as_ref()
                .map_or(0, |p| ctx.stages.copied_bytes(&p.message))
        })
        .collect();
    let (mut staged, mut bytes, mut undecodable) = (0, 0, 0);
    for run in spill::runs(&sizes) {
        let (s, b, u, direct) = move_run(ctx, queue, &prepared[run]).await?;
        (staged, bytes, undecodable) = (staged + s, bytes + b, undecodable + u);
        ctx.stages.count_direct(&direct);
    }
    if undecodable > 0 {
        warn!(route = %ctx.config.name, source = label, messages = undecodable, "dropped queued messages the AMQP front did not write");
    }
    let labels = [
        (metric::LABEL_ROUTE, ctx.config.name.clone()),
        (metric::LABEL_ENDPOINT, label.to_owned()),
    ];
    metrics::counter!(metric::MESSAGES_IN_TOTAL, &labels).increment(staged as u64);
    metrics::counter!(metric::BYTES_IN_TOTAL, &labels).increment(bytes);
    Ok(())
}

/// One transaction of [`move_batch`]: acknowledges `run` in the queue, hands what it
/// removed to the route and lets go of the spills written for it; returns the messages
/// handed over, their body bytes, how many did not decode, and what went straight to a
/// destination.
async fn move_run(
    ctx: &RouteContext,
    queue: &BoundQueue,
    run: &[(MessageId, Option<Prepared>)],
) -> Result<(usize, u64, usize, Direct), StageError> {
    let now = now_ms();
    let held: Vec<Spill> = run
        .iter()
        .filter_map(|(_, p)| p.as_ref().and_then(|p| p.held))
        .collect();
    let held = &held;
    ctx.db
        .run(|tx| async move {
            let mut staged = Vec::with_capacity(run.len());
            let (mut bytes, mut undecodable) = (0, 0);
            for (id, prepared) in run {
                if queue.stage.ack_in(&tx, ctx.holder, &[*id]).await? != 1 {
                    continue;
                }
                match prepared {
                    Some(p) => {
                        bytes += p.message.len();
                        staged.push(&p.message);
                    }
                    None => undecodable += 1,
                }
            }
            let direct = ctx.stages.stage_in(&tx, &staged, now).await?;
            ctx.stages.let_go_in(&tx, ctx.holder, held).await?;
            Ok::<_, StageError>((staged.len(), bytes, undecodable, direct))
        })
        .await
}
