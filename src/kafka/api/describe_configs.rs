//! DescribeConfigs: a topic's supported settings (its overrides, or the broker default
//! they follow) and, read-only, the broker defaults `[kafka]` sets. Needs DescribeConfigs
//! on the topic (else `TOPIC_AUTHORIZATION_FAILED`) or on the cluster for a broker (else
//! `CLUSTER_AUTHORIZATION_FAILED`).

use super::{Session, str_bytes};
use crate::kafka::Context;
use crate::kafka::acls::Operation;
use crate::kafka::topics::{
    CLEANUP_POLICY, COMPRESSION_TYPE, DELETE_RETENTION_MS, MAX_MESSAGE_BYTES,
    MESSAGE_TIMESTAMP_TYPE, MIN_CLEANABLE_DIRTY_RATIO, MIN_COMPACTION_LAG_MS, RETENTION_BYTES,
    RETENTION_MS,
};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind};
use std::sync::Arc;

/// Kafka's resource type of a topic.
pub const TOPIC: i8 = 2;
/// Kafka's resource type of a broker.
pub const BROKER: i8 = 4;
/// Config source: set on the topic.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// Config source: the broker's configuration file.
const STATIC_BROKER_CONFIG: i8 = 4;
/// Config source: the default.
const DEFAULT_CONFIG: i8 = 5;
/// Config types (v3+).
const STRING: i8 = 2;
const INT: i8 = 3;
const LONG: i8 = 5;
const DOUBLE: i8 = 6;
const BOOLEAN: i8 = 1;

/// One setting as described.
struct Entry {
    name: &'static str,
    value: String,
    source: i8,
    read_only: bool,
    kind: i8,
}

/// Describes every resource asked for.
pub fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: DescribeConfigsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let results = request
        .resources
        .into_iter()
        .map(|r| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let refused = match r.resource_type {
                TOPIC if !access.topic(Operation::DescribeConfigs, r.resource_name.as_str()) => {
                    Some(ResponseError::TopicAuthorizationFailed)
                }
                BROKER if !access.cluster(Operation::DescribeConfigs) => {
                    Some(ResponseError::ClusterAuthorizationFailed)
                }
                _ => None,
            };
            if let Some(e) = refused {
                return result
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes("Authorization failed.")));
            }
            let entries = match r.resource_type {
                TOPIC => match ctx.topics.get(r.resource_name.as_str()) {
                    Some(t) => topic_entries(ctx, &t.meta.config),
                    None => {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(str_bytes(format!(
                                "topic '{}' does not exist",
                                r.resource_name.as_str()
                            ))));
                    }
                },
                BROKER => broker_entries(ctx),
                other => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(str_bytes(format!(
                            "resource type {other} is not described; only topics (2) and brokers (4) are"
                        ))));
                }
            };
            let wanted = r.configuration_keys;
            result.with_configs(
                entries
                    .into_iter()
                    .filter(|e| {
                        wanted
                            .as_ref()
                            .is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name))
                    })
                    .map(|e| {
                        let described = DescribeConfigsResourceResult::default()
                            .with_name(str_bytes(e.name))
                            .with_value(Some(str_bytes(e.value)))
                            .with_read_only(e.read_only)
                            .with_config_source(e.source);
                        if version >= 3 {
                            described.with_config_type(e.kind)
                        } else {
                            described
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))
}

fn topic_entries(ctx: &Context, config: &crate::kafka::topics::TopicConfig) -> Vec<Entry> {
    let d = ctx.defaults;
    let source = |set: bool| {
        if set {
            DYNAMIC_TOPIC_CONFIG
        } else {
            DEFAULT_CONFIG
        }
    };
    vec![
        Entry {
            name: RETENTION_MS,
            value: d.retention_ms(config).to_string(),
            source: source(config.retention_ms.is_some()),
            read_only: false,
            kind: LONG,
        },
        Entry {
            name: RETENTION_BYTES,
            value: d.retention_bytes(config).to_string(),
            source: source(config.retention_bytes.is_some()),
            read_only: false,
            kind: LONG,
        },
        Entry {
            name: MAX_MESSAGE_BYTES,
            value: d.max_message_bytes(config).to_string(),
            source: source(config.max_message_bytes.is_some()),
            read_only: false,
            kind: INT,
        },
        Entry {
            name: CLEANUP_POLICY,
            value: config.cleanup_policy().as_str().into(),
            source: source(config.cleanup_policy.is_some()),
            read_only: false,
            kind: STRING,
        },
        Entry {
            name: DELETE_RETENTION_MS,
            value: config.delete_retention_ms().to_string(),
            source: source(config.delete_retention_ms.is_some()),
            read_only: false,
            kind: LONG,
        },
        Entry {
            name: MIN_COMPACTION_LAG_MS,
            value: config.min_compaction_lag_ms().to_string(),
            source: source(config.min_compaction_lag_ms.is_some()),
            read_only: false,
            kind: LONG,
        },
        Entry {
            name: MIN_CLEANABLE_DIRTY_RATIO,
            value: config.min_cleanable_dirty_ratio().to_string(),
            source: source(config.min_cleanable_dirty_ratio.is_some()),
            read_only: false,
            kind: DOUBLE,
        },
        Entry {
            name: MESSAGE_TIMESTAMP_TYPE,
            value: config.message_timestamp_type().as_str().into(),
            source: source(config.message_timestamp_type.is_some()),
            read_only: false,
            kind: STRING,
        },
        Entry {
            name: COMPRESSION_TYPE,
            value: config.compression_type().as_str().into(),
            source: source(config.compression_type.is_some()),
            read_only: false,
            kind: STRING,
        },
    ]
}

fn broker_entries(ctx: &Context) -> Vec<Entry> {
    let c = &ctx.config;
    let entry = |name, value: String, kind| Entry {
        name,
        value,
        source: STATIC_BROKER_CONFIG,
        read_only: true,
        kind,
    };
    vec![
        entry("log.retention.ms", c.retention_ms.to_string(), LONG),
        entry("log.retention.bytes", c.retention_bytes.to_string(), LONG),
        entry("message.max.bytes", c.max_message_bytes.to_string(), INT),
        entry("num.partitions", c.default_partitions.to_string(), INT),
        entry(
            "connections.max.reauth.ms",
            c.connections_max_reauth_ms.to_string(),
            LONG,
        ),
        entry(
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            BOOLEAN,
        ),
    ]
}
