//! `/api/ferry/kafka/…` that change the Kafka front, for administrators only: topics
//! created, their settings changed, and deleted, as CreateTopics, IncrementalAlterConfigs
//! and DeleteTopics do; a consumer group's committed offsets reset, as
//! `kafka-consumer-groups --reset-offsets` resets them (refused while the group has
//! members). Everything goes through [`KafkaAdmin`](ferry_kafka::admin::KafkaAdmin).
//!
//! - `PUT /api/ferry/kafka/topics/{topic}` `{"partitions": 3, "configs": {"retention.ms":
//!   "60000"}}` creates a topic (201; 409 when it exists).
//! - `PUT /api/ferry/kafka/topics/{topic}/config` `{"retention.ms": "60000",
//!   "cleanup.policy": null}` sets settings, and takes those given `null` back to their
//!   default (204).
//! - `DELETE /api/ferry/kafka/topics/{topic}` (204).
//! - `POST /api/ferry/kafka/groups/{group}/reset-offsets` `{"topics": ["t"], "to":
//!   "earliest" | "latest" | "offset" | "timestamp", "offset": 5, "timestamp": MS,
//!   "dry_run": false}` answers the new offsets (409 while the group has members).

use crate::Api;
use crate::administrator::administrator;
use crate::body::Body;
use crate::error::{ApiError, ApiResult};
use crate::login::Principal;
use crate::reply::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{post, put};
use bytes::Bytes;
use ferry_kafka::admin::{ResetError, ResetOffset, ResetTo, TopicError};
use serde_json::{Value, json};

/// The fields a topic creation takes.
const CREATE_FIELDS: &[&str] = &["partitions", "configs"];
/// The fields a reset takes.
const RESET_FIELDS: &[&str] = &["topics", "to", "offset", "timestamp", "dry_run"];

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route(
            "/api/ferry/kafka/topics/{topic}",
            put(create).delete(delete),
        )
        .route("/api/ferry/kafka/topics/{topic}/config", put(alter))
        .route(
            "/api/ferry/kafka/groups/{group}/reset-offsets",
            post(reset_offsets),
        )
}

impl From<TopicError> for ApiError {
    fn from(e: TopicError) -> Self {
        match e {
            TopicError::Unknown(_) => ApiError::not_found(),
            TopicError::Exists(_) => ApiError::conflict(e.to_string()),
            TopicError::InvalidName(_)
            | TopicError::InvalidPartitions(_)
            | TopicError::InvalidConfig { .. } => ApiError::bad_request(e.to_string()),
            TopicError::NotAuthorized(_) => ApiError::not_authorised(ApiError::ACCESS_REFUSED),
            TopicError::Store(_) | TopicError::Stage(_) | TopicError::Corrupt(_) => {
                ApiError::internal(e.to_string())
            }
        }
    }
}

impl From<ResetError> for ApiError {
    fn from(e: ResetError) -> Self {
        match e {
            ResetError::ActiveMembers(_) => ApiError::conflict(e.to_string()),
            ResetError::UnknownTopic(_) | ResetError::NoTopics(_) => {
                ApiError::bad_request(e.to_string())
            }
            ResetError::NotCoordinator(_) => ApiError::unavailable(e.to_string()),
            ResetError::Refused { .. } | ResetError::Log(_) => ApiError::internal(e.to_string()),
        }
    }
}

/// A setting's value as sent: a string, or a number or boolean written as one.
fn setting(name: &str, value: &Value) -> ApiResult<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        other => Err(ApiError::bad_request(format!(
            "setting '{name}' must be a string, a number or null, not {other}"
        ))),
    }
}

/// `PUT /api/ferry/kafka/topics/{topic}`.
async fn create(
    State(api): State<Api>,
    principal: Principal,
    Path(topic): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let body = Body::parse(&body, CREATE_FIELDS)?;
    let partitions =
        match body.u64("partitions", 0)? {
            0 => None,
            n => Some(i32::try_from(n).map_err(|_| {
                ApiError::bad_request(format!("field 'partitions' is too large: {n}"))
            })?),
        };
    let mut configs = Vec::new();
    for (name, value) in body.object("configs")? {
        if let Some(value) = setting(&name, &value)? {
            configs.push((name, value));
        }
    }
    api.kafka.create_topic(&topic, partitions, &configs).await?;
    Ok(StatusCode::CREATED)
}

