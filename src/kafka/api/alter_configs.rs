//! AlterConfigs: replaces a topic's settings (those not named return to the broker
//! default, as Kafka's non-incremental AlterConfigs does). Broker settings come from
//! `ferry.toml` and cannot be altered. Needs AlterConfigs on the topic (else
//! `TOPIC_AUTHORIZATION_FAILED`) or, for a broker, on the cluster (else
//! `CLUSTER_AUTHORIZATION_FAILED`); [`refusal`] is that check, shared with
//! IncrementalAlterConfigs.

use super::describe_configs::{BROKER, TOPIC};
use super::{Refused, Session, str_bytes};
use crate::kafka::Context;
use crate::kafka::acls::{Access, Operation};
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
        let name = r.resource_name.as_str();
        let outcome = match refusal(&access, r.resource_type, name) {
            Some(refused) => Err(refused),
            None => match TopicConfig::parse(
                r.configs
                    .iter()
                    .map(|c| (c.name.as_str(), c.value.as_ref().map(|v| v.as_str()))),
            ) {
                Ok(config) => ctx
                    .topics
                    .set_config(name, |_| Ok(config), request.validate_only)
                    .await
                    .map_err(|e| (e.code(), e.to_string())),
                Err(e) => Err((e.code(), e.to_string())),
            },
        };
        responses.push(answer(r.resource_type, r.resource_name, outcome));
    }
    ResponseKind::AlterConfigs(AlterConfigsResponse::default().with_responses(responses))
}

/// Why the caller of `access` may not alter the settings of resource `name` of
/// `resource_type`, if it may not: the ACL refusal, or, for anything but a topic, that
/// only topic settings can be altered.
pub(super) fn refusal(access: &Access, resource_type: i8, name: &str) -> Option<Refused> {
    let denied = match resource_type {
        TOPIC => (!access.topic(Operation::AlterConfigs, name))
            .then_some(ResponseError::TopicAuthorizationFailed),
        BROKER => (!access.cluster(Operation::AlterConfigs))
            .then_some(ResponseError::ClusterAuthorizationFailed),
        _ => None,
    };
    if let Some(e) = denied {
        return Some((e.code(), "Authorization failed.".to_owned()));
    }
    (resource_type != TOPIC).then(|| {
        (
            ResponseError::InvalidRequest.code(),
            "only topic settings can be altered; broker settings come from ferry.toml".into(),
        )
    })
}

/// The answer for one resource.
fn answer(
    resource_type: i8,
    resource_name: kafka_protocol::protocol::StrBytes,
    outcome: Result<(), Refused>,
) -> AlterConfigsResourceResponse {
    let response = AlterConfigsResourceResponse::default()
        .with_resource_type(resource_type)
        .with_resource_name(resource_name);
    match outcome {
        Ok(()) => response,
        Err((code, message)) => response
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message))),
    }
}
