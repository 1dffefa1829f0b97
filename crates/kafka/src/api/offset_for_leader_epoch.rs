//! OffsetForLeaderEpoch (KIP-101, KIP-320; v2–4): per partition, the end offset of the
//! leader epoch asked for and the newest epoch at or below it
//! ([`crate::partition::leader_epochs::end_offset`]) — what a consumer asks after the
//! leader changed, to check that its position is still in the log (librdkafka's and the
//! Java client's offset validation). A `current_leader_epoch` other than the partition's is
//! `FENCED_LEADER_EPOCH` (older) or `UNKNOWN_LEADER_EPOCH` (newer); a partition no
//! sequencer ever claimed is `NOT_LEADER_OR_FOLLOWER`. Needs Describe on the topic (else
//! `TOPIC_AUTHORIZATION_FAILED`), as Kafka asks of a consumer.

use super::Session;
use crate::Context;
use crate::acls::Operation;
use crate::metadata::topics::Partition;
use crate::partition::leader_epochs::{UNDEFINED_EPOCH, UNDEFINED_OFFSET};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseKind,
};
use std::sync::Arc;
use tracing::warn;

/// Answers every partition asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: OffsetForLeaderEpochRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let name = t.topic.0.as_str();
        let allowed = access.topic(Operation::Describe, name);
        let topic = ctx.topics.get(name);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let answer = EpochEndOffset::default()
                .with_partition(p.partition)
                .with_leader_epoch(UNDEFINED_EPOCH)
                .with_end_offset(UNDEFINED_OFFSET);
            let outcome = match topic.as_ref().and_then(|t| t.partition(p.partition)) {
                _ if !allowed => Err(ResponseError::TopicAuthorizationFailed),
                None => Err(ResponseError::UnknownTopicOrPartition),
                Some(partition) => end_offset(ctx, partition, &p).await,
            };
            partitions.push(match outcome {
                Ok((epoch, end)) => answer.with_leader_epoch(epoch).with_end_offset(end),
                Err(e) => answer.with_error_code(e.code()),
            });
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions),
        );
    }
    ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics))
}

/// The (epoch, end offset) answering `asked` in `partition`.
async fn end_offset(
    ctx: &Context,
    partition: &Partition,
    asked: &OffsetForLeaderPartition,
) -> Result<(i32, i64), ResponseError> {
    let read = ctx
        .reads
        .epoch_end(partition, asked.current_leader_epoch, asked.leader_epoch);
    read.await.unwrap_or_else(|e| {
        warn!(topic = %partition.topic, partition = partition.index, error = %e, "cannot read the leader epochs");
        Err(ResponseError::KafkaStorageError)
    })
}
