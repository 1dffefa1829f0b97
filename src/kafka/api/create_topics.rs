//! CreateTopics: topics with their partition count (-1: `kafka.default_partitions`) and
//! the settings Ferry supports; this instance takes each new partition's sequencer lease
//! before answering, so the topic is writable at once. Replication is the store's
//! (FoundationDB's), so any replication factor is accepted and reported as 1. A topic
//! needs Create on the cluster or on the topic (else `TOPIC_AUTHORIZATION_FAILED`), as
//! Kafka.

use super::{Session, str_bytes};
use crate::kafka::Context;
use crate::kafka::topics::{TopicConfig, TopicError};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, ResponseKind};
use std::sync::Arc;
use uuid::Uuid;

/// Creates every topic asked for.
pub async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: CreateTopicsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let partitions = if t.num_partitions == -1 {
            ctx.config.default_partitions
        } else {
            t.num_partitions
        };
        let created = match TopicConfig::parse(
            t.configs
                .iter()
                .map(|c| (c.name.as_str(), c.value.as_ref().map(|v| v.as_str()))),
        ) {
            _ if !access.create_topic(t.name.0.as_str()) => {
                Err(TopicError::NotAuthorized(t.name.to_string()))
            }
            Err(e) => Err(e),
            Ok(_) if !t.assignments.is_empty() => Err(TopicError::InvalidPartitions(
                "manual replica assignments are not supported".into(),
            )),
            Ok(config) if request.validate_only => {
                ctx.topics
                    .create(t.name.0.as_str(), partitions, config, true)
                    .await
            }
            Ok(config) => {
                ctx.create_topic(t.name.0.as_str(), partitions, config)
                    .await
            }
        };
        let result = CreatableTopicResult::default().with_name(t.name);
        topics.push(match created {
            Ok(topic) => {
                let result = result.with_topic_id(Uuid::from_bytes(topic.meta.uuid));
                if version >= 5 {
                    result
                        .with_num_partitions(partitions)
                        .with_replication_factor(1)
                } else {
                    result
                }
            }
            Err(e) => result
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(e.to_string()))),
        });
    }
    ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(topics))
}
