//! OffsetCommit: checked against the group's member and generation, then written to the
//! store in one transaction (fenced by the group's coordinator lease) before the next
//! request of the connection is read.

use crate::kafka::Context;
use crate::kafka::groups::store::CommittedOffset;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseKind};
use std::sync::Arc;

/// Commits the offsets the group's state allows.
pub async fn handle(ctx: &Arc<Context>, request: OffsetCommitRequest) -> ResponseKind {
    let group = request.group_id.0.to_string();
    let mut known: Vec<Vec<bool>> = Vec::with_capacity(request.topics.len());
    let mut offsets = Vec::new();
    for t in &request.topics {
        let topic = ctx.topics.get(t.name.0.as_str());
        known.push(
            t.partitions
                .iter()
                .map(|p| {
                    let exists = topic
                        .as_ref()
                        .is_some_and(|t| t.partition(p.partition_index).is_some());
                    if exists {
                        offsets.push((
                            t.name.0.to_string(),
                            p.partition_index,
                            CommittedOffset {
                                offset: p.committed_offset,
                                leader_epoch: p.committed_leader_epoch,
                                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                            },
                        ));
                    }
                    exists
                })
                .collect(),
        );
    }
    let outcome = if group.is_empty() {
        ResponseError::InvalidGroupId.code()
    } else {
        ctx.coordinator
            .commit(
                &group,
                request.member_id.to_string(),
                request.generation_id_or_member_epoch,
                &offsets,
            )
            .await
    };
    // A refusal applies to every partition; otherwise only unknown partitions fail.
    let codes: Vec<Vec<i16>> = known
        .into_iter()
        .map(|partitions| {
            partitions
                .into_iter()
                .map(|exists| match (outcome, exists) {
                    (0, true) => 0,
                    (0, false) => ResponseError::UnknownTopicOrPartition.code(),
                    (refused, _) => refused,
                })
                .collect()
        })
        .collect();
    let topics = request
        .topics
        .into_iter()
        .zip(codes)
        .map(|(t, codes)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(codes)
                        .map(|(p, code)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))
}
