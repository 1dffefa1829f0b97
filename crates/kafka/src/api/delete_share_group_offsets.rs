//! DeleteShareGroupOffsets (KIP-932): forgets a share group's share-partitions of the
//! topics named (what waits there goes; the next assignment starts them again by
//! `share.auto.offset.reset`). Only while the group has no members (else
//! `NON_EMPTY_GROUP`); a group that is not a share group is `GROUP_ID_NOT_FOUND`. Needs
//! Delete on the group (else `GROUP_AUTHORIZATION_FAILED`) and Read on each topic (else
//! `TOPIC_AUTHORIZATION_FAILED` for it), as Kafka.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{
    DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, ResponseKind,
};
use std::sync::Arc;
use uuid::Uuid;

/// Why a change of `group`'s offsets is refused as a whole, if it is: not `allowed` by the
/// ACLs, not a share group, or one with members.
pub(super) async fn refusal(
    ctx: &Context,
    allowed: bool,
    group: &str,
) -> Option<(ResponseError, Option<String>)> {
    if !allowed {
        return Some((ResponseError::GroupAuthorizationFailed, None));
    }
    match ctx.share.exists(group).await {
        Ok(true) if ctx.share.has_members(group) => Some((
            ResponseError::NonEmptyGroup,
            Some(format!("Share group {group} has members.")),
        )),
        Ok(true) => None,
        Ok(false) => Some((
            ResponseError::GroupIdNotFound,
            Some(format!("Group {group} is not a share group.")),
        )),
        Err(e) => Some((ResponseError::CoordinatorNotAvailable, Some(e.to_string()))),
    }
}

/// Deletes the offsets of the topics asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DeleteShareGroupOffsetsRequest,
) -> ResponseKind {
    let group = request.group_id.0.to_string();
    let access = session.access(ctx);
    if let Some((e, why)) = refusal(ctx, access.group(Operation::Delete, &group), &group).await {
        return ResponseKind::DeleteShareGroupOffsets(
            DeleteShareGroupOffsetsResponse::default()
                .with_error_code(e.code())
                .with_error_message(why.map(str_bytes)),
        );
    }
    let started = ctx.share.started(&group).await.unwrap_or_default();
    let mut responses = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let topic = t.topic_name.0.to_string();
        let known = ctx.topics.get(&topic);
        let outcome = if !access.topic(Operation::Read, &topic) {
            Err(ResponseError::TopicAuthorizationFailed.code())
        } else if known.is_none() {
            Err(ResponseError::UnknownTopicOrPartition.code())
        } else {
            let mut outcome = Ok(());
            for (_, partition) in started.iter().filter(|(t, _)| *t == topic) {
                if ctx
                    .share
                    .restart_at(&group, &topic, *partition, None)
                    .await
                    .is_err()
                {
                    outcome = Err(ResponseError::UnknownServerError.code());
                }
            }
            outcome
        };
        let line = DeleteShareGroupOffsetsResponseTopic::default()
            .with_topic_id(Uuid::from_bytes(known.map_or([0; 16], |k| k.meta.uuid)))
            .with_topic_name(t.topic_name);
        responses.push(match outcome {
            Ok(()) => line,
            Err(code) => line.with_error_code(code),
        });
    }
    ResponseKind::DeleteShareGroupOffsets(
        DeleteShareGroupOffsetsResponse::default().with_responses(responses),
    )
}
