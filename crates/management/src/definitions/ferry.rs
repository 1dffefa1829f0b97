//! The `ferry` section of a definitions document: what RabbitMQ's format has no place
//! for — the Kafka front's topics with their settings, its ACLs, consumer groups'
//! committed offsets, and the bridge's runtime routes (users' SCRAM credentials travel
//! with the users, as fields of Ferry's own).
//!
//! An import checks the whole section first (names, partition counts against existing
//! topics, ACL values, route definitions) and refuses it, naming the field, before
//! anything changes; then, after the RabbitMQ part's transaction, applies it through the
//! fronts' own operations in order: topics (created as CreateTopics creates them; one that
//! exists with the same partition count keeps its settings), ACLs (added once), offsets
//! (committed as an admin client commits them: refused for a group with members), routes
//! (added or replaced as `PUT /api/ferry/routes/{name}`). A refusal while applying stops
//! there, naming the item; what came before it stays.

use super::model::{AclDefinition, FerryDefinitions, GroupOffsetDefinition, TopicDefinition};
use crate::Api;
use crate::administrator::store_failed;
use crate::error::{ApiError, ApiResult};
use crate::kafka::{from_kafka_name, kafka_name};
use ferry_bridge::admin::Origin;
use ferry_config::RouteConfig;
use ferry_kafka::admin::{
    Acl, AclCodes, Operation, PatternType, Permission, ResetOffset, ResourceType,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// The section as this instance holds it now.
///
/// # Errors
/// A 500 when the store cannot be read.
pub(crate) async fn export(api: &Api) -> ApiResult<FerryDefinitions> {
    let topics = api.kafka.topics().await.map_err(store_failed)?;
    let kafka_topics = topics
        .iter()
        .map(|t| TopicDefinition {
            name: t.name.clone(),
            partitions: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
            configs: t
                .configs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::from(v.as_str())))
                .collect(),
        })
        .collect();
    let acls = api.kafka.acls().await.map_err(store_failed)?;
    let kafka_acls = acls
        .acls
        .iter()
        .map(|a| AclDefinition {
            resource_type: kafka_name(a.resource.resource_type),
            pattern_type: kafka_name(a.resource.pattern_type),
            name: a.resource.name.clone(),
            principal: a.principal.clone(),
            host: a.host.clone(),
            operation: kafka_name(a.operation),
            permission: kafka_name(a.permission),
        })
        .collect();
    let groups = api.kafka.groups().await.map_err(store_failed)?;
    let kafka_group_offsets = groups
        .iter()
        .flat_map(|g| {
            g.offsets.iter().map(|o| GroupOffsetDefinition {
                group: g.id.clone(),
                topic: o.topic.clone(),
                partition: o.partition,
                offset: o.committed_offset,
            })
        })
        .collect();
    let routes = api.routes.routes().await?;
    let routes = routes
        .iter()
        .filter(|r| r.origin == Origin::Runtime)
        .map(|r| serde_json::to_value(&r.route).map_err(|e| ApiError::internal(e.to_string())))
        .collect::<ApiResult<_>>()?;
    Ok(FerryDefinitions {
        kafka_topics,
        kafka_acls,
        kafka_group_offsets,
        routes,
    })
}

/// A topic to create.
struct NewTopic {
    name: String,
    partitions: i32,
    /// Its settings, as CreateTopics takes them.
    configs: Vec<(String, String)>,
}

/// A checked section, ready to apply.
pub(crate) struct Checked {
    /// Topics to create.
    topics: Vec<NewTopic>,
    acls: Vec<Acl>,
    /// Offsets by group.
    offsets: BTreeMap<String, Vec<ResetOffset>>,
    routes: Vec<RouteConfig>,
}

