//! The dead-letter router of a queue with `x-dead-letter-exchange`.
//!
//! The stage moves a rejected, expired, over-delivered or length-dropped message to the
//! queue's hidden dead-letter stage. This task takes messages from there and, in **one**
//! transaction per batch, removes them, adds RabbitMQ's `x-death` record to their
//! headers, routes them through the dead-letter exchange (with
//! `x-dead-letter-routing-key` or their own routing key) and appends them to the target
//! queues. A crash can therefore neither lose nor duplicate a dead-lettered message.
//! When the dead-letter stage is empty the task waits on its watch.
//!
//! As in RabbitMQ: the message's `expiration` is removed (kept as the x-death entry's
//! `original-expiration`); a missing dead-letter exchange or no route drops the message;
//! a message that would go back to a queue it already died in, with no rejection on the
//! way, is dropped (a cycle).

use super::delayed::{self, Hold};
use super::enqueue::{Entry, QueueBatch, enqueue_in, expires_at};
use crate::message::large::Prespill;
use crate::message::stored::StoredMessage;
use crate::state::broker::Broker;
use crate::state::topology::args::text;
use crate::state::topology::exchange::delay_of;
use crate::state::topology::routing::Routes;
use crate::state::topology::{Queue, VHost};
use crate::wire::codec::encode_properties;
use crate::wire::errors::TxError;
use amq_protocol::protocol::basic::AMQPProperties;
use amq_protocol::types::{AMQPValue, FieldArray, FieldTable};
use bytes::Bytes;
use ferry_stage::{DeadLetterReason, Delivery, NewMessage, Spill, Wakeup, now_ms, spill};
use ferry_telemetry::amqp as metric;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Dead-lettered messages routed per transaction.
const BATCH: usize = 100;
/// Pause after a failed batch before trying again.
const RETRY: Duration = Duration::from_secs(1);

