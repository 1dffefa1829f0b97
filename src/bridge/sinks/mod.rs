//! Sinks: how a route destination hands messages over ([`super::sink::Sink`]).
//!
//! Modules (one per kind of endpoint, added as each is built): [`rabbitmq`] (an external
//! RabbitMQ exchange); to come: kafka (external brokers), amqp_front and kafka_front
//! (Ferry's own fronts).

pub mod rabbitmq;

use super::route::Destination;
use super::sink::{Sink, endpoint_label};
use super::{BridgeError, RouteContext};
use crate::config::{Endpoint, SinkConfig};
use std::collections::BTreeMap;

/// The sink of `destination`. Never fails because a broker is down: that shows up as
/// retried deliveries.
///
/// # Errors
/// [`BridgeError::Config`] for a destination this build cannot deliver to.
pub async fn open(
    ctx: &RouteContext,
    destination: &Destination,
    sinks: &BTreeMap<String, SinkConfig>,
) -> Result<Sink, BridgeError> {
    let unsupported = |what: &str| {
        BridgeError::Config(format!(
            "route '{}': {what} sinks are not built yet",
            ctx.config.name
        ))
    };
    match &destination.endpoint {
        Endpoint::Sink(name) => match sinks.get(name) {
            Some(SinkConfig::Rabbitmq {
                uri,
                exchange,
                routing_key,
            }) => Ok(Sink::External(Box::new(rabbitmq::RabbitmqSink::new(
                endpoint_label(&destination.endpoint),
                uri.clone(),
                exchange.clone(),
                routing_key.clone(),
                ctx.status.clone(),
            )))),
            Some(SinkConfig::Kafka { .. }) => Err(unsupported("kafka")),
            None => Err(BridgeError::Config(format!("unknown sink '{name}'"))),
        },
        Endpoint::AmqpExchange { .. } => Err(unsupported("amqp_exchange")),
        Endpoint::KafkaTopic(_) => Err(unsupported("kafka_topic")),
        Endpoint::Source(name) => Err(BridgeError::Config(format!(
            "source '{name}' cannot be a destination"
        ))),
    }
}
