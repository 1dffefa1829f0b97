//! An exchange on Ferry's own AMQP front as a route destination ([`InStoreSink`]).
//!
//! Each message is routed through the vhost's topology as a publish to the exchange with
//! the route's routing key (or the message's own) and its headers ([`AmqpPort::route`]),
//! and stored into the routed queues as a publish stores it (queue TTL, priorities, length
//! limits; [`AmqpPort::store_in`]) in the transaction that acknowledges it in the route's
//! stage: exactly once. The queues' consumers get every property.
//!
//! A missing exchange (or vhost) is retried (the worker backs off; nothing is counted as
//! an attempt); a message no queue is bound for is rejected as unroutable, and after
//! `max_attempts` dead-lettered to the route's dead-letter stage. A queue with
//! `x-overflow: reject-publish` at its `x-max-length` refuses what it has no room for, as
//! it nacks a publisher: the message stays in the route's stage (written to none of its
//! queues) and is retried after a backoff until there is room.
//!
//! A large message is stored by reference to its spill, one reference per queue, as the
//! front's own fanout stores a publish: its body is never read into memory
//! ([`InStoreSink::keeps_spills`]). [`InStoreSink::copies`] tells the worker how many
//! queues a message reaches, so a body whose copies would not fit one transaction is
//! spilled first ([`crate::sink`]).

use crate::sink::{InStoreSink, Outcome};
use crate::staged::Outgoing;
use ferry_amqp::port::{AmqpPort, RouteError, Routed, ToStore};
use ferry_stage::{MessageId, StageError};
use ferry_store::Transaction;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use std::collections::HashMap;

/// Where a route delivers on the AMQP front.
pub(crate) struct AmqpFrontSink {
    /// The front.
    amqp: AmqpPort,
    /// The vhost.
    vhost: String,
    /// The exchange.
    exchange: String,
    /// The routing key; `None` keeps each message's own.
    routing_key: Option<String>,
    /// Where each message of the batch being delivered was routed by
    /// [`InStoreSink::plan`], for [`InStoreSink::write_in`].
    planned: Mutex<HashMap<MessageId, Routed>>,
}

impl AmqpFrontSink {
    /// A sink publishing to `exchange` in `vhost` of the front behind `amqp`.
    pub(crate) fn new(
        amqp: AmqpPort,
        vhost: String,
        exchange: String,
        routing_key: Option<String>,
    ) -> Self {
        Self {
            amqp,
            vhost,
            exchange,
            routing_key,
            planned: Mutex::default(),
        }
    }

    /// Where `o` goes, or why it cannot be published.
    fn route(&self, o: &Outgoing) -> Result<Routed, Outcome> {
        let routing_key = self
            .routing_key
            .as_deref()
            .unwrap_or(&o.message.routing_key);
        self.amqp
            .route(&self.vhost, &self.exchange, routing_key, &o.message)
            .map_err(|e| match e {
                RouteError::Unavailable(why) => Outcome::Retry(why),
                RouteError::Refused(why) => Outcome::Rejected(why),
            })
    }
}

impl InStoreSink for AmqpFrontSink {
    fn keeps_spills(&self) -> bool {
        true
    }

    fn copies(&self, message: &Outgoing) -> usize {
        self.planned
            .lock()
            .get(&message.id)
            .map_or(0, Routed::copies)
    }

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
        // Positions in `batch` of the planned messages, with where they go.
        let routed: Vec<(usize, Routed)> = {
            let planned = self.planned.lock();
            batch
                .iter()
                .enumerate()
                .filter_map(|(i, o)| Some((i, planned.get(&o.id)?.clone())))
                .collect()
        };
        Box::pin(async move {
            let to_store: Vec<ToStore<'_>> = routed
                .iter()
                .map(|(i, r)| (r, &batch[*i].message, batch[*i].spill))
                .collect();
            let refused = self.amqp.store_in(tx, &to_store, now).await?;
            Ok(refused
                .into_iter()
                .map(|(n, why)| (routed[n].0, why))
                .collect())
        })
    }
}
