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

/// One offset a commit request asks for: (topic, partition, offset).
pub(super) type Requested = (String, i32, CommittedOffset);

/// The offsets a commit request's `topics` ask for, per topic ([`Requested`]): the same
/// fields in OffsetCommit and TxnOffsetCommit, whose generated types differ.
macro_rules! requested_offsets {
    ($topics:expr) => {
        $topics
            .iter()
            .map(|t| {
                t.partitions
                    .iter()
                    .map(|p| {
                        (
                            t.name.0.to_string(),
                            p.partition_index,
                            $crate::kafka::groups::store::CommittedOffset {
                                offset: p.committed_offset,
                                leader_epoch: p.committed_leader_epoch,
                                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                            },
                        )
                    })
                    .collect()
            })
            .collect()
    };
}
pub(super) use requested_offsets;

/// Per topic, in request order, whether each requested partition exists; and the offsets
/// of those that do, to write.
pub(super) fn existing(
    ctx: &Context,
    requested: Vec<Vec<Requested>>,
) -> (Vec<Vec<bool>>, Vec<Requested>) {
    let mut offsets = Vec::new();
    let known = requested
        .into_iter()
        .map(|partitions| {
            partitions
                .into_iter()
                .map(|(topic, partition, offset)| {
                    let exists = ctx
                        .topics
                        .get(&topic)
                        .is_some_and(|t| t.partition(partition).is_some());
                    if exists {
                        offsets.push((topic, partition, offset));
                    }
                    exists
                })
                .collect()
        })
        .collect();
    (known, offsets)
}

/// Commits the offsets the group's state allows.
pub async fn handle(ctx: &Arc<Context>, request: OffsetCommitRequest) -> ResponseKind {
    let group = request.group_id.0.to_string();
    let requested = requested_offsets!(request.topics);
    let (known, offsets) = existing(ctx, requested);
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
