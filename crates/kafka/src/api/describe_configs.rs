//! DescribeConfigs: a topic's supported settings (its overrides, or the broker default
//! they follow: a dynamic broker setting of this instance or of the cluster, else
//! `[kafka]`'s or Kafka's) and a broker's: as Kafka, resource `""` lists the cluster's
//! dynamic settings, this instance's id every setting it has (the dynamic ones over
//! `[kafka]`'s, and read-only those only `ferry.toml` sets — among them the keys tools read
//! of a broker: `listeners`, `advertised.listeners`, `node.id`, `log.dirs`, …), and another
//! id is `INVALID_REQUEST` (a broker is described by itself). No keys asked (null or an
//! empty list) describes every setting, as Kafka. Needs DescribeConfigs on the topic (else
//! `TOPIC_AUTHORIZATION_FAILED`) or on the cluster for a broker (else
//! `CLUSTER_AUTHORIZATION_FAILED`). A group's settings are its share group settings
//! ([`crate::share::config`]; DescribeConfigs on the group, else
//! `GROUP_AUTHORIZATION_FAILED`).

use super::{Refused, Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::metadata::settings::broker::{self, Scope, Settings};
use crate::metadata::settings::{Kind, Layer, SETTINGS, Setting, TopicConfig, TopicDefaults};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind};
use std::sync::Arc;

/// Kafka's resource type of a topic.
pub(super) const TOPIC: i8 = 2;
/// Kafka's resource type of a broker.
pub(super) const BROKER: i8 = 4;
/// Kafka's config resource type of a group (KIP-848, KIP-932: a group's settings).
pub(super) const GROUP: i8 = 32;
/// Config source: set on the topic.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// Config source: a dynamic setting of this broker.
const DYNAMIC_BROKER_CONFIG: i8 = 2;
/// Config source: a dynamic setting of the cluster (every broker).
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
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
const LIST: i8 = 7;

/// Config source: set on the group.
const GROUP_CONFIG: i8 = 8;

/// A share group's settings: those set on the group, and the defaults.
fn group_entries(config: &crate::share::config::ShareConfig) -> Vec<Entry> {
    config
        .describe()
        .into_iter()
        .map(|(name, value, default)| Entry {
            name,
            kind: if value.parse::<i64>().is_ok() {
                INT
            } else {
                STRING
            },
            value,
            source: if default {
                DEFAULT_CONFIG
            } else {
                GROUP_CONFIG
            },
            read_only: false,
        })
        .collect()
}

/// One setting as described.
struct Entry {
    name: &'static str,
    value: String,
    source: i8,
    read_only: bool,
    kind: i8,
}

/// Describes every resource asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: DescribeConfigsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut groups = std::collections::HashMap::new();
    for r in request
        .resources
        .iter()
        .filter(|r| r.resource_type == GROUP)
    {
        let name = r.resource_name.to_string();
        let config = ctx.share.config(&name).await.map_err(|e| e.to_string());
        groups.insert(name, config);
    }
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
                GROUP if !access.group(Operation::DescribeConfigs, r.resource_name.as_str()) => {
                    Some(ResponseError::GroupAuthorizationFailed)
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
                    Some(t) => topic_entries(&ctx.defaults(), &t.meta.config),
                    None => {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(str_bytes(format!(
                                "topic '{}' does not exist",
                                r.resource_name.as_str()
                            ))));
                    }
                },
                BROKER => match broker_entries(ctx, r.resource_name.as_str()) {
                    Ok(entries) => entries,
                    Err((code, message)) => {
                        return result
                            .with_error_code(code)
                            .with_error_message(Some(str_bytes(message)));
                    }
                },
                GROUP => match &groups[r.resource_name.as_str()] {
                    Ok(config) => group_entries(config),
                    Err(e) => {
                        return result
                            .with_error_code(ResponseError::UnknownServerError.code())
                            .with_error_message(Some(str_bytes(e.clone())));
                    }
                },
                other => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(str_bytes(format!(
                            "resource type {other} is not described; only topics (2), brokers (4) and groups (32) are"
                        ))));
                }
            };
            // As Kafka's ConfigHelper: null or empty, every key.
            let wanted = r.configuration_keys.filter(|keys| !keys.is_empty());
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

/// The settings of a topic of settings `config` under the broker defaults `d`.
fn topic_entries(d: &TopicDefaults, config: &TopicConfig) -> Vec<Entry> {
    SETTINGS
        .iter()
        .map(|s| setting_entry(d, config, s, s.name, DEFAULT_CONFIG))
        .collect()
}

/// Setting `s` of a topic of settings `config` under the broker defaults `d`, described
/// as `name`; `from_config` is the source of a value `[kafka]` sets.
fn setting_entry(
    d: &TopicDefaults,
    config: &TopicConfig,
    s: &Setting,
    name: &'static str,
    from_config: i8,
) -> Entry {
    Entry {
        name,
        value: d.describe(s, config),
        source: match d.layer(s, config) {
            Some(Layer::Topic) => DYNAMIC_TOPIC_CONFIG,
            Some(Layer::Broker) => DYNAMIC_BROKER_CONFIG,
            Some(Layer::Cluster) => DYNAMIC_DEFAULT_BROKER_CONFIG,
            Some(Layer::Config) => from_config,
            None => DEFAULT_CONFIG,
        },
        read_only: false,
        kind: config_type(s.kind),
    }
}

