//! An exchange on Ferry's own AMQP front as a route destination ([`InStoreSink`]).
//!
//! Each message is routed through the vhost's topology as a publish to the exchange with
//! the route's routing key (or the message's own) and its headers, and stored into the
//! routed queues with the front's own [`enqueue_in`] (queue TTL, priorities, length
//! limits) in the transaction that acknowledges it in the route's stage: exactly once.
//! The stored body is the front's [`StoredMessage`], so the queues' consumers get every
//! property.
//!
//! A missing exchange (or vhost) is retried (the worker backs off; nothing is counted as
//! an attempt); a message no queue is bound for is rejected as unroutable, and after
//! `max_attempts` dead-lettered to the route's dead-letter stage. A queue with
//! `x-overflow: reject-publish` at its `x-max-length` refuses what it has no room for, as
//! it nacks a publisher: the message stays in the route's stage (written to none of its
//! queues) and is retried after a backoff until there is room.

use crate::amqp::broker::Broker;
use crate::amqp::codec::encode_properties;
use crate::amqp::enqueue::{Entry, QueueBatch, enqueue_in, expires_at, hint_expiries};
use crate::amqp::message::StoredMessage;
use crate::amqp::topology::Queue;
use crate::amqp::topology::args::Overflow;
use crate::bridge::sink::{InStoreSink, Outcome};
use crate::bridge::staged::Outgoing;
use crate::stage::{MessageId, NewMessage, StageError};
use crate::store::Transaction;
use bytes::Bytes;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Where one message goes: the queues it reaches and its own TTL (`expiration`).
type Routed = (Vec<Arc<Queue>>, Option<u64>);

/// Where a route delivers on the AMQP front.
pub struct AmqpFrontSink {
    /// The front.
    broker: Arc<Broker>,
    /// The vhost.
    vhost: String,
    /// The exchange.
    exchange: String,
    /// The routing key; `None` keeps each message's own.
    routing_key: Option<String>,
    /// The queues each message of the batch being delivered was routed to by
    /// [`InStoreSink::plan`], with its TTL, for [`InStoreSink::write_in`].
    planned: Mutex<HashMap<MessageId, Routed>>,
}

impl AmqpFrontSink {
    /// A sink publishing to `exchange` in `vhost` of `broker`'s front.
    pub fn new(
        broker: Arc<Broker>,
        vhost: String,
        exchange: String,
        routing_key: Option<String>,
    ) -> Self {
        Self {
            broker,
            vhost,
            exchange,
            routing_key,
            planned: Mutex::default(),
        }
    }

    fn routing_key<'a>(&'a self, o: &'a Outgoing) -> &'a str {
        self.routing_key
            .as_deref()
            .unwrap_or(&o.message.routing_key)
    }

    /// The queues `o` reaches, with its own TTL, or why it cannot be published.
    fn route(&self, o: &Outgoing) -> Result<Routed, Outcome> {
        let Some(vhost) = self.broker.vhosts.get(&self.vhost) else {
            return Err(Outcome::Retry(format!(
                "no vhost '{}' on the AMQP front",
                self.vhost
            )));
        };
        let properties = &o.message.properties;
        let ttl = match properties.expiration() {
            None => None,
            Some(e) => match e.as_str().parse::<u64>() {
                Ok(ttl) => Some(ttl),
                Err(_) => return Err(Outcome::Rejected(format!("invalid expiration '{e}'"))),
            },
        };
        let queues = vhost
            .topology()
            .route(
                &self.vhost,
                &self.exchange,
                self.routing_key(o),
                properties.headers().as_ref(),
            )
            .map_err(|e| Outcome::Retry(e.to_string()))?;
        if queues.is_empty() {
            return Err(Outcome::Rejected(format!(
                "unroutable: no queue is bound to exchange '{}' in vhost '{}' for routing key '{}'",
                self.exchange,
                self.vhost,
                self.routing_key(o)
            )));
        }
        Ok((queues, ttl))
    }
}

