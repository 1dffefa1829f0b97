//! Sinks: how a route destination hands messages over ([`super::sink::Sink`]).
//!
//! Modules (one per kind of endpoint, added as each is built): rabbitmq and [`kafka`]
//! (external brokers), amqp_front and kafka_front (Ferry's own fronts).

pub mod kafka;

use super::route::Destination;
use super::sink::Sink;
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
            Some(SinkConfig::Rabbitmq { .. }) => Err(unsupported("rabbitmq")),
            Some(SinkConfig::Kafka {
                bootstrap_servers,
                topic,
                partitioner,
                transactional,
                properties,
            }) => Ok(Sink::External(Box::new(kafka::KafkaSink::new(
                kafka::KafkaSinkConfig {
                    label: super::sink::endpoint_label(&destination.endpoint),
                    bootstrap_servers: bootstrap_servers.clone(),
                    topic: topic.clone(),
                    index: destination.index,
                    partitioner: partitioner.clone(),
                    transactional_id: transactional
                        .then(|| format!("ferry.{}.{}", ctx.config.name, destination.index)),
                    properties: properties.clone(),
                    key: ctx.config.key,
                },
                ctx.status.clone(),
                ctx.db.clone(),
                ctx.keys.space(),
            )))),
            None => Err(BridgeError::Config(format!("unknown sink '{name}'"))),
        },
        Endpoint::AmqpExchange { .. } => Err(unsupported("amqp_exchange")),
        Endpoint::KafkaTopic(_) => Err(unsupported("kafka_topic")),
        Endpoint::Source(name) => Err(BridgeError::Config(format!(
            "source '{name}' cannot be a destination"
        ))),
    }
}
