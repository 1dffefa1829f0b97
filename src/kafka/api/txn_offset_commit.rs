//! TxnOffsetCommit: offsets a transactional producer commits for a group, pending until
//! its transaction commits (visible to OffsetFetch only then) or dropped when it aborts.
//! Every partition of a request gets the request's outcome; unknown partitions get
//! `UNKNOWN_TOPIC_OR_PARTITION` and are not written.

use super::logged;
use super::offset_commit::{existing, requested_offsets};
use crate::kafka::Context;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use std::sync::Arc;

/// Writes the pending offsets.
pub async fn handle(ctx: &Arc<Context>, request: TxnOffsetCommitRequest) -> ResponseKind {
    let transactional_id = request.transactional_id.0.as_str();
    let requested = requested_offsets!(request.topics);
    let (known, offsets) = existing(ctx, requested);
    let outcome = ctx
        .transactions
        .commit_offsets(
            transactional_id,
            (request.producer_id.0, request.producer_epoch),
            request.group_id.0.as_str(),
            &offsets,
        )
        .await;
    let code = logged(transactional_id, "TxnOffsetCommit", outcome);
    let topics = request
        .topics
        .into_iter()
        .zip(known)
        .map(|(t, known)| {
            let partitions = t
                .partitions
                .iter()
                .zip(known)
                .map(|(p, exists)| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(if exists {
                            code
                        } else {
                            ResponseError::UnknownTopicOrPartition.code()
                        })
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
}
