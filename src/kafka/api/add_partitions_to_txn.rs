//! AddPartitionsToTxn (v0-3): the partitions join the producer's open transaction; a
//! refusal names every partition of the request (the unknown ones with their own code,
//! the others `OPERATION_NOT_ATTEMPTED`, as Kafka answers).

use super::logged;
use crate::kafka::Context;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ResponseKind,
};
use std::sync::Arc;

/// Adds the partitions.
pub async fn handle(ctx: &Arc<Context>, request: AddPartitionsToTxnRequest) -> ResponseKind {
    let transactional_id = request.v3_and_below_transactional_id.0.as_str();
    let producer = (
        request.v3_and_below_producer_id.0,
        request.v3_and_below_producer_epoch,
    );
    let partitions: Vec<(String, i32)> = request
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect();
    let outcome = ctx
        .transactions
        .add_partitions(transactional_id, producer, &partitions)
        .await;
    let code = logged(transactional_id, "AddPartitionsToTxn", outcome);
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let results = request
        .v3_and_below_topics
        .into_iter()
        .map(|t| {
            let topic = ctx.topics.get(t.name.0.as_str());
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    let exists = topic.as_ref().is_some_and(|t| t.partition(p).is_some());
                    let partition_code = match code {
                        0 => 0,
                        c if c == unknown && exists => ResponseError::OperationNotAttempted.code(),
                        c => c,
                    };
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(partition_code)
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name)
                .with_results_by_partition(partitions)
        })
        .collect();
    ResponseKind::AddPartitionsToTxn(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
    )
}
