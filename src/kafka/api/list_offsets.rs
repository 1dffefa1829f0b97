//! ListOffsets: the earliest offset (-2: the log start), the latest (-1: the high
//! watermark; for `read_committed`, the last stable offset), or the first offset whose record timestamp is at least a given time
//! (exact within uncompressed batches; the batch's first offset within a compressed one).
//! A topic the principal may not Describe is `TOPIC_AUTHORIZATION_FAILED`.

use super::Session;
use crate::kafka::Context;
use crate::kafka::acls::Operation;
use crate::kafka::log::{Log, LogError};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseKind};
use std::sync::Arc;
use tracing::warn;

/// Kafka's "latest offset" timestamp.
const LATEST: i64 = -1;
/// Kafka's "earliest offset" timestamp.
const EARLIEST: i64 = -2;
/// The isolation level of `read_committed` consumers.
const READ_COMMITTED: i8 = 1;

/// Answers every partition asked for.
pub async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
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
            let log = Log::new(&partition.keys);
            match lookup(ctx, &log, p.timestamp, read_committed).await {
                Ok(Some((offset, timestamp))) => {
                    partitions.push(response.with_offset(offset).with_timestamp(timestamp));
                }
                Ok(None) => partitions.push(response),
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

/// The (offset, timestamp) for Kafka's `timestamp` query; `None` when no record is that
/// new.
async fn lookup(
    ctx: &Context,
    log: &Log<'_>,
    timestamp: i64,
    read_committed: bool,
) -> Result<Option<(i64, i64)>, LogError> {
    let tx = ctx.db.begin()?;
    let bounds = log.bounds(&tx, true).await?;
    Ok(match timestamp {
        LATEST if read_committed => Some((log.last_stable(&tx, bounds.high_watermark).await?, -1)),
        LATEST => Some((bounds.high_watermark, -1)),
        EARLIEST => Some((bounds.start, -1)),
        at => log.offset_for_timestamp(&tx, at, bounds.start).await?,
    })
}