impl InStoreSink for AmqpFrontSink {
    fn plan(&self, batch: &[Outgoing]) -> Vec<Outcome> {
        let mut planned = self.planned.lock();
        planned.clear();
        batch
            .iter()
            .map(|o| match self.route(o) {
                Ok(routed) => {
                    planned.insert(o.id, routed);
                    Outcome::Delivered
                }
                Err(outcome) => outcome,
            })
            .collect()
    }

    fn write_in<'a>(
        &'a self,
        tx: &'a Transaction,
        batch: &'a [&'a Outgoing],
        now: u64,
    ) -> BoxFuture<'a, Result<Vec<(usize, String)>, StageError>> {
        let routed: Vec<Option<Routed>> = {
            let planned = self.planned.lock();
            batch.iter().map(|o| planned.get(&o.id).cloned()).collect()
        };
        Box::pin(async move {
            let refused = self.refused_by_full_queues(tx, &routed).await?;
            let mut by_stage: HashMap<u64, usize> = HashMap::new();
            let mut batches: Vec<QueueBatch> = Vec::new();
            for (item, (o, routed)) in batch.iter().zip(&routed).enumerate() {
                let Some((queues, ttl)) = routed else {
                    continue;
                };
                if refused.iter().any(|(r, _)| *r == item) {
                    continue;
                }
                let body = StoredMessage {
                    exchange: self.exchange.clone(),
                    routing_key: self.routing_key(o).to_owned(),
                    raw_properties: Bytes::from(encode_properties(&o.message.properties)),
                    body: Bytes::copy_from_slice(&o.message.body),
                }
                .encode();
                let priority = o.message.properties.priority().unwrap_or(0);
                for queue in queues {
                    let at = *by_stage.entry(queue.stage.id()).or_insert_with(|| {
                        batches.push(QueueBatch {
                            queue: queue.clone(),
                            messages: Vec::new(),
                        });
                        batches.len() - 1
                    });
                    let message = NewMessage::new(body.clone())
                        .priority(priority)
                        .expires_ms(expires_at(queue, *ttl, now));
                    batches[at].messages.push(Entry { item, message });
                }
            }
            enqueue_in(tx, &batches, now).await?;
            hint_expiries(&self.broker.expiry, &batches);
            Ok(refused)
        })
    }
}

impl AmqpFrontSink {
    /// The messages (positions, with why) that a queue with `x-overflow: reject-publish`
    /// at its `x-max-length` cannot take now. A message goes to all of its queues or to
    /// none, so one full queue holds it back from every queue; the rest are taken in order
    /// while there is room.
    async fn refused_by_full_queues(
        &self,
        tx: &Transaction,
        routed: &[Option<Routed>],
    ) -> Result<Vec<(usize, String)>, StageError> {
        let mut room: HashMap<u64, u64> = HashMap::new();
        for queue in routed.iter().flatten().flat_map(|(queues, _)| queues) {
            if let (Some(max), Overflow::RejectPublish) =
                (queue.spec.args.max_length, queue.spec.args.overflow)
                && !room.contains_key(&queue.stage.id())
            {
                let ready = queue.stage.depth_in(tx).await?.ready.max(0) as u64;
                room.insert(queue.stage.id(), max.saturating_sub(ready));
            }
        }
        let mut refused = Vec::new();
        for (item, (queues, _)) in routed
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, r.as_ref()?)))
        {
            let full = queues
                .iter()
                .find(|q| room.get(&q.stage.id()).is_some_and(|left| *left == 0));
            match full {
                Some(q) => refused.push((
                    item,
                    format!(
                        "queue '{}' in vhost '{}' is full (x-max-length with x-overflow reject-publish)",
                        q.name, self.vhost
                    ),
                )),
                None => {
                    for q in queues {
                        if let Some(left) = room.get_mut(&q.stage.id()) {
                            *left -= 1;
                        }
                    }
                }
            }
        }
        Ok(refused)
    }
}
