//! TxnOffsetCommit: offsets a transactional producer commits for a group, pending until
//! its transaction commits (visible to OffsetFetch only then) or dropped when it aborts.
//! From v3 a request naming a group member and generation (KIP-447: the consumer's group
//! metadata) is checked against the group first, so a zombie of an older generation is
//! refused; one naming neither (generation -1) is not checked, as in Kafka.
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
    let group = request.group_id.0.as_str();
    let member = request.member_id.to_string();
    let refused = if request.generation_id >= 0 || !member.is_empty() {
        ctx.coordinator
            .check_member(group, member, request.generation_id)
            .await
    } else {
        0
    };
    let code = if refused != 0 {
        refused
    } else {
        let outcome = ctx
            .transactions
            .commit_offsets(
                transactional_id,
                (request.producer_id.0, request.producer_epoch),
                group,
                &offsets,
            )
            .await;
        logged(transactional_id, "TxnOffsetCommit", outcome)
    };
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
