//! AlterShareGroupOffsets (KIP-932): starts a share group's share-partitions again at the
//! offsets given (what waits there is dropped; records before the offset are not
//! delivered). Only while the group has no members (else `NON_EMPTY_GROUP`); a group that
//! is not a share group is `GROUP_ID_NOT_FOUND`. Needs Read on the group (else
//! `GROUP_AUTHORIZATION_FAILED`) and on each topic (else `TOPIC_AUTHORIZATION_FAILED` for
//! its partitions), as Kafka.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ResponseKind,
};
use std::sync::Arc;
use uuid::Uuid;

/// Alters the offsets asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: AlterShareGroupOffsetsRequest,
) -> ResponseKind {
    let group = request.group_id.0.to_string();
    let access = session.access(ctx);
    if let Some((e, why)) = super::delete_share_group_offsets::refusal(
        ctx,
        access.group(Operation::Read, &group),
        &group,
    )
    .await
    {
        return ResponseKind::AlterShareGroupOffsets(
            AlterShareGroupOffsetsResponse::default()
                .with_error_code(e.code())
                .with_error_message(why.map(str_bytes)),
        );
    }
    let mut responses = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let topic = t.topic_name.0.to_string();
        let known = ctx.topics.get(&topic);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let line = AlterShareGroupOffsetsResponsePartition::default()
                .with_partition_index(p.partition_index);
            let code = if !access.topic(Operation::Read, &topic) {
                Err(ResponseError::TopicAuthorizationFailed.code())
            } else if known
                .as_ref()
                .and_then(|k| k.partition(p.partition_index))
                .is_none()
            {
                Err(ResponseError::UnknownTopicOrPartition.code())
            } else {
                ctx.share
                    .restart_at(&group, &topic, p.partition_index, Some(p.start_offset))
                    .await
                    .map_err(|_| ResponseError::UnknownServerError.code())
            };
            partitions.push(match code {
                Ok(()) => line,
                Err(code) => line.with_error_code(code),
            });
        }
        responses.push(
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_id(Uuid::from_bytes(known.map_or([0; 16], |k| k.meta.uuid)))
                .with_topic_name(t.topic_name)
                .with_partitions(partitions),
        );
    }
    ResponseKind::AlterShareGroupOffsets(
        AlterShareGroupOffsetsResponse::default().with_responses(responses),
    )
}
