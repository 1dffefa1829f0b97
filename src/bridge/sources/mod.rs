//! Sources: where a route's messages come from. Each stages messages with
//! [`super::route::RouteStages::stage_in`] in a transaction that also records its own
//! progress, and tells its upstream only after that commit.
//!
//! Modules (one per kind of endpoint, added as each is built): rabbitmq and [`kafka`]
//! (external brokers), amqp_front and kafka_front (Ferry's own fronts).

pub mod kafka;

use super::{BridgeError, RouteContext};
use crate::config::{Endpoint, SourceConfig};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The task that runs `endpoint` as the source of `ctx`'s route until `shutdown`.
///
/// # Errors
/// [`BridgeError::Config`] for an endpoint this build cannot read from.
pub fn start(
    ctx: Arc<RouteContext>,
    endpoint: Endpoint,
    sources: &BTreeMap<String, SourceConfig>,
    shutdown: CancellationToken,
) -> Result<BoxFuture<'static, Result<(), BridgeError>>, BridgeError> {
    let unsupported = |what: &str| {
        BridgeError::Config(format!(
            "route '{}': {what} sources are not built yet",
            ctx.config.name
        ))
    };
    match endpoint {
        Endpoint::Source(name) => match sources.get(&name) {
            Some(SourceConfig::Rabbitmq { .. }) => Err(unsupported("rabbitmq")),
            Some(SourceConfig::Kafka {
                bootstrap_servers,
                topics,
                group_id,
                properties,
            }) => Ok(kafka::start(
                ctx.clone(),
                kafka::KafkaSource {
                    name,
                    bootstrap_servers: bootstrap_servers.clone(),
                    topics: topics.clone(),
                    group_id: group_id.clone(),
                    properties: properties.clone(),
                },
                shutdown,
            )),
            None => Err(BridgeError::Config(format!("unknown source '{name}'"))),
        },
        Endpoint::AmqpExchange { .. } => Err(unsupported("amqp_exchange")),
        Endpoint::KafkaTopic(_) => Err(unsupported("kafka_topic")),
        Endpoint::Sink(name) => Err(BridgeError::Config(format!(
            "sink '{name}' cannot be a source"
        ))),
    }
}
