//! The AMQP front's port: the few operations Ferry's bridge needs from the front, and
//! nothing else of the front's internals.
//!
//! - [`AmqpPort::route`]: where a message published to an exchange goes — the queues its
//!   routing key and headers reach in the vhost's topology, and its own TTL.
//! - [`AmqpPort::store_in`]: stores routed messages in their queues inside the caller's
//!   store transaction, with each queue's rules (message TTL, priorities, length limits),
//!   exactly as a publish stores them (a delayed-message exchange holds it as it holds a
//!   publish). A message goes to all of its queues or to none. A large message whose
//!   body is in a spill is stored by reference to it, one reference per queue, as a
//!   publish's fanout is ([`Routed::copies`] tells a caller whether a body must be
//!   spilled first, [`ferry_stage::spill::spills`]).
//! - [`AmqpPort::bind_queue`]: declares a durable queue bound to an exchange, for a reader
//!   that leases its messages from the queue's stage; [`AmqpPort::delete_queue`] removes
//!   it when its reader is gone for good.
//!
//! Messages cross the port as [`AmqpMessage`]s, the front's model of a message, and
//! [`AmqpMessage::to_stage_body`] / [`AmqpMessage::from_stage_body`] give the stage body
//! the front stores a message as (`docs/keyspace.md`), so one encoding serves every stage.

use crate::message::stored::StoredMessage;
use crate::publishing::delayed::{self, Hold};
use crate::publishing::enqueue::{
    Entry, QueueBatch, enqueue_in, expires_at, hint_expiries, parse_expiration,
};
use crate::state::broker::Broker;
use crate::state::topology::args::{Overflow, QueueArgs};
use crate::state::topology::exchange::{Exchange, ExchangeKind, delay_of};
use crate::state::topology::queue::QueueSpec;
use crate::state::topology::routing::{Binding, Destination};
use crate::state::topology::{Queue, VHost};
use crate::wire::codec::{decode_properties, encode_properties};
use crate::wire::errors::AmqpError;
use amq_protocol::protocol::BasicProperties;
use bytes::Bytes;
use ferry_stage::{NewMessage, Spill, Stage, StageError};
use ferry_store::Transaction;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// An AMQP message as it crosses the port.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AmqpMessage {
    /// The exchange it was (or is to be) published to.
    pub exchange: String,
    /// Its routing key.
    pub routing_key: String,
    /// Its content properties, headers table included.
    pub properties: BasicProperties,
    /// Its body (shared, never copied on its way through the bridge).
    pub body: Bytes,
}

/// Why a stage body is not a message the front stored.
#[derive(Debug, thiserror::Error)]
#[error("a stored AMQP message cannot be decoded: {0}")]
pub struct UndecodableMessage(String);

impl AmqpMessage {
    /// The stage body the front stores this message as.
    pub fn to_stage_body(&self) -> Bytes {
        StoredMessage {
            exchange: self.exchange.clone(),
            routing_key: self.routing_key.clone(),
            raw_properties: Bytes::from(encode_properties(&self.properties)),
            body: self.body.clone(),
        }
        .encode()
    }

    /// Reads a stage body the front (or [`AmqpMessage::to_stage_body`]) wrote.
    ///
    /// # Errors
    /// [`UndecodableMessage`] for a body of another layout or with damaged properties.
    pub fn from_stage_body(body: Bytes) -> Result<Self, UndecodableMessage> {
        let stored = StoredMessage::decode(body).map_err(|e| UndecodableMessage(e.to_string()))?;
        let properties = decode_properties(&stored.raw_properties)
            .map_err(|e| UndecodableMessage(e.to_string()))?;
        Ok(Self {
            exchange: stored.exchange,
            routing_key: stored.routing_key,
            properties,
            body: stored.body,
        })
    }
}

/// Why a message cannot be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The vhost or exchange is missing (for now): try again later.
    #[error("{0}")]
    Unavailable(String),
    /// The message itself cannot be published there (no queue is bound for it, or its
    /// `expiration` is invalid).
    #[error("{0}")]
    Refused(String),
}

/// Where a message goes: the queues it reaches and its own TTL.
#[derive(Debug, Clone)]
pub struct Routed {
    /// The vhost.
    vhost: String,
    /// The exchange it is published to.
    exchange: String,
    /// The routing key it is published with.
    routing_key: String,
    /// The queues it reaches.
    queues: Vec<Arc<Queue>>,
    /// The delayed-message exchanges that hold it first, and for how long (ms).
    delayed: (Vec<String>, u64),
    /// Its `expiration` property, ms.
    ttl: Option<u64>,
}

/// A queue declared by [`AmqpPort::bind_queue`].
#[derive(Debug, Clone)]
pub struct BoundQueue {
    /// Its name.
    pub name: String,
    /// The stage its messages are leased from.
    pub stage: Stage,
    /// Fires when the queue is deleted.
    pub deleted: CancellationToken,
}

impl Routed {
    /// How many copies of the message's body storing it takes: one per queue and per
    /// delayed-message exchange.
    pub fn copies(&self) -> usize {
        self.queues.len() + self.delayed.0.len()
    }
}

