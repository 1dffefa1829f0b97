//! AddPartitionsToTxn (v0-3): the partitions join the producer's open transaction; a
//! refusal names every partition of the request (the unknown ones with their own code,
//! the others `OPERATION_NOT_ATTEMPTED`, as Kafka answers).
//!
//! ACLs: Write on the transactional id (else every partition is
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`) and Write on each topic (else its partitions
//! are `TOPIC_AUTHORIZATION_FAILED`, the others `OPERATION_NOT_ATTEMPTED`, and none is
//! added), as Kafka.

use super::{Session, logged};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ResponseKind,
};
use std::sync::Arc;

/// Adds the partitions.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: AddPartitionsToTxnRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let id_allowed = access.transactional_id(
        Operation::Write,
        request.v3_and_below_transactional_id.0.as_str(),
    );
    let refusal = |topic: &str| {
        if !id_allowed {
            Some(ResponseError::TransactionalIdAuthorizationFailed.code())
        } else if !access.topic(Operation::Write, topic) {
            Some(ResponseError::TopicAuthorizationFailed.code())
        } else {
            None
        }
    };
    let refused = request
        .v3_and_below_topics
        .iter()
        .any(|t| refusal(t.name.0.as_str()).is_some());
    if refused {
        return refuse_all(request, refusal);
    }
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

/// The answer refusing every partition: those `refusal` names with its code, the others
/// `OPERATION_NOT_ATTEMPTED`.
fn refuse_all(
    request: AddPartitionsToTxnRequest,
    refusal: impl Fn(&str) -> Option<i16>,
) -> ResponseKind {
    let results = request
        .v3_and_below_topics
        .into_iter()
        .map(|t| {
            let code =
                refusal(t.name.0.as_str()).unwrap_or(ResponseError::OperationNotAttempted.code());
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(code)
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
