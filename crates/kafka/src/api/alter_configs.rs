//! AlterConfigs: replaces a topic's settings (those not named return to the broker
//! default, as Kafka's non-incremental AlterConfigs does), or the dynamic broker settings
//! of a BROKER resource ([`crate::metadata::settings::broker`]: `""` the cluster's, a live
//! broker's id that instance's), which it replaces the same way. Needs AlterConfigs on the
//! topic (else `TOPIC_AUTHORIZATION_FAILED`) or, for a broker, on the cluster (else
//! `CLUSTER_AUTHORIZATION_FAILED`); [`refusal`] is that check, and [`alter_broker`] the
//! change of broker settings, shared with IncrementalAlterConfigs.

use super::describe_configs::{BROKER, TOPIC};
use super::{Refused, Session, str_bytes};
use crate::Context;
use crate::acls::{Access, Operation};
use crate::metadata::settings::TopicConfig;
use crate::metadata::settings::broker::{self, BrokerSettingsError, Scope, Settings};
use crate::metadata::topics::TopicError;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ResponseKind};
use std::sync::Arc;

/// Applies every resource's settings.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: AlterConfigsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut responses = Vec::with_capacity(request.resources.len());
    for r in request.resources {
        let name = r.resource_name.as_str();
        let pairs = r
            .configs
            .iter()
            .map(|c| (c.name.as_str(), c.value.as_ref().map(|v| v.as_str())));
        let outcome = match refusal(&access, r.resource_type, name) {
            Some(refused) => Err(refused),
            // A broker setting without a value is left unset.
            None if r.resource_type == BROKER => {
                let pairs: Vec<(&str, &str)> = pairs.filter_map(|(k, v)| Some((k, v?))).collect();
                let replace = |_: Settings| {
                    pairs
                        .iter()
                        .try_fold(Settings::new(), |s, (k, v)| broker::set(s, k, v))
                };
                alter_broker(ctx, name, replace, request.validate_only).await
            }
            None => match TopicConfig::parse(pairs) {
                Ok(config) => ctx
                    .topics
                    .set_config(name, |_| Ok(config), request.validate_only)
                    .await
                    .map_err(|e| (e.code(), e.to_string())),
                Err(e) => {
                    let e = TopicError::from(e);
                    Err((e.code(), e.to_string()))
                }
            },
        };
        responses.push(answer(r.resource_type, r.resource_name, outcome));
    }
    ResponseKind::AlterConfigs(AlterConfigsResponse::default().with_responses(responses))
}

/// Why the caller of `access` may not alter the settings of resource `name` of
/// `resource_type`, if it may not: the ACL refusal, or that only topics and brokers have
/// settings to alter.
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
    (resource_type != TOPIC && resource_type != BROKER).then(|| {
        (
            ResponseError::InvalidRequest.code(),
            format!(
                "resource type {resource_type} has no settings to alter; topics (2) and brokers (4) have"
            ),
        )
    })
}

/// Replaces the dynamic broker settings of BROKER resource `name` with what `change` makes
/// of them (only checks with `validate_only`).
///
/// # Errors
/// `INVALID_REQUEST` for a name that is neither `""` nor a live broker's id (Kafka's
/// messages), else as [`broker::BrokerSettings::alter`].
pub(super) async fn alter_broker(
    ctx: &Context,
    name: &str,
    change: impl Fn(Settings) -> Result<Settings, BrokerSettingsError>,
    validate_only: bool,
) -> Result<(), Refused> {
    let scope = scope(ctx, name).await?;
    ctx.broker_settings
        .alter(scope, change, validate_only)
        .await
        .map_err(|e| (e.code(), e.to_string()))
}

/// The scope BROKER resource `name` names: `""` the cluster, a live broker's id that
/// broker.
async fn scope(ctx: &Context, name: &str) -> Result<Scope, Refused> {
    if name.is_empty() {
        return Ok(Scope::Cluster);
    }
    let invalid = |message| Err((ResponseError::InvalidRequest.code(), message));
    let Ok(node) = name.parse::<i32>() else {
        return invalid(format!("Broker id must be an integer, but it is: {name}"));
    };
    let live = super::create_topics::live_nodes(ctx).await?;
    if !live.contains(&node) {
        let live: Vec<String> = live.iter().map(i32::to_string).collect();
        return invalid(format!(
            "broker {node} is not a live broker of this cluster (live: {})",
            live.join(", ")
        ));
    }
    Ok(Scope::Broker(node))
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
