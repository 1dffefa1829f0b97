//! DescribeProducers (API 61, v0, KIP-664): the idempotent and transactional producers
//! each partition knows — id, epoch, last sequence and, while one is open, where its
//! transaction begins in the partition — what `kafka-transactions.sh describe-producers`
//! shows and `find-hanging` starts from. Needs Read on the topic
//! (`TOPIC_AUTHORIZATION_FAILED` otherwise), as Kafka. Ferry keeps no per-producer
//! timestamp or coordinator epoch: `last_timestamp` and `coordinator_epoch` are -1.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::partition::producers::ActiveProducer;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId, ResponseKind,
};
use std::sync::Arc;
use tracing::warn;

/// Describes the producers of the partitions asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DescribeProducersRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let name = t.name.0.as_str();
        let allowed = access.topic(Operation::Read, name);
        let topic = ctx.topics.get(name);
        let mut partitions = Vec::with_capacity(t.partition_indexes.len());
        for index in t.partition_indexes {
            let answer = PartitionResponse::default().with_partition_index(index);
            let answer = match topic.as_ref().and_then(|t| t.partition(index)) {
                _ if !allowed => {
                    answer.with_error_code(ResponseError::TopicAuthorizationFailed.code())
                }
                None => answer.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                Some(partition) => match ctx.reads.active_producers(partition).await {
                    Ok(producers) => {
                        answer.with_active_producers(producers.iter().map(described).collect())
                    }
                    Err(e) => {
                        warn!(topic = name, partition = index, error = %e, "cannot read a partition's producers");
                        answer
                            .with_error_code(ResponseError::KafkaStorageError.code())
                            .with_error_message(Some(str_bytes(e.to_string())))
                    }
                },
            };
            partitions.push(answer);
        }
        topics.push(
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    ResponseKind::DescribeProducers(DescribeProducersResponse::default().with_topics(topics))
}

/// One producer as the answer shows it.
fn described(p: &ActiveProducer) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(i32::from(p.state.epoch))
        .with_last_sequence(p.state.recent.back().map_or(-1, |b| b.last_sequence))
        .with_last_timestamp(-1)
        .with_coordinator_epoch(-1)
        .with_current_txn_start_offset(p.open_transaction.unwrap_or(-1))
}