/// What one routing transaction did.
enum Pass {
    /// Routed messages, counted by reason.
    Routed(HashMap<&'static str, u64>),
    /// Nothing to route; wait on this.
    Idle(Wakeup),
}

/// Routes `queue`'s dead-lettered messages until the queue is deleted or `shutdown`.
pub(crate) async fn run(
    broker: Arc<Broker>,
    vhost: Arc<VHost>,
    queue: Arc<Queue>,
    shutdown: CancellationToken,
) {
    if queue.dead_letter_stage.is_none() {
        return;
    }
    loop {
        let pause = match route_batch(&broker, &vhost, &queue).await {
            Ok(Pass::Routed(by_reason)) => {
                for (reason, n) in by_reason {
                    let mut labels = queue.labels().to_vec();
                    labels.push((metric::LABEL_REASON, reason.to_owned()));
                    metrics::counter!(metric::DEAD_LETTERED_TOTAL, &labels).increment(n);
                }
                continue;
            }
            Ok(Pass::Idle(wakeup)) => tokio::select! {
                _ = wakeup.wait() => continue,
                () = queue.deleted.cancelled() => return,
                () = shutdown.cancelled() => return,
            },
            Err(e) => {
                warn!(queue = %queue.name, error = %e, "cannot route dead-lettered messages; retrying");
                RETRY
            }
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = queue.deleted.cancelled() => return,
            () = shutdown.cancelled() => return,
        }
    }
}

async fn route_batch(broker: &Broker, vhost: &VHost, queue: &Queue) -> Result<Pass, TxError> {
    let Some(dl) = queue.dead_letter_stage.as_ref() else {
        return Ok(Pass::Routed(HashMap::new()));
    };
    let exchange = queue
        .spec
        .args
        .dead_letter_exchange
        .clone()
        .unwrap_or_default();
    // How many of the head to route in one transaction: those whose copies fit it (a
    // first one alone whatever it copies). A look without conflicts; if the head changes
    // before the transaction, it takes as many of the new head.
    let now = now_ms();
    let mut first = None;
    let mut copied = Vec::new();
    for d in dl.peek(BATCH).await? {
        let (id, spilled) = (d.id, d.envelope.spill.is_some());
        let Some(routed) = route_one(vhost, queue, &exchange, d, now) else {
            copied.push(0);
            continue;
        };
        // A large message's body stays in its spill, which each copy references.
        let len = if spilled { 0 } else { routed.body.len() as u64 };
        copied.push(len * routed.copies() as u64);
        if first.is_none() && !spilled {
            first = Some((id, routed));
        }
    }
    let take = spill::runs(&copied).first().map_or(BATCH, |run| run.len());
    // A head message whose copies alone would not fit one transaction is stored by
    // reference to a spill of its body, written first.
    let prespill = match first {
        Some((id, routed))
            if take == 1
                && copied.first().is_some_and(|c| *c > 0)
                && spill::spills(routed.died.message.body.len() as u64, routed.copies()) =>
        {
            Some((
                id,
                Prespill::write(broker, &routed.died.message.body).await?,
            ))
        }
        _ => None,
    };
    let (exchange, dl) = (&exchange, dl);
    let routed = vhost
        .db()
        .run(|tx| async move {
            let now = now_ms();
            let dead = dl.pop_in(&tx, take, now).await?;
            if dead.is_empty() {
                return Ok(Pass::Idle(dl.watch_ready(&tx)));
            }
            let mut by_reason: HashMap<&'static str, u64> = HashMap::new();
            let mut batches: Vec<QueueBatch> = Vec::new();
            let mut held: Vec<(String, u64, Bytes, Option<Spill>)> = Vec::new();
            for (item, d) in dead.into_iter().enumerate() {
                // A message dropped at the length limit before it was stored has no stage
                // dead-letter record (see `enqueue`).
                let reason = d
                    .envelope
                    .dead_letter
                    .map_or(DeadLetterReason::MaxLength, |info| info.reason);
                *by_reason.entry(reason.as_str()).or_default() += 1;
                // A large message's body stays in its spill, which each copy references.
                let mut spill = d.envelope.spill;
                let prespilled = prespill.filter(|(id, _)| *id == d.id && spill.is_none());
                let Some(RoutedDeath {
                    mut died,
                    routes,
                    mut body,
                }) = route_one(vhost, queue, exchange, d, now)
                else {
                    continue;
                };
                if let Some((_, written)) = prespilled {
                    died.message.body = Bytes::new();
                    body = died.message.encode();
                    spill = Some(written.spill);
                }
                // A delayed-message exchange holds it as it holds a publish.
                let due = now + delay_of(died.headers.as_ref()).unwrap_or(0);
                held.extend(
                    routes
                        .delayed
                        .into_iter()
                        .map(|x| (x, due, body.clone(), spill)),
                );
                for target in routes.queues.iter().filter(|t| !died.is_cycle_to(&t.name)) {
                    let entry = Entry {
                        item,
                        message: NewMessage::new(body.clone())
                            .priority(died.priority)
                            .expires_ms(expires_at(target, None, now))
                            .spill(spill),
                    };
                    match batches.iter_mut().find(|b| Arc::ptr_eq(&b.queue, target)) {
                        Some(b) => b.messages.push(entry),
                        None => batches.push(QueueBatch {
                            queue: target.clone(),
                            messages: vec![entry],
                        }),
                    }
                }
            }
            enqueue_in(&tx, &batches, now).await?;
            let holds: Vec<Hold<'_>> = held
                .iter()
                .map(|(exchange, due_ms, stored, spill)| Hold {
                    exchange,
                    due_ms: *due_ms,
                    stored,
                    spill: *spill,
                    idempotency: None,
                })
                .collect();
            let spills = vhost.spills();
            delayed::hold_in(&tx, vhost.keys(), &spills, &vhost.name, &holds).await?;
            Ok(Pass::Routed(by_reason))
        })
        .await;
    // The queues reference the spill now (or, if the head changed, nothing does).
    if let Some((_, written)) = prespill {
        written.release(broker).await;
    }
    routed
}

/// A dead-lettered message with its death recorded, where it goes, and its stored form.
struct RoutedDeath {
    died: Died,
    routes: Routes,
    body: Bytes,
}

impl RoutedDeath {
    /// How many copies of it storing it takes: one per queue (a cycle back to a queue it
    /// died in is none) and per delayed-message exchange.
    fn copies(&self) -> usize {
        let queues = self.routes.queues.iter();
        queues.filter(|t| !self.died.is_cycle_to(&t.name)).count() + self.routes.delayed.len()
    }
}

/// Records `d`'s death in `queue` and routes it through the dead-letter exchange
/// `exchange`; `None` when it is dropped (its stored form or properties do not decode).
fn route_one(
    vhost: &VHost,
    queue: &Queue,
    exchange: &str,
    d: Delivery,
    now: u64,
) -> Option<RoutedDeath> {
    let reason = d
        .envelope
        .dead_letter
        .map_or(DeadLetterReason::MaxLength, |info| info.reason);
    let message = StoredMessage::decode(d.body).ok()?;
    let died = with_death(queue, exchange, &message, reason, now)?;
    let routes = vhost
        .topology()
        .route(
            &vhost.name,
            exchange,
            &died.message.routing_key,
            died.headers.as_ref(),
        )
        .unwrap_or_default();
    let body = died.message.encode();
    Some(RoutedDeath { died, routes, body })
}

/// A dead-lettered message on its way to the dead-letter exchange.
struct Died {
    message: StoredMessage,
    headers: Option<FieldTable>,
    priority: u8,
    /// Queues it died in before (and now), and whether any death was a rejection.
    died_in: Vec<String>,
    rejected: bool,
}

impl Died {
    fn is_cycle_to(&self, queue: &str) -> bool {
        !self.rejected && self.died_in.iter().any(|q| q == queue)
    }
}

/// `message` with its death in `queue` recorded: the `x-death` entry for (queue, reason)
/// counted up and moved first (or added), the `x-first-death-*` headers set once, the
/// `x-last-death-*` headers set, `expiration` removed. `None` when the stored properties
/// do not parse (the message is dropped).
fn with_death(
    queue: &Queue,
    exchange: &str,
    message: &StoredMessage,
    reason: DeadLetterReason,
    now: u64,
) -> Option<Died> {
    let properties = message.properties().ok()?;
    let mut headers = properties.headers().clone().unwrap_or_default();
    let mut deaths: Vec<AMQPValue> = match headers.inner().get("x-death") {
        Some(AMQPValue::FieldArray(a)) => a.as_slice().to_vec(),
        _ => Vec::new(),
    };
    let field = |entry: &AMQPValue, name: &str| match entry {
        AMQPValue::FieldTable(t) => t.inner().get(name).and_then(text),
        _ => None,
    };
    let reason_text = reason.as_str();
    let mut count = 1;
    if let Some(at) = deaths.iter().position(|e| {
        field(e, "queue").as_deref() == Some(queue.name.as_str())
            && field(e, "reason").as_deref() == Some(reason_text)
    }) {
        let old = deaths.remove(at);
        if let AMQPValue::FieldTable(t) = &old {
            count += t
                .inner()
                .get("count")
                .and_then(crate::state::topology::args::integer)
                .unwrap_or(0);
        }
    }
    let long = |s: &str| AMQPValue::LongString(s.into());
    let mut entry = FieldTable::default();
    entry.insert("count".into(), AMQPValue::LongLongInt(count));
    entry.insert("reason".into(), long(reason_text));
    entry.insert("queue".into(), long(&queue.name));
    entry.insert("time".into(), AMQPValue::Timestamp(now / 1000));
    entry.insert("exchange".into(), long(&message.exchange));
    entry.insert(
        "routing-keys".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![long(&message.routing_key)])),
    );
    if let Some(expiration) = properties.expiration() {
        entry.insert("original-expiration".into(), long(expiration.as_str()));
    }
    deaths.insert(0, AMQPValue::FieldTable(entry));
    let died_in = deaths.iter().filter_map(|e| field(e, "queue")).collect();
    let rejected = deaths
        .iter()
        .any(|e| field(e, "reason").as_deref() == Some("rejected"));
    headers.insert(
        "x-death".into(),
        AMQPValue::FieldArray(FieldArray::from(deaths)),
    );
    for (what, value) in [
        ("reason", reason_text),
        ("queue", queue.name.as_str()),
        ("exchange", message.exchange.as_str()),
    ] {
        let first = format!("x-first-death-{what}");
        if !headers.contains_key(&first) {
            headers.insert(first.into(), long(value));
        }
        headers.insert(format!("x-last-death-{what}").into(), long(value));
    }
    let routing_key = queue
        .spec
        .args
        .dead_letter_routing_key
        .clone()
        .unwrap_or_else(|| message.routing_key.clone());
    let rebuilt = without_expiration(&properties).with_headers(headers.clone());
    Some(Died {
        message: StoredMessage {
            exchange: exchange.to_owned(),
            routing_key,
            raw_properties: Bytes::from(encode_properties(&rebuilt)),
            body: message.body.clone(),
        },
        headers: Some(headers),
        priority: properties.priority().unwrap_or(0),
        died_in,
        rejected,
    })
}