/// Checks `section` against what this instance holds, changing nothing.
///
/// # Errors
/// A 400 naming the first field at fault (`ferry.kafka_topics[2].partitions: …`).
pub(crate) async fn check(api: &Api, section: FerryDefinitions) -> ApiResult<Checked> {
    let refused =
        |field: String, why: String| ApiError::bad_request(format!("ferry.{field}: {why}"));
    let existing: BTreeMap<String, usize> = api
        .kafka
        .topics()
        .await
        .map_err(store_failed)?
        .into_iter()
        .map(|t| (t.name, t.partitions.len()))
        .collect();
    let mut topics = Vec::new();
    for (i, t) in section.kafka_topics.into_iter().enumerate() {
        if t.partitions < 1 {
            return Err(refused(
                format!("kafka_topics[{i}].partitions"),
                "must be at least 1".into(),
            ));
        }
        match existing.get(&t.name) {
            Some(&n) if n == t.partitions as usize => continue,
            Some(&n) => {
                return Err(refused(
                    format!("kafka_topics[{i}].partitions"),
                    format!(
                        "topic '{}' exists with {n} partitions, not {}",
                        t.name, t.partitions
                    ),
                ));
            }
            None => {}
        }
        let configs = t
            .configs
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k, s)),
                Value::Number(n) => Ok((k, n.to_string())),
                Value::Bool(b) => Ok((k, b.to_string())),
                other => Err(refused(
                    format!("kafka_topics[{i}].configs.{k}"),
                    format!("{other} is not a setting's value"),
                )),
            })
            .collect::<ApiResult<_>>()?;
        topics.push(NewTopic {
            name: t.name,
            partitions: t.partitions,
            configs,
        });
    }
    let acls = section
        .kafka_acls
        .iter()
        .enumerate()
        .map(|(i, a)| acl(a).map_err(|why| refused(format!("kafka_acls[{i}]"), why)))
        .collect::<ApiResult<_>>()?;
    let mut offsets: BTreeMap<String, Vec<ResetOffset>> = BTreeMap::new();
    for o in section.kafka_group_offsets {
        offsets.entry(o.group).or_default().push(ResetOffset {
            topic: o.topic,
            partition: o.partition,
            offset: o.offset,
        });
    }
    let routes = section
        .routes
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::from_value(r).map_err(|e| {
                refused(
                    format!("routes[{i}]"),
                    format!("not a route definition: {e}"),
                )
            })
        })
        .collect::<ApiResult<_>>()?;
    Ok(Checked {
        topics,
        acls,
        offsets,
        routes,
    })
}

/// The ACL `a` names, checked as CreateAcls checks one.
fn acl(a: &AclDefinition) -> Result<Acl, String> {
    let code = |value: Option<i8>, field: &str, name: &str| {
        value.ok_or_else(|| format!("{field}: '{name}' is not one of Kafka's names"))
    };
    let codes = AclCodes {
        resource_type: code(
            from_kafka_name(ResourceType::ALL, &a.resource_type).map(ResourceType::code),
            "resource_type",
            &a.resource_type,
        )?,
        name: &a.name,
        pattern_type: code(
            from_kafka_name(PatternType::ALL, &a.pattern_type).map(PatternType::code),
            "pattern_type",
            &a.pattern_type,
        )?,
        principal: &a.principal,
        host: &a.host,
        operation: code(
            from_kafka_name(Operation::ALL, &a.operation).map(Operation::code),
            "operation",
            &a.operation,
        )?,
        permission: code(
            from_kafka_name(Permission::ALL, &a.permission).map(Permission::code),
            "permission",
            &a.permission,
        )?,
    };
    Acl::from_codes(&codes).map_err(|e| e.0)
}

/// Applies a checked section.
///
/// # Errors
/// A 400 naming the item the front refused (what came before it stays), a 500 when the
/// store fails.
pub(crate) async fn apply(api: &Api, checked: Checked) -> ApiResult<()> {
    for t in &checked.topics {
        api.kafka
            .create_topic(&t.name, Some(t.partitions), &t.configs)
            .await
            .map_err(|e| {
                ApiError::bad_request(format!("ferry.kafka_topics: topic '{}': {e}", t.name))
            })?;
    }
    if !checked.acls.is_empty() {
        api.kafka
            .add_acls(&checked.acls)
            .await
            .map_err(store_failed)?;
    }
    for (group, offsets) in &checked.offsets {
        api.kafka
            .commit_offsets(group, offsets)
            .await
            .map_err(|e| ApiError::bad_request(format!("ferry.kafka_group_offsets: {e}")))?;
    }
    for route in &checked.routes {
        api.routes.add(route).await?;
    }
    Ok(())
}
