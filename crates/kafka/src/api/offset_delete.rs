//! OffsetDelete (KIP-496): deletes a group's committed offsets of the partitions named. An
//! empty group loses them all; a consumer group with members keeps those of topics a member
//! subscribes to (`GROUP_SUBSCRIBED_TO_TOPIC` for each); any other group with members is
//! `NON_EMPTY_GROUP`, an unknown one `GROUP_ID_NOT_FOUND`. Needs Delete on the group (else
//! `GROUP_AUTHORIZATION_FAILED` for the whole request) and Read on each topic (else
//! `TOPIC_AUTHORIZATION_FAILED` for its partitions); a partition that does not exist is
//! `UNKNOWN_TOPIC_OR_PARTITION`. As Kafka's `KafkaApis` and group coordinator.

use super::Session;
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, ResponseKind};
use std::sync::Arc;

/// Deletes the offsets that may be deleted.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: OffsetDeleteRequest,
) -> ResponseKind {
    let group = request.group_id.0.as_str();
    let access = session.access(ctx);
    let refused = |code: i16| {
        ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(code))
    };
    if !access.group(Operation::Delete, group) {
        return refused(ResponseError::GroupAuthorizationFailed.code());
    }
    // Every partition's code: refused here, or to be filled in by the coordinator.
    let mut answers: Vec<(usize, i32, Option<i16>)> = Vec::new();
    let mut eligible = Vec::new();
    for (t, topic) in request.topics.iter().enumerate() {
        let name = topic.name.0.as_str();
        let allowed = access.topic(Operation::Read, name);
        let known = ctx.topics.get(name);
        for p in &topic.partitions {
            let index = p.partition_index;
            let code = if !allowed {
                Some(ResponseError::TopicAuthorizationFailed.code())
            } else if known.as_ref().and_then(|k| k.partition(index)).is_none() {
                Some(ResponseError::UnknownTopicOrPartition.code())
            } else {
                eligible.push((name.to_owned(), index));
                None
            };
            answers.push((t, index, code));
        }
    }
    // The coordinator is asked even with nothing to delete: it answers for the group.
    let mut deleted = match ctx.coordinator.delete_offsets(group, eligible).await {
        Ok(codes) => codes.into_iter(),
        Err(code) => return refused(code),
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = request
        .topics
        .iter()
        .map(|t| OffsetDeleteResponseTopic::default().with_name(t.name.clone()))
        .collect();
    for (t, index, code) in answers {
        let code = code.or_else(|| deleted.next()).unwrap_or(0);
        topics[t].partitions.push(
            OffsetDeleteResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code),
        );
    }
    ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_topics(topics))
}