/// The settings of BROKER resource `name`: `""`, the cluster's dynamic settings; this
/// instance's id, every setting it has.
///
/// # Errors
/// `INVALID_REQUEST` for another name, with Kafka's message.
fn broker_entries(ctx: &Context, name: &str) -> Result<Vec<Entry>, Refused> {
    let cluster = ctx.broker_settings.of(Scope::Cluster);
    if name.is_empty() {
        return Ok(dynamic_entries(&cluster, DYNAMIC_DEFAULT_BROKER_CONFIG).collect());
    }
    let me = ctx.config.node_id;
    if name.parse::<i32>().ok() != Some(me) {
        return Err((
            ResponseError::InvalidRequest.code(),
            format!("Unexpected broker id, expected {me} or empty string, but received {name}"),
        ));
    }
    // The topic defaults, under their broker names; those not set dynamically are
    // `ferry.toml`'s, or Kafka's defaults where `ferry.toml` has no key for them.
    let defaults = ctx.defaults();
    let mut entries: Vec<Entry> = SETTINGS
        .iter()
        .map(|s| {
            setting_entry(
                &defaults,
                &TopicConfig::default(),
                s,
                s.broker,
                STATIC_BROKER_CONFIG,
            )
        })
        .collect();
    entries.extend(static_entries(ctx));
    // The inert settings set dynamically: this instance's own over the cluster's.
    let mine = ctx.broker_settings.of(Scope::Broker(me));
    let inert = |e: &Entry| matches!(broker::meaning(e.name), Some(broker::Meaning::Inert(..)));
    entries.extend(dynamic_entries(&mine, DYNAMIC_BROKER_CONFIG).filter(inert));
    entries.extend(
        dynamic_entries(&cluster, DYNAMIC_DEFAULT_BROKER_CONFIG)
            .filter(|e| inert(e) && !mine.contains_key(e.name)),
    );
    Ok(entries)
}

/// The settings of this instance only `ferry.toml` sets (or Ferry's model fixes), under
/// Kafka's broker keys: read-only, `STATIC_BROKER_CONFIG`.
fn static_entries(ctx: &Context) -> Vec<Entry> {
    let c = &ctx.config;
    let me = ctx.brokers.me();
    let advertised = me
        .listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, host(&l.host), l.port))
        .collect::<Vec<_>>()
        .join(",");
    let protocols = me
        .listeners
        .iter()
        .map(|l| format!("{0}:{0}", l.name))
        .collect::<Vec<_>>()
        .join(",");
    let fixed = |name, value: String, kind| Entry {
        name,
        value,
        source: STATIC_BROKER_CONFIG,
        read_only: true,
        kind,
    };
    vec![
        fixed("node.id", c.node_id.to_string(), INT),
        fixed("broker.id", c.node_id.to_string(), INT),
        fixed("listeners", ctx.bound.join(","), STRING),
        fixed("advertised.listeners", advertised, STRING),
        fixed("listener.security.protocol.map", protocols, STRING),
        fixed("log.dirs", ctx.log_dir.path.clone(), STRING),
        fixed("log.dir", ctx.log_dir.path.clone(), STRING),
        fixed("num.partitions", c.default_partitions.to_string(), INT),
        // One copy per partition as Kafka sees it (the store replicates).
        fixed("default.replication.factor", "1".to_owned(), INT),
        fixed(
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            BOOLEAN,
        ),
        fixed(
            "socket.request.max.bytes",
            c.max_request_size.to_string(),
            INT,
        ),
        fixed(
            "connections.max.idle.ms",
            c.connections_max_idle_ms.to_string(),
            LONG,
        ),
        fixed(
            "connections.max.reauth.ms",
            c.connections_max_reauth_ms.to_string(),
            LONG,
        ),
        fixed(
            "log.retention.check.interval.ms",
            c.retention_check_interval_ms.to_string(),
            LONG,
        ),
        fixed(
            "group.min.session.timeout.ms",
            c.group_min_session_timeout_ms.to_string(),
            INT,
        ),
        fixed(
            "group.max.session.timeout.ms",
            c.group_max_session_timeout_ms.to_string(),
            INT,
        ),
        fixed(
            "group.initial.rebalance.delay.ms",
            c.group_initial_rebalance_delay_ms.to_string(),
            INT,
        ),
        fixed(
            "group.consumer.session.timeout.ms",
            c.group_consumer_session_timeout_ms.to_string(),
            INT,
        ),
        fixed(
            "group.consumer.heartbeat.interval.ms",
            c.group_consumer_heartbeat_interval_ms.to_string(),
            INT,
        ),
        fixed(
            "allow.everyone.if.no.acl.found",
            c.allow_everyone_if_no_acl_found.to_string(),
            BOOLEAN,
        ),
        fixed("super.users", c.super_users.join(";"), STRING),
        fixed(
            "ssl.principal.mapping.rules",
            c.ssl_principal_mapping_rules.clone(),
            STRING,
        ),
    ]
}

/// `host` as a listener URL writes it: an IPv6 address in brackets.
fn host(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// Dynamic broker `settings`, described with `source`.
fn dynamic_entries(settings: &Settings, source: i8) -> impl Iterator<Item = Entry> + '_ {
    settings.iter().filter_map(move |(key, value)| {
        let m = broker::meaning(key)?;
        Some(Entry {
            name: m.name(),
            value: value.clone(),
            source,
            read_only: false,
            kind: config_type(m.kind()),
        })
    })
}

/// Kafka's config type (DescribeConfigs v3+) of a value of `kind`.
fn config_type(kind: Kind) -> i8 {
    match kind {
        Kind::Int(_) => INT,
        Kind::Long(_) => LONG,
        Kind::Double => DOUBLE,
        Kind::Boolean => BOOLEAN,
        Kind::Version | Kind::Text => STRING,
        Kind::List => LIST,
    }
}
