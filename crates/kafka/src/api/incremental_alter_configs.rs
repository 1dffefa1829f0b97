//! IncrementalAlterConfigs (KIP-339): changes the named settings of a topic, or the
//! dynamic settings of a broker ([`crate::metadata::settings::broker`]) — SET a value, DELETE
//! (back to the default) — and keeps the others, in one store transaction. Values are
//! checked as AlterConfigs checks them ([`crate::metadata::settings::TopicConfig::with`],
//! [`broker::set`]). APPEND and SUBTRACT add items to and take them from Ferry's
//! one list setting, `cleanup.policy` (`log.cleanup.policy` for a broker;
//! [`crate::metadata::settings::TopicConfig::edit_list`], [`broker::edit_list`]); for
//! another setting they are `INVALID_CONFIG`, as Kafka answers them for a setting that is
//! not a list. A setting named twice, or an unknown operation, is `INVALID_REQUEST`. The
//! ACL checks, the resource types that have settings and the broker names taken are
//! AlterConfigs' ([`alter_configs::refusal`], [`alter_configs::alter_broker`]).

use super::alter_configs;
use super::describe_configs::{BROKER, GROUP};
use super::{Refused, Session, str_bytes};
use crate::Context;
use crate::metadata::settings::broker;
use crate::metadata::topics::TopicError;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ResponseKind,
};
use std::collections::HashSet;
use std::sync::Arc;

/// Kafka's `AlterConfigOp.OpType` ids.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Applies every resource's changes.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: IncrementalAlterConfigsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut responses = Vec::with_capacity(request.resources.len());
    for r in request.resources {
        let name = r.resource_name.as_str();
        let outcome = if r.resource_type == GROUP {
            alter_group(ctx, &access, name, &r.configs, request.validate_only).await
        } else {
            match alter_configs::refusal(&access, r.resource_type, name) {
                Some(refused) => Err(refused),
                None => match changes(&r.configs) {
                    Ok(changes) if r.resource_type == BROKER => {
                        let change = |settings: broker::Settings| {
                            changes
                                .iter()
                                .try_fold(settings, |s, (key, change)| match change {
                                    Change::Set(Some(value)) => broker::set(s, key, value),
                                    Change::Set(None) => broker::delete(s, key),
                                    Change::Append(items) => broker::edit_list(s, key, items, true),
                                    Change::Subtract(items) => {
                                        broker::edit_list(s, key, items, false)
                                    }
                                })
                        };
                        alter_configs::alter_broker(ctx, name, change, request.validate_only).await
                    }
                    Ok(changes) => ctx
                        .topics
                        .set_config(
                            name,
                            |config| {
                                changes
                                    .iter()
                                    .try_fold(config, |c, (key, change)| match change {
                                        Change::Set(value) => c.with([(*key, *value)]),
                                        Change::Append(items) => c.edit_list(key, items, true),
                                        Change::Subtract(items) => c.edit_list(key, items, false),
                                    })
                                    .map_err(TopicError::from)
                            },
                            request.validate_only,
                        )
                        .await
                        .map_err(|e| (e.code(), e.to_string())),
                    Err(refused) => Err(refused),
                },
            }
        };
        let response = AlterConfigsResourceResponse::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name);
        responses.push(match outcome {
            Ok(()) => response,
            Err((code, message)) => response
                .with_error_code(code)
                .with_error_message(Some(str_bytes(message))),
        });
    }
    ResponseKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse::default().with_responses(responses),
    )
}

/// SETs and DELETEs share group `name`'s settings ([`crate::share::config`]); needs
/// AlterConfigs on the group (else `GROUP_AUTHORIZATION_FAILED`), and Write on the topic a
/// dead-letter topic setting names (else `TOPIC_AUTHORIZATION_FAILED`). An unknown setting or a
/// bad value is `INVALID_CONFIG`, a list operation `INVALID_REQUEST`.
async fn alter_group(
    ctx: &Context,
    access: &crate::acls::Access,
    name: &str,
    configs: &[AlterableConfig],
    validate_only: bool,
) -> Result<(), Refused> {
    if !access.group(crate::acls::Operation::AlterConfigs, name) {
        return Err((
            ResponseError::GroupAuthorizationFailed.code(),
            "Authorization failed.".to_owned(),
        ));
    }
    let failed = |e: crate::share::partition::ShareError| {
        (ResponseError::UnknownServerError.code(), e.to_string())
    };
    let mut config = ctx.share.config(name).await.map_err(failed)?;
    for (key, change) in changes(configs)? {
        let Change::Set(value) = change else {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!("{key}: a group setting is not a list"),
            ));
        };
        // Archived records are written to the dead-letter topic on the group's behalf: only
        // a principal that may write there may name it.
        if key == crate::share::config::DEAD_LETTER_TOPIC
            && let Some(topic) = value.filter(|t| !t.is_empty())
            && !access.topic(crate::acls::Operation::Write, topic)
        {
            return Err((
                ResponseError::TopicAuthorizationFailed.code(),
                format!("{key}: not authorized to write to topic {topic}"),
            ));
        }
        config = config
            .with(key, value)
            .map_err(|why| (ResponseError::InvalidConfig.code(), why))?;
    }
    if validate_only {
        return Ok(());
    }
    ctx.share.set_config(name, config).await.map_err(failed)
}

/// What one operation does to a setting.
#[derive(Debug, Clone, Copy)]
enum Change<'a> {
    /// SET a value, or DELETE it (`None`: back to the default).
    Set(Option<&'a str>),
    /// APPEND these list items.
    Append(&'a str),
    /// SUBTRACT these list items.
    Subtract(&'a str),
}

/// The changes `configs` make, by setting name.
fn changes(configs: &[AlterableConfig]) -> Result<Vec<(&str, Change<'_>)>, Refused> {
    let mut named = HashSet::new();
    let mut out = Vec::with_capacity(configs.len());
    for c in configs {
        let key = c.name.as_str();
        if !named.insert(key) {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!("{key}: named twice"),
            ));
        }
        let value = c.value.as_ref().map(|v| v.as_str());
        let needed = |op: &str| {
            value.ok_or_else(|| {
                (
                    ResponseError::InvalidRequest.code(),
                    format!("{key}: {op} needs a value"),
                )
            })
        };
        out.push(match c.config_operation {
            SET => (key, Change::Set(Some(needed("SET")?))),
            DELETE => (key, Change::Set(None)),
            APPEND => (key, Change::Append(needed("APPEND")?)),
            SUBTRACT => (key, Change::Subtract(needed("SUBTRACT")?)),
            other => {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    format!("{key}: unknown operation {other}"),
                ));
            }
        });
    }
    Ok(out)
}