/// A message for [`AmqpPort::store_in`]: where [`AmqpPort::route`] sent it, the message,
/// and the spill its body is in, for a large one (its `body` is then empty).
pub type ToStore<'a> = (&'a Routed, &'a AmqpMessage, Option<Spill>);

/// The AMQP front, as the bridge sees it; cheap to clone.
#[derive(Clone)]
pub struct AmqpPort {
    /// The front's shared state.
    broker: Arc<Broker>,
}

impl AmqpPort {
    /// The port of the front whose connections share `broker`.
    pub fn new(broker: Arc<Broker>) -> Self {
        Self { broker }
    }

    fn vhost(&self, name: &str) -> Result<Arc<VHost>, AmqpError> {
        self.broker
            .vhosts
            .get(name)
            .ok_or_else(|| AmqpError::not_found(format!("no vhost '{name}' on the AMQP front")))
    }

    /// Where `message`, published to `exchange` in `vhost` with `routing_key`, goes.
    ///
    /// # Errors
    /// [`RouteError::Unavailable`] for a missing vhost or exchange; [`RouteError::Refused`]
    /// when no queue is bound for it or its `expiration` is not a number.
    pub fn route(
        &self,
        vhost: &str,
        exchange: &str,
        routing_key: &str,
        message: &AmqpMessage,
    ) -> Result<Routed, RouteError> {
        let host = self
            .vhost(vhost)
            .map_err(|e| RouteError::Unavailable(e.to_string()))?;
        let properties = &message.properties;
        let ttl = match properties.expiration() {
            None => None,
            Some(e) => Some(parse_expiration(e.as_str()).map_err(RouteError::Refused)?),
        };
        let routes = host
            .topology()
            .route(vhost, exchange, routing_key, properties.headers().as_ref())
            .map_err(|e| RouteError::Unavailable(e.to_string()))?;
        if routes.is_empty() {
            return Err(RouteError::Refused(format!(
                "unroutable: no queue is bound to exchange '{exchange}' in vhost '{vhost}' for routing key '{routing_key}'"
            )));
        }
        Ok(Routed {
            vhost: vhost.to_owned(),
            exchange: exchange.to_owned(),
            routing_key: routing_key.to_owned(),
            queues: routes.queues,
            delayed: (
                routes.delayed,
                delay_of(properties.headers().as_ref()).unwrap_or(0),
            ),
            ttl,
        })
    }