/// `PUT /api/ferry/kafka/topics/{topic}/config`.
async fn alter(
    State(api): State<Api>,
    principal: Principal,
    Path(topic): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let changes = crate::body::object(&body)?
        .iter()
        .map(|(name, value)| Ok((name.clone(), setting(name, value)?)))
        .collect::<ApiResult<Vec<_>>>()?;
    api.kafka.alter_topic_config(&topic, &changes).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/ferry/kafka/topics/{topic}`.
async fn delete(
    State(api): State<Api>,
    principal: Principal,
    Path(topic): Path<String>,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    api.kafka.delete_topic(&topic).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Where a reset body says to move the offsets.
fn reset_to(body: &Body) -> ApiResult<ResetTo> {
    let to = body.required_string("to")?;
    let number = |name: &str| -> ApiResult<i64> {
        if !body.has(name) {
            return Err(ApiError::bad_request(format!(
                "field '{name}' is missing (\"to\": \"{to}\" needs it)"
            )));
        }
        i64::try_from(body.u64(name, 0)?)
            .map_err(|_| ApiError::bad_request(format!("field '{name}' is too large")))
    };
    match to.as_str() {
        "earliest" => Ok(ResetTo::Earliest),
        "latest" => Ok(ResetTo::Latest),
        "offset" => Ok(ResetTo::Offset(number("offset")?)),
        "timestamp" => Ok(ResetTo::Timestamp(number("timestamp")?)),
        other => Err(ApiError::bad_request(format!(
            "field 'to' must be earliest, latest, offset or timestamp, not \"{other}\""
        ))),
    }
}

/// The `topics` field of a reset: a list of names (absent: every topic the group has
/// committed offsets for).
fn topics(body: &Body) -> ApiResult<Vec<String>> {
    let wrong = || ApiError::bad_request("field 'topics' must be a list of topic names");
    match body.value("topics") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(names)) => names
            .iter()
            .map(|n| n.as_str().map(str::to_owned).ok_or_else(wrong))
            .collect(),
        Some(_) => Err(wrong()),
    }
}

fn offset_json(group: &str, o: &ResetOffset) -> Value {
    json!({"group_id": group, "topic": o.topic, "partition": o.partition, "offset": o.offset})
}

/// `POST /api/ferry/kafka/groups/{group}/reset-offsets`.
async fn reset_offsets(
    State(api): State<Api>,
    principal: Principal,
    Path(group): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Vec<Value>>> {
    administrator(&principal)?;
    let body = Body::parse(&body, RESET_FIELDS)?;
    let (to, topics, dry_run) = (
        reset_to(&body)?,
        topics(&body)?,
        body.bool("dry_run", false)?,
    );
    let offsets = api
        .kafka
        .reset_offsets(&group, &topics, to, dry_run)
        .await?;
    Ok(Json(
        offsets.iter().map(|o| offset_json(&group, o)).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> Body {
        Body::parse(json.as_bytes(), RESET_FIELDS).unwrap()
    }

    #[test]
    fn a_reset_body_names_its_target() {
        assert_eq!(
            reset_to(&body(r#"{"to":"earliest"}"#)).unwrap(),
            ResetTo::Earliest
        );
        assert_eq!(
            reset_to(&body(r#"{"to":"offset","offset":7}"#)).unwrap(),
            ResetTo::Offset(7)
        );
        assert_eq!(
            reset_to(&body(r#"{"to":"offset"}"#)).unwrap_err().reason,
            "field 'offset' is missing (\"to\": \"offset\" needs it)"
        );
        assert_eq!(
            reset_to(&body(r#"{"to":"soon"}"#)).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            topics(&body(r#"{"topics":["a","b"]}"#)).unwrap(),
            ["a", "b"]
        );
        assert!(topics(&body(r#"{"topics":"a"}"#)).is_err());
    }

    #[test]
    fn settings_are_strings_or_null() {
        assert_eq!(setting("x", &json!(5)).unwrap().as_deref(), Some("5"));
        assert_eq!(setting("x", &Value::Null).unwrap(), None);
        assert!(setting("x", &json!([1])).is_err());
    }
}
