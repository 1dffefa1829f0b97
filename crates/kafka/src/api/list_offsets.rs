//! ListOffsets: the earliest offset (-2: the log start), the latest (-1: the high
//! watermark; for `read_committed`, the last stable offset), or the first offset whose record timestamp is at least a given time
//! (exact within uncompressed batches; the batch's first offset within a compressed one).
//! A topic the principal may not Describe is `TOPIC_AUTHORIZATION_FAILED`. From v4 each
//! answer names the leader epoch that wrote the offset, and a `current_leader_epoch` other
//! than the partition's is refused (KIP-320, [`crate::partition::leader_epochs`]); an
//! older answer has no leader epoch, so none is set (the response would not encode:
//! librdkafka 2.0 asks at v2).

use super::Session;
use crate::Context;
use crate::acls::Operation;
use crate::partition::reads::OffsetQuery;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseKind};
use std::sync::Arc;
use tracing::warn;

/// The first version whose answers carry the leader epoch.
const LEADER_EPOCH_SINCE: i16 = 4;
/// Kafka's "latest offset" timestamp.
const LATEST: i64 = -1;
/// Kafka's "earliest offset" timestamp.
const EARLIEST: i64 = -2;
/// The isolation level of `read_committed` consumers.
const READ_COMMITTED: i8 = 1;

/// Answers every partition asked for, as a client at `version` reads it.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: ListOffsetsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let read_committed = request.isolation_level == READ_COMMITTED;
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let topic = ctx.topics.get(t.name.0.as_str());
        let allowed = access.topic(Operation::Describe, t.name.0.as_str());
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let response = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1);
            if !allowed {
                partitions
                    .push(response.with_error_code(ResponseError::TopicAuthorizationFailed.code()));
                continue;
            }
            let Some(partition) = topic.as_ref().and_then(|t| t.partition(p.partition_index))
            else {
                partitions
                    .push(response.with_error_code(ResponseError::UnknownTopicOrPartition.code()));
                continue;
            };
            let query = match p.timestamp {
                LATEST if read_committed => OffsetQuery::LastStable,
                LATEST => OffsetQuery::Latest,
                EARLIEST => OffsetQuery::Earliest,
                at => OffsetQuery::AtTime(at),
            };
            let lookup = ctx.reads.offset(partition, query, p.current_leader_epoch);
            match lookup.await {
                Ok(Ok(Some(found))) => {
                    let response = response
                        .with_offset(found.offset)
                        .with_timestamp(found.timestamp);
                    partitions.push(if version >= LEADER_EPOCH_SINCE {
                        response.with_leader_epoch(found.leader_epoch)
                    } else {
                        response
                    });
                }
                Ok(Ok(None)) => partitions.push(response),
                Ok(Err(fenced)) => partitions.push(response.with_error_code(fenced.code())),
                Err(e) => {
                    warn!(topic = %partition.topic, error = %e, "cannot look up an offset");
                    partitions
                        .push(response.with_error_code(ResponseError::KafkaStorageError.code()));
                }
            }
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
}