    /// Stores `batch` (each message with where [`AmqpPort::route`] sent it, and its spill)
    /// in its queues within `tx`, at `now`. A message with a spill is stored by reference
    /// to it (the caller's own reference keeps it until `tx` commits); one without is
    /// copied into each queue. A message goes to all of its queues or to none: a queue with
    /// `x-overflow: reject-publish` at its `x-max-length` refuses what it has no room for,
    /// as it nacks a publisher, and holds that message back from its other queues too.
    /// Returns the refused messages' positions in `batch`, with why.
    ///
    /// # Errors
    /// The stage's error.
    pub async fn store_in(
        &self,
        tx: &Transaction,
        batch: &[ToStore<'_>],
        now: u64,
    ) -> Result<Vec<(usize, String)>, StageError> {
        let refused = refused_by_full_queues(tx, batch).await?;
        let mut by_stage: HashMap<u64, usize> = HashMap::new();
        let mut batches: Vec<QueueBatch> = Vec::new();
        let mut held: Vec<(&Routed, Bytes, Option<Spill>)> = Vec::new();
        for (item, (routed, message, spill)) in batch.iter().enumerate() {
            if refused.iter().any(|(r, _)| *r == item) {
                continue;
            }
            let body = StoredMessage {
                exchange: routed.exchange.clone(),
                routing_key: routed.routing_key.clone(),
                raw_properties: Bytes::from(encode_properties(&message.properties)),
                body: message.body.clone(),
            }
            .encode();
            if !routed.delayed.0.is_empty() {
                held.push((routed, body.clone(), *spill));
            }
            let priority = message.properties.priority().unwrap_or(0);
            for queue in &routed.queues {
                let at = *by_stage.entry(queue.stage.id()).or_insert_with(|| {
                    batches.push(QueueBatch {
                        queue: queue.clone(),
                        messages: Vec::new(),
                    });
                    batches.len() - 1
                });
                let message = NewMessage::new(body.clone())
                    .priority(priority)
                    .expires_ms(expires_at(queue, routed.ttl, now))
                    .spill(*spill);
                batches[at].messages.push(Entry { item, message });
            }
        }
        enqueue_in(tx, &batches, now).await?;
        let holds: Vec<Hold<'_>> = held
            .iter()
            .flat_map(|(routed, body, spill)| {
                let (exchanges, delay) = &routed.delayed;
                exchanges.iter().map(move |exchange| Hold {
                    exchange,
                    due_ms: now + delay,
                    stored: body,
                    spill: *spill,
                    idempotency: None,
                })
            })
            .collect();
        // A route's batch is all in one vhost.
        if let Some((routed, _, _)) = held.first() {
            let spills = self.broker.stages.spills();
            delayed::hold_in(
                tx,
                self.broker.vhosts.keys(),
                &spills,
                &routed.vhost,
                &holds,
            )
            .await?;
        }
        // Only a hint: if `tx` is retried, the sweeper just looks early.
        hint_expiries(&self.broker.expiry, &batches);
        Ok(refused)
    }

    /// Declares (idempotently) the durable queue `queue` in `vhost` and binds it to
    /// `exchange` with `binding_key`, so every matching publish is stored in it. A missing
    /// `exchange` is declared first, durable and of type `topic`: nothing published to it
    /// can then be unroutable for want of the route's binding, whichever of the route and
    /// the exchange's users starts first (an application that declares it later with
    /// another type gets RabbitMQ's 406 for an inequivalent redeclare, and should be
    /// started first or declare it `topic`).
    ///
    /// # Errors
    /// The front's error, as a sentence: a missing vhost, a reserved exchange name, a
    /// queue of that name declared otherwise, or the store's failure.
    pub async fn bind_queue(
        &self,
        vhost: &str,
        exchange: &str,
        binding_key: &str,
        queue: &str,
    ) -> Result<BoundQueue, AmqpError> {
        let host = self.vhost(vhost)?;
        // The bridge's own queue and binding, declared by no user.
        let trusted = &crate::authorize::Unrestricted;
        if !host.topology().exchanges.contains_key(exchange) {
            let declared = Exchange {
                name: exchange.to_owned(),
                kind: ExchangeKind::Topic,
                delayed: false,
                durable: true,
                auto_delete: false,
                internal: false,
                arguments: Default::default(),
                owner: 0,
                builtin: false,
            };
            // Declaring is idempotent: an application that declared it in between keeps
            // its own, of whatever type.
            if let Err(e) = host.declare_exchange(declared, trusted).await
                && !host.topology().exchanges.contains_key(exchange)
            {
                return Err(e);
            }
        }
        let spec = QueueSpec {
            durable: true,
            exclusive_owner: None,
            auto_delete: false,
            args: QueueArgs::default(),
            owner: 0,
        };
        let declared = host.declare_queue(queue, spec, false, 0, trusted).await?;
        host.bind(
            Binding {
                source: exchange.to_owned(),
                destination: Destination::Queue(queue.to_owned()),
                routing_key: binding_key.to_owned(),
                arguments: Default::default(),
            },
            0,
            trusted,
        )
        .await?;
        Ok(BoundQueue {
            name: declared.name.clone(),
            stage: declared.stage.clone(),
            deleted: declared.deleted.clone(),
        })
    }

    /// Deletes queue `queue` of `vhost` with its messages and bindings (nothing when
    /// either is missing); returns how many ready messages it held.
    ///
    /// # Errors
    /// The front's error, as a sentence: the store's failure.
    pub async fn delete_queue(&self, vhost: &str, queue: &str) -> Result<u32, AmqpError> {
        match self.vhost(vhost) {
            Ok(host) => host.delete_queue(queue, false, false, 0).await,
            Err(_) => Ok(0),
        }
    }
}

/// The messages of `batch` (positions, with why) that a queue with `x-overflow:
/// reject-publish` at its `x-max-length` cannot take now. One full queue holds a message
/// back from every queue; the rest are taken in order while there is room.
async fn refused_by_full_queues(
    tx: &Transaction,
    batch: &[ToStore<'_>],
) -> Result<Vec<(usize, String)>, StageError> {
    let mut room: HashMap<u64, u64> = HashMap::new();
    for queue in batch.iter().flat_map(|(routed, _, _)| &routed.queues) {
        if let (Some(max), Overflow::RejectPublish) =
            (queue.spec.args.max_length, queue.spec.args.overflow)
            && !room.contains_key(&queue.stage.id())
        {
            let ready = queue.stage.depth_in(tx).await?.ready.max(0) as u64;
            room.insert(queue.stage.id(), max.saturating_sub(ready));
        }
    }
    let mut refused = Vec::new();
    for (item, (routed, _, _)) in batch.iter().enumerate() {
        let full = routed
            .queues
            .iter()
            .find(|q| room.get(&q.stage.id()).is_some_and(|left| *left == 0));
        match full {
            Some(q) => refused.push((
                item,
                format!(
                    "queue '{}' in vhost '{}' is full (x-max-length with x-overflow reject-publish)",
                    q.name, routed.vhost
                ),
            )),
            None => {
                for q in &routed.queues {
                    if let Some(left) = room.get_mut(&q.stage.id()) {
                        *left -= 1;
                    }
                }
            }
        }
    }
    Ok(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_through_its_stage_body() {
        let m = AmqpMessage {
            exchange: "x".into(),
            routing_key: "k".into(),
            properties: BasicProperties::default().with_priority(7),
            body: Bytes::from_static(b"hello"),
        };
        let back = AmqpMessage::from_stage_body(m.to_stage_body()).unwrap();
        assert_eq!(back, m);
        assert!(AmqpMessage::from_stage_body(Bytes::from_static(b"\x09junk")).is_err());
    }
}
