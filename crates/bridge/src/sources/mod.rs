//! Sources: where a route's messages come from. Each stages messages with
//! [`super::route::RouteStages::stage_in`] in a transaction that also records its own
//! progress, and tells its upstream only after that commit.
//!
//! Modules, one per kind of endpoint: [`rabbitmq`] (an external RabbitMQ queue),
//! [`kafka`] (external Kafka topics), [`amqp_front`] and [`kafka_front`] (Ferry's own
//! fronts).

pub(crate) mod amqp_front;
pub(crate) mod kafka;
pub(crate) mod kafka_front;
pub(crate) mod rabbitmq;

use super::kafka_client::KafkaEndpoint;
use super::{BridgeError, RouteContext};
use ferry_config::{Endpoint, SourceConfig};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The task that runs `endpoint` as the source of `ctx`'s route until `shutdown`.
///
/// # Errors
/// [`BridgeError::Config`] for an endpoint on a front this process does not run.
pub(crate) fn start(
    ctx: Arc<RouteContext>,
    endpoint: Endpoint,
    sources: &BTreeMap<String, SourceConfig>,
    shutdown: CancellationToken,
) -> Result<BoxFuture<'static, Result<(), BridgeError>>, BridgeError> {
    let no_front = |front: &str| {
        BridgeError::Config(format!(
            "route '{}': the {front} front does not run in this process",
            ctx.config.name
        ))
    };
    match endpoint {
        Endpoint::Source(name) => match sources.get(&name) {
            Some(SourceConfig::Rabbitmq {
                uri,
                queue,
                prefetch,
                dedup_window_ms,
                tls,
            }) => {
                let settings = rabbitmq::Settings {
                    name: name.clone(),
                    uri: uri.clone(),
                    tls: tls.clone(),
                    queue: queue.clone(),
                    prefetch: *prefetch,
                    dedup_window_ms: *dedup_window_ms,
                };
                Ok(rabbitmq::run(ctx, settings, shutdown))
            }
            Some(SourceConfig::Kafka {
                bootstrap_servers,
                topics,
                group_id,
                properties,
                security,
            }) => Ok(kafka::start(
                ctx.clone(),
                kafka::KafkaSource {
                    endpoint: KafkaEndpoint {
                        key: format!("sources.{name}"),
                        bootstrap_servers: bootstrap_servers.clone(),
                        security: security.clone(),
                        properties: properties.clone(),
                    },
                    name,
                    topics: topics.clone(),
                    group_id: group_id.clone(),
                },
                shutdown,
            )),
            None => Err(BridgeError::Config(format!("unknown source '{name}'"))),
        },
        Endpoint::AmqpExchange {
            vhost,
            exchange,
            key,
        } => {
            let amqp = ctx.fronts.amqp.clone().ok_or_else(|| no_front("AMQP"))?;
            let from = amqp_front::Exchange {
                vhost,
                exchange,
                binding_key: key.unwrap_or_else(|| "#".to_owned()),
            };
            Ok(Box::pin(amqp_front::run(ctx, amqp, from, shutdown)))
        }
        Endpoint::KafkaTopic(topic) => {
            let kafka = ctx.fronts.kafka.clone().ok_or_else(|| no_front("Kafka"))?;
            Ok(Box::pin(kafka_front::run(ctx, kafka, topic, shutdown)))
        }
        Endpoint::Sink(name) => Err(BridgeError::Config(format!(
            "sink '{name}' cannot be a source"
        ))),
    }
}
