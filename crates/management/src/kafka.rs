//! `/api/ferry/kafka/…`: Ferry's own endpoints for its Kafka front (RabbitMQ's API has
//! none): topics with each partition's offsets, consumer groups with their committed
//! offsets and lag, share groups with each share-partition's records in flight, waiting
//! and archived and its lag, this instance's live Kafka client connections, and the Kafka
//! ACLs. Like RabbitMQ's cluster-wide views, topics, groups and clients are for users tagged
//! `monitoring` or `administrator` (anyone else: 401 "Not monitor user"); the ACLs, which
//! say who may do what, for administrators only.
//! What changes the front (topics, settings, a group's offsets) is in [`changes`]; a
//! partition's records, for the record browser, in [`records`].

mod changes;
mod records;

use super::Api;
use super::administrator::{administrator, monitor, store_failed};
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::reply::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get};
use ferry_kafka::admin::{Acl, GroupSummary, KafkaClient, ShareGroupFigures, TopicView};
use serde_json::{Value, json};

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/ferry/kafka/topics", get(topics))
        .route("/api/ferry/kafka/topics/{topic}", get(topic))
        .route("/api/ferry/kafka/groups", get(groups))
        .route("/api/ferry/kafka/groups/{group}", get(group))
        .route("/api/ferry/kafka/share-groups", get(share_groups))
        .route("/api/ferry/kafka/share-groups/{group}", get(share_group))
        .route("/api/ferry/kafka/acls", get(acls))
        .route("/api/ferry/kafka/clients", get(clients))
        .route("/api/ferry/kafka/clients/{id}", delete(close_client))
        .merge(changes::routes())
        .merge(records::routes())
}

fn topic_json(t: &TopicView) -> Value {
    json!({
        "name": t.name,
        "config": {"retention.ms": t.retention_ms, "retention.bytes": t.retention_bytes},
        "configs": t.configs.iter().map(|(k, v)| ((*k).to_owned(), Value::from(v.as_str()))).collect::<serde_json::Map<_, _>>(),
        "partitions": t.partitions.iter().map(|p| json!({
            "partition": p.partition,
            "log_start_offset": p.log_start_offset,
            "high_watermark": p.high_watermark,
            "last_stable_offset": p.last_stable_offset,
        })).collect::<Vec<_>>(),
    })
}

fn group_json(g: &GroupSummary) -> Value {
    json!({
        "group_id": g.id,
        "state": g.state,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol,
        "generation": g.generation,
        "members": g.members.iter().map(|m| json!({
            "member_id": m.id,
            "client_id": m.client_id,
            "client_host": m.client_host,
        })).collect::<Vec<_>>(),
        "offsets": g.offsets.iter().map(|o| json!({
            "topic": o.topic,
            "partition": o.partition,
            "committed_offset": o.committed_offset,
            "high_watermark": o.high_watermark,
            "lag": o.lag,
        })).collect::<Vec<_>>(),
        "total_lag": g.total_lag(),
    })
}

