//! What the management API may use of the AMQP front, and nothing else of its internals
//! (`crates/management/` names `ferry_amqp::` only as `ferry_amqp::admin`, which
//! `tests/daemon/layering.rs` checks).
//!
//! Operations are [`AmqpAdmin`]'s methods: the virtual hosts (whose topology operations it
//! calls as a channel would, as a connection of its own, on a [`VHost`]; created, changed
//! and deleted through [`VHosts`]), the registry of live connections ([`Connections`]),
//! the resource alarm, and the three message operations RabbitMQ's API has — publish to an
//! exchange, get messages from a queue, and purge a queue — done here with the same stage
//! operations the channels use.
//!
//! The views and values those operations take and give are re-exported here, and only
//! these: the topology's [`Exchange`], [`Queue`], [`Binding`] and their declarations
//! ([`QueueSpec`], [`QueueArgs`], [`Declarations`], planned as [`PlannedDeclarations`]),
//! a vhost's [`VhostMeta`], live [`LiveConnection`]s and [`LiveChannel`]s, a message as
//! [`AmqpMessage`], the [`AmqpError`] with its [`ReplyCode`], and the [`Authorize`] check
//! that asks a user's permissions as the channels do.

pub use crate::authorize::Authorize;
pub use crate::port::AmqpMessage;
pub use crate::state::registry::{Connections, LiveChannel, LiveConnection};
pub use crate::state::topology::args::{QueueArgs, QueueType, encode_table};
pub use crate::state::topology::{
    Binding, Declarations, Destination, Exchange, ExchangeKind, PlannedDeclarations, Queue,
    QueueSpec, VHost,
};
pub use crate::state::vhosts::{VHosts, VhostError, VhostMeta};
pub use crate::wire::errors::{AmqpError, ReplyCode, TxError};

use crate::message::large::Prespill;
use crate::message::stored::StoredMessage;
use crate::port::{AmqpPort, RouteError};
use crate::state::broker::Broker;
use crate::wire::codec::decode_properties;
use amq_protocol::protocol::BasicProperties;
use bytes::Bytes;
use ferry_stage::{Release, now_ms, spill};
use std::sync::Arc;

/// The connection id the management API acts as: 0 is no connection's, so it may not
/// touch another connection's exclusive queues (as RabbitMQ's API may not).
pub const NO_CONNECTION: u64 = 0;

/// What happens to messages a management get took (RabbitMQ's `ackmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetMode {
    /// `ack_requeue_true`, `reject_requeue_true`: they go back to their place, redelivered.
    Requeue,
    /// `ack_requeue_false`: they are removed.
    Ack,
    /// `reject_requeue_false`: they are dead-lettered (dropped without a dead-letter
    /// exchange).
    Reject,
}

/// A message a management get took.
#[derive(Debug, Clone)]
pub struct GotMessage {
    /// The exchange it was published to.
    pub exchange: String,
    /// Its routing key.
    pub routing_key: String,
    /// Whether it was delivered before.
    pub redelivered: bool,
    /// Ready messages left in the queue after it was taken.
    pub message_count: u64,
    /// Its properties.
    pub properties: BasicProperties,
    /// Its body.
    pub body: Bytes,
}

/// The AMQP front as the management API sees it; cheap to clone.
#[derive(Clone)]
pub struct AmqpAdmin {
    broker: Arc<Broker>,
}

impl AmqpAdmin {
    /// The admin side of the front whose connections share `broker`.
    pub(crate) fn new(broker: Arc<Broker>) -> Self {
        Self { broker }
    }

    /// The virtual host `name`, if it exists.
    pub fn vhost(&self, name: &str) -> Option<Arc<VHost>> {
        self.broker.vhosts.get(name)
    }

    /// Every virtual host, by name.
    pub fn vhosts(&self) -> Vec<Arc<VHost>> {
        self.broker.vhosts.list()
    }

    /// The virtual hosts, to create, change and delete them.
    pub fn vhost_registry(&self) -> &VHosts {
        &self.broker.vhosts
    }

    /// The owner of transient (non-durable) exchanges and queues the API declares: this
    /// instance, so they go when it does, as RabbitMQ's go with their node.
    pub fn transient_owner(&self) -> u64 {
        self.broker.instance
    }

    /// Why publishers are blocked (`amqp.max_backlog_messages`, `amqp.max_memory_mb`), if
    /// they are: the resource alarm.
    pub fn alarm(&self) -> Option<String> {
        self.broker.blocked.borrow().clone()
    }

    /// The live connections.
    pub fn connections(&self) -> &Connections {
        &self.broker.connections
    }

    /// The largest message body a publish may carry (`amqp.max_message_size`).
    pub fn max_message_size(&self) -> u32 {
        self.broker.config.max_message_size
    }

