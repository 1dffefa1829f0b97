//! CreateTopics: topics with their partition count (-1: `kafka.default_partitions`) and
//! the settings Ferry supports; this instance takes each new partition's sequencer lease
//! before answering, so the topic is writable at once. Replication is the store's
//! (FoundationDB's), so any replication factor is accepted and reported as 1. A manual
//! replica assignment is checked as Kafka checks it ([`replica_assignment`]) and gives the
//! partition count; its placement is not kept. A topic needs Create on the cluster or on
//! the topic (else `TOPIC_AUTHORIZATION_FAILED`), as Kafka.

use super::{Refused, Session, str_bytes};
use crate::Context;
use crate::metadata::replica_assignment;
use crate::metadata::settings::TopicConfig;
use crate::metadata::topics::TopicError;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, ResponseKind};
use std::sync::Arc;
use uuid::Uuid;

/// Creates every topic asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: CreateTopicsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let name = t.name.0.as_str();
        let created = async {
            let refused = |e: TopicError| (e.code(), e.to_string());
            if !access.create_topic(name) {
                return Err(refused(TopicError::NotAuthorized(name.to_owned())));
            }
            let config = TopicConfig::parse(
                t.configs
                    .iter()
                    .map(|c| (c.name.as_str(), c.value.as_ref().map(|v| v.as_str()))),
            )
            .map_err(|e| refused(e.into()))?;
            let partitions = partition_count(ctx, &t).await?;
            let topic = if request.validate_only {
                ctx.topics.create(name, partitions, config, true).await
            } else {
                ctx.create_topic(name, partitions, config).await
            };
            topic.map(|topic| (topic, partitions)).map_err(refused)
        }
        .await;
        let result = CreatableTopicResult::default().with_name(t.name);
        topics.push(match created {
            Ok((topic, partitions)) => {
                let result = result.with_topic_id(Uuid::from_bytes(topic.meta.uuid));
                if version >= 5 {
                    result
                        .with_num_partitions(partitions)
                        .with_replication_factor(1)
                } else {
                    result
                }
            }
            Err((code, message)) => result
                .with_error_code(code)
                .with_error_message(Some(str_bytes(message))),
        });
    }
    ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(topics))
}

/// The partition count `t` asks for: its replica assignment's, else `num_partitions`, or
/// `kafka.default_partitions` for -1.
///
/// # Errors
/// `INVALID_REQUEST` for an assignment beside a partition count or replication factor
/// (Kafka's message), `INVALID_REPLICA_ASSIGNMENT` for an assignment Kafka refuses.
async fn partition_count(ctx: &Context, t: &CreatableTopic) -> Result<i32, Refused> {
    if t.assignments.is_empty() {
        return Ok(match t.num_partitions {
            -1 => ctx.config.default_partitions,
            n => n,
        });
    }
    if t.num_partitions != -1 || t.replication_factor != -1 {
        return Err((
            ResponseError::InvalidRequest.code(),
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
        ));
    }
    let assignment: Vec<(i32, Vec<i32>)> = t
        .assignments
        .iter()
        .map(|a| {
            (
                a.partition_index,
                a.broker_ids.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    let live = live_nodes(ctx).await?;
    replica_assignment::check_topic(&assignment, &live).map_err(|e| (e.code(), e.to_string()))
}

/// The live brokers' node ids, for checking an assignment.
///
/// # Errors
/// `UNKNOWN_SERVER_ERROR` when the store fails.
pub(super) async fn live_nodes(ctx: &Context) -> Result<Vec<i32>, Refused> {
    ctx.brokers
        .live_nodes()
        .await
        .map_err(|e| (ResponseError::UnknownServerError.code(), e.to_string()))
}