fn share_group_json(g: &ShareGroupFigures) -> Value {
    json!({
        "group_id": g.id,
        "state": g.state,
        "group_epoch": g.epoch,
        "members": g.members.iter().map(|m| json!({
            "member_id": m.id,
            "member_epoch": m.epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topics": m.subscribed,
            "assignment": m.assigned.iter().map(|(topic, partitions)| json!({
                "topic": topic,
                "partitions": partitions,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "partitions": g.partitions.iter().map(|p| json!({
            "topic": p.topic,
            "partition": p.partition,
            "start_offset": p.start_offset,
            "end_offset": p.end_offset,
            "high_watermark": p.high_watermark,
            "in_flight": p.in_flight,
            "waiting": p.waiting,
            "archived": p.archived,
            "lag": p.lag,
        })).collect::<Vec<_>>(),
        "total_in_flight": g.total(|p| p.in_flight),
        "total_waiting": g.total(|p| p.waiting),
        "total_archived": g.total(|p| p.archived),
        "total_lag": g.total(|p| p.lag),
    })
}

/// Kafka's name of an ACL enum value: `TransactionalId` as `TRANSACTIONAL_ID`.
pub(crate) fn kafka_name(value: impl std::fmt::Debug) -> String {
    let mut out = String::new();
    for (i, c) in format!("{value:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn acl_json(a: &Acl) -> Value {
    json!({
        "resource_type": kafka_name(a.resource.resource_type),
        "pattern_type": kafka_name(a.resource.pattern_type),
        "name": a.resource.name,
        "principal": a.principal,
        "host": a.host,
        "operation": kafka_name(a.operation),
        "permission": kafka_name(a.permission),
    })
}

/// The value of `all` whose Kafka name ([`kafka_name`]) is `name`.
pub(crate) fn from_kafka_name<T: Copy + std::fmt::Debug>(all: &[T], name: &str) -> Option<T> {
    all.iter().copied().find(|v| kafka_name(v) == name)
}

/// `GET /api/ferry/kafka/topics`.
async fn topics(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    monitor(&principal)?;
    let topics = api.kafka.topics().await.map_err(store_failed)?;
    Ok(Json(topics.iter().map(topic_json).collect()))
}

/// `GET /api/ferry/kafka/topics/{topic}`.
async fn topic(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    monitor(&principal)?;
    let topic = api.kafka.topic(&name).await.map_err(store_failed)?;
    Ok(Json(topic_json(&topic.ok_or_else(ApiError::not_found)?)))
}

/// `GET /api/ferry/kafka/groups`.
async fn groups(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    monitor(&principal)?;
    let groups = api.kafka.groups().await.map_err(store_failed)?;
    Ok(Json(groups.iter().map(group_json).collect()))
}

/// `GET /api/ferry/kafka/groups/{group}`.
async fn group(
    State(api): State<Api>,
    principal: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    monitor(&principal)?;
    let group = api.kafka.group(&id).await.map_err(store_failed)?;
    Ok(Json(group_json(&group.ok_or_else(ApiError::not_found)?)))
}

/// `GET /api/ferry/kafka/share-groups`.
async fn share_groups(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    monitor(&principal)?;
    let groups = api.kafka.share_groups().await.map_err(store_failed)?;
    Ok(Json(groups.iter().map(share_group_json).collect()))
}

/// `GET /api/ferry/kafka/share-groups/{group}`.
async fn share_group(
    State(api): State<Api>,
    principal: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    monitor(&principal)?;
    let group = api.kafka.share_group(&id).await.map_err(store_failed)?;
    Ok(Json(share_group_json(
        &group.ok_or_else(ApiError::not_found)?,
    )))
}

fn client_json(c: &KafkaClient) -> Value {
    let connected_at = c
        .connected_at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    json!({
        "id": c.id,
        "name": format!("{} -> {}", c.peer, c.local),
        "peer_host": c.peer.ip().to_string(),
        "peer_port": c.peer.port(),
        "host": c.local.ip().to_string(),
        "port": c.local.port(),
        "listener": c.listener,
        "ssl": c.tls,
        "client_id": c.client_id,
        "user": c.user,
        "connected_at": connected_at,
    })
}

/// `GET /api/ferry/kafka/clients`: this instance's live Kafka connections.
async fn clients(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    monitor(&principal)?;
    Ok(Json(api.kafka.clients().iter().map(client_json).collect()))
}

/// `DELETE /api/ferry/kafka/clients/{id}`: closes that Kafka connection of this instance
/// (the client sees its connection end and connects again), as `DELETE
/// /api/connections/{name}` closes an AMQP one: administrators close any, other users
/// their own.
async fn close_client(
    State(api): State<Api>,
    principal: Principal,
    Path(id): Path<u64>,
) -> ApiResult<StatusCode> {
    let client = api
        .kafka
        .clients()
        .into_iter()
        .find(|c| c.id == id)
        .ok_or_else(ApiError::not_found)?;
    let user = client.user.as_deref().unwrap_or_default();
    if !principal.access.closes_connection_of(user) {
        return Err(ApiError::not_authorised(ApiError::OBJECT_REFUSED));
    }
    if !api.kafka.close_client(id) {
        return Err(ApiError::not_found());
    }
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/ferry/kafka/acls` (administrators only).
async fn acls(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    administrator(&principal)?;
    let acls = api.kafka.acls().await.map_err(store_failed)?;
    Ok(Json(acls.acls.iter().map(acl_json).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_kafka::admin::{Operation, ResourceType};

    #[test]
    fn acl_values_have_kafka_names() {
        assert_eq!(
            kafka_name(ResourceType::TransactionalId),
            "TRANSACTIONAL_ID"
        );
        assert_eq!(kafka_name(Operation::IdempotentWrite), "IDEMPOTENT_WRITE");
        assert_eq!(kafka_name(Operation::Read), "READ");
    }
}