    /// Publishes `message` to its exchange in `vhost` as a publisher would (stored in
    /// every queue it routes to, in one transaction); returns whether it reached a queue.
    /// A body the spill rule sends through a spill ([`spill::spills`]) is written to one
    /// first, and the transaction stores the message by reference to it ([`Prespill`]).
    ///
    /// # Errors
    /// 406 for a body larger than `amqp.max_message_size`, 404 for a missing exchange, 403
    /// for an internal one, 406 for an `expiration` that is not a number, 541 when the
    /// store fails.
    pub async fn publish(&self, vhost: &str, message: &AmqpMessage) -> Result<bool, AmqpError> {
        let max = self.max_message_size();
        if message.body.len() as u64 > u64::from(max) {
            return Err(AmqpError::precondition_failed(format!(
                "message size {} is larger than configured max size {max} (amqp.max_message_size)",
                message.body.len()
            )));
        }
        let host = self
            .vhost(vhost)
            .ok_or_else(|| AmqpError::not_found(format!("no vhost '{vhost}'")))?;
        host.topology().route(
            vhost,
            &message.exchange,
            &message.routing_key,
            message.properties.headers().as_ref(),
        )?;
        let port = AmqpPort::new(self.broker.clone());
        let routed = match port.route(vhost, &message.exchange, &message.routing_key, message) {
            Ok(routed) => routed,
            Err(RouteError::Refused(reason)) if reason.starts_with("unroutable") => {
                return Ok(false);
            }
            Err(RouteError::Refused(reason)) => return Err(AmqpError::precondition_failed(reason)),
            Err(RouteError::Unavailable(reason)) => return Err(AmqpError::not_found(reason)),
        };
        let prespill = if spill::spills(message.body.len() as u64, routed.copies()) {
            Some(Prespill::write(&self.broker, &message.body).await?)
        } else {
            None
        };
        let head = prespill.map(|_| AmqpMessage {
            body: Bytes::new(),
            ..message.clone()
        });
        let stored = head.as_ref().unwrap_or(message);
        let (port, routed, spill) = (&port, &routed, prespill.map(|p| p.spill));
        let refused = self
            .broker
            .db
            .run(|tx| async move {
                let now = now_ms();
                Ok::<_, TxError>(port.store_in(&tx, &[(routed, stored, spill)], now).await?)
            })
            .await;
        // The queues reference the spill now (or nothing does, and it is freed).
        if let Some(prespill) = prespill {
            prespill.release(&self.broker).await;
        }
        match refused?.into_iter().next() {
            Some((_, reason)) => Err(AmqpError::precondition_failed(reason)),
            None => Ok(true),
        }
    }

    /// Takes up to `count` messages from the head of `queue` and settles them as `mode`
    /// says once all were read, so a requeued message is not taken twice by one get.
    ///
    /// # Errors
    /// 541 when the store fails or a message cannot be decoded.
    pub async fn get(
        &self,
        queue: &Queue,
        count: usize,
        mode: GetMode,
    ) -> Result<Vec<GotMessage>, AmqpError> {
        queue.touch();
        let holders = &self.broker.holders;
        let holder = holders.register(self.broker.liveness.ttl()).await?;
        let result = self.get_as(holder, queue, count, mode).await;
        // Whatever is still leased (a failure midway) returns to its place.
        let _ = holders.release(holder).await;
        result
    }

    async fn get_as(
        &self,
        holder: u64,
        queue: &Queue,
        count: usize,
        mode: GetMode,
    ) -> Result<Vec<GotMessage>, AmqpError> {
        let deliveries = queue.stage.lease(holder, count).await?;
        let ready = queue.stage.depth().await?.ready.max(0) as u64;
        let taken = deliveries.len() as u64;
        let mut got = Vec::with_capacity(deliveries.len());
        for (i, d) in deliveries.iter().enumerate() {
            let stored = StoredMessage::decode(d.body.clone())
                .map_err(|e| AmqpError::internal(e.to_string()))?;
            let properties = decode_properties(&stored.raw_properties)
                .map_err(|e| AmqpError::internal(e.to_string()))?;
            let body = match d.envelope.spill {
                None => stored.body,
                Some(spill) => queue.stage.spills().read_all(spill).await?,
            };
            got.push(GotMessage {
                exchange: stored.exchange,
                routing_key: stored.routing_key,
                redelivered: d.redelivered(),
                // As RabbitMQ counts: the ready messages behind this one.
                message_count: ready + taken - 1 - i as u64,
                properties,
                body,
            });
        }
        let ids: Vec<_> = deliveries.iter().map(|d| d.id).collect();
        let how = match mode {
            GetMode::Ack => {
                queue.stage.ack(holder, &ids).await?;
                return Ok(got);
            }
            GetMode::Requeue => Release::Requeue,
            GetMode::Reject => Release::Reject,
        };
        // Releasing may dead-letter (copy) them: as many per transaction as fit one.
        let copies: Vec<u64> = deliveries
            .iter()
            .map(|d| queue.stage.dead_letter_copies(&d.envelope))
            .collect();
        for run in spill::runs(&copies) {
            queue.stage.release(holder, &ids[run], how).await?;
        }
        Ok(got)
    }

    /// Removes every ready message of `queue`; returns how many.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub async fn purge(&self, queue: &Queue) -> Result<usize, AmqpError> {
        Ok(queue.stage.purge().await?)
    }
}
