//! DeleteRecords (KIP-107): moves each partition's log start offset to the offset asked
//! for (-1: the high watermark), deleting the batches that end before it; answers the new
//! log start offset (the low watermark). An offset beyond the high watermark (or negative
//! and not -1) is `OFFSET_OUT_OF_RANGE`; a partition this instance does not lead
//! `NOT_LEADER_OR_FOLLOWER` (the client asks Metadata again). Needs Delete on the topic
//! (else `TOPIC_AUTHORIZATION_FAILED`), as Kafka.

use super::Session;
use crate::Context;
use crate::acls::Operation;
use crate::partition::sequencer::DeleteRecordsError;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseKind};
use std::sync::Arc;
use tracing::warn;

/// The low watermark of a partition answered with an error, as Kafka sends it.
const NO_LOW_WATERMARK: i64 = -1;

/// Deletes the records asked for, partition by partition.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DeleteRecordsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let name = t.name.0.as_str();
        let allowed = access.topic(Operation::Delete, name);
        let topic = ctx.topics.get(name);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let result = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(NO_LOW_WATERMARK);
            let outcome = match topic.as_ref().and_then(|t| t.partition(p.partition_index)) {
                _ if !allowed => Err(ResponseError::TopicAuthorizationFailed.code()),
                None => Err(ResponseError::UnknownTopicOrPartition.code()),
                Some(partition) => ctx
                    .sequencers
                    .delete_records(partition, p.offset)
                    .await
                    .map_err(|e| {
                        if let DeleteRecordsError::Failed(_) = e {
                            warn!(topic = name, partition = p.partition_index, error = %e, "cannot delete records");
                        }
                        e.code()
                    }),
            };
            partitions.push(match outcome {
                Ok(low_watermark) => result.with_low_watermark(low_watermark),
                Err(code) => result.with_error_code(code),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    ResponseKind::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics))
}
