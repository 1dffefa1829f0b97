//! OffsetCommit: checked against the group's member and generation, then written to the
//! store in one transaction (fenced by the group's coordinator lease) before the next
//! request of the connection is read. Needs Read on the group (else every partition is
//! `GROUP_AUTHORIZATION_FAILED`) and Read on each topic (else its partitions are
//! `TOPIC_AUTHORIZATION_FAILED`), as Kafka.

use super::Session;
use crate::Context;
use crate::acls::{Access, Operation};
use crate::coordinator::groups::state::MemberRef;
use crate::coordinator::groups::store::CommittedOffset;
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
                            $crate::coordinator::groups::store::CommittedOffset {
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

/// Per topic, in request order, the error code of each requested partition (0: it exists
/// and `access` may Read its topic); and the offsets of those with 0, to write.
pub(super) fn writable(
    ctx: &Context,
    access: &Access,
    requested: Vec<Vec<Requested>>,
) -> (Vec<Vec<i16>>, Vec<Requested>) {
    let mut offsets = Vec::new();
    let codes = requested
        .into_iter()
        .map(|partitions| {
            partitions
                .into_iter()
                .map(|(topic, partition, offset)| {
                    if !access.topic(Operation::Read, &topic) {
                        return ResponseError::TopicAuthorizationFailed.code();
                    }
                    let exists = ctx
                        .topics
                        .get(&topic)
                        .is_some_and(|t| t.partition(partition).is_some());
                    if !exists {
                        return ResponseError::UnknownTopicOrPartition.code();
                    }
                    offsets.push((topic, partition, offset));
                    0
                })
                .collect()
        })
        .collect();
    (codes, offsets)
}

/// Per partition, the refusal of the whole request when there is one (`outcome`), else
/// the partition's own code.
pub(super) fn partition_codes(outcome: i16, codes: Vec<Vec<i16>>) -> Vec<Vec<i16>> {
    codes
        .into_iter()
        .map(|partitions| {
            partitions
                .into_iter()
                .map(|own| if outcome == 0 { own } else { outcome })
                .collect()
        })
        .collect()
}

/// Commits the offsets the group's state allows.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: OffsetCommitRequest,
) -> ResponseKind {
    let group = request.group_id.0.to_string();
    let access = session.access(ctx);
    let requested = requested_offsets!(request.topics);
    let (codes, offsets) = writable(ctx, &access, requested);
    let outcome = if group.is_empty() {
        ResponseError::InvalidGroupId.code()
    } else if !access.group(Operation::Read, &group) {
        ResponseError::GroupAuthorizationFailed.code()
    } else {
        ctx.coordinator
            .commit(
                &group,
                MemberRef::new(&request.member_id, request.group_instance_id.as_deref()),
                request.generation_id_or_member_epoch,
                &offsets,
            )
            .await
    };
    let codes = partition_codes(outcome, codes);
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
