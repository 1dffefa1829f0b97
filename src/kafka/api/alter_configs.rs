//! AlterConfigs: replaces a topic's settings (those not named return to the broker
//! default, as Kafka's non-incremental AlterConfigs does). Broker settings come from
//! `ferry.toml` and cannot be altered. Needs AlterConfigs on the topic (else
//! `TOPIC_AUTHORIZATION_FAILED`) or, for a broker, on the cluster (else
//! `CLUSTER_AUTHORIZATION_FAILED`).

use super::describe_configs::{BROKER, TOPIC};
use super::{Session, str_bytes};
use crate::kafka::Context;
use crate::kafka::acls::Operation;
use crate::kafka::topics::TopicConfig;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ResponseKind};
use std::sync::Arc;

/// Applies every resource's settings.
pub async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: AlterConfigsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut responses = Vec::with_capacity(request.resources.len());
    for r in request.resources {
        let response = AlterConfigsResourceResponse::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        let refused = match r.resource_type {
            TOPIC => (!access.topic(Operation::AlterConfigs, r.resource_name.as_str()))
                .then_some(ResponseError::TopicAuthorizationFailed),
            BROKER => (!access.cluster(Operation::AlterConfigs))
                .then_some(ResponseError::ClusterAuthorizationFailed),
            _ => None,
        };
        let outcome = if let Some(e) = refused {
            Err((e.code(), "Authorization failed.".to_owned()))
        } else if r.resource_type == TOPIC {
            match TopicConfig::parse(
                r.configs
                    .iter()
                    .map(|c| (c.name.as_str(), c.value.as_ref().map(|v| v.as_str()))),
            ) {
                Ok(config) => ctx
                    .topics
                    .set_config(r.resource_name.as_str(), config, request.validate_only)
                    .await
                    .map_err(|e| (e.code(), e.to_string())),
                Err(e) => Err((e.code(), e.to_string())),
            }
        } else {
            Err((
                ResponseError::InvalidRequest.code(),
                "only topic settings can be altered; broker settings come from ferry.toml".into(),
            ))
        };
        responses.push(match outcome {
            Ok(()) => response,
            Err((code, message)) => response
                .with_error_code(code)
                .with_error_message(Some(str_bytes(message))),
        });
    }
    ResponseKind::AlterConfigs(AlterConfigsResponse::default().with_responses(responses))
}
