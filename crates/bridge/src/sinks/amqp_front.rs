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
//! queues a message reaches ([`Planned::copies`]), so a body whose copies would not fit
//! one transaction is spilled first ([`crate::sink`]).

use crate::sink::{InStoreSink, Outcome, Planned};
use crate::staged::Outgoing;
use ferry_amqp::port::{AmqpPort, RouteError, ToStore};
use ferry_stage::StageError;
use ferry_store::Transaction;
use futures::future::BoxFuture;

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
        }
    }

    /// Where `o` goes, or why it cannot be published.
    fn plan_one(&self, o: &Outgoing) -> Planned {
        let routing_key = self
            .routing_key
            .as_deref()
            .unwrap_or(&o.message.routing_key);
        match self
            .amqp
            .route(&self.vhost, &self.exchange, routing_key, &o.message)
        {
            Ok(routed) => Planned {
                copies: routed.copies(),
                routed: Some(routed),
                ..Planned::delivered(0)
            },
            Err(RouteError::Unavailable(why)) => Planned::not(Outcome::Retry(why)),
            Err(RouteError::Refused(why)) => Planned::not(Outcome::Rejected(why)),
        }
    }
}

impl InStoreSink for AmqpFrontSink {
    fn keeps_spills(&self) -> bool {
        true
    }

    fn plan(&self, batch: &[Outgoing]) -> Vec<Planned> {
        batch.iter().map(|o| self.plan_one(o)).collect()
    }

    fn write_in<'a>(
        &'a self,
        tx: &'a Transaction,
        batch: &'a [(&'a Outgoing, &'a Planned)],
        now: u64,
    ) -> BoxFuture<'a, Result<Vec<(usize, String)>, StageError>> {
        Box::pin(async move {
            // Positions in `batch` of the routed messages, with where they go.
            let (positions, to_store): (Vec<usize>, Vec<ToStore<'_>>) = batch
                .iter()
                .enumerate()
                .filter_map(|(i, (o, plan))| {
                    Some((i, (plan.routed.as_ref()?, &o.message, o.spill)))
                })
                .unzip();
            let refused = self.amqp.store_in(tx, &to_store, now).await?;
            Ok(refused
                .into_iter()
                .map(|(n, why)| (positions[n], why))
                .collect())
        })
    }
}