/// The properties without `expiration` (and without headers, set by the caller).
fn without_expiration(p: &AMQPProperties) -> AMQPProperties {
    let mut out = AMQPProperties::default();
    if let Some(v) = p.content_type() {
        out = out.with_content_type(v.clone());
    }
    if let Some(v) = p.content_encoding() {
        out = out.with_content_encoding(v.clone());
    }
    if let Some(v) = p.delivery_mode() {
        out = out.with_delivery_mode(*v);
    }
    if let Some(v) = p.priority() {
        out = out.with_priority(*v);
    }
    if let Some(v) = p.correlation_id() {
        out = out.with_correlation_id(v.clone());
    }
    if let Some(v) = p.reply_to() {
        out = out.with_reply_to(v.clone());
    }
    if let Some(v) = p.message_id() {
        out = out.with_message_id(v.clone());
    }
    if let Some(v) = p.timestamp() {
        out = out.with_timestamp(*v);
    }
    if let Some(v) = p.kind() {
        out = out.with_type(v.clone());
    }
    if let Some(v) = p.user_id() {
        out = out.with_user_id(v.clone());
    }
    if let Some(v) = p.app_id() {
        out = out.with_app_id(v.clone());
    }
    if let Some(v) = p.cluster_id() {
        out = out.with_cluster_id(v.clone());
    }
    out
}
