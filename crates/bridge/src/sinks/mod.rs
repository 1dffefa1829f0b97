//! Sinks: how a route destination hands messages over ([`super::sink::Sink`]).
//!
//! Modules, one per kind of endpoint: [`rabbitmq`] (an external RabbitMQ exchange),
//! [`kafka`] (external Kafka topics), [`amqp_front`] and [`kafka_front`] (Ferry's own
//! fronts).

pub(crate) mod amqp_front;
pub(crate) mod kafka;
pub(crate) mod kafka_front;
pub(crate) mod rabbitmq;

use super::kafka_client::KafkaEndpoint;
use super::route::Destination;
use super::sink::{InStoreSink, Sink, endpoint_label};
use super::{BridgeError, Fronts, RouteContext};
use ferry_config::{Endpoint, RouteConfig, SinkConfig};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The sink of `endpoint` when it is on one of Ferry's fronts (`None` for an external
/// sink): shared by the route's source, which writes to it while the destination's stage
/// is empty, and the destination's worker.
///
/// # Errors
/// [`BridgeError::Config`] for a destination on a front this process does not run.
pub(crate) async fn open_in_store(
    fronts: &Fronts,
    route: &RouteConfig,
    endpoint: &Endpoint,
) -> Result<Option<Arc<dyn InStoreSink>>, BridgeError> {
    let no_front = |front: &str| {
        BridgeError::Config(format!(
            "route '{}': the {front} front does not run in this process",
            route.name
        ))
    };
    Ok(match endpoint {
        Endpoint::AmqpExchange {
            vhost,
            exchange,
            key,
        } => {
            let amqp = fronts.amqp.clone().ok_or_else(|| no_front("AMQP"))?;
            Some(Arc::new(amqp_front::AmqpFrontSink::new(
                amqp,
                vhost.clone(),
                exchange.clone(),
                key.clone(),
            )))
        }
        Endpoint::KafkaTopic(topic) => {
            let kafka = fronts.kafka.clone().ok_or_else(|| no_front("Kafka"))?;
            Some(Arc::new(
                kafka_front::KafkaFrontSink::open(kafka, topic.clone(), route.key).await,
            ))
        }
        Endpoint::Sink(_) | Endpoint::Source(_) => None,
    })
}

/// The sink of `destination`. Never fails because a broker is down: that shows up as
/// retried deliveries.
///
/// # Errors
/// [`BridgeError::Config`] for a destination that is a source.
pub(crate) fn open(
    ctx: &RouteContext,
    destination: &Destination,
    sinks: &BTreeMap<String, SinkConfig>,
) -> Result<Sink, BridgeError> {
    if let Some(sink) = &destination.in_store {
        return Ok(Sink::InStore(sink.clone()));
    }
    match &destination.endpoint {
        Endpoint::Sink(name) => match sinks.get(name) {
            Some(SinkConfig::Rabbitmq {
                uri,
                exchange,
                routing_key,
                tls,
            }) => Ok(Sink::External(Box::new(rabbitmq::RabbitmqSink::new(
                endpoint_label(&destination.endpoint),
                (uri.clone(), tls.clone()),
                exchange.clone(),
                routing_key.clone(),
                ctx.status.clone(),
            )))),
            Some(SinkConfig::Kafka {
                bootstrap_servers,
                topic,
                partitioner,
                transactional,
                properties,
                security,
            }) => Ok(Sink::External(Box::new(kafka::KafkaSink::new(
                kafka::KafkaSinkConfig {
                    label: endpoint_label(&destination.endpoint),
                    endpoint: KafkaEndpoint {
                        key: format!("sinks.{name}"),
                        bootstrap_servers: bootstrap_servers.clone(),
                        security: security.clone(),
                        properties: properties.clone(),
                    },
                    topic: topic.clone(),
                    index: destination.index,
                    partitioner: partitioner.clone(),
                    transactional_id: transactional
                        .then(|| format!("ferry.{}.{}", ctx.config.name, destination.index)),
                    key: ctx.config.key,
                },
                ctx.status.clone(),
                ctx.db.clone(),
                ctx.keys.space(),
            )))),
            None => Err(BridgeError::Config(format!("unknown sink '{name}'"))),
        },
        other => Err(BridgeError::Config(format!(
            "'{}' cannot be a destination",
            endpoint_label(other)
        ))),
    }
}
