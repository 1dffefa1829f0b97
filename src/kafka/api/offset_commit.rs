//! OffsetCommit: checked against the group's member and generation, then written to the
//! store in one transaction before the next request of the connection is read.

use crate::kafka::Context;
use crate::kafka::groups::store::CommittedOffset;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseKind};
use std::sync::Arc;
use tracing::warn;

/// Commits the offsets the group's state allows.
pub async fn handle(ctx: &Arc<Context>, request: OffsetCommitRequest) -> ResponseKind {
    let group = request.group_id.0.to_string();
    let check = if group.is_empty() {
        ResponseError::InvalidGroupId.code()
    } else {
        ctx.coordinator
            .check_commit(
                &group,
                request.member_id.to_string(),
                request.generation_id_or_member_epoch,
            )
            .await
    };
    let mut codes: Vec<Vec<i16>> = Vec::with_capacity(request.topics.len());
    let mut offsets = Vec::new();
    for t in &request.topics {
        let topic = ctx.topics.get(t.name.0.as_str());
        codes.push(
            t.partitions
                .iter()
                .map(|p| {
                    if check != 0 {
                        return check;
                    }
                    if topic
                        .as_ref()
                        .and_then(|t| t.partition(p.partition_index))
                        .is_none()
                    {
                        return ResponseError::UnknownTopicOrPartition.code();
                    }
                    offsets.push((
                        t.name.0.to_string(),
                        p.partition_index,
                        CommittedOffset {
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                        },
                    ));
                    0
                })
                .collect(),
        );
    }
    if !offsets.is_empty()
        && let Err(e) = ctx.coordinator.store().commit(&group, &offsets).await
    {
        warn!(group = %group, error = %e, "cannot commit offsets");
        for code in codes.iter_mut().flatten() {
            if *code == 0 {
                *code = ResponseError::CoordinatorNotAvailable.code();
            }
        }
    }
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
